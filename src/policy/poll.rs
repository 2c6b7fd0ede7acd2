//! How often a long operation's status is asked for: an interval that grows by a
//! factor up to a ceiling, with equal jitter (half fixed, half random) so many
//! followers do not poll in step, and a server's own suggestion taken when it gives
//! one.

use std::time::Duration;

/// The poll schedule's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PollRule {
    pub(crate) first: Duration,
    pub(crate) multiplier: f64,
    pub(crate) max: Duration,
}

impl PollRule {
    /// The interval after `interval`: × multiplier, at most the ceiling.
    pub(crate) fn next(&self, interval: Duration) -> Duration {
        let grown = interval.as_secs_f64() * self.multiplier;
        Duration::try_from_secs_f64(grown)
            .unwrap_or(self.max)
            .min(self.max)
            .max(self.first.min(self.max))
    }
}

/// The shortest wait between two polls, whatever the interval set or a server
/// suggested: a zero interval would otherwise poll as fast as the server answers.
pub(crate) const MIN_POLL_WAIT: Duration = Duration::from_millis(50);

/// The wait before the next poll: half of `interval` fixed, half drawn (`unit` in
/// `[0, 1)`); a server's `suggested` wait instead, when it gives one; never below
/// [`MIN_POLL_WAIT`].
pub(crate) fn poll_wait(interval: Duration, suggested: Option<Duration>, unit: f64) -> Duration {
    if let Some(s) = suggested {
        return s.max(MIN_POLL_WAIT);
    }
    let unit = if (0.0..1.0).contains(&unit) {
        unit
    } else {
        0.0
    };
    let half = interval / 2;
    half.saturating_add(half.mul_f64(unit)).max(MIN_POLL_WAIT)
}

/// Whether a `NOT_FOUND` for an operation whose submit's answer was lost proves it was
/// not taken: only once it has held for `settle` since the submit was sent, over at
/// least `min_polls` polls (a handler cut by the caller's timeout may still commit its
/// effect, and a scheduler may register a task a moment after the submit arrived).
pub(crate) fn not_taken(
    since_sent: Duration,
    not_found_polls: u32,
    settle: Duration,
    min_polls: u32,
) -> bool {
    since_sent >= settle && not_found_polls >= min_polls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_grows_to_its_ceiling_and_the_wait_keeps_half_of_it() {
        let ms = Duration::from_millis;
        let rule = PollRule {
            first: ms(200),
            multiplier: 2.0,
            max: ms(1_000),
        };
        let mut i = rule.first;
        let mut seen = vec![i];
        for _ in 0..4 {
            i = rule.next(i);
            seen.push(i);
        }
        assert_eq!(seen, [ms(200), ms(400), ms(800), ms(1_000), ms(1_000)]);
        // A multiplier that shrinks never goes below the first; one that is not a
        // number goes to the ceiling.
        let shrinking = PollRule {
            multiplier: 0.5,
            ..rule
        };
        assert_eq!(shrinking.next(ms(200)), ms(200));
        let odd = PollRule {
            multiplier: f64::NAN,
            ..rule
        };
        assert_eq!(odd.next(ms(200)), ms(1_000));
        let huge = PollRule {
            multiplier: 1e300,
            ..rule
        };
        assert_eq!(huge.next(ms(200)), ms(1_000));
        // (interval, suggested, unit, wait)
        let table = [
            (ms(400), None, 0.0, ms(200)),
            (ms(400), None, 0.5, ms(300)),
            (ms(400), None, 0.999_999, ms(399)),
            (ms(400), None, 9.0, ms(200)),
            (ms(400), Some(ms(60)), 0.5, ms(60)),
            // Never below the floor: a zero interval, a zero or tiny suggestion.
            (ms(400), Some(Duration::ZERO), 0.5, MIN_POLL_WAIT),
            (ms(400), Some(ms(1)), 0.5, MIN_POLL_WAIT),
            (Duration::ZERO, None, 0.5, MIN_POLL_WAIT),
            (ms(20), None, 0.999, MIN_POLL_WAIT),
            (
                Duration::MAX,
                None,
                0.5,
                Duration::MAX / 2 + (Duration::MAX / 2).mul_f64(0.5),
            ),
        ];
        for (interval, suggested, unit, want) in table {
            let got = poll_wait(interval, suggested, unit);
            assert!(
                got.abs_diff(want) < ms(1),
                "{interval:?} {suggested:?} {unit}: {got:?}"
            );
        }
    }

    #[test]
    fn a_not_found_proves_nothing_until_it_held_over_the_settle_window() {
        let s = Duration::from_secs;
        // (since the submit was sent, NOT_FOUND polls, settle, min polls, not taken)
        let table = [
            (s(0), 1, s(10), 3, false),
            (s(1), 5, s(10), 3, false),
            (s(10), 2, s(10), 3, false),
            (s(10), 3, s(10), 3, true),
            (s(30), 9, s(10), 3, true),
            (s(0), 1, s(0), 1, true),
        ];
        for (since, polls, settle, min, want) in table {
            assert_eq!(
                not_taken(since, polls, settle, min),
                want,
                "{since:?} {polls} {settle:?} {min}"
            );
        }
    }
}
