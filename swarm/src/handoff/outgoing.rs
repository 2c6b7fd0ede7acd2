//! What a delegation's `BudgetEnvelope` carries on the way out, as pure arithmetic:
//! never more than what remains, nor than the caller wrote; one hop deeper.
//!
//! In an envelope, 0 means "not set" for the wall time, the epoch deadline and the
//! maximum depth (proto3 sends no zeros).

use std::time::Duration;

use sw4rm_timeouts::seams::Envelope;

/// Why a delegation is refused before it is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It would run at `next`, beyond `max_delegation_depth`.
    Depth { next: u32, max: u32 },
    /// Nothing (less than a millisecond) is left to grant.
    Spent,
}

/// The envelope a delegation carries: `base` (what the caller wrote, or the envelope
/// the current work was handed) one hop deeper, with one deadline written twice. That
/// deadline is the smallest of every cap that applies, measured at `now_epoch_ms`:
/// `left` (what remains of the scope's caps, if any), the wall time `base` set, and the
/// time to the epoch deadline `base` set. Where any of them is set, both fields say it
/// (`wall_ms` = d, `epoch_ms` = now + d), so a receiver that reads only one of them
/// gets the same deadline as one that reads both. Never grows a value `base` set.
pub(crate) fn outgoing(
    base: Envelope,
    left: Option<Duration>,
    now_epoch_ms: u64,
) -> Result<Envelope, Refusal> {
    let next = base.depth.saturating_add(1);
    if base.max_depth > 0 && next > base.max_depth {
        return Err(Refusal::Depth {
            next,
            max: base.max_depth,
        });
    }
    let mut out = Envelope {
        depth: next,
        ..base
    };
    if let Some(ms) = deadline_ms(base, left, now_epoch_ms) {
        if ms == 0 {
            return Err(Refusal::Spent);
        }
        out.wall_ms = ms;
        out.epoch_ms = now_epoch_ms.saturating_add(ms);
    }
    Ok(out)
}

/// The smallest of the caps on a delegation, in whole milliseconds from
/// `now_epoch_ms` (rounded down: never more than remains); `None` when nothing caps it.
fn deadline_ms(base: Envelope, left: Option<Duration>, now_epoch_ms: u64) -> Option<u64> {
    let left = left.map(|l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX));
    let wall = (base.wall_ms > 0).then_some(base.wall_ms);
    // An epoch deadline already past leaves nothing.
    let epoch = (base.epoch_ms > 0).then(|| base.epoch_ms.saturating_sub(now_epoch_ms));
    [left, wall, epoch].into_iter().flatten().min()
}

/// The envelope a delegation starts from: what the caller wrote, within what the work
/// it belongs to was handed (`inbound`, whose times the scope's budget already
/// carries): the deeper depth, the smaller of the limits set.
pub(crate) fn base(written: Option<Envelope>, inbound: Option<Envelope>) -> Envelope {
    match (written, inbound) {
        (None, None) => Envelope::default(),
        (Some(e), None) | (None, Some(e)) => e,
        (Some(w), Some(i)) => Envelope {
            tokens: smallest_set(w.tokens, i.tokens),
            depth: w.depth.max(i.depth),
            max_depth: smallest_set(w.max_depth, i.max_depth),
            ..w
        },
    }
}

/// The smaller of two values where 0 is "not set" (0 only when neither is set).
fn smallest_set<T: Ord + Default + Copy>(a: T, b: T) -> T {
    let unset = T::default();
    match (a == unset, b == unset) {
        (true, _) => b,
        (_, true) => a,
        _ => a.min(b),
    }
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
    fn outgoing_table() {
        type Row = (Envelope, Option<Duration>, Result<Envelope, Refusal>);
        let table: [Row; 13] = [
            // Nothing written, 30 s left: stamped with what remains, one hop deeper.
            (
                env(0, 0, 0, 0),
                Some(ms(30_000)),
                Ok(env(30_000, NOW + 30_000, 1, 0)),
            ),
            // The caller wrote less than remains: theirs stands.
            (
                env(10_000, NOW + 10_000, 1, 5),
                Some(ms(30_000)),
                Ok(env(10_000, NOW + 10_000, 2, 5)),
            ),
            // The caller wrote more than remains: lowered.
            (
                env(60_000, NOW + 60_000, 1, 5),
                Some(ms(30_000)),
                Ok(env(30_000, NOW + 30_000, 2, 5)),
            ),
            // Written wall time, no epoch: both say the wall time (the smaller cap).
            (
                env(10_000, 0, 0, 0),
                Some(ms(30_000)),
                Ok(env(10_000, NOW + 10_000, 1, 0)),
            ),
            // Written epoch deadline sooner than the written wall time: both say it.
            (
                env(10_000, NOW + 4_000, 0, 0),
                Some(ms(30_000)),
                Ok(env(4_000, NOW + 4_000, 1, 0)),
            ),
            // Written epoch deadline, no wall time, more than remains: what remains.
            (
                env(0, NOW + 60_000, 0, 0),
                Some(ms(2_500)),
                Ok(env(2_500, NOW + 2_500, 1, 0)),
            ),
            // A written epoch deadline already past: nothing left.
            (env(0, NOW - 1, 0, 0), Some(ms(2_500)), Err(Refusal::Spent)),
            // Sub-millisecond precision is rounded down.
            (
                env(0, 0, 0, 0),
                Some(Duration::from_micros(2_999)),
                Ok(env(2, NOW + 2, 1, 0)),
            ),
            // No time cap in scope: the written time, in both fields.
            (
                env(10_000, 0, 2, 3),
                None,
                Ok(env(10_000, NOW + 10_000, 3, 3)),
            ),
            (env(0, 0, 2, 3), None, Ok(env(0, 0, 3, 3))),
            // Depth: the last hop allowed, then refused.
            (
                env(0, 0, 2, 3),
                Some(ms(1_000)),
                Ok(env(1_000, NOW + 1_000, 3, 3)),
            ),
            (
                env(0, 0, 3, 3),
                Some(ms(1_000)),
                Err(Refusal::Depth { next: 4, max: 3 }),
            ),
            // Nothing left.
            (
                env(0, 0, 0, 0),
                Some(Duration::from_micros(999)),
                Err(Refusal::Spent),
            ),
        ];
        for (i, (base, left, want)) in table.into_iter().enumerate() {
            assert_eq!(outgoing(base, left, NOW), want, "row {i}");
        }
    }

    #[test]
    fn base_table() {
        let inbound = Envelope {
            tokens: 800,
            depth: 2,
            max_depth: 4,
            ..Envelope::default()
        };
        assert_eq!(base(None, None), Envelope::default());
        assert_eq!(base(None, Some(inbound)), inbound);
        let written = env(10_000, NOW + 10_000, 0, 0);
        assert_eq!(base(Some(written), None), written);
        // Written beside an inbound envelope: depth never goes back, limits only shrink.
        assert_eq!(
            base(Some(written), Some(inbound)),
            Envelope {
                tokens: 800,
                depth: 2,
                max_depth: 4,
                ..written
            }
        );
        let tighter = env(10_000, 0, 3, 3);
        assert_eq!(
            base(Some(tighter), Some(inbound)),
            Envelope {
                tokens: 800,
                ..tighter
            }
        );
        // A limit only one side sets stands.
        let unlimited = Envelope {
            max_depth: 0,
            tokens: 0,
            ..inbound
        };
        assert_eq!(base(Some(tighter), Some(unlimited)), tighter);
    }

    proptest! {
        /// Budgets never grow from hop to hop: what a delegation carries is never more
        /// than the caller wrote nor than remains, and always one hop deeper.
        #[test]
        fn an_envelope_never_grows(
            wall in 0u64..10_000_000,
            epoch_in in 0u64..10_000_000,
            depth in 0u32..10,
            max_depth in 0u32..10,
            left_ms in proptest::option::of(0u64..10_000_000),
        ) {
            let epoch = if epoch_in == 0 { 0 } else { NOW + epoch_in };
            let base = env(wall, epoch, depth, max_depth);
            match outgoing(base, left_ms.map(ms), NOW) {
                Ok(out) => {
                    prop_assert_eq!(out.depth, depth + 1);
                    prop_assert!(max_depth == 0 || out.depth <= max_depth);
                    prop_assert_eq!(out.tokens, base.tokens);
                    if wall > 0 { prop_assert!(out.wall_ms <= wall); }
                    if epoch > 0 { prop_assert!(out.epoch_ms <= epoch); }
                    if let Some(left) = left_ms {
                        prop_assert!(out.wall_ms <= left && out.wall_ms > 0);
                        prop_assert!(out.epoch_ms <= NOW + left);
                    }
                    // One deadline, written twice: a receiver reading either field
                    // gets the same.
                    if out.wall_ms > 0 || out.epoch_ms > 0 {
                        prop_assert_eq!(out.epoch_ms, NOW + out.wall_ms);
                    }
                }
                Err(Refusal::Depth { next, max }) => {
                    prop_assert!(max > 0 && next > max);
                }
                Err(Refusal::Spent) => prop_assert!(left_ms == Some(0)),
            }
        }
    }
}
