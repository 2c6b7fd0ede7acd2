//! A timeout tried on what calls took: how many it would have cut that
//! succeeded (false timeouts), and how long a caller waits under it when the peer is
//! dead (detection time). A proposal is worth writing only if it **dominates** the
//! value in use: no more false timeouts, and less detection time.
//!
//! The trial leans against the proposal wherever the figures are unsure: the value
//! in use is charged only the calls known to have taken longer than it, a proposal
//! every call that may have (a call is known only to its bucket); the calls that
//! timed out are timeouts under both (how long they would have taken is unknown, so
//! a longer value cannot be credited with saving them).

use std::time::Duration;

use sw4rm_timeouts::observations::LatencySnapshot;

/// What one timeout would have done to the observed calls.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Trial {
    /// The timeout tried.
    pub timeout: Duration,
    /// Successful calls it would have cut (for the value in use, those known to have
    /// taken longer; for a proposal, those that may have).
    pub false_timeouts: u64,
    /// `false_timeouts` as a share of the calls observed (0 to 1).
    pub false_timeout_rate: f64,
    /// How long a caller waits on a dead or black-holed peer: the timeout itself.
    pub detection: Duration,
    /// Time spent in calls that end in a timeout (the observed timeouts and the false
    /// ones, each the whole timeout).
    pub time_in_timeouts: Duration,
}

/// The value in use and a proposal, tried on the same calls.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Evaluation {
    /// The value in use.
    pub current: Trial,
    /// The proposal.
    pub proposed: Trial,
}

/// Why a proposal does not dominate the value in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotDominant {
    /// It would cut more successful calls than the value in use.
    MoreFalseTimeouts,
    /// It makes a caller wait longer on a dead peer (it raises the timeout: the
    /// calls that timed out may have needed it, but the trial cannot know).
    SlowerDetection,
    /// It makes a caller wait on a dead peer just as long.
    NoSoonerDetection,
}

impl NotDominant {
    /// The reason as the overlay's comment gives it.
    pub fn text(&self) -> &'static str {
        match self {
            NotDominant::MoreFalseTimeouts => {
                "it would cut successful calls the value in use lets finish"
            }
            NotDominant::SlowerDetection => {
                "it raises detection time, and the replay cannot show the calls that \
                 timed out would have succeeded (how long they would have taken is unknown)"
            }
            NotDominant::NoSoonerDetection => "it detects a dead peer no sooner",
        }
    }
}

impl Evaluation {
    /// Replays `latency` against the value in use and the proposal.
    pub(crate) fn of(latency: &LatencySnapshot, current: Duration, proposed: Duration) -> Self {
        let calls = latency.successes().saturating_add(latency.timeouts());
        let replay = |timeout: Duration, false_timeouts: u64| Trial {
            timeout,
            false_timeouts,
            false_timeout_rate: rate(false_timeouts, calls),
            detection: timeout,
            time_in_timeouts: times(timeout, latency.timeouts().saturating_add(false_timeouts)),
        };
        Evaluation {
            current: replay(current, latency.above(current).at_least),
            proposed: replay(proposed, latency.above(proposed).at_most),
        }
    }

    /// `Ok` with how many times faster the proposal detects a dead peer when it
    /// dominates the value in use; why not, when it does not.
    pub fn dominance(&self) -> Result<f64, NotDominant> {
        let (now, next) = (&self.current, &self.proposed);
        if next.false_timeouts > now.false_timeouts {
            return Err(NotDominant::MoreFalseTimeouts);
        }
        if next.detection > now.detection {
            return Err(NotDominant::SlowerDetection);
        }
        if next.detection == now.detection {
            return Err(NotDominant::NoSoonerDetection);
        }
        Ok(now.detection.as_secs_f64() / next.detection.as_secs_f64().max(1e-9))
    }

    /// Whether the proposal dominates the value in use.
    pub fn dominates(&self) -> bool {
        self.dominance().is_ok()
    }

    /// Whether the proposal is no worse than the value in use on either count (a
    /// route's own profile at the default it already had holds it where it is).
    pub fn holds(&self) -> bool {
        self.proposed.false_timeouts <= self.current.false_timeouts
            && self.proposed.detection <= self.current.detection
    }
}

fn rate(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 / of as f64
    }
}

fn times(d: Duration, n: u64) -> Duration {
    d.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Calls of each latency (ms), then `timeouts` timed out.
    fn calls(latencies: &[(u64, u64)], timeouts: u64) -> LatencySnapshot {
        let mut s = LatencySnapshot::default();
        for (ms_each, n) in latencies {
            for _ in 0..*n {
                s.record(ms(*ms_each));
            }
        }
        s.record_timeouts(timeouts);
        s
    }

    /// Calls, the value in use, the proposal (ms), the false timeouts of each, and
    /// the dominance.
    type Row = (
        LatencySnapshot,
        u64,
        u64,
        (u64, u64),
        Result<f64, NotDominant>,
    );

    #[test]
    fn row_by_row() {
        let rows: [Row; 5] = [
            // Everything well under both: 5 s to 1 s detects five times faster.
            (calls(&[(20, 990)], 10), 5_000, 1_000, (0, 0), Ok(5.0)),
            // The proposal cuts the two 1.5 s calls.
            (
                calls(&[(20, 998), (1_500, 2)], 0),
                5_000,
                1_000,
                (0, 2),
                Err(NotDominant::MoreFalseTimeouts),
            ),
            // Raising never dominates, whatever the timeouts.
            (
                calls(&[(900, 900)], 100),
                1_000,
                2_000,
                (0, 0),
                Err(NotDominant::SlowerDetection),
            ),
            // The value against itself: no faster.
            (
                calls(&[(20, 100)], 0),
                1_000,
                1_000,
                (0, 0),
                Err(NotDominant::NoSoonerDetection),
            ),
            // Calls that ran under a longer per-call value and took longer than the
            // default count against the default too.
            (
                calls(&[(20, 90), (3_000, 10)], 0),
                2_000,
                1_000,
                (10, 10),
                Ok(2.0),
            ),
        ];
        for (latency, current, proposed, (ft_now, ft_next), want) in rows {
            let e = Evaluation::of(&latency, ms(current), ms(proposed));
            assert_eq!(
                (e.current.false_timeouts, e.proposed.false_timeouts),
                (ft_now, ft_next),
                "{current} -> {proposed}"
            );
            assert_eq!(e.dominance(), want, "{current} -> {proposed}");
            assert_eq!(e.proposed.detection, ms(proposed));
        }
    }

    #[test]
    fn time_in_timeouts_counts_the_observed_and_the_false_ones() {
        let e = Evaluation::of(&calls(&[(20, 95), (1_500, 3)], 2), ms(5_000), ms(1_000));
        assert_eq!(e.current.time_in_timeouts, ms(2 * 5_000));
        assert_eq!(e.proposed.time_in_timeouts, ms(5 * 1_000));
        assert!((e.proposed.false_timeout_rate - 0.03).abs() < 1e-12);
    }

    proptest! {
        /// A proposal that dominates cuts no call the value in use lets finish and
        /// detects sooner; the value in use never dominates itself; a longer value
        /// never dominates.
        #[test]
        fn dominance_means_what_it_says(
            latencies in proptest::collection::vec((1u64..20_000, 1u64..50), 1..20),
            timeouts in 0u64..100,
            current in 1u64..60_000,
            proposed in 1u64..60_000,
        ) {
            let latency = calls(&latencies, timeouts);
            let e = Evaluation::of(&latency, ms(current), ms(proposed));
            if e.dominates() {
                prop_assert!(proposed < current);
                let cut = |limit: u64| latencies
                    .iter()
                    .filter(|(l, _)| *l > limit)
                    .map(|(_, n)| n)
                    .sum::<u64>();
                // It truly cuts no more calls than the value in use.
                prop_assert!(cut(proposed) <= cut(current));
                prop_assert!(e.proposed.time_in_timeouts <= e.current.time_in_timeouts);
            }
            let itself = Evaluation::of(&latency, ms(current), ms(current));
            prop_assert!(!itself.dominates());
            prop_assert!(!e.dominates() || e.holds());
        }
    }
}
