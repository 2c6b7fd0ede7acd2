//! Why work was cancelled, and SW4-004's grace rule for a cancelled delegation: pure
//! values, read by the scope's cancel signal, the call record and the cascade.

use std::fmt;
use std::time::Duration;

/// Why a scope was cancelled: where the cancel an outgoing call (or long work) obeyed
/// came from. It is the cause at the root: a scope cancelled because its parent was
/// carries the parent's reason.
///
/// ```
/// use sw4rm_timeouts::CancelReason;
/// assert_eq!(CancelReason::CallerGone.as_str(), "caller_gone");
/// assert_eq!(CancelReason::parse("delegation_cancelled"), Some(CancelReason::DelegationCancelled));
/// // Only a deadline that passed is a timeout; every other reason is a cancel.
/// assert!(CancelReason::InboundDeadline.is_deadline());
/// assert!(!CancelReason::BudgetCancelled.is_deadline());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelReason {
    /// The caller of the inbound call went away: it reset the HTTP/2 stream, or the
    /// connection closed, before the handler finished answering.
    CallerGone,
    /// The inbound call's deadline passed before the handler answered.
    InboundDeadline,
    /// The [`crate::OperationBudget`] the work runs under was cancelled on purpose
    /// ([`crate::OperationBudget::cancel`]).
    BudgetCancelled,
    /// The agent that delegated the work cancelled the delegation (SW4-004
    /// `CancelDelegation`).
    DelegationCancelled,
}

impl CancelReason {
    /// Every reason, in code order.
    pub const ALL: [CancelReason; 4] = [
        CancelReason::CallerGone,
        CancelReason::InboundDeadline,
        CancelReason::BudgetCancelled,
        CancelReason::DelegationCancelled,
    ];

    /// The name used in details, logs and the `cause` metric attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::CallerGone => "caller_gone",
            CancelReason::InboundDeadline => "inbound_deadline",
            CancelReason::BudgetCancelled => "budget_cancelled",
            CancelReason::DelegationCancelled => "delegation_cancelled",
        }
    }

    /// The reason [`CancelReason::as_str`] names.
    pub fn parse(s: &str) -> Option<CancelReason> {
        CancelReason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether the cause is a deadline that passed: an outgoing call ended by it is a
    /// timeout (`DEADLINE_EXCEEDED`), not a cancel.
    pub fn is_deadline(self) -> bool {
        self == CancelReason::InboundDeadline
    }

    /// A one-line account, for status messages.
    pub fn describe(self) -> &'static str {
        match self {
            CancelReason::CallerGone => "the caller of the inbound call went away",
            CancelReason::InboundDeadline => "the inbound call's deadline passed",
            CancelReason::BudgetCancelled => "its operation budget was cancelled",
            CancelReason::DelegationCancelled => "the delegating agent cancelled the delegation",
        }
    }

    /// The compact code a signal stores (0 is "not cancelled").
    pub(crate) fn code(self) -> u8 {
        match self {
            CancelReason::CallerGone => 1,
            CancelReason::InboundDeadline => 2,
            CancelReason::BudgetCancelled => 3,
            CancelReason::DelegationCancelled => 4,
        }
    }

    /// The reason a stored code names (`None`: 0, not cancelled).
    pub(crate) fn from_code(code: u8) -> Option<CancelReason> {
        CancelReason::ALL.into_iter().find(|r| r.code() == code)
    }
}

impl fmt::Display for CancelReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// SW4-004's floor on a cancelled delegation's grace period: a requested 0 becomes this.
pub const MIN_CANCEL_GRACE: Duration = Duration::from_millis(5_000);

/// The grace period a `CancelDelegation` gives: what was requested, but never less
/// than [`MIN_CANCEL_GRACE`] (SW4-004: "min 5000ms"; a requested 0 is the floor).
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::scope::effective_grace;
/// assert_eq!(effective_grace(0), Duration::from_secs(5));
/// assert_eq!(effective_grace(10_000), Duration::from_secs(10));
/// ```
pub fn effective_grace(requested_ms: u64) -> Duration {
    Duration::from_millis(requested_ms).max(MIN_CANCEL_GRACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_round_trip_by_name_and_code() {
        for r in CancelReason::ALL {
            assert_eq!(CancelReason::parse(r.as_str()), Some(r));
            assert_eq!(CancelReason::from_code(r.code()), Some(r));
            assert_ne!(r.code(), 0);
        }
        assert_eq!(CancelReason::from_code(0), None);
        assert_eq!(CancelReason::parse("timeout"), None);
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
}
