//! The advisor's rules, as one pure function of what was observed of a route (or a
//! profile) and the profile's values: a [`Verdict`] and, where one is due, the
//! proposed default, always within the profile's SW4-002 bounds.

use std::time::Duration;

/// Fewer calls than this say too little about a tail.
pub const MIN_CALLS: u64 = 100;
/// A default at least this many times the successful calls' p99.9 detects failures
/// later than it needs to.
pub const SLOW_FACTOR: u32 = 10;
/// Timeouts on more than this share of calls are not rare failures.
pub const TIMEOUT_SHARE: f64 = 0.01;
/// Successful calls "cluster just below the default" when their p99 is at least this
/// share of it.
pub const CLUSTER_SHARE: f64 = 0.5;
/// A route whose p99 differs from its profile's other routes by this factor does not
/// fit the profile.
pub const MISFIT_FACTOR: u32 = 10;
/// A proposed default leaves this much room over the successful calls' p99.9.
pub const HEADROOM: u32 = 4;

/// What was observed, and the profile's values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Facts {
    pub(crate) successes: u64,
    pub(crate) timeouts: u64,
    pub(crate) p99: Option<Duration>,
    pub(crate) p999: Option<Duration>,
    pub(crate) default: Duration,
    pub(crate) min: Duration,
    pub(crate) max: Duration,
    /// The typical p99 of the profile's routes (the median over its routes with
    /// enough calls; for a route, when the profile has two or more; `None` for a
    /// profile).
    pub(crate) peers_p99: Option<Duration>,
}

/// Which bound of the profile a proposal was held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bound {
    /// The profile's `min_timeout_ms`: the data would allow a shorter default.
    Min,
    /// The profile's `max_timeout_ms`: the data asks for a longer default than the
    /// profile allows (a standard profile's bounds are a MUST: a custom profile and a
    /// route are the way to more).
    Max,
}

/// The advisor's verdict on a route or a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Fewer calls than [`MIN_CALLS`]: nothing proposed.
    NotEnoughData {
        /// The calls observed.
        calls: u64,
    },
    /// The default suits what the calls take.
    Fits,
    /// The default is at least [`SLOW_FACTOR`] times the successful calls' p99.9: a
    /// dead peer is noticed later than it needs to be. Whatever share timed out: with
    /// the successful calls that far below the default, the timeouts are calls that
    /// never answer (a black-holed peer), and they fail sooner under a shorter one.
    DetectionSlow {
        /// The proposed default.
        proposed: Duration,
        /// The profile bound that held the proposal, if one did.
        bound: Option<Bound>,
    },
    /// More than [`TIMEOUT_SHARE`] of calls time out while the successful ones cluster
    /// just below the default: some of those timeouts would have succeeded.
    FalseFailures {
        /// The proposed default.
        proposed: Duration,
        /// The profile bound that held the proposal, if one did.
        bound: Option<Bound>,
    },
    /// The route's p99 is an order of magnitude ([`MISFIT_FACTOR`]) from the median
    /// p99 of its profile's routes: it wants a profile of its own, with this default
    /// ([`HEADROOM`] times its p99.9, rounded up, and never above the default in use).
    DoesNotFit {
        /// The proposed default of the route's own profile.
        proposed: Duration,
    },
}

impl Verdict {
    /// The verdict's name, as the overlay's comments and the report give it.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::NotEnoughData { .. } => "not enough data",
            Verdict::Fits => "fits",
            Verdict::DetectionSlow { .. } => "failure detection slower than it needs to be",
            Verdict::FalseFailures { .. } => "false failures likely",
            Verdict::DoesNotFit { .. } => "does not fit its profile",
        }
    }
}

/// The verdict on what was observed.
pub(crate) fn judge(f: &Facts) -> Verdict {
    let calls = f.successes.saturating_add(f.timeouts);
    if calls < MIN_CALLS {
        return Verdict::NotEnoughData { calls };
    }
    let share = f.timeouts as f64 / calls as f64;
    let clustered = f
        .p99
        .is_some_and(|p| p.as_secs_f64() >= CLUSTER_SHARE * f.default.as_secs_f64());
    let Some(p999) = f.p999 else {
        // Every call timed out: the default is too short for all of them.
        return false_failures(f, Duration::ZERO);
    };
    if share > TIMEOUT_SHARE && clustered {
        return false_failures(f, p999);
    }
    if let (Some(p99), Some(peers)) = (f.p99, f.peers_p99) {
        let (hi, lo) = (p99.max(peers), p99.min(peers).max(Duration::from_micros(1)));
        if hi >= lo * MISFIT_FACTOR {
            return Verdict::DoesNotFit {
                // Never above the default in use: a replay cannot show a longer
                // one is better, and the route's own profile is there to keep it
                // where it is while the profile it leaves moves.
                proposed: nice(p999 * HEADROOM).min(f.default),
            };
        }
    }
    // Whatever share timed out: with the successful calls this far below the
    // default, the timeouts are calls that never answer (a dead or black-holed peer),
    // and they fail under a shorter default too, only sooner.
    if f.default >= p999 * SLOW_FACTOR {
        let (proposed, bound) = within(nice(p999 * HEADROOM), f);
        if proposed < f.default {
            return Verdict::DetectionSlow { proposed, bound };
        }
    }
    Verdict::Fits
}

fn false_failures(f: &Facts, p999: Duration) -> Verdict {
    let wanted = nice((f.default * 2).max(p999 * HEADROOM));
    let (proposed, bound) = within(wanted, f);
    Verdict::FalseFailures { proposed, bound }
}

/// `d` held within the profile's bounds, and which bound held it.
fn within(d: Duration, f: &Facts) -> (Duration, Option<Bound>) {
    if d < f.min {
        (f.min, Some(Bound::Min))
    } else if d > f.max {
        (f.max, Some(Bound::Max))
    } else {
        (d, None)
    }
}

/// Rounded up to 1, 1.5, 2, 3, 5 or 7 times a power of ten milliseconds (at least
/// 1 ms): values an operator reads at a glance, and never more than 5/3 of the value
/// (1-2-5 steps gave away up to 2.5 times the detection time: `benches/README.md`).
pub(crate) fn nice(d: Duration) -> Duration {
    let ms = d.as_millis().max(1);
    let mut step = 1u128;
    loop {
        // Tenths of the step, so that 1.5 steps are whole milliseconds from 10 ms.
        for tenths in [10, 15, 20, 30, 50, 70] {
            let v = tenths * step;
            if v.is_multiple_of(10) && v / 10 >= ms {
                return Duration::from_millis(u64::try_from(v / 10).unwrap_or(u64::MAX));
            }
        }
        step = step.saturating_mul(10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// A profile with default 5 s, bounds 1 s to 30 s (heartbeat's shape).
    fn facts(successes: u64, timeouts: u64, p99: u64, p999: u64) -> Facts {
        Facts {
            successes,
            timeouts,
            p99: Some(ms(p99)),
            p999: Some(ms(p999)),
            default: ms(5_000),
            min: ms(1_000),
            max: ms(30_000),
            peers_p99: None,
        }
    }

    #[test]
    fn verdict_table() {
        struct Row {
            name: &'static str,
            facts: Facts,
            want: Verdict,
        }
        let rows = [
            Row {
                name: "too few calls",
                facts: facts(80, 19, 10, 12),
                want: Verdict::NotEnoughData { calls: 99 },
            },
            Row {
                name: "fits: p99.9 is a fifth of the default",
                facts: facts(10_000, 0, 700, 1_000),
                want: Verdict::Fits,
            },
            Row {
                name: "slow detection: 10x p99.9, proposal 4x p99.9 rounded up",
                facts: facts(10_000, 0, 300, 450),
                want: Verdict::DetectionSlow {
                    proposed: ms(2_000),
                    bound: None,
                },
            },
            Row {
                name: "slow detection held at the profile's minimum",
                facts: facts(10_000, 0, 20, 30),
                want: Verdict::DetectionSlow {
                    proposed: ms(1_000),
                    bound: Some(Bound::Min),
                },
            },
            Row {
                name: "false failures: 5 % time out, p99 just below the default",
                facts: facts(9_500, 500, 4_800, 4_950),
                want: Verdict::FalseFailures {
                    proposed: ms(20_000),
                    bound: None,
                },
            },
            Row {
                name: "false failures beyond the profile's maximum",
                facts: Facts {
                    max: ms(10_000),
                    ..facts(9_500, 500, 4_800, 4_950)
                },
                want: Verdict::FalseFailures {
                    proposed: ms(10_000),
                    bound: Some(Bound::Max),
                },
            },
            Row {
                name: "timeouts, but successes far from the default: a dead peer, noticed sooner",
                facts: facts(9_500, 500, 100, 150),
                want: Verdict::DetectionSlow {
                    proposed: ms(1_000),
                    bound: Some(Bound::Min),
                },
            },
            Row {
                name: "timeouts, successes a fifth of the default: fits",
                facts: facts(9_500, 500, 900, 1_000),
                want: Verdict::Fits,
            },
            Row {
                name: "every call timed out",
                facts: Facts {
                    p99: None,
                    p999: None,
                    ..facts(0, 200, 0, 0)
                },
                want: Verdict::FalseFailures {
                    proposed: ms(10_000),
                    bound: None,
                },
            },
            Row {
                name: "a route 20x slower than its profile's others",
                facts: Facts {
                    peers_p99: Some(ms(200)),
                    ..facts(1_000, 0, 4_000, 4_400)
                },
                want: Verdict::DoesNotFit {
                    // 4 x p99.9 is 20 s: held at the default in use.
                    proposed: ms(5_000),
                },
            },
            Row {
                name: "a route 20x faster than its profile's others",
                facts: Facts {
                    peers_p99: Some(ms(2_000)),
                    ..facts(1_000, 0, 100, 120)
                },
                want: Verdict::DoesNotFit { proposed: ms(500) },
            },
            Row {
                name: "a route 9x its peers fits",
                facts: Facts {
                    peers_p99: Some(ms(100)),
                    ..facts(1_000, 0, 900, 1_000)
                },
                want: Verdict::Fits,
            },
        ];
        for row in rows {
            assert_eq!(judge(&row.facts), row.want, "{}", row.name);
        }
    }

    #[test]
    fn nice_never_rounds_down_nor_up_by_more_than_five_thirds() {
        let mut last = Duration::ZERO;
        for v in (1..200_000u64).chain([u32::MAX as u64, 3_600_001]) {
            let n = nice(ms(v));
            assert!(n >= ms(v), "{v}");
            assert!(n.as_millis() * 3 <= u128::from(v) * 5, "{v} -> {n:?}");
            if v < 200_000 {
                assert!(n >= last, "monotone at {v}");
                last = n;
            }
        }
    }

    #[test]
    fn nice_rounds_up_to_readable_steps() {
        for (input, want) in [
            (0, 1),
            (1, 1),
            (3, 3),
            (4, 5),
            (7, 7),
            (8, 10),
            (11, 15),
            (180, 200),
            (720, 1_000),
            (1_120, 1_500),
            (2_001, 3_000),
            (6_076, 7_000),
            (7_001, 10_000),
        ] {
            assert_eq!(nice(ms(input)), ms(want), "{input}");
        }
    }
}
