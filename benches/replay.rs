//! The advisor replayed on latency shapes of real services (`cargo bench --bench
//! replay`, a few seconds): for each scenario of `advise/tests/support/scenarios.rs`, the advisor
//! reads the first hour of calls, and the value its overlay writes is judged on the
//! second hour beside SW4-002's standard table — false timeouts (calls cut that would
//! have answered) and detection time (how long a caller waits on a dead peer). Then
//! the same judged hour under shorter headroom, and under an online rule (k × the
//! recent p99.9, held within the profile's bounds) that is not shipped. Figures, not
//! timings: the same on every machine. `benches/README.md` has them and what they say.

use std::time::Duration;

use sw4rm_timeouts::ProfileSet;

#[path = "../advise/tests/support/scenarios.rs"]
mod scenarios;

use scenarios::{
    adaptive, advised, all, calls, judge, observed_p999, restate, Judged, FALSE_TIMEOUT_GOAL,
};

const SEED: u64 = 0x5EED_0002;

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1_000.0;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.1} ms")
    }
}

fn pct(r: f64) -> String {
    format!("{:.3} %", r * 100.0)
}

fn main() {
    let table = ProfileSet::standard();
    println!("## The advised value against the standard table (judged on the second hour)\n");
    println!(
        "| Scenario | Profile (default, min) | p99.9 seen | default ÷ p99.9 | advised | detection cut | \
         false timeouts: advised / standard | time in timeouts: advised / standard |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut sweep = Vec::new();
    let mut online = Vec::new();
    let mut restates = Vec::new();
    for s in all() {
        let Some(profile) = table.profile(s.profile) else {
            continue;
        };
        let (default, min, max) = (
            profile.default_timeout(),
            profile.min_timeout(),
            profile.max_timeout(),
        );
        let c = calls(&s, SEED);
        let p999 = observed_p999(&c);
        let advised = advised(&s, &c);
        let standard = judge(&c, |_| default);
        let chosen = judge(&c, |_| advised.unwrap_or(default));
        println!(
            "| {} | {} ({}, {}) | {} | {:.0}× | {} | {:.1}× | {} / {} | {:.0} s / {:.0} s |",
            s.name,
            s.profile,
            ms(default),
            ms(min),
            ms(p999),
            default.as_secs_f64() / p999.as_secs_f64(),
            advised.map_or("none written".to_owned(), ms),
            default.as_secs_f64() / chosen.detection.as_secs_f64(),
            pct(chosen.false_timeout_rate()),
            pct(standard.false_timeout_rate()),
            chosen.time_in_timeouts.as_secs_f64(),
            standard.time_in_timeouts.as_secs_f64(),
        );
        let by_k: Vec<(f64, Judged)> = [1.0, 2.0, 4.0]
            .into_iter()
            .map(|k| (k, judge(&c, |_| p999.mul_f64(k).clamp(min, max))))
            .collect();
        sweep.push((s.name, default, by_k));
        online.push((s.name, standard, adaptive(&c, default, min, max, 4.0)));
        restates.push((
            s.name,
            standard,
            chosen,
            restate(&c, min, max, 2.0),
            restate(&c, min, max, 4.0),
        ));
    }

    println!("\n## Less headroom: k × the observed p99.9 (unrounded, within the bounds)\n");
    println!(
        "| Scenario | k = 1: false timeouts, cut | k = 2 | k = 4 (the advisor, before rounding) |"
    );
    println!("|---|---|---|---|");
    for (name, default, by_k) in &sweep {
        let cells: Vec<String> = by_k
            .iter()
            .map(|(_, j)| {
                format!(
                    "{}, {:.1}×",
                    pct(j.false_timeout_rate()),
                    default.as_secs_f64() / j.detection.as_secs_f64()
                )
            })
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }

    println!("\n## An online rule (4 × the last 10 minutes' p99.9, frozen above 1 % timeouts) against the standard table\n");
    println!("| Scenario | false timeouts: online / standard | mean detection: online / standard | worst detection | dominates |");
    println!("|---|---|---|---|---|");
    let mut everywhere = true;
    for (name, standard, rule) in &online {
        let dominates =
            rule.false_timeouts <= standard.false_timeouts && rule.detection < standard.detection;
        everywhere &= dominates;
        println!(
            "| {name} | {} ({}) / {} | {} / {} | {} | {} |",
            pct(rule.false_timeout_rate()),
            rule.false_timeouts,
            pct(standard.false_timeout_rate()),
            ms(rule.detection),
            ms(standard.detection),
            ms(rule.worst_detection),
            if dominates { "yes" } else { "no" },
        );
    }
    println!(
        "\nThe online rule {} the standard table on every scenario (goal for shipping it: it must); \
         false-timeout goal for the advised value: ≤ {}.",
        if everywhere { "dominates" } else { "does not dominate" },
        pct(FALSE_TIMEOUT_GOAL)
    );
    restate_table(&restates);
}

/// Restate's adaptive rule beside the standard table and the advised value.
fn restate_table(rows: &[(&str, Judged, Judged, Judged, Judged)]) {
    println!(
        "\n## Restate's adaptive timeout (clamp(safety × p99.99 of the last 60 s, min, max)) \
         against the standard table and the advised value\n"
    );
    println!(
        "| Scenario | false timeouts: 2× / 4× / advised / standard | mean detection: 2× / 4× / \
         advised / standard | wins (dominates both) |"
    );
    println!("|---|---|---|---|");
    for (name, standard, advised, two, four) in rows {
        let wins = |r: &Judged| {
            r.false_timeouts <= standard.false_timeouts.min(advised.false_timeouts)
                && r.detection < standard.detection.min(advised.detection)
        };
        let won: Vec<&str> = [("2×", two), ("4×", four)]
            .into_iter()
            .filter(|(_, r)| wins(r))
            .map(|(k, _)| k)
            .collect();
        println!(
            "| {name} | {} ({}) / {} ({}) / {} / {} | {} / {} / {} / {} | {} |",
            pct(two.false_timeout_rate()),
            two.false_timeouts,
            pct(four.false_timeout_rate()),
            four.false_timeouts,
            pct(advised.false_timeout_rate()),
            pct(standard.false_timeout_rate()),
            ms(two.detection),
            ms(four.detection),
            ms(advised.detection),
            ms(standard.detection),
            if won.is_empty() {
                "no".to_owned()
            } else {
                won.join(", ")
            },
        );
    }
}
