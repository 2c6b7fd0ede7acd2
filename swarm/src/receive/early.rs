//! Cancels that arrived before the handoff they name (a `CancelDelegation` can
//! overtake its `RequestHandoff` on another connection): kept for a while, bounded in
//! number and size, and applied when the handoff arrives.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use sw4rm_timeouts::proto::sw4rm::handoff::CancelDelegation;
use sw4rm_timeouts::seams::{cut, QUOTE_LIMIT};

/// At most this many cancels for delegations not (yet) running are kept; a new one
/// past it pushes out the oldest.
pub const MAX_EARLY_CANCELS: usize = 1_024;
/// How long a cancel for a delegation not (yet) running is kept.
pub const EARLY_CANCEL_MEMORY: Duration = Duration::from_secs(60);
/// A cancel naming a longer correlation id is not kept (no handoff of ours has one).
const MAX_ID_LEN: usize = 256;

/// The cancels kept, by correlation id, with their arrival order.
#[derive(Debug, Default)]
pub(super) struct EarlyCancels {
    by_id: HashMap<String, EarlyCancel>,
    /// Arrival order; entries taken or replaced stay until they age out or the
    /// queue is compacted.
    order: VecDeque<(String, u64, Instant)>,
    /// Numbers each cancel kept, so a replaced one is told from its successor.
    seq: u64,
}

#[derive(Debug)]
struct EarlyCancel {
    request: CancelDelegation,
    at: Instant,
    seq: u64,
}

impl EarlyCancels {
    /// Keeps `request` (arrived at `now`); `false` when it cannot be kept (an id too
    /// long).
    pub(super) fn keep(&mut self, request: &CancelDelegation, now: Instant) -> bool {
        if request.correlation_id.len() > MAX_ID_LEN {
            return false;
        }
        self.prune(now);
        while self.by_id.len() >= MAX_EARLY_CANCELS
            && !self.by_id.contains_key(&request.correlation_id)
        {
            let Some((id, seq, _)) = self.order.pop_front() else {
                break;
            };
            self.forget_if(&id, seq);
        }
        self.seq += 1;
        let kept = EarlyCancel {
            request: CancelDelegation {
                correlation_id: request.correlation_id.clone(),
                reason: cut(&request.reason, QUOTE_LIMIT).to_string(),
                grace_period_ms: request.grace_period_ms,
            },
            at: now,
            seq: self.seq,
        };
        self.by_id.insert(request.correlation_id.clone(), kept);
        self.order
            .push_back((request.correlation_id.clone(), self.seq, now));
        if self.order.len() > 2 * MAX_EARLY_CANCELS {
            let by_id = &self.by_id;
            self.order
                .retain(|(id, seq, _)| by_id.get(id).is_some_and(|kept| kept.seq == *seq));
        }
        true
    }

    /// The cancel kept for `id`, if one is and it is not too old.
    pub(super) fn take(&mut self, id: &str, now: Instant) -> Option<CancelDelegation> {
        let kept = self.by_id.remove(id)?;
        (now.saturating_duration_since(kept.at) < EARLY_CANCEL_MEMORY).then_some(kept.request)
    }

    /// Cancels kept now.
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Drops what is too old.
    fn prune(&mut self, now: Instant) {
        while let Some((id, seq, at)) = self.order.front().cloned() {
            if now.saturating_duration_since(at) < EARLY_CANCEL_MEMORY {
                break;
            }
            self.order.pop_front();
            self.forget_if(&id, seq);
        }
    }

    /// Forgets `id` if what is kept for it is the cancel numbered `seq` (not a later
    /// one).
    fn forget_if(&mut self, id: &str, seq: u64) {
        if self.by_id.get(id).is_some_and(|kept| kept.seq == seq) {
            self.by_id.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cancel(id: &str) -> CancelDelegation {
        CancelDelegation {
            correlation_id: id.into(),
            reason: "r".repeat(10_000),
            grace_period_ms: 7_000,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn kept_for_a_while_then_forgotten() {
        let mut early = EarlyCancels::default();
        let now = Instant::now();
        assert!(early.keep(&cancel("a"), now));
        assert!(early.keep(&cancel("b"), now));
        let a = early.take("a", now + Duration::from_secs(59)).unwrap();
        assert_eq!(a.grace_period_ms, 7_000);
        assert!(a.reason.len() < 1_000, "a peer's text is bounded");
        assert!(early.take("a", now).is_none(), "taken once");
        assert!(
            early.take("b", now + EARLY_CANCEL_MEMORY).is_none(),
            "too old"
        );
        assert!(!early.keep(&cancel(&"x".repeat(MAX_ID_LEN + 1)), now));
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_under_ten_thousand_unknown_ids() {
        let mut early = EarlyCancels::default();
        let now = Instant::now();
        for i in 0..10_000 {
            assert!(early.keep(&cancel(&format!("unknown-{i}")), now));
            assert!(early.len() <= MAX_EARLY_CANCELS);
            assert!(early.order.len() <= 2 * MAX_EARLY_CANCELS + 1);
        }
        // The newest are the ones kept.
        assert!(early.take("unknown-9999", now).is_some());
        assert!(early.take("unknown-0", now).is_none());
        // The same id over and over stays one entry, and the queue stays bounded.
        for _ in 0..10_000 {
            early.keep(&cancel("same"), now);
            assert!(early.order.len() <= 2 * MAX_EARLY_CANCELS + 1);
        }
        // Everything ages out.
        early.keep(&cancel("late"), now + EARLY_CANCEL_MEMORY);
        assert_eq!(early.len(), 1);
    }
}
