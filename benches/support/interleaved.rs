//! Interleaved medians: every round runs each variant once, in a rotating order, so
//! slow drift of a shared, noisy machine (loopback in a VM, 2 cores) hits all
//! variants alike. Criterion's per-variant runs follow, for the full statistics.

use std::future::Future;
use std::time::{Duration, Instant};

/// Runs `run(variant)` for every variant in each of `rounds` rounds and returns the
/// median duration of each variant.
#[allow(dead_code)] // not every bench that includes this file uses it
pub async fn medians<F, Fut>(rounds: usize, names: &[&str], run: F) -> Vec<Duration>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    samples(rounds, names.len(), run)
        .await
        .into_iter()
        .map(|mut s| median(&mut s))
        .collect()
}

/// Runs `run(variant)` for each of `variants` in each of `rounds` rounds, in a
/// rotating order; every variant's durations, in round order.
pub async fn samples<F, Fut>(rounds: usize, variants: usize, mut run: F) -> Vec<Vec<Duration>>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let n = variants;
    let mut samples: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        for k in 0..n {
            let variant = (round + k) % n;
            let start = Instant::now();
            run(variant).await;
            samples[variant].push(start.elapsed());
        }
    }
    samples
}

/// The median of `s` (sorted in place).
#[allow(dead_code)] // not every bench that includes this file uses it
pub fn median(s: &mut [Duration]) -> Duration {
    s.sort_unstable();
    s[s.len() / 2]
}

/// The median, over rounds, of `a`'s duration minus `b`'s in the same round, in ns
/// (paired: drift that slows a whole round cancels out).
#[allow(dead_code)]
pub fn paired_difference_ns(a: &[Duration], b: &[Duration]) -> f64 {
    let mut d: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(a, b)| a.as_nanos() as f64 - b.as_nanos() as f64)
        .collect();
    d.sort_unstable_by(f64::total_cmp);
    d[d.len() / 2]
}

/// Prints each median and its ratio to the first (the baseline).
#[allow(dead_code)]
pub fn report(title: &str, names: &[&str], medians: &[Duration]) {
    println!("\n{title} (interleaved p50)");
    let base = medians[0].as_secs_f64();
    for (name, m) in names.iter().zip(medians) {
        println!(
            "  {name:<28} p50 {:>10.1} µs   {:.3}x",
            m.as_secs_f64() * 1e6,
            m.as_secs_f64() / base
        );
    }
    println!();
}
