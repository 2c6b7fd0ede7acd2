//! SW4-004's grace rule for a cancelled delegation: the floor, the grace a cancel
//! gives, the grace a cancelled delegation's own children get, and when it expires.

use std::time::Duration;

/// SW4-004's floor on a cancelled delegation's grace period: a requested 0 becomes this.
pub const MIN_CANCEL_GRACE: Duration = Duration::from_millis(5_000);

/// The grace period a `CancelDelegation` gives: what was requested, but never less
/// than [`MIN_CANCEL_GRACE`] (SW4-004: "min 5000ms"; a requested 0 is the floor).
///
/// ```
/// use std::time::Duration;
/// use sw4rm_swarm::effective_grace;
/// assert_eq!(effective_grace(0), Duration::from_secs(5));
/// assert_eq!(effective_grace(10_000), Duration::from_secs(10));
/// ```
pub fn effective_grace(requested_ms: u64) -> Duration {
    Duration::from_millis(requested_ms).max(MIN_CANCEL_GRACE)
}

/// The grace a delegation's own children get when it is cancelled (SW4-004 §9.4
/// item 5, conformance T-016): what the agent asks for, clamped to what is left of
/// the grace its own delegator gave it (`parent_left`, when a delegator cancelled
/// it), and never below [`MIN_CANCEL_GRACE`].
///
/// ```
/// use std::time::Duration;
/// use sw4rm_swarm::child_grace;
/// let s = Duration::from_secs;
/// assert_eq!(child_grace(s(30), Some(s(8))), s(8));
/// assert_eq!(child_grace(s(30), Some(s(2))), s(5)); // the floor
/// assert_eq!(child_grace(s(30), None), s(30));
/// ```
pub fn child_grace(requested: Duration, parent_left: Option<Duration>) -> Duration {
    parent_left
        .map_or(requested, |left| requested.min(left))
        .max(MIN_CANCEL_GRACE)
}

/// Whether the grace of a cancel made at `cancelled_at_ms` (any clock) has expired at
/// `now_ms` (the same clock): from the grace deadline on, work still running is
/// forced (`FORCED_PREEMPTION`).
pub(crate) fn grace_expired(cancelled_at_ms: u64, grace: Duration, now_ms: u64) -> bool {
    let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
    now_ms >= cancelled_at_ms.saturating_add(grace_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t016_a_childs_grace_is_clamped_to_the_parents_remaining_grace() {
        let ms = Duration::from_millis;
        // (requested, parent's grace left, given)
        let table = [
            (ms(30_000), None, ms(30_000)),
            (ms(0), None, ms(5_000)),
            (ms(30_000), Some(ms(12_000)), ms(12_000)),
            (ms(8_000), Some(ms(12_000)), ms(8_000)),
            // The floor holds even when less is left.
            (ms(30_000), Some(ms(1_000)), ms(5_000)),
            (ms(30_000), Some(ms(0)), ms(5_000)),
            (Duration::MAX, Some(Duration::MAX), Duration::MAX),
        ];
        for (requested, left, want) in table {
            assert_eq!(child_grace(requested, left), want, "{requested:?} {left:?}");
        }
    }

    #[test]
    fn grace_floor() {
        // (requested ms, effective ms)
        let rows = [
            (0, 5_000),
            (1, 5_000),
            (4_999, 5_000),
            (5_000, 5_000),
            (10_000, 10_000),
        ];
        for (requested, effective) in rows {
            assert_eq!(
                effective_grace(requested),
                Duration::from_millis(effective),
                "{requested}"
            );
        }
    }

    #[test]
    fn grace_expires_from_offset_zero() {
        let grace = Duration::from_millis(5_000);
        // (offset from the grace deadline, expired)
        for (offset, expired) in [(-1i64, false), (0, true), (1, true)] {
            let now = u64::try_from(6_000 + offset).unwrap_or(0);
            assert_eq!(grace_expired(1_000, grace, now), expired, "offset {offset}");
        }
        assert!(!grace_expired(u64::MAX - 1, grace, u64::MAX - 1));
    }
}
