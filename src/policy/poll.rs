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

/// The wait before the next poll: half of `interval` fixed, half drawn (`unit` in
/// `[0, 1)`); a server's `suggested` wait instead, when it gives one (never below a
/// millisecond).
pub(crate) fn poll_wait(interval: Duration, suggested: Option<Duration>, unit: f64) -> Duration {
    if let Some(s) = suggested {
        return s.max(Duration::from_millis(1));
    }
    let unit = if (0.0..1.0).contains(&unit) {
        unit
    } else {
        0.0
    };
    let half = interval / 2;
    half + half.mul_f64(unit)
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
            (ms(400), Some(ms(50)), 0.5, ms(50)),
            (ms(400), Some(Duration::ZERO), 0.5, ms(1)),
        ];
        for (interval, suggested, unit, want) in table {
            let got = poll_wait(interval, suggested, unit);
            assert!(
                got.abs_diff(want) < ms(1),
                "{interval:?} {suggested:?} {unit}: {got:?}"
            );
        }
    }
}
