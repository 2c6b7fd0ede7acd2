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

/// The grace a delegation's own children get when it is cancelled (SW4-004 §9.4
/// item 5, conformance T-016): what the agent asks for, clamped to what is left of
/// the grace its own delegator gave it (`parent_left`, when a delegator cancelled
/// it), and never below [`MIN_CANCEL_GRACE`].
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::scope::child_grace;
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

/// SW4-004's cancellation book, as pure state on a millisecond clock: which
/// delegations are children of which, which were cancelled when and with what grace.
/// A cancel reaches the delegation and its **direct** children only (each child
/// cascades to its own).
#[derive(Clone, Debug, Default)]
pub(crate) struct CancelBook {
    children: std::collections::HashMap<String, Vec<String>>,
    /// The reverse of `children`, so that a child that ends leaves its parents' lists.
    parents: std::collections::HashMap<String, Vec<String>>,
    cancelled: std::collections::HashMap<String, (u64, Duration)>,
}

/// What one cancel request did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CancelPlan {
    /// The grace in force for the delegation named: its first cancel's.
    pub(crate) grace: Duration,
    /// The delegation and its direct children, in that order.
    pub(crate) cancelled: Vec<String>,
}

impl CancelBook {
    /// `child` was delegated from the work of `parent`.
    pub(crate) fn link(&mut self, parent: &str, child: &str) {
        self.children
            .entry(parent.to_owned())
            .or_default()
            .push(child.to_owned());
        self.parents
            .entry(child.to_owned())
            .or_default()
            .push(parent.to_owned());
    }

    /// Cancels `correlation_id` and its direct children at `now_ms` with the requested
    /// grace (raised to the floor). A delegation cancelled before keeps its first
    /// cancel, and the plan gives that grace. Children forgotten (ended) are not
    /// cancelled, nor remembered.
    pub(crate) fn cancel(
        &mut self,
        correlation_id: &str,
        grace_ms: u64,
        now_ms: u64,
    ) -> CancelPlan {
        let requested = effective_grace(grace_ms);
        let mut cancelled = vec![correlation_id.to_owned()];
        cancelled.extend(
            self.children
                .get(correlation_id)
                .into_iter()
                .flatten()
                .cloned(),
        );
        for id in &cancelled {
            self.cancelled
                .entry(id.clone())
                .or_insert((now_ms, requested));
        }
        let grace = self
            .cancelled
            .get(correlation_id)
            .map_or(requested, |(_, grace)| *grace);
        CancelPlan { grace, cancelled }
    }

    /// Whether `correlation_id` was cancelled and its grace has expired at `now_ms`.
    pub(crate) fn expired(&self, correlation_id: &str, now_ms: u64) -> bool {
        self.cancelled
            .get(correlation_id)
            .is_some_and(|(at, grace)| grace_expired(*at, *grace, now_ms))
    }

    /// Of `active`, the delegations forced at `now_ms`, in the order given.
    pub(crate) fn collect_forced<'a>(
        &self,
        active: impl IntoIterator<Item = &'a str>,
        now_ms: u64,
    ) -> Vec<String> {
        active
            .into_iter()
            .filter(|id| self.expired(id, now_ms))
            .map(str::to_owned)
            .collect()
    }

    /// The grace deadline of `correlation_id`, if it was cancelled (ms).
    pub(crate) fn grace_deadline(&self, correlation_id: &str) -> Option<u64> {
        let (at, grace) = self.cancelled.get(correlation_id)?;
        Some(at.saturating_add(u64::try_from(grace.as_millis()).unwrap_or(u64::MAX)))
    }

    /// Forgets `correlation_id` (its work ended): its cancel, its children, and its
    /// place in its parents' lists (a later cancel of a parent does not reach it).
    pub(crate) fn forget(&mut self, correlation_id: &str) {
        self.cancelled.remove(correlation_id);
        for child in self.children.remove(correlation_id).unwrap_or_default() {
            remove_one(&mut self.parents, &child, correlation_id);
        }
        for parent in self.parents.remove(correlation_id).unwrap_or_default() {
            remove_one(&mut self.children, &parent, correlation_id);
        }
    }

    /// Delegations the book holds anything for (for leak checks).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let mut ids: std::collections::HashSet<&str> =
            self.cancelled.keys().map(String::as_str).collect();
        ids.extend(self.children.keys().map(String::as_str));
        ids.extend(self.parents.keys().map(String::as_str));
        ids.len()
    }
}

/// Takes `id` out of the list `map` keeps under `key`, and the list when it empties.
fn remove_one(map: &mut std::collections::HashMap<String, Vec<String>>, key: &str, id: &str) {
    if let Some(list) = map.get_mut(key) {
        if let Some(at) = list.iter().position(|x| x == id) {
            list.swap_remove(at);
        }
        if list.is_empty() {
            map.remove(key);
        }
    }
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

    #[test]
    fn a_cancel_reaches_direct_children_only_and_keeps_its_first_grace() {
        let mut book = CancelBook::default();
        book.link("root", "a");
        book.link("a", "a1");
        let plan = book.cancel("root", 0, 100);
        assert_eq!(plan.cancelled, ["root", "a"]);
        assert_eq!(plan.grace, MIN_CANCEL_GRACE);
        assert!(
            !book.expired("a1", u64::MAX),
            "grandchildren hear it from their parent"
        );
        // Cancelled again later with another grace: the first stays, and is answered.
        let again = book.cancel("a", 60_000, 200);
        assert_eq!(again.grace, MIN_CANCEL_GRACE);
        assert_eq!(book.grace_deadline("a"), Some(5_100));
        for id in ["root", "a", "a1"] {
            book.forget(id);
        }
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn a_child_that_ended_is_neither_cancelled_nor_remembered() {
        let mut book = CancelBook::default();
        for parent in 0..1_000 {
            for child in 0..10 {
                book.link(&format!("p{parent}"), &format!("p{parent}-c{child}"));
            }
            for child in 0..10 {
                book.forget(&format!("p{parent}-c{child}")); // ended
            }
            let plan = book.cancel(&format!("p{parent}"), 0, 100);
            assert_eq!(plan.cancelled, [format!("p{parent}")]);
        }
        // Only the parents, cancelled and still running, are held.
        assert_eq!(book.len(), 1_000);
        for parent in 0..1_000 {
            book.forget(&format!("p{parent}"));
        }
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn a_parent_that_ended_leaves_its_childrens_lists() {
        let mut book = CancelBook::default();
        book.link("p", "c");
        book.forget("p");
        assert_eq!(book.len(), 0);
        assert_eq!(book.cancel("c", 0, 0).cancelled, ["c"]);
    }
}
