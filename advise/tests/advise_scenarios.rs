//! The advisor on latency shapes of real services (the scenarios of
//! `benches/replay.rs`, whose figures are in `benches/README.md`): the value its
//! overlay writes after an observed hour, judged on the next hour beside SW4-002's
//! standard table.

use std::time::Duration;

use sw4rm_timeouts::ProfileSet;

#[path = "support/scenarios.rs"]
mod scenarios;

use scenarios::{advised, all, calls, judge, observed_p999, restate, FALSE_TIMEOUT_GOAL};

const SEED: u64 = 0x5EED_0002;

/// Where the advisor loses: a burst 25 times slower than the observed hour outruns
/// any headroom learned from that hour (`benches/README.md`).
const LOSES: &[&str] = &["overload burst"];

#[test]
fn the_advised_value_detects_sooner_and_cuts_no_more_than_the_standard_table() {
    let table = ProfileSet::standard();
    for s in all() {
        let profile = table.profile(s.profile).expect("a standard profile");
        let (default, min) = (profile.default_timeout(), profile.min_timeout());
        let c = calls(&s, SEED);
        let p999 = observed_p999(&c);
        assert!(
            default >= p999 * 10,
            "{}: every scenario's default is ≥ 10 × p99.9",
            s.name
        );

        let advised = advised(&s, &c).unwrap_or_else(|| panic!("{}: no value written", s.name));
        assert!(
            advised >= min && advised < default,
            "{}: {advised:?}",
            s.name
        );
        // 4 × p99.9 rounded up (by at most 5/3) is within 7 × p99.9, unless the
        // minimum held it.
        assert!(
            advised <= (p999 * 7).max(min),
            "{}: {advised:?} for p99.9 {p999:?}",
            s.name
        );

        let standard = judge(&c, |_| default);
        let chosen = judge(&c, |_| advised);
        assert!(chosen.detection < standard.detection, "{}", s.name);
        assert!(chosen.time_in_timeouts <= standard.time_in_timeouts || LOSES.contains(&s.name));
        if LOSES.contains(&s.name) {
            assert!(
                chosen.false_timeouts > standard.false_timeouts,
                "{}: no longer a loss",
                s.name
            );
        } else {
            assert!(
                chosen.false_timeout_rate() <= FALSE_TIMEOUT_GOAL,
                "{}: {} false timeouts",
                s.name,
                chosen.false_timeouts
            );
            assert!(
                chosen.false_timeouts <= standard.false_timeouts,
                "{}",
                s.name
            );
        }
    }
}

#[test]
fn a_black_holed_peer_in_the_observed_hour_does_not_silence_the_advisor() {
    let s = all()
        .into_iter()
        .find(|s| s.name == "black-holed peer, seen")
        .expect("the scenario");
    let c = calls(&s, SEED);
    // More than 1 % of the observed hour timed out (the peer that never answers) ...
    let observed = scenarios::observe(&c, Duration::from_secs(30));
    assert!(observed.timeouts() * 100 > observed.successes() + observed.timeouts());
    // ... and the advisor still proposes detecting it sooner: at the profile's minimum.
    assert_eq!(advised(&s, &c), Some(Duration::from_secs(5)));
    let hangs = judge(&c, |_| Duration::from_secs(5));
    assert!(hangs.hangs > 0);
    assert_eq!(
        hangs.time_in_timeouts,
        Duration::from_secs(5) * hangs.hangs as u32
    );
}

/// Restate's adaptive timeout, as `benches/README.md` and the advisor chapter report
/// it: it beats both the standard table and the advised value only on the steady
/// lognormal route; under a black-holed peer its own timeouts, recorded as round trips,
/// drive it up to the profile's maximum, so it waits longer than the standard table.
#[test]
fn restates_adaptive_rule_wins_only_on_a_steady_route_and_escalates_on_a_black_hole() {
    let table = ProfileSet::standard();
    let mut wins = Vec::new();
    for s in all() {
        let p = table.profile(s.profile).unwrap();
        let (default, min, max) = (p.default_timeout(), p.min_timeout(), p.max_timeout());
        let c = calls(&s, SEED);
        let standard = judge(&c, |_| default);
        let value = advised(&s, &c).unwrap_or(default);
        let advised = judge(&c, |_| value);
        let rule = restate(&c, min, max, 2.0);
        if rule.false_timeouts <= standard.false_timeouts.min(advised.false_timeouts)
            && rule.detection < standard.detection.min(advised.detection)
        {
            wins.push(s.name);
        }
        if s.name.starts_with("black-holed") {
            assert!(
                rule.detection > standard.detection,
                "{}: {:?} against the standard {:?}",
                s.name,
                rule.detection,
                standard.detection
            );
        }
    }
    assert_eq!(wins, ["lognormal + 1 % tail"]);
}
