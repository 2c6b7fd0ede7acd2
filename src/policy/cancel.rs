//! Why work was cancelled: a pure value, read by the scope's cancel signal, the call
//! record and the crates beside this one.

use std::fmt;

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
    /// The caller cancelled the call itself, with tonic's
    /// `Request::cancellation_handle()`.
    CallCancelled,
}

impl CancelReason {
    /// Every reason, in code order.
    pub const ALL: [CancelReason; 5] = [
        CancelReason::CallerGone,
        CancelReason::InboundDeadline,
        CancelReason::BudgetCancelled,
        CancelReason::DelegationCancelled,
        CancelReason::CallCancelled,
    ];

    /// The name used in details, logs and the `cause` metric attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::CallerGone => "caller_gone",
            CancelReason::InboundDeadline => "inbound_deadline",
            CancelReason::BudgetCancelled => "budget_cancelled",
            CancelReason::DelegationCancelled => "delegation_cancelled",
            CancelReason::CallCancelled => "call_cancelled",
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
            CancelReason::CallCancelled => "the caller cancelled the call",
        }
    }

    /// The compact code a signal stores (0 is "not cancelled").
    pub(crate) fn code(self) -> u8 {
        match self {
            CancelReason::CallerGone => 1,
            CancelReason::InboundDeadline => 2,
            CancelReason::BudgetCancelled => 3,
            CancelReason::DelegationCancelled => 4,
            CancelReason::CallCancelled => 5,
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
}
