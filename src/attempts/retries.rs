//! One call's retry state: what the plan decided ([`RetryPlan`]), the attempt in
//! flight as the rules numbered it, and after a failure either the [`Retry`] the
//! rules decided (its backoff and the next attempt, [`Resend`]) or why not; and the
//! box the state lives in, reused per thread ([`boxes`]). The layer's
//! [`RetryBudget`], which every call's retries spend from and every answer pays into,
//! is `retry_budget.rs`.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::attempt::WireTimeout;
use super::replay::{Spare, ToKeep};
use super::retry_budget::RetryBudget;
use super::ATTEMPTS_HEADER;
use crate::policy::deadline::Cap;
use crate::policy::retry::{decide, Decision, Failed, Failure, Pushback, RetryPolicy, Stop};
use crate::policy::source::Source;
use boxes::RetryState;

type Request = http::Request<tonic::body::Body>;

/// What the plan decided about retrying one call.
#[derive(Clone, Debug)]
pub(crate) struct RetryPlan {
    pub(crate) policy: RetryPolicy,
    pub(crate) idempotent: bool,
    pub(crate) min_timeout: Duration,
    /// The first attempt's timeout when it is below the call's deadline (a cap of its
    /// own, from `attempt_source`).
    pub(crate) first: Option<Duration>,
    /// Where the policy's attempt timeout came from; `None`: the policy has none, and
    /// every attempt runs under what remains of the call's deadline alone.
    pub(crate) attempt_source: Option<Source>,
}

/// The retry state of one call: a share of the spare, and the rest in a box reused
/// from call to call on this thread ([`boxes`]).
#[derive(Debug)]
pub(crate) struct Retries<S> {
    /// Where the attempts after the first take their handle on the inner service.
    spare: Spare<S>,
    state: Box<RetryState>,
}

/// A retry the rules decided: wait `backoff` (until `resume`), then send `resend`.
#[derive(Debug)]
pub(crate) struct Retry<S> {
    /// The attempt that follows, from 2.
    pub(crate) attempt: u32,
    pub(crate) backoff: Duration,
    pub(crate) resume: Instant,
    pub(crate) reason: &'static str,
    /// The status the failed attempt ended with.
    pub(crate) status: tonic::Code,
    /// Boxed: a decision travels through the call loop by value, and only a retried
    /// call pays for the next attempt's size.
    pub(crate) resend: Box<Resend<S>>,
}

/// The next attempt, made when the retry was decided and started after the backoff.
#[derive(Debug)]
pub(crate) struct Resend<S> {
    svc: S,
    attempt: u32,
    request: Request,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    /// Where the policy's attempt timeout came from; `None`: it has none, and the
    /// attempt runs under the call's deadline alone, with no timer of its own.
    source: Option<Source>,
}

/// A started attempt: the service and request it sends, when its own timeout ends it,
/// and what the call record says of it.
#[derive(Debug)]
pub(crate) struct Started<S> {
    pub(crate) svc: S,
    pub(crate) request: Request,
    pub(crate) until: Option<Instant>,
    pub(crate) attempt: u32,
    pub(crate) cap: Option<Cap>,
}

impl<S> Resend<S> {
    /// Starts the attempt now: it gets what remains of the call's deadline, never
    /// more (the backoff timer fires on the timer's tick, a little after the backoff).
    pub(crate) fn start(mut self, now: Instant) -> Started<S> {
        let remaining = self.deadline.map(|d| d.saturating_duration_since(now));
        let timeout = match (self.timeout, remaining) {
            (Some(t), Some(r)) => Some(t.min(r)),
            (t, r) => t.or(r),
        };
        // An attempt timeout past any representable instant is no attempt timeout.
        let until = timeout.and_then(|t| now.checked_add(t));
        WireTimeout::of(timeout.filter(|_| until.is_some())).apply(self.request.headers_mut());
        // Under a policy without an attempt timeout, the call's deadline ends the
        // attempt, and is what a timeout names (its phase and where it came from).
        let cap = match (timeout.filter(|_| until.is_some()), self.source) {
            (Some(t), Some(source)) => Some(Cap::new(t, source)),
            _ => None,
        };
        Started {
            svc: self.svc,
            request: self.request,
            until: until.filter(|_| cap.is_some()),
            attempt: self.attempt,
            cap,
        }
    }
}

impl<S> Retries<S> {
    /// The call has ended: its box goes back to this thread's free list, emptied.
    pub(crate) fn end(self) {
        boxes::give_back(self.state);
    }
}

impl<S: Clone> Retries<S> {
    /// The state after the first attempt was planned and sent, keeping the request
    /// (the head of `request` and its whole body, `bytes`) for replay; the attempts
    /// after it go through handles taken from `spare`. The plan is read where it is
    /// (its source cloned): moved into a closure, its 152 bytes were copied.
    pub(crate) fn new(
        spare: Spare<S>,
        plan: &RetryPlan,
        request: ToKeep<'_>,
        bytes: &Bytes,
    ) -> Self {
        // Written field by field where the box is: nothing of its size is moved.
        let mut state = boxes::take();
        state.kept.keep(request, bytes);
        Self::planned(spare, plan, state)
    }

    #[inline(always)]
    fn planned(spare: Spare<S>, plan: &RetryPlan, mut state: Box<RetryState>) -> Self {
        state.policy = plan.policy;
        state.idempotent = plan.idempotent;
        state.min_timeout = plan.min_timeout;
        state.source = plan.attempt_source.clone();
        state.attempt = 1;
        state.timeout = plan.first;
        Retries { spare, state }
    }

    /// When the first attempt's own timeout ends it, for a call started at `start`.
    pub(crate) fn first_until(&self, start: Instant) -> Option<Instant> {
        self.state.timeout.and_then(|t| start.checked_add(t))
    }

    /// The first attempt's timeout, when it is shorter than the call's deadline (asked
    /// before any retry).
    pub(crate) fn first_cap(&self) -> Option<Cap> {
        match (self.state.timeout, &self.state.source) {
            (Some(t), Some(source)) => Some(Cap::new(t, source.clone())),
            _ => None,
        }
    }

    /// The attempt in flight (or the last one), from 1.
    pub(crate) fn attempt(&self) -> u32 {
        self.state.attempt
    }

    /// After a failed attempt: the retry the rules decided, or why the failure is the
    /// call's answer. `deadline` is the call's own; `budget` the layer's.
    pub(crate) fn after_failure(
        &mut self,
        failure: Failure,
        pushback: Pushback,
        deadline: Option<Instant>,
        budget: Option<&RetryBudget>,
    ) -> Result<Retry<S>, Stop> {
        let now = Instant::now();
        let decision = decide(
            &self.state.policy,
            Failed {
                attempt: self.state.attempt,
                failure,
                idempotent: self.state.idempotent,
                last_timeout: self.state.timeout,
                remaining: deadline.map(|d| d.saturating_duration_since(now)),
                min_timeout: self.state.min_timeout,
                pushback,
                jitter: jitter(),
            },
        );
        let (attempt, backoff, timeout) = match decision {
            Decision::Retry {
                attempt,
                backoff,
                timeout,
            } => (attempt, backoff, timeout),
            Decision::Stop(stop) => {
                self.settle(failure, budget);
                return Err(stop);
            }
        };
        // The budget is charged for every failure the policy would retry.
        if let Some(budget) = budget {
            if !budget.fail() {
                return Err(Stop::Budget);
            }
        }
        // A server's pushback is peer input: one past any representable instant ends
        // the retries instead of the process.
        let resume = now.checked_add(backoff).ok_or(Stop::Pushback)?;
        self.state.attempt = attempt;
        self.state.timeout = timeout;
        Ok(Retry {
            attempt,
            backoff,
            resume,
            reason: reason(failure),
            status: failure_status(failure),
            resend: Box::new(Resend {
                svc: self.spare.handle(),
                attempt,
                request: self.state.kept.request(attempt),
                timeout,
                deadline,
                source: self.state.source.clone(),
            }),
        })
    }

    /// A final answer that is not a retryable failure gives the layer's budget back.
    pub(crate) fn answered(&self, budget: Option<&RetryBudget>) {
        if let Some(budget) = budget {
            budget.succeed();
        }
    }

    fn settle(&self, failure: Failure, budget: Option<&RetryBudget>) {
        // A status the policy does not retry is still an answer from the server.
        if let Failure::Code(code) = failure {
            if !self.state.policy.retries_code(code) {
                self.answered(budget);
            }
        }
    }

    /// Marks a final answer with the number of attempts made.
    pub(crate) fn mark<B>(&self, response: &mut http::Response<B>) {
        if self.state.attempt > 1 {
            response
                .headers_mut()
                .insert(ATTEMPTS_HEADER, http::HeaderValue::from(self.state.attempt));
        }
    }
}

/// Uniform in `[0, 1)`: a per-thread xorshift seeded from the standard library's
/// random hasher keys (no dependency, no lock).
fn jitter() -> f64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x5157_4d52);
            h.finish() | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// The status an attempt that failed with `failure` ended with, as gRPC's per-attempt
/// metrics name it: the server's code, `DEADLINE_EXCEEDED` for the attempt's own
/// timeout, `UNAVAILABLE` for a request that never reached the server.
fn failure_status(failure: Failure) -> tonic::Code {
    match failure {
        Failure::Code(code) => tonic::Code::from_i32(code),
        Failure::AttemptTimeout => tonic::Code::DeadlineExceeded,
        Failure::NotSent => tonic::Code::Unavailable,
    }
}

/// The `reason` a retry is logged with.
fn reason(failure: Failure) -> &'static str {
    match failure {
        Failure::AttemptTimeout => "attempt_timeout",
        Failure::NotSent => "not_sent",
        Failure::Code(code) if tonic::Code::from_i32(code) == tonic::Code::Unavailable => {
            "unavailable"
        }
        Failure::Code(_) => "status",
    }
}

pub(crate) mod boxes {
    //! The boxes calls keep their retry state in ([`RetryState`]), reused from call to
    //! call on each thread: a call that may be retried takes one from its thread's free
    //! list and gives it back when it ends; the next call writes its state there. After
    //! a thread's first calls, keeping a request for replay allocates nothing (the body
    //! that sends it is tonic's own box).
    //!
    //! A box is emptied when it is given back, not when it is next used: the request's
    //! headers (a caller's credentials among them), extensions and bytes, and where the
    //! attempt timeout came from are let go of then, and bytes kept inline are
    //! overwritten. What stays is the request's path, which names a method, and plain
    //! figures (the retry policy). A call dropped before it ends (its caller gave up on
    //! it) frees its box instead. Each thread keeps at most [`KEPT_PER_THREAD`] boxes;
    //! the list is freed with the thread.

    use std::cell::RefCell;
    use std::thread::LocalKey;
    use std::time::Duration;

    use super::super::replay::ReplayRequest;
    use crate::policy::retry::RetryPolicy;
    use crate::policy::source::Source;

    /// What a call's retries keep besides the spare, in the box.
    #[derive(Debug)]
    pub(crate) struct RetryState {
        pub(crate) kept: ReplayRequest,
        pub(crate) policy: RetryPolicy,
        pub(crate) idempotent: bool,
        pub(crate) min_timeout: Duration,
        /// Where the policy's attempt timeout came from; `None`: it has none.
        pub(crate) source: Option<Source>,
        /// The attempt in flight (or the last one), from 1, as the rules numbered it.
        pub(crate) attempt: u32,
        /// The attempt timeout the rules gave the attempt in flight.
        pub(crate) timeout: Option<Duration>,
    }

    impl RetryState {
        /// A state that holds nothing of any call: what a new box starts from.
        pub(crate) fn vacant() -> Self {
            RetryState {
                kept: ReplayRequest::vacant(),
                policy: RetryPolicy::off(),
                idempotent: false,
                min_timeout: Duration::ZERO,
                source: None,
                attempt: 1,
                timeout: None,
            }
        }

        /// Lets go of what the call gave it: a box given back keeps the request's path and
        /// plain figures (below).
        pub(crate) fn clear(&mut self) {
            self.kept.clear();
            self.source = None;
        }
    }

    /// The most boxes one thread keeps for later calls: enough for calls that overlap a
    /// few dozen at a time, 15 KiB at most (a box is 464 bytes).
    pub(crate) const KEPT_PER_THREAD: usize = 32;

    thread_local! {
        // Boxes, not states: a box is what a call takes and gives back.
        #[allow(clippy::vec_box)]
        static FREE: RefCell<Vec<Box<RetryState>>> = const { RefCell::new(Vec::new()) };
    }

    /// A box from this thread's free list, emptied when it was given back, or a new one
    /// holding a vacant state.
    pub(crate) fn take() -> Box<RetryState> {
        pop(&FREE).unwrap_or_else(|| Box::new(RetryState::vacant()))
    }

    /// Gives a call's box back when the call has ended: emptied at once, kept for a later
    /// call on this thread if the list has room, freed otherwise.
    pub(crate) fn give_back(mut state: Box<RetryState>) {
        state.clear();
        push(&FREE, state, KEPT_PER_THREAD);
    }

    /// The last item of a thread's free list (`None`: the list is empty, or the thread is
    /// going away). Shared with the call record's boxes (`timeout/record/boxed.rs`).
    #[inline]
    pub(crate) fn pop<T: 'static>(list: &'static LocalKey<RefCell<Vec<T>>>) -> Option<T> {
        list.try_with(|free| free.try_borrow_mut().ok().and_then(|mut f| f.pop()))
            .ok()
            .flatten()
    }

    /// Keeps `item` on a thread's free list if the list holds fewer than `max`; drops it
    /// otherwise (outside the list's borrow), and when the thread is going away.
    #[inline]
    pub(crate) fn push<T: 'static>(list: &'static LocalKey<RefCell<Vec<T>>>, item: T, max: usize) {
        let refused = list
            .try_with(|free| match free.try_borrow_mut() {
                Ok(mut free) if free.len() < max => {
                    if free.capacity() == 0 {
                        free.reserve_exact(max);
                    }
                    free.push(item);
                    None
                }
                _ => Some(item),
            })
            .ok()
            .flatten();
        drop(refused);
    }

    /// How many boxes this thread keeps now.
    #[cfg(test)]
    pub(crate) fn kept_here() -> usize {
        FREE.with(|free| free.borrow().len())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use http::HeaderValue;

    use super::super::replay::SpareSlot;
    use super::boxes::KEPT_PER_THREAD;
    use super::*;
    use crate::wire::grpc_timeout;

    /// Each failure's logged reason and per-attempt status.
    #[test]
    fn reasons_and_statuses() {
        let rows = [
            (Failure::Code(14), "unavailable", tonic::Code::Unavailable),
            (Failure::Code(13), "status", tonic::Code::Internal),
            (Failure::Code(99), "status", tonic::Code::Unknown),
            (
                Failure::AttemptTimeout,
                "attempt_timeout",
                tonic::Code::DeadlineExceeded,
            ),
            (Failure::NotSent, "not_sent", tonic::Code::Unavailable),
        ];
        for (failure, logged, status) in rows {
            assert_eq!(reason(failure), logged, "{failure:?}");
            assert_eq!(failure_status(failure), status, "{failure:?}");
        }
    }

    #[test]
    fn jitter_is_in_range_and_varies() {
        let values: Vec<f64> = (0..1_000).map(|_| jitter()).collect();
        assert!(values.iter().all(|v| (0.0..1.0).contains(v)));
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!((0.4..0.6).contains(&mean), "{mean}");
    }

    /// A call that may be retried keeps a [`Retries`] in its response future (a share
    /// of the spare and the box) and its [`RetryState`] in the box: within these sizes a
    /// call holds at most 1 KiB more than a plain tonic call (`benches/hostile.rs`
    /// measures it; `timeout/future.rs` bounds the future). They are 16 and 464 bytes
    /// with the locked dependencies; the bound leaves 16 bytes for another compiler's
    /// layout, not for a new field, which must make room for itself.
    #[test]
    fn a_calls_retry_state_stays_within_its_budget() {
        use std::mem::size_of;
        type Channel = tonic::transport::Channel;
        assert_eq!(size_of::<Retries<Channel>>(), 16, "in the future");
        let state = size_of::<RetryState>();
        assert!(state <= 464 + 16, "in its box: {state} bytes");
    }

    /// A call's retry state made with a credential header, a message too large to
    /// keep inline, and an attempt timeout from an environment variable.
    fn retries(secret: &Bytes, from: &Arc<str>) -> Retries<()> {
        let sent = http::Request::post("/sw4rm.tool.ToolService/Call")
            .header(
                "authorization",
                HeaderValue::from_maybe_shared(secret.clone()).unwrap(),
            )
            .body(tonic::body::Body::default())
            .unwrap();
        let plan = RetryPlan {
            policy: RetryPolicy::standard(),
            idempotent: true,
            min_timeout: Duration::from_millis(50),
            first: None,
            attempt_source: Some(Source::Env(from.clone())),
        };
        let bytes = Bytes::from(vec![7u8; 4096]);
        Retries::new(
            SpareSlot::default().share(&()),
            &plan,
            ToKeep::new(&sent),
            &bytes,
        )
    }

    /// A call that ended gives its box back emptied: nothing of the request (its
    /// credentials) or of where its figures came from stays with the box, and the next
    /// call on the thread keeps its state in the same box instead of allocating one.
    #[test]
    fn an_ended_calls_box_is_emptied_and_reused_by_the_next_call() {
        let secret = Bytes::from(b"Bearer s3cret".to_vec());
        let from: Arc<str> = Arc::from("SW4RM_TIMEOUT_TOOL_CALL");
        let first = retries(&secret, &from);
        let first_box: *const RetryState = &*first.state;
        assert!(
            !secret.is_unique(),
            "the kept head shares the header's bytes"
        );
        assert_eq!(Arc::strong_count(&from), 2);
        let kept_before = super::boxes::kept_here();
        first.end();
        assert!(
            secret.is_unique(),
            "the credential was let go at the call's end"
        );
        assert_eq!(Arc::strong_count(&from), 1);
        assert_eq!(super::boxes::kept_here(), kept_before + 1);
        let second = retries(&secret, &from);
        assert_eq!(
            &*second.state as *const RetryState, first_box,
            "the box is reused"
        );
        assert_eq!(super::boxes::kept_here(), kept_before);
        // The reused box holds the second call's request, whole.
        let sent = second.state.kept.request(2);
        assert_eq!(sent.headers()["authorization"], "Bearer s3cret");
        assert_eq!(sent.uri().path(), "/sw4rm.tool.ToolService/Call");
        second.end();
    }

    /// A thread keeps a bounded number of boxes: calls ending past it free theirs.
    #[test]
    fn a_thread_keeps_at_most_its_share_of_boxes() {
        let secret = Bytes::from_static(b"Bearer t");
        let from: Arc<str> = Arc::from("SW4RM_TIMEOUT_TOOL_CALL");
        let many: Vec<_> = (0..KEPT_PER_THREAD + 8)
            .map(|_| retries(&secret, &from))
            .collect();
        many.into_iter().for_each(Retries::end);
        assert_eq!(super::boxes::kept_here(), KEPT_PER_THREAD);
    }

    #[tokio::test(start_paused = true)]
    async fn a_resend_gets_what_remains_never_more() {
        let now = Instant::now();
        let resend = |timeout, deadline| Resend {
            svc: (),
            attempt: 2,
            request: Request::default(),
            timeout,
            deadline,
            source: Some(Source::Client),
        };
        let ms = Duration::from_millis;
        // Less remains than the attempt timeout: the attempt gets what remains.
        let started = resend(Some(ms(800)), Some(now + ms(300))).start(now);
        let wire = |r: &Request| grpc_timeout::parse(r.headers()["grpc-timeout"].as_bytes()).ok();
        assert_eq!(wire(&started.request), Some(ms(300)));
        assert_eq!(started.until, Some(now + ms(300)));
        assert_eq!(started.cap, Some(Cap::new(ms(300), Source::Client)));
        assert_eq!(started.attempt, 2);
        // No deadline, no attempt timeout: nothing on the wire.
        let started = resend(None, None).start(now);
        assert!(started.request.headers().get("grpc-timeout").is_none());
        assert_eq!((started.until, started.cap), (None, None));
        // Only the deadline: the attempt runs under what remains of it.
        let started = resend(None, Some(now + ms(50))).start(now);
        assert_eq!(wire(&started.request), Some(ms(50)));
        // A policy without an attempt timeout: what remains goes on the wire, and the
        // attempt has no timer of its own (the call's deadline ends it, and is named).
        let mut unbounded = resend(Some(ms(800)), Some(now + ms(300)));
        unbounded.source = None;
        let started = unbounded.start(now);
        assert_eq!(wire(&started.request), Some(ms(300)));
        assert_eq!((started.until, started.cap), (None, None));
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn five_failures_empty_half_a_bucket_of_ten() {
        let budget = RetryBudget::default();
        let allowed: Vec<bool> = (0..6).map(|_| budget.fail()).collect();
        assert_eq!(allowed, [true, true, true, true, false, false]);
        assert_eq!(budget.tokens(), 4.0);
        for _ in 0..20 {
            budget.succeed();
        }
        assert_eq!(budget.tokens(), 6.0);
        assert!(!budget.fail(), "6 → 5 tokens: not more than half");
    }

    #[test]
    fn bounds() {
        assert_eq!(RetryBudget::new(0).max_tokens(), 1);
        assert_eq!(RetryBudget::new(5_000).max_tokens(), 1_000);
        let b = RetryBudget::new(2).with_token_ratio(f64::NAN);
        b.succeed();
        assert_eq!(b.tokens(), 2.0);
    }
}
