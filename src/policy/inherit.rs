//! Deadlines that follow the work, as pure arithmetic: what an outgoing call may use
//! of a deadline inherited from the inbound call it serves, and what remains of an
//! operation budget that pauses while a human decides.
//!
//! Budgets only shrink: nothing here raises a value to meet a profile's minimum.

use std::time::Duration;

/// How an inherited deadline is passed on to outgoing calls.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::Propagation;
/// let p = Propagation::default()
///     .with_hop_offset(Duration::from_millis(20))
///     .with_max_propagated(Duration::from_secs(60));
/// assert_eq!(p.hop_offset(), Duration::from_millis(20));
/// assert_eq!(p.max_propagated(), Some(Duration::from_secs(60)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Propagation {
    offset: Duration,
    max: Option<Duration>,
    floor: Duration,
}

impl Default for Propagation {
    /// A 5 ms hop offset, nothing capped, calls refused below 1 ms.
    fn default() -> Self {
        Propagation {
            offset: Duration::from_millis(5),
            max: None,
            floor: Duration::from_millis(1),
        }
    }
}

impl Propagation {
    /// Time kept back for the hop (the network and the reply): an outgoing call gets
    /// the inherited remaining time minus this.
    pub fn with_hop_offset(mut self, offset: Duration) -> Self {
        self.offset = offset;
        self
    }

    /// The most an outgoing call inherits, however much the inbound call had.
    pub fn with_max_propagated(mut self, max: Duration) -> Self {
        self.max = Some(max);
        self
    }

    /// Below this much inherited time an outgoing call is not sent: it fails at once
    /// with `DEADLINE_EXCEEDED`. Retries of a call capped by an inherited deadline or
    /// a budget run down to it too.
    pub fn with_floor(mut self, floor: Duration) -> Self {
        self.floor = floor;
        self
    }

    /// The hop offset.
    pub fn hop_offset(&self) -> Duration {
        self.offset
    }

    /// The cap on what is propagated, if any.
    pub fn max_propagated(&self) -> Option<Duration> {
        self.max
    }

    /// The floor below which calls are not sent.
    pub fn floor(&self) -> Duration {
        self.floor
    }
}

/// What an outgoing call inherits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inherit {
    /// Cap the call at this.
    Cap(Duration),
    /// Too little is left: fail at once, without sending.
    Exhausted(Duration),
}

/// `min(remaining − offset, max)`, or `Exhausted` below the floor.
pub(crate) fn inherited(remaining: Duration, p: &Propagation) -> Inherit {
    let left = remaining.saturating_sub(p.offset);
    let left = p.max.map_or(left, |m| left.min(m));
    if left < p.floor || left.is_zero() {
        Inherit::Exhausted(left)
    } else {
        Inherit::Cap(left)
    }
}

/// What remains of a budget of `total` after `elapsed` wall time, of which `paused`
/// was spent paused; pause time beyond `max_pause` is charged.
pub(crate) fn budget_remaining(
    total: Duration,
    elapsed: Duration,
    paused: Duration,
    max_pause: Option<Duration>,
) -> Duration {
    let excused = max_pause.map_or(paused, |m| paused.min(m)).min(elapsed);
    total.saturating_sub(elapsed - excused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn inherited_table() {
        let p = Propagation::default();
        let capped = p.with_max_propagated(ms(1_000));
        let floor = p.with_floor(ms(50));
        let rows = [
            ("offset taken off", ms(3_000), p, Inherit::Cap(ms(2_995))),
            (
                "cap on what is propagated",
                ms(3_000),
                capped,
                Inherit::Cap(ms(1_000)),
            ),
            ("nothing left", ms(0), p, Inherit::Exhausted(ms(0))),
            ("less than the offset", ms(4), p, Inherit::Exhausted(ms(0))),
            ("below the floor", ms(40), floor, Inherit::Exhausted(ms(35))),
            ("at the floor", ms(55), floor, Inherit::Cap(ms(50))),
        ];
        for (name, remaining, p, want) in rows {
            assert_eq!(inherited(remaining, &p), want, "{name}");
        }
    }

    #[test]
    fn budget_table() {
        let rows = [
            ("nothing spent", ms(0), ms(0), None, ms(10_000)),
            ("wall time is charged", ms(4_000), ms(0), None, ms(6_000)),
            ("pauses are not", ms(9_000), ms(7_000), None, ms(8_000)),
            (
                "pause beyond the maximum is",
                ms(9_000),
                ms(7_000),
                Some(ms(5_000)),
                ms(6_000),
            ),
            ("spent", ms(12_000), ms(0), None, ms(0)),
        ];
        for (name, elapsed, paused, max, want) in rows {
            assert_eq!(
                budget_remaining(ms(10_000), elapsed, paused, max),
                want,
                "{name}"
            );
        }
    }

    proptest! {
        #[test]
        fn budgets_only_shrink(elapsed in 0u64..100_000, paused in 0u64..100_000, more in 0u64..10_000) {
            let paused = paused.min(elapsed);
            let a = budget_remaining(ms(50_000), ms(elapsed), ms(paused), None);
            let b = budget_remaining(ms(50_000), ms(elapsed + more), ms(paused), None);
            prop_assert!(b <= a);
        }

        #[test]
        fn inheriting_never_grows(remaining in 0u64..100_000, offset in 0u64..1_000) {
            let p = Propagation::default().with_hop_offset(ms(offset));
            match inherited(ms(remaining), &p) {
                Inherit::Cap(c) | Inherit::Exhausted(c) => prop_assert!(c <= ms(remaining)),
            }
        }
    }
}
