//! SW4-004's cancel cascade, the receiving side: delegated work started from a
//! handoff runs under its envelope's budget, registered by the handoff's `request_id`
//! (the delegation's correlation id); a `CancelDelegation` for it cancels that scope in
//! one line ([`Delegations::cancel`]). The work's outgoing calls end, its own handoffs
//! are cancelled in turn (the layer's cascade), and work still running when the grace
//! expires is dropped and reported `FORCED_PREEMPTION`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

mod answer;
mod early;
mod refused;

pub use early::{EARLY_CANCEL_MEMORY, MAX_EARLY_CANCELS};
pub use refused::{HandoffRefused, PeerText};

use crate::cancel::book::CancelBook;
use sw4rm_timeouts::proto::sw4rm::common::ErrorCode;
use sw4rm_timeouts::proto::sw4rm::handoff::{
    BudgetEnvelope, CancelDelegation, CancelDelegationResponse, HandoffRequest,
};
use sw4rm_timeouts::seams::epoch_ms_now;
use sw4rm_timeouts::seams::quoted;
use sw4rm_timeouts::seams::Watch;
use sw4rm_timeouts::CancelReason;
use sw4rm_timeouts::OperationBudget;

/// SW4-004's cancellation rules as a book on a millisecond clock you give: which
/// delegation is a child of which, which were cancelled when, with what grace. What
/// [`Delegations`] keeps, open for conformance tests and for agents that keep their
/// own registry.
///
/// ```
/// use sw4rm_timeouts::proto::sw4rm::handoff::CancelDelegation;
/// use sw4rm_swarm::DelegationBook;
/// let mut book = DelegationBook::new();
/// book.link("parent", "child");
/// let request = CancelDelegation { correlation_id: "parent".into(), grace_period_ms: 0, ..Default::default() };
/// let answer = book.cancel(&request, 1_000);
/// assert_eq!((answer.grace_ms, answer.cancelled.len()), (5_000, 2));
/// assert!(!book.expired("child", 5_999));
/// assert_eq!(book.error_code("child", 6_000).as_str_name(), "FORCED_PREEMPTION");
/// ```
#[derive(Clone, Debug, Default)]
pub struct DelegationBook {
    book: CancelBook,
}

/// What a cancel request did ([`DelegationBook::cancel`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CancelAnswer {
    /// The request was taken.
    pub acknowledged: bool,
    /// The grace granted: the requested one, never below 5000 ms.
    pub grace_ms: u64,
    /// The delegation and its direct children, cancelled.
    pub cancelled: Vec<String>,
}

impl DelegationBook {
    /// An empty book.
    pub fn new() -> Self {
        DelegationBook::default()
    }

    /// `child` was delegated from the work of `parent`.
    pub fn link(&mut self, parent: &str, child: &str) {
        self.book.link(parent, child);
    }

    /// Cancels the delegation `request` names and its direct children at `now_ms`.
    pub fn cancel(&mut self, request: &CancelDelegation, now_ms: u64) -> CancelAnswer {
        let plan = self
            .book
            .cancel(&request.correlation_id, request.grace_period_ms, now_ms);
        CancelAnswer {
            acknowledged: true,
            grace_ms: u64::try_from(plan.grace.as_millis()).unwrap_or(u64::MAX),
            cancelled: plan.cancelled,
        }
    }

    /// Whether the delegation was cancelled and its grace has expired at `now_ms`.
    pub fn expired(&self, correlation_id: &str, now_ms: u64) -> bool {
        self.book.expired(correlation_id, now_ms)
    }

    /// `FORCED_PREEMPTION` once the delegation's grace has expired, else unspecified.
    pub fn error_code(&self, correlation_id: &str, now_ms: u64) -> ErrorCode {
        match self.book.expired(correlation_id, now_ms) {
            true => ErrorCode::ForcedPreemption,
            false => ErrorCode::Unspecified,
        }
    }

    /// Of `active`, the delegations forced at `now_ms`.
    pub fn collect_forced<'a>(
        &self,
        active: impl IntoIterator<Item = &'a str>,
        now_ms: u64,
    ) -> Vec<String> {
        self.book.collect_forced(active, now_ms)
    }

    /// When the delegation's grace expires (ms), if it was cancelled.
    pub fn grace_deadline(&self, correlation_id: &str) -> Option<u64> {
        self.book.grace_deadline(correlation_id)
    }

    /// Forgets a delegation whose work ended.
    pub fn forget(&mut self, correlation_id: &str) {
        self.book.forget(correlation_id);
    }
}

/// How delegated work ended ([`Delegations::run`]).
#[derive(Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Delegated<T> {
    /// The work finished: before any cancel, or inside the grace after one
    /// (`cancelled` says which).
    Finished {
        /// What the work returned.
        output: T,
        /// Why its scope was cancelled before it finished, if it was.
        cancelled: Option<CancelReason>,
    },
    /// Cancelled by its delegator and still running when the grace expired: the work
    /// was dropped (SW4-004 `FORCED_PREEMPTION`).
    Forced {
        /// The grace it had.
        grace: Duration,
    },
}

impl<T> Delegated<T> {
    /// The SW4-004 code to report: `FORCED_PREEMPTION` for forced work.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Delegated::Forced { .. } => ErrorCode::ForcedPreemption,
            Delegated::Finished { .. } => ErrorCode::Unspecified,
        }
    }
}

/// One delegation running here.
#[derive(Debug)]
struct Running {
    budget: OperationBudget,
    /// When its grace expires, once its delegator cancelled it.
    forced_at: Mutex<Option<(Instant, Duration)>>,
    /// The run waiting for a grace after its scope was cancelled otherwise (a later
    /// `CancelDelegation` wakes it).
    waiting: Mutex<Option<std::task::Waker>>,
    /// How the work ended, once it did (for a cancel that waits for it).
    ended: tokio::sync::watch::Sender<Ended>,
}

/// Where a delegation's work is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// Still running.
    Running,
    /// It returned (or its run was dropped).
    Finished,
    /// Dropped at the end of its grace (`FORCED_PREEMPTION`).
    Forced,
}

/// The delegations this agent runs, by correlation id (a handoff's `request_id`).
/// Clone it into the handoff service: [`run`](Delegations::run) in `RequestHandoff`
/// (or wherever the work starts), [`cancel`](Delegations::cancel) in
/// `CancelDelegation`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::proto::sw4rm::handoff::{CancelDelegation, HandoffRequest};
/// use sw4rm_swarm::{Delegated, Delegations};
/// use sw4rm_timeouts::scope;
/// let delegations = Delegations::new();
/// let request = HandoffRequest { request_id: "h-1".into(), ..Default::default() };
/// // In the handler of RequestHandoff: registered now, run in a task of its own.
/// let run = delegations.run(&request, async {
///     let reason = scope::cancelled().await; // outgoing calls end too
///     tokio::time::sleep(Duration::from_secs(1)).await; // cleanup, inside the grace
///     reason
/// });
/// let work = tokio::spawn(scope::detach(run.expect("the envelope grants time")));
/// // In the handler of CancelDelegation, one line:
/// let answer = delegations.cancel(&CancelDelegation { correlation_id: "h-1".into(), ..Default::default() });
/// assert!(answer.acknowledged);
/// let ended = work.await.unwrap();
/// assert!(matches!(ended, Delegated::Finished { cancelled: Some(_), .. }));
/// assert_eq!(delegations.running(), 0);
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Delegations {
    inner: Arc<Mutex<Registry>>,
}

#[derive(Debug, Default)]
struct Registry {
    book: DelegationBook,
    running: HashMap<String, Arc<Running>>,
    /// Cancels that came before their handoff.
    early: early::EarlyCancels,
}

impl Delegations {
    /// No delegation running.
    pub fn new() -> Self {
        Delegations::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Delegations running now (for leak checks and dashboards).
    pub fn running(&self) -> usize {
        self.lock().running.len()
    }

    /// Cancels kept for delegations not (yet) running (at most
    /// [`MAX_EARLY_CANCELS`]).
    pub fn kept_cancels(&self) -> usize {
        self.lock().early.len()
    }

    /// How the work of delegation `id` is doing, to wait on; `None` when it does not
    /// run here.
    fn ended(&self, id: &str) -> Option<tokio::sync::watch::Receiver<Ended>> {
        self.lock().running.get(id).map(|r| r.ended.subscribe())
    }

    /// Registers the work `request` delegated, by its `request_id`, and gives the
    /// future that runs it under its envelope's budget
    /// ([`OperationBudget::from_envelope`]; none sets no limit) until it ends.
    /// Refused before any work when the envelope grants nothing. Registered at once, so
    /// a `CancelDelegation` that comes right after `RequestHandoff` is answered finds
    /// it. A cancelled delegation sees its scope cancelled ([`sw4rm_timeouts::scope::cancelled()`]) and
    /// has the grace to wind down; still running at its end, it is dropped:
    /// [`Delegated::Forced`].
    pub fn run<F: Future>(
        &self,
        request: &HandoffRequest,
        work: F,
    ) -> Result<impl Future<Output = Delegated<F::Output>>, HandoffRefused> {
        let none = BudgetEnvelope::default();
        let budget = OperationBudget::from_envelope(request.budget.as_ref().unwrap_or(&none))?;
        let id = request.request_id.clone();
        let running = Arc::new(Running {
            budget: budget.clone(),
            forced_at: Mutex::new(None),
            waiting: Mutex::new(None),
            ended: tokio::sync::watch::Sender::new(Ended::Running),
        });
        let early = {
            let mut registry = self.lock();
            // A retried handoff reuses its id: the first run stays the one a cancel
            // reaches, and no second copy of the work starts.
            if registry.running.contains_key(&id) {
                return Err(HandoffRefused::AlreadyRunning {
                    request_id: PeerText::new(&id),
                });
            }
            registry.running.insert(id.clone(), running.clone());
            registry.early.take(&id, Instant::now())
        };
        // A cancel that came first applies now: the work starts cancelled, its grace
        // from now.
        if let Some(cancel) = early {
            self.cancel(&cancel);
        }
        let registered = Registered {
            delegations: self.clone(),
            id,
        };
        Ok(async move {
            let _registered = registered;
            let mut work = pin!(budget.run(work));
            let mut watch = Watch::new(sw4rm_timeouts::seams::signal(&budget).clone());
            let mut grace = pin!(tokio::time::sleep(Duration::ZERO));
            let mut armed = false;
            std::future::poll_fn(|cx| {
                if let Poll::Ready(output) = work.as_mut().poll(cx) {
                    let cancelled = budget.cancel_reason();
                    running.ended.send_replace(Ended::Finished);
                    return Poll::Ready(Delegated::Finished { output, cancelled });
                }
                if watch.poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let forced = {
                    let forced = running.forced_at.lock().unwrap_or_else(|e| e.into_inner());
                    if forced.is_none() {
                        // Cancelled otherwise (its own parent scope): the work winds
                        // down, unless its delegator cancels it too.
                        let mut waiting = running.waiting.lock().unwrap_or_else(|e| e.into_inner());
                        *waiting = Some(cx.waker().clone());
                    }
                    *forced
                };
                let Some((at, grace_given)) = forced else {
                    return Poll::Pending;
                };
                if !armed {
                    grace.as_mut().reset(at);
                    armed = true;
                }
                match grace.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        running.ended.send_replace(Ended::Forced);
                        Poll::Ready(Delegated::Forced { grace: grace_given })
                    }
                    Poll::Pending => Poll::Pending,
                }
            })
            .await
        })
    }

    /// `child` was delegated from the work of `parent`, both known here by their
    /// correlation ids: a cancel of `parent` reaches `child` too (direct children only).
    pub fn link(&self, parent: &str, child: &str) {
        self.lock().book.link(parent, child);
    }

    /// Cancels the delegation `request` names (and its direct children linked here):
    /// their scopes are cancelled ([`CancelReason::DelegationCancelled`]) and their
    /// grace starts, the requested one raised to 5000 ms. Not acknowledged when
    /// nothing by that id runs here; the cancel is then kept for
    /// [`EARLY_CANCEL_MEMORY`] (at most [`MAX_EARLY_CANCELS`] of them) and applied if
    /// the handoff arrives in that time (a cancel can overtake its handoff).
    pub fn cancel(&self, request: &CancelDelegation) -> CancelDelegationResponse {
        let now = Instant::now();
        let mut registry = self.lock();
        let id = &request.correlation_id;
        if !registry.running.contains_key(id) {
            let message = match registry.early.keep(request, now) {
                true => format!(
                    "no delegation {} runs here yet: the cancel is kept for {} s and \
                     applied if its handoff arrives",
                    quoted(id),
                    EARLY_CANCEL_MEMORY.as_secs()
                ),
                false => format!("no delegation {} runs here", quoted(id)),
            };
            return CancelDelegationResponse {
                acknowledged: false,
                message,
            };
        }
        let answer = registry.book.cancel(request, epoch_ms_now());
        let grace = Duration::from_millis(answer.grace_ms);
        // A grace too long to add to an instant never forces the work.
        let at = now.checked_add(grace).unwrap_or_else(|| now + FAR_FUTURE);
        let mut stopped = 0;
        for cancelled in &answer.cancelled {
            let Some(running) = registry.running.get(cancelled) else {
                // Linked here but not running here: nothing to remember.
                registry.book.forget(cancelled);
                continue;
            };
            {
                let mut forced = running.forced_at.lock().unwrap_or_else(|e| e.into_inner());
                forced.get_or_insert((at, grace));
                drop(forced);
                let reason = CancelReason::DelegationCancelled;
                sw4rm_timeouts::seams::cancel_within(&running.budget, reason, at);
                // A run whose scope was cancelled otherwise waits for this.
                let waiting = running
                    .waiting
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                if let Some(waker) = waiting {
                    waker.wake();
                }
                stopped += 1;
            }
        }
        CancelDelegationResponse {
            acknowledged: true,
            message: format!(
                "cancelled {stopped} delegation(s) here, {} ms grace",
                answer.grace_ms
            ),
        }
    }
}

/// Far enough ahead to mean "never" for a grace, near enough to add to any instant.
const FAR_FUTURE: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// Takes a delegation out of the registry when its work ends (or is dropped).
struct Registered {
    delegations: Delegations,
    id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut registry = self.delegations.lock();
        if let Some(running) = registry.running.remove(&self.id) {
            // A run dropped before it ended: its work no longer runs.
            running.ended.send_if_modified(|ended| {
                let was = *ended == Ended::Running;
                if was {
                    *ended = Ended::Finished;
                }
                was
            });
        }
        registry.book.forget(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handoff(id: &str) -> HandoffRequest {
        HandoffRequest {
            request_id: id.into(),
            ..Default::default()
        }
    }

    fn cancel(id: &str, grace_ms: u64) -> CancelDelegation {
        CancelDelegation {
            correlation_id: id.into(),
            reason: "stop".into(),
            grace_period_ms: grace_ms,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ten_thousand_cancels_for_unknown_ids_keep_memory_bounded() {
        let delegations = Delegations::new();
        for i in 0..10_000 {
            let answer = delegations.cancel(&cancel(&format!("unknown-{i}"), 0));
            assert!(!answer.acknowledged);
        }
        assert_eq!(delegations.kept_cancels(), MAX_EARLY_CANCELS);
        assert_eq!(delegations.running(), 0);
        // The newest is kept and applies when its handoff comes; the oldest is gone.
        let late = delegations
            .run(&handoff("unknown-9999"), async {
                sw4rm_timeouts::scope::cancelled().await
            })
            .unwrap();
        assert_eq!(
            late.await,
            Delegated::Finished {
                output: CancelReason::DelegationCancelled,
                cancelled: Some(CancelReason::DelegationCancelled)
            }
        );
        let first = delegations.run(&handoff("unknown-0"), async { 7 }).unwrap();
        assert_eq!(
            first.await,
            Delegated::Finished {
                output: 7,
                cancelled: None
            }
        );
        // Kept no longer than EARLY_CANCEL_MEMORY.
        tokio::time::sleep(EARLY_CANCEL_MEMORY).await;
        let aged = delegations
            .run(&handoff("unknown-9998"), async { 8 })
            .unwrap();
        assert!(matches!(
            aged.await,
            Delegated::Finished {
                output: 8,
                cancelled: None
            }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_a_forced_end_says_forced() {
        let delegations = Delegations::new();
        let run = delegations
            .run(&handoff("h"), std::future::pending::<()>())
            .unwrap();
        tokio::spawn(run);
        tokio::task::yield_now().await;
        let mut request = tonic::Request::new(cancel("h", 6_000));
        request
            .metadata_mut()
            .insert("sw4rm-cancel-wait", "ended".parse().unwrap());
        let start = Instant::now();
        let answer = delegations.answer_cancel(request).await;
        assert_eq!(
            answer.metadata().get("sw4rm-cancel-outcome").unwrap(),
            "forced"
        );
        assert_eq!(start.elapsed(), Duration::from_secs(6));
        // Without the ask, the answer is at once and says nothing of the end.
        let run = delegations
            .run(&handoff("g"), std::future::pending::<()>())
            .unwrap();
        tokio::spawn(run);
        tokio::task::yield_now().await;
        let answer = delegations
            .answer_cancel(tonic::Request::new(cancel("g", 0)))
            .await;
        assert!(answer.get_ref().acknowledged);
        assert!(answer.metadata().get("sw4rm-cancel-outcome").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_ignores_the_cancel_is_forced_at_the_grace_floor() {
        let delegations = Delegations::new();
        let d = delegations.clone();
        let start = Instant::now();
        let work = tokio::spawn(d.run(&handoff("h"), std::future::pending::<()>()).unwrap());
        tokio::task::yield_now().await;
        assert_eq!(delegations.running(), 1);
        // A requested 0 is the 5000 ms floor.
        assert!(delegations.cancel(&cancel("h", 0)).acknowledged);
        let ended = work.await.unwrap();
        assert_eq!(
            ended,
            Delegated::Forced {
                grace: Duration::from_secs(5)
            }
        );
        assert_eq!(ended.error_code(), ErrorCode::ForcedPreemption);
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        assert_eq!(delegations.running(), 0);
        assert_eq!(delegations.lock().book.book.len(), 0, "nothing remembered");
        assert!(!delegations.cancel(&cancel("h", 0)).acknowledged, "gone");
    }

    #[tokio::test(start_paused = true)]
    async fn a_delegation_cancelled_by_its_parent_scope_first_is_still_forced_later() {
        let delegations = Delegations::new();
        let parent = OperationBudget::new(Duration::from_secs(600));
        let run = delegations
            .run(&handoff("h"), std::future::pending::<()>())
            .unwrap();
        // Run inside another operation, which is cancelled first.
        let work = tokio::spawn(parent.run(run));
        tokio::task::yield_now().await;
        parent.cancel();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!work.is_finished(), "no grace without a CancelDelegation");
        let start = Instant::now();
        delegations.cancel(&cancel("h", 0));
        let ended = work.await.unwrap();
        assert_eq!(
            ended,
            Delegated::Forced {
                grace: Duration::from_secs(5)
            }
        );
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancel_reaches_linked_children_and_larger_graces_are_kept() {
        let delegations = Delegations::new();
        delegations.link("p", "c");
        let spawn = |id: &'static str| {
            let run = delegations.run(&handoff(id), async {
                let reason = sw4rm_timeouts::scope::cancelled().await;
                tokio::time::sleep(Duration::from_secs(7)).await;
                reason
            });
            tokio::spawn(run.unwrap())
        };
        let (p, c, other) = (spawn("p"), spawn("c"), spawn("other"));
        let start = Instant::now();
        delegations.cancel(&cancel("p", 10_000));
        for task in [p, c] {
            let ended = task.await.unwrap();
            let reason = Some(CancelReason::DelegationCancelled);
            assert_eq!(
                ended,
                Delegated::Finished {
                    output: CancelReason::DelegationCancelled,
                    cancelled: reason
                }
            );
        }
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(7),
            "inside the 10 s grace"
        );
        assert!(!other.is_finished(), "not a child: runs on");
        other.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_handoff_with_a_running_id_is_refused_and_the_first_stays_reachable() {
        let delegations = Delegations::new();
        let first = tokio::spawn(
            delegations
                .run(&handoff("h"), std::future::pending::<()>())
                .unwrap(),
        );
        tokio::task::yield_now().await;
        let Err(refused) = delegations.run(&handoff("h"), async {}) else {
            panic!("a second run of a running id was accepted");
        };
        assert_eq!(
            refused.to_string(),
            "a delegation with request_id \"h\" already runs here: the first run goes on \
             (a retried handoff must not start the work twice)"
        );
        assert_eq!(delegations.running(), 1);
        // The first is still the one a cancel reaches.
        assert!(delegations.cancel(&cancel("h", 0)).acknowledged);
        assert!(matches!(first.await.unwrap(), Delegated::Forced { .. }));
        assert_eq!(delegations.running(), 0);
        // Once it ended, the id may run again.
        assert!(delegations.run(&handoff("h"), async {}).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn children_that_ended_are_forgotten_when_the_parent_is_cancelled() {
        let delegations = Delegations::new();
        let mut parents = Vec::new();
        for p in 0..100 {
            let parent = format!("p{p}");
            parents.push(tokio::spawn(
                delegations
                    .run(&handoff(&parent), std::future::pending::<()>())
                    .unwrap(),
            ));
            for c in 0..10 {
                let child = format!("{parent}-c{c}");
                delegations.link(&parent, &child);
                delegations.run(&handoff(&child), async {}).unwrap().await;
            }
            delegations.cancel(&cancel(&parent, 0));
        }
        // Only the 100 parents (cancelled, in their grace) are held.
        assert_eq!(delegations.lock().book.book.len(), 100);
        for parent in parents {
            parent.await.unwrap();
        }
        assert_eq!(delegations.lock().book.book.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn echoes_are_bounded_and_a_repeated_cancel_answers_the_grace_in_force() {
        let delegations = Delegations::new();
        let huge = "x".repeat(10 << 20);
        let answer = delegations.cancel(&cancel(&huge, 0));
        assert!(!answer.acknowledged);
        assert!(answer.message.len() < 300, "{} bytes", answer.message.len());
        assert!(answer
            .message
            .ends_with("… (10485760 bytes in all) runs here"));
        let Err(refused) = ({
            let _first = delegations.run(&handoff(&huge), std::future::pending::<()>());
            delegations.run(&handoff(&huge), async {}).map(drop)
        }) else {
            panic!("accepted twice");
        };
        assert!(refused.to_string().len() < 400);

        let work = tokio::spawn(
            delegations
                .run(&handoff("h"), std::future::pending::<()>())
                .unwrap(),
        );
        tokio::task::yield_now().await;
        let first = delegations.cancel(&cancel("h", 8_000));
        assert!(
            first.message.ends_with("8000 ms grace"),
            "{}",
            first.message
        );
        let again = delegations.cancel(&cancel("h", 60_000));
        assert!(
            again.message.ends_with("8000 ms grace"),
            "{}",
            again.message
        );
        let start = Instant::now();
        assert_eq!(
            work.await.unwrap(),
            Delegated::Forced {
                grace: Duration::from_secs(8)
            }
        );
        assert_eq!(start.elapsed(), Duration::from_secs(8));
    }

    #[tokio::test(start_paused = true)]
    async fn a_grace_too_long_to_add_never_forces_and_never_panics() {
        let delegations = Delegations::new();
        let work = tokio::spawn(
            delegations
                .run(&handoff("h"), std::future::pending::<()>())
                .unwrap(),
        );
        tokio::task::yield_now().await;
        assert!(delegations.cancel(&cancel("h", u64::MAX)).acknowledged);
        tokio::time::sleep(Duration::from_secs(365 * 24 * 3600)).await;
        assert!(!work.is_finished());
        work.abort();
    }
}
