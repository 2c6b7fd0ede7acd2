//! [`OperationBudget`]: one time budget for a whole operation of many calls, which
//! pauses while a human decides.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::task::{with_budget, Scoped};
use crate::policy::inherit::budget_remaining;

/// A time budget for an operation that spans many calls. Calls made inside
/// [`run`](OperationBudget::run) are capped by what remains (the smallest cap wins,
/// and a timeout's details name `budget` and carry the paused time). While a human
/// decides, [`pause`](OperationBudget::pause) stops the clock.
///
/// A call made while the budget is paused is **not capped by the budget**: the HITL
/// call itself keeps its own profile deadline (`hitl_escalate`, minutes), and the
/// time it takes is not charged. Caps are taken when a call starts: pausing later
/// does not lengthen a call already in flight.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::OperationBudget;
/// let budget = OperationBudget::new(Duration::from_secs(60));
/// tokio::time::sleep(Duration::from_secs(5)).await;          // work: charged
/// {
///     let _human = budget.pause();
///     tokio::time::sleep(Duration::from_secs(600)).await;    // a person decides: not charged
/// }
/// assert_eq!(budget.remaining(), Duration::from_secs(55));
/// assert_eq!(budget.paused(), Duration::from_secs(600));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct OperationBudget {
    inner: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    total: Duration,
    started: Instant,
    max_pause: Option<Duration>,
    /// Paused time of the pauses that ended.
    paused: Duration,
    /// Guards alive, and since when the first of them.
    depth: u32,
    since: Option<Instant>,
}

impl State {
    fn paused_at(&self, now: Instant) -> Duration {
        self.paused + self.since.map_or(Duration::ZERO, |s| now - s)
    }

    fn remaining_at(&self, now: Instant) -> Duration {
        budget_remaining(
            self.total,
            now.saturating_duration_since(self.started),
            self.paused_at(now),
            self.max_pause,
        )
    }
}

impl OperationBudget {
    /// A budget of `total`, starting now.
    pub fn new(total: Duration) -> Self {
        OperationBudget {
            inner: Arc::new(Mutex::new(State {
                total,
                started: Instant::now(),
                max_pause: None,
                paused: Duration::ZERO,
                depth: 0,
                since: None,
            })),
        }
    }

    /// Pause time beyond `max` is charged after all (a decision that never comes
    /// cannot hold the operation open forever).
    pub fn with_max_pause(self, max: Duration) -> Self {
        self.lock().max_pause = Some(max);
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic in a caller: every update is
        // a single assignment.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Time left now.
    pub fn remaining(&self) -> Duration {
        self.lock().remaining_at(Instant::now())
    }

    /// Time spent paused so far (including a pause in progress).
    pub fn paused(&self) -> Duration {
        self.lock().paused_at(Instant::now())
    }

    /// Whether a pause is in progress.
    pub fn is_paused(&self) -> bool {
        self.lock().depth > 0
    }

    /// Stops the clock until the guard is dropped. Nested or overlapping pauses count
    /// once; dropping the guard — or the future holding it, when it is cancelled —
    /// resumes the clock.
    pub fn pause(&self) -> PauseGuard {
        let mut state = self.lock();
        if state.depth == 0 {
            state.since = Some(Instant::now());
        }
        state.depth += 1;
        PauseGuard {
            budget: self.clone(),
        }
    }

    /// Runs `future` with every outgoing call capped by this budget (inside any
    /// inherited deadline already in scope).
    pub fn run<F: Future>(&self, future: F) -> Scoped<F> {
        with_budget(self.clone(), future)
    }

    /// The cap for a call starting at `now`: what remains and the paused time, or
    /// `None` while paused.
    pub(crate) fn cap_at(&self, now: Instant) -> Option<(Duration, Duration)> {
        let state = self.lock();
        (state.depth == 0).then(|| (state.remaining_at(now), state.paused_at(now)))
    }
}

/// Keeps an [`OperationBudget`] paused while it lives.
#[derive(Debug)]
#[must_use = "the budget resumes as soon as the guard is dropped"]
pub struct PauseGuard {
    budget: OperationBudget,
}

impl Drop for PauseGuard {
    fn drop(&mut self) {
        let mut state = self.budget.lock();
        state.depth = state.depth.saturating_sub(1);
        if state.depth == 0 {
            if let Some(since) = state.since.take() {
                state.paused += Instant::now() - since;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    #[tokio::test(start_paused = true)]
    async fn nested_pauses_count_once_and_the_max_pause_is_charged() {
        let b = OperationBudget::new(s(100));
        tokio::time::sleep(s(10)).await;
        let outer = b.pause();
        tokio::time::sleep(s(5)).await;
        let inner = b.pause();
        tokio::time::sleep(s(5)).await;
        drop(outer);
        assert!(b.is_paused(), "the inner guard still holds it");
        tokio::time::sleep(s(5)).await;
        drop(inner);
        assert_eq!((b.remaining(), b.paused()), (s(90), s(15)));
        tokio::time::sleep(s(20)).await;
        assert_eq!(b.remaining(), s(70));

        let capped = OperationBudget::new(s(100)).with_max_pause(s(30));
        {
            let _g = capped.pause();
            tokio::time::sleep(s(50)).await;
            assert_eq!(capped.remaining(), s(80), "20 s beyond the maximum charged");
        }
        assert_eq!(capped.paused(), s(50));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_dropped_by_cancellation_resumes_the_clock() {
        let b = OperationBudget::new(s(60));
        let waiting = {
            let b = b.clone();
            async move {
                let _g = b.pause();
                std::future::pending::<()>().await;
            }
        };
        // The human wait is cancelled after 10 s (the caller gave up on it).
        assert!(tokio::time::timeout(s(10), waiting).await.is_err());
        assert!(!b.is_paused());
        tokio::time::sleep(s(5)).await;
        assert_eq!((b.remaining(), b.paused()), (s(55), s(10)));
    }

    #[tokio::test(start_paused = true)]
    async fn calls_see_no_cap_while_paused() {
        let b = OperationBudget::new(s(60));
        let now = Instant::now();
        assert_eq!(b.cap_at(now), Some((s(60), s(0))));
        let g = b.pause();
        assert_eq!(b.cap_at(now), None);
        drop(g);
    }
}
