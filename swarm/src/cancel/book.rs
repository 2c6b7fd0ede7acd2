//! SW4-004's cancellation book: which delegations are children of which, which were
//! cancelled when and with what grace, as pure state on a millisecond clock.

use std::time::Duration;

use super::grace::{effective_grace, grace_expired};

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
    use crate::MIN_CANCEL_GRACE;

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
