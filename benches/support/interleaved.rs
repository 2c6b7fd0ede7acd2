//! Interleaved medians: every round runs each variant once, in a rotating order, so
//! slow drift of a shared, noisy machine (loopback in a VM, 2 cores) hits all
//! variants alike. Criterion's per-variant runs follow, for the full statistics.

use std::future::Future;
use std::time::{Duration, Instant};

/// Runs `run(variant)` for every variant in each of `rounds` rounds and returns the
/// median duration of each variant.
pub async fn medians<F, Fut>(rounds: usize, names: &[&str], mut run: F) -> Vec<Duration>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    let n = names.len();
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
        .into_iter()
        .map(|mut s| {
            s.sort_unstable();
            s[s.len() / 2]
        })
        .collect()
}

/// Prints each median and its ratio to the first (the baseline).
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
