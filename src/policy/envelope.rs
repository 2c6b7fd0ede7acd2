//! SW4-004's `BudgetEnvelope` as pure arithmetic: how much time a received envelope
//! grants, with a guard against clock skew, and an epoch deadline long past. What a
//! delegation carries on the way out is `sw4rm-swarm`'s.
//!
//! In an envelope, 0 means "not set" for the wall time, the epoch deadline and the
//! maximum depth (proto3 sends no zeros).

use std::time::Duration;

/// A `BudgetEnvelope`'s fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Envelope {
    /// `token_budget_remaining`.
    pub tokens: u64,
    /// `wall_time_remaining_ms` (0: not set).
    pub wall_ms: u64,
    /// `deadline_epoch_ms` (0: not set).
    pub epoch_ms: u64,
    /// `current_depth`.
    pub depth: u32,
    /// `max_delegation_depth` (0: not set).
    pub max_depth: u32,
}

/// What a received envelope's time was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Basis {
    /// No time in the envelope: no time cap.
    Unlimited,
    /// The wall time remaining, measured from arrival.
    Wall,
    /// The epoch deadline on this host's clock.
    Epoch,
    /// Both agree (within the skew allowed): the smaller.
    Both,
    /// The epoch deadline is further from what the wall time says than the skew
    /// allowed (`epoch_left_ms` after arrival, negative when already past): the clocks
    /// disagree, or the envelope waited longer than that on the way. The wall time wins.
    Skewed { epoch_left_ms: i64 },
}

/// The time a received envelope grants from arrival (`now_epoch_ms` on this host's
/// clock): the smaller of the wall time and the time to the epoch deadline, unless
/// they disagree by more than `max_skew`; then the wall time, which needs no
/// agreement between clocks.
pub(crate) fn incoming(
    envelope: &Envelope,
    now_epoch_ms: u64,
    max_skew: Duration,
) -> (Option<Duration>, Basis) {
    let epoch_left =
        (envelope.epoch_ms > 0).then(|| i128::from(envelope.epoch_ms) - i128::from(now_epoch_ms));
    let ms = |v: i128| Duration::from_millis(u64::try_from(v.max(0)).unwrap_or(u64::MAX));
    match (envelope.wall_ms, epoch_left) {
        (0, None) => (None, Basis::Unlimited),
        (wall, None) => (Some(ms(wall.into())), Basis::Wall),
        (0, Some(epoch)) => (Some(ms(epoch)), Basis::Epoch),
        (wall, Some(epoch)) => {
            let skew = i128::try_from(max_skew.as_millis()).unwrap_or(i128::MAX);
            if (epoch - i128::from(wall)).abs() > skew {
                let epoch_left_ms = i64::try_from(epoch).unwrap_or(i64::MAX);
                (Some(ms(wall.into())), Basis::Skewed { epoch_left_ms })
            } else {
                (Some(ms(epoch.min(wall.into()))), Basis::Both)
            }
        }
    }
}

/// How far in the past an epoch deadline may lie before it is refused as a mistake
/// rather than taken as a budget spent: no clock skew is a day.
pub(crate) const LONG_PAST_MS: u64 = 24 * 3_600 * 1_000;

/// An epoch deadline that lies more than `LONG_PAST_MS` (a day) before `now_ms`: how far
/// (ms), and whether it reads as *seconds* since the epoch (× 1,000 it lies within a
/// year of now). `None` for a deadline that is not long past.
pub fn long_past(deadline_epoch_ms: u64, now_ms: u64) -> Option<(u64, bool)> {
    let ago = now_ms.checked_sub(deadline_epoch_ms)?;
    if ago <= LONG_PAST_MS {
        return None;
    }
    const YEAR_MS: u64 = 365 * 24 * 3_600 * 1_000;
    let as_seconds = deadline_epoch_ms.saturating_mul(1_000).abs_diff(now_ms) <= YEAR_MS;
    Some((ago, as_seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: u64 = 1_800_000_000_000;

    fn env(wall_ms: u64, epoch_ms: u64, depth: u32, max_depth: u32) -> Envelope {
        Envelope {
            tokens: 5_000,
            wall_ms,
            epoch_ms,
            depth,
            max_depth,
        }
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn incoming_table() {
        let skew = ms(30_000);
        type Row = (u64, u64, (Option<Duration>, Basis));
        let table: [Row; 8] = [
            (0, 0, (None, Basis::Unlimited)),
            (20_000, 0, (Some(ms(20_000)), Basis::Wall)),
            (0, NOW + 15_000, (Some(ms(15_000)), Basis::Epoch)),
            // An epoch deadline already past grants nothing.
            (0, NOW - 5, (Some(ms(0)), Basis::Epoch)),
            // Both, in agreement: the smaller (time spent on the way counts).
            (20_000, NOW + 19_200, (Some(ms(19_200)), Basis::Both)),
            (20_000, NOW + 21_000, (Some(ms(20_000)), Basis::Both)),
            // Far in the future of the wall time: the wall time wins.
            (
                20_000,
                NOW + 3_600_000,
                (
                    Some(ms(20_000)),
                    Basis::Skewed {
                        epoch_left_ms: 3_600_000,
                    },
                ),
            ),
            // Far in the past: the wall time wins too.
            (
                20_000,
                NOW - 3_600_000,
                (
                    Some(ms(20_000)),
                    Basis::Skewed {
                        epoch_left_ms: -3_600_000,
                    },
                ),
            ),
        ];
        for (i, (wall, epoch, want)) in table.into_iter().enumerate() {
            assert_eq!(
                incoming(&env(wall, epoch, 1, 3), NOW, skew),
                want,
                "row {i}"
            );
        }
    }

    proptest! {
        /// A received envelope never grants more than its wall time, when it has one.
        #[test]
        fn reading_never_exceeds_the_wall_time(
            wall in 1u64..10_000_000,
            epoch_offset in -10_000_000i64..10_000_000,
            skew in 0u64..100_000,
        ) {
            let epoch = NOW.saturating_add_signed(epoch_offset);
            let (left, _) = incoming(&env(wall, epoch, 0, 0), NOW, ms(skew));
            prop_assert!(left.is_some_and(|l| l <= ms(wall)));
        }
    }

    #[test]
    fn an_epoch_deadline_long_past_is_told_and_seconds_are_recognised() {
        const NOW: u64 = 1_780_000_000_000; // 2026
        let day = LONG_PAST_MS;
        // (deadline, now, long past by, reads as seconds)
        let table = [
            (NOW + 5_000, NOW, None),
            (NOW - 5_000, NOW, None),
            (NOW - day, NOW, None),
            (NOW - day - 1, NOW, Some((day + 1, false))),
            (
                NOW / 1_000 + 30,
                NOW,
                Some((NOW - (NOW / 1_000 + 30), true)),
            ),
            (0, NOW, Some((NOW, false))),
            (u64::MAX, NOW, None),
            (5, 0, None),
        ];
        for (deadline, now, want) in table {
            assert_eq!(long_past(deadline, now), want, "{deadline} at {now}");
        }
    }
}
