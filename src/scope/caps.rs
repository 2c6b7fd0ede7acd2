//! The caps of the scope a call is planned in ([`Current`]): what is left of an
//! inherited deadline and of an operation budget, and how they lower the call's
//! deadline. The arithmetic is `policy/inherit.rs` and `policy/deadline.rs`; this is
//! where the scope's values meet it.

use std::time::Duration;

use crate::policy::deadline::{tighten, Cap};
use crate::policy::envelope::Envelope;
use crate::policy::inherit::{inherited, Inherit, Propagation};
use crate::policy::source::Source;

/// The caps a call planned now sees.
#[derive(Clone, Copy, Debug, Default)]
pub struct Current {
    /// Time left before the inherited deadline.
    pub(crate) inherited: Option<Duration>,
    /// What remains of the budget and the time it has been paused, unless it is
    /// paused now (a call made during a pause is not capped by the budget).
    pub(crate) budget: Option<BudgetNow>,
    /// The envelope the budget was read from, when the work continues a delegation.
    pub delegation: Option<Envelope>,
}

/// An operation budget at the start of a call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetNow {
    /// What remains.
    pub(crate) remaining: Duration,
    /// Time spent paused so far.
    pub(crate) paused: Duration,
    /// Time since the budget started, paused time included.
    pub(crate) ran: Duration,
}

/// One of the scope's caps on a call, and whether too little of it is left to send.
#[derive(Clone, Debug)]
struct ScopeCap {
    cap: Cap,
    exhausted: bool,
}

/// What the scope's caps did to a call's deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tightened {
    /// Too little of an inherited deadline or a budget is left to send the call.
    pub(crate) exhausted: bool,
    /// The budget at the call's start, when the budget is the smallest cap.
    pub(crate) budget: Option<BudgetNow>,
}

impl Current {
    /// Lowers the call's deadline to the caps of the scope it is made in (an inherited
    /// deadline, an operation budget).
    pub(crate) fn tighten(&self, total: &mut Option<Cap>, propagation: &Propagation) -> Tightened {
        let inherited_cap = self.inherited.map(|remaining| {
            let (limit, exhausted) = match inherited(remaining, propagation) {
                Inherit::Cap(d) => (d, false),
                Inherit::Exhausted(d) => (d, true),
            };
            ScopeCap {
                cap: Cap::new(limit, Source::Inherited),
                exhausted,
            }
        });
        let budget_source = match self.delegation {
            Some(_) => Source::BudgetEnvelope,
            None => Source::Budget,
        };
        let budget_cap = self.budget.map(|b| ScopeCap {
            cap: Cap::new(b.remaining, budget_source),
            exhausted: b.remaining.is_zero(),
        });
        let caps = [inherited_cap, budget_cap];
        let exhausted = caps.iter().flatten().any(|c| c.exhausted);
        tighten(total, caps.into_iter().flatten().map(|c| c.cap));
        let budget = match total {
            Some(cap) if matches!(cap.source, Source::Budget | Source::BudgetEnvelope) => {
                self.budget
            }
            _ => None,
        };
        Tightened { exhausted, budget }
    }

    /// What the scope's caps leave for work beyond this call (a delegation's envelope):
    /// the smaller of the inherited deadline, less the hop offset, and the budget's
    /// remainder; `None` when neither caps.
    pub fn left(&self, propagation: &Propagation) -> Option<Duration> {
        let inherited = self
            .inherited
            .map(|remaining| match inherited(remaining, propagation) {
                Inherit::Cap(d) => d,
                Inherit::Exhausted(_) => Duration::ZERO,
            });
        let budget = self.budget.map(|b| b.remaining);
        match (inherited, budget) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn left_is_the_smallest_scope_cap() {
        let p = Propagation::default().with_hop_offset(ms(5));
        let scope = |inherited, budget: Option<Duration>| Current {
            inherited,
            budget: budget.map(|remaining| BudgetNow {
                remaining,
                ..BudgetNow::default()
            }),
            delegation: None,
        };
        let table = [
            (None, None, None),
            (Some(ms(1_000)), None, Some(ms(995))),
            (None, Some(ms(700)), Some(ms(700))),
            (Some(ms(1_000)), Some(ms(700)), Some(ms(700))),
            (Some(ms(500)), Some(ms(700)), Some(ms(495))),
            // Below the floor: nothing left.
            (Some(ms(5)), None, Some(ms(0))),
        ];
        for (inherited, budget, want) in table {
            assert_eq!(
                scope(inherited, budget).left(&p),
                want,
                "{inherited:?} {budget:?}"
            );
        }
    }
}
