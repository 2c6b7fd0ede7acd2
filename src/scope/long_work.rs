//! [`LongWork`]: the guard a handler runs long work under. The work is stopped when it
//! is stuck (no [`super::progress()`] for the idle limit) or at the hard cap (the smaller
//! of the cap and the inbound deadline), whichever comes first; the handler gets a
//! typed [`Outcome`] with what the work produced so far, and the status to answer.

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};

pub(crate) use super::output::{Forward, Produced};
pub use super::output::{Output, DEFAULT_STREAM_BUFFER};
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use super::cancel::CancelSignal;
use super::outcome::{outcome, CapFrom, Ending, Limits, Outcome};
use super::task::{current_deadline, current_inbound, current_rpc, with_work};
use super::work_state::WorkState;
use crate::policy::cancel::CancelReason;
use crate::policy::streaming::{millis, StreamingTimeoutPolicy};
use crate::policy::wrap_up::WrapUp;

/// A guard for long work inside a handler: an idle limit (reset by
/// [`super::progress()`] or by [`Output::push`]) and a hard cap, 0 turning either off.
/// The cap is lowered to the inbound deadline when the call has one (the handler's
/// scope, [`super::InboundDeadlineLayer`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::scope::{self, Ending, LongWork};
/// tokio::time::pause();
/// let outcome = LongWork::new()
///     .idle_limit(Duration::from_secs(1))
///     .cap(Duration::from_secs(30))
///     .run(|out| async move {
///         out.push("part 1");
///         std::future::pending::<()>().await // stuck
///     })
///     .await;
/// assert!(matches!(outcome.ending(), Ending::Idle));
/// assert_eq!(outcome.produced(), ["part 1"]);
/// let status = outcome.status().unwrap();
/// assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
/// assert!(status.message().contains("no progress for 1000 ms (idle limit; cap 30000 ms)"));
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default)]
#[must_use = "a LongWork guards nothing until it runs work (run, run_or_tell, stream)"]
pub struct LongWork {
    idle: Option<Duration>,
    cap: Option<Duration>,
    heartbeat: Option<Duration>,
    rpc: &'static str,
    wrap_up: Option<WrapUp>,
    /// A stream's buffer, in items (`None`: [`DEFAULT_STREAM_BUFFER`]).
    buffer: Option<usize>,
}

/// What a guard dropped before its work ended tells.
type OnAbandon<T> = Box<dyn FnOnce(Outcome<(), T>) + Send>;

impl LongWork {
    /// No idle limit, no cap (set them with [`LongWork::idle_limit`] and
    /// [`LongWork::cap`]).
    pub fn new() -> Self {
        LongWork::default()
    }

    /// The idle limit: the work is stopped after this long without progress (zero:
    /// none). Above the cap it is lowered to the cap.
    pub fn idle_limit(mut self, limit: Duration) -> Self {
        self.idle = Some(limit).filter(|d| !d.is_zero());
        self
    }

    /// How many items a stream ([`LongWork::stream`]) holds for a caller that reads
    /// more slowly than the work produces (default [`DEFAULT_STREAM_BUFFER`]; at least
    /// one). That is what a slow or stalled reader costs: at most this many items in
    /// memory. Past it [`Output::send`] waits, [`Output::try_push`] gives the item
    /// back, and [`Output::push`] ends the stream with `RESOURCE_EXHAUSTED`.
    pub fn buffer(mut self, items: usize) -> Self {
        self.buffer = Some(items.max(1));
        self
    }

    /// A stream's buffer, in items.
    pub(crate) fn buffer_items(&self) -> usize {
        self.buffer.unwrap_or(DEFAULT_STREAM_BUFFER)
    }

    /// The hard cap on the work's wall-clock time (zero: none; the inbound deadline
    /// still applies).
    pub fn cap(mut self, cap: Duration) -> Self {
        self.cap = Some(cap).filter(|d| !d.is_zero());
        self
    }

    /// The limits of a profile's streaming policy: `idle_timeout_ms` and
    /// `total_timeout_ms` (the same table the callers use).
    ///
    /// ```
    /// use sw4rm_timeouts::{scope::LongWork, StreamingTimeoutPolicy};
    /// let policy = StreamingTimeoutPolicy { idle_timeout_ms: 120_000, total_timeout_ms: 1_800_000, ..Default::default() };
    /// let guard = LongWork::from_policy(&policy);
    /// # drop(guard);
    /// ```
    pub fn from_policy(policy: &StreamingTimeoutPolicy) -> Self {
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        LongWork::new()
            .idle_limit(ms(policy.idle_timeout_ms))
            .cap(ms(policy.total_timeout_ms))
    }

    /// For [`LongWork::stream`]: the caller's idle limit (its gap timer or idle limit),
    /// so that a working tool sends a progress message at least every half of it
    /// (default: half of this guard's idle limit).
    pub fn caller_idle_limit(mut self, limit: Duration) -> Self {
        self.heartbeat = Some(limit / 2).filter(|d| !d.is_zero());
        self
    }

    /// Names the RPC (`/package.Service/Method`) in the details of the status the
    /// outcome gives, and the SW4-002 profile of a standard route. Without it, a
    /// handler behind [`super::InboundDeadlineLayer`] is named by its inbound call's
    /// path.
    pub fn for_rpc(mut self, path: &'static str) -> Self {
        self.rpc = path;
        self
    }

    /// Tells the work, `wrap_up` before its cap (the smaller of [`LongWork::cap`] and
    /// the inbound deadline), that time is nearly up ([`Output::should_wrap_up`],
    /// [`Output::wrap_up_notice`], [`super::should_wrap_up`]), so it returns what it
    /// has: the outcome then says [`Outcome::partial`], and the handler marks its
    /// answer ([`Partial::mark`](crate::wire::partial::Partial::mark)). Work that ignores the notice is stopped at
    /// the cap as without it. Off by default; no effect without a cap.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use sw4rm_timeouts::scope::LongWork;
    /// use sw4rm_timeouts::{Partial, WrapUp};
    /// let outcome = LongWork::new()
    ///     .cap(Duration::from_secs(60))
    ///     .wrap_up(WrapUp::before_end(Duration::from_secs(10)))
    ///     .run(|out| async move {
    ///         let notice = out.wrap_up_notice();
    ///         tokio::select! {
    ///             _ = notice => "summary of what was found",      // at 50 s
    ///             _ = std::future::pending::<()>() => "the full answer",
    ///         }
    ///     })
    ///     .await;
    /// assert_eq!(outcome.partial(), Some(Partial::TimeBudget));
    /// assert!(outcome.status().is_none()); // a normal answer, marked partial
    /// # let _: &[()] = outcome.produced();
    /// # }
    /// ```
    pub fn wrap_up(mut self, wrap_up: WrapUp) -> Self {
        self.wrap_up = Some(wrap_up);
        self
    }

    /// The interval of a stream's progress messages.
    pub(crate) fn heartbeat(&self) -> Option<Duration> {
        self.heartbeat.or(self.idle.map(|d| d / 2))
    }

    /// The idle limit and the cap at `start`: the cap lowered to the inbound deadline,
    /// the idle limit to the cap.
    fn limits(&self, start: Instant) -> Limits {
        let inbound = current_deadline().map(|at| at.saturating_duration_since(start));
        let cap = match (self.cap, inbound) {
            (Some(c), Some(i)) if i < c => Some((i, CapFrom::Inbound)),
            (Some(c), _) => Some((c, CapFrom::Guard)),
            (None, Some(i)) => Some((i, CapFrom::Inbound)),
            (None, None) => None,
        };
        let idle = match (self.idle, cap) {
            (Some(i), Some((c, CapFrom::Guard))) if i > c => {
                tracing::warn!(
                    idle_ms = millis(i),
                    cap_ms = millis(c),
                    "SW4RM long work: idle limit above the cap, clamped to the cap"
                );
                Some(c)
            }
            (idle, _) => idle,
        };
        Limits { idle, cap }
    }

    /// Runs `work` under the guard. `work` gets an [`Output`] to push what it produces
    /// (each push is progress); [`super::progress()`] anywhere in its task reports too.
    pub async fn run<T, R, F, Fut>(self, work: F) -> Outcome<R, T>
    where
        F: FnOnce(Output<T>) -> Fut,
        Fut: Future<Output = R>,
    {
        self.run_collecting(None, work).await
    }

    /// Like [`LongWork::run`], and tells `tell` how the work ended when the guard is
    /// dropped before it does: [`Ending::CallerGone`] when the caller went away (under
    /// [`super::InboundDeadlineLayer`]; hyper drops the handler then, so nobody awaits
    /// the outcome), [`Ending::Dropped`] otherwise. `tell` gets what the work had
    /// produced; the work's future is dropped first.
    pub async fn run_or_tell<T, R, F, Fut>(
        self,
        work: F,
        tell: impl FnOnce(Outcome<(), T>) + Send + 'static,
    ) -> Outcome<R, T>
    where
        F: FnOnce(Output<T>) -> Fut,
        Fut: Future<Output = R>,
    {
        self.run_collecting(Some(Box::new(tell)), work).await
    }

    /// Runs `work` under the guard, started now, collecting what it pushes.
    async fn run_collecting<T, R, F, Fut>(
        self,
        tell: Option<OnAbandon<T>>,
        work: F,
    ) -> Outcome<R, T>
    where
        F: FnOnce(Output<T>) -> Fut,
        Fut: Future<Output = R>,
    {
        note_if_outside_the_layer();
        let produced = Arc::new(Produced::Collect(Mutex::new(Vec::new())));
        let state = Arc::new(WorkState::new(Instant::now()));
        self.run_with(produced, state, tell, work).await
    }

    /// Runs `work` under the guard, reporting to `state` (started now) and putting
    /// what it pushes into `produced`.
    pub(crate) async fn run_with<T, R, F, Fut>(
        self,
        produced: Arc<Produced<T>>,
        state: Arc<WorkState>,
        tell: Option<OnAbandon<T>>,
        work: F,
    ) -> Outcome<R, T>
    where
        F: FnOnce(Output<T>) -> Fut,
        Fut: Future<Output = R>,
    {
        let start = state.start();
        let limits = self.limits(start);
        if let (Some(wrap_up), Some((cap, _))) = (self.wrap_up, limits.cap) {
            state.set_notice(wrap_up.notice_after(cap));
        }
        let inbound = current_inbound();
        // Named by `for_rpc`, else the inbound call's own path.
        let rpc: Arc<str> = match self.rpc {
            "" => current_rpc().map_or_else(|| Arc::from(""), |p| Arc::from(p.path())),
            path => Arc::from(path),
        };
        let mut watch = Abandon {
            tell,
            inbound,
            state: state.clone(),
            produced: produced.clone(),
            limits,
            rpc: rpc.clone(),
        };
        let output = Output::new(produced.clone(), state.clone());
        let ending = {
            let mut work = pin!(with_work(state.clone(), work(output)));
            let mut sleep = pin!(tokio::time::sleep_until(start));
            std::future::poll_fn(|cx| {
                if let Poll::Ready(r) = work.as_mut().poll(cx) {
                    return Poll::Ready(Ending::Finished(r));
                }
                loop {
                    let now = Instant::now();
                    // A limit too large to add to an instant is no limit.
                    let cap_at = limits.cap.and_then(|(c, _)| start.checked_add(c));
                    let idle_at = limits.idle.and_then(|i| state.last().checked_add(i));
                    if cap_at.is_some_and(|at| now >= at) {
                        return Poll::Ready(Ending::Capped);
                    }
                    if idle_at.is_some_and(|at| now >= at) {
                        return Poll::Ready(Ending::Idle);
                    }
                    let Some(next) = [cap_at, idle_at].into_iter().flatten().min() else {
                        return Poll::Pending;
                    };
                    if sleep.deadline() != next {
                        sleep.as_mut().reset(next);
                    }
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                }
            })
            .await
        };
        watch.tell = None;
        let wrapped_up = matches!(ending, Ending::Finished(_)) && state.wrapping_up();
        outcome(ending, &state, produced.take(), limits, rpc)
            .with_sent(produced.sent())
            .with_wrapped_up(wrapped_up)
    }
}

/// Says once per process, at WARN, that long work runs outside
/// [`super::InboundDeadlineLayer`]: the caller's deadline does not cap it, and a caller
/// that goes away is told as [`Ending::Dropped`], not [`Ending::CallerGone`].
pub(crate) fn note_if_outside_the_layer() {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if first_outside_the_layer(&SAID) {
        tracing::warn!(
            "SW4RM long work runs outside InboundDeadlineLayer: the caller's deadline does \
             not cap it, and a caller that goes away is told as Dropped, not CallerGone \
             (serve with `Server::builder().layer(InboundDeadlineLayer::new())`; said once)"
        );
    }
}

/// Whether long work starting now runs outside the layer and nobody said so yet in
/// `said` (which it then records).
fn first_outside_the_layer(said: &std::sync::atomic::AtomicBool) -> bool {
    current_inbound().is_none() && !said.swap(true, std::sync::atomic::Ordering::Relaxed)
}

/// Whether the inbound call's caller went away.
fn caller_gone(call: &CancelSignal) -> bool {
    call.reason() == Some(CancelReason::CallerGone)
}

/// Tells how the work ended when the guard is dropped before it ended.
struct Abandon<T> {
    tell: Option<OnAbandon<T>>,
    inbound: Option<Arc<CancelSignal>>,
    state: Arc<WorkState>,
    produced: Arc<Produced<T>>,
    limits: Limits,
    rpc: Arc<str>,
}

impl<T> Drop for Abandon<T> {
    fn drop(&mut self) {
        if let Some(tell) = self.tell.take() {
            let ending = match self.inbound.as_deref().is_some_and(caller_gone) {
                true => Ending::CallerGone,
                false => Ending::Dropped,
            };
            tell(
                outcome(
                    ending,
                    &self.state,
                    self.produced.take(),
                    self.limits,
                    self.rpc.clone(),
                )
                .with_sent(self.produced.sent()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::time::Duration;

    use futures_core::Stream;

    use super::*;
    use crate::scope::{Frame, ProgressStream};

    /// Work that reports progress, then finishes after ten seconds.
    async fn ten_seconds(out: Output<u32>) -> u32 {
        out.progress();
        tokio::time::sleep(Duration::from_secs(10)).await;
        out.push(1);
        7
    }

    #[tokio::test(start_paused = true)]
    async fn a_limit_too_large_to_add_is_no_limit() {
        let guards = [
            LongWork::new().cap(Duration::MAX),
            LongWork::new().idle_limit(Duration::MAX),
            LongWork::new().idle_limit(Duration::MAX).cap(Duration::MAX),
            LongWork::new().idle_limit(Duration::MAX - Duration::from_secs(1)),
        ];
        for guard in guards {
            let outcome = guard.run(ten_seconds).await;
            assert_eq!(outcome.ending(), &Ending::Finished(7), "{guard:?}");
            assert_eq!(outcome.produced(), [1]);
            assert!(outcome.status().is_none());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_whose_progress_interval_is_too_large_to_add_runs_to_its_end() {
        let guards = [
            LongWork::new().caller_idle_limit(Duration::MAX),
            LongWork::new().idle_limit(Duration::MAX),
        ];
        for guard in guards {
            let mut stream = guard.stream(
                |out: Output<u32>| async move {
                    ten_seconds(out).await;
                },
                Ok,
            );
            let mut got = Vec::new();
            while let Some(frame) =
                std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await
            {
                got.push(frame.map_err(|s| s.code()));
            }
            assert_eq!(got, [Ok(Frame::Item(1))], "{guard:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_counts_what_it_sent_as_the_unary_path_counts_what_it_kept() {
        let (told, mut outcome) = tokio::sync::mpsc::unbounded_channel();
        let mut stream = LongWork::new()
            .idle_limit(Duration::from_secs(10))
            .stream_or_tell(
                |out: Output<u32>| async move {
                    out.push(1);
                    out.push(2);
                    std::future::pending::<()>().await
                },
                Ok,
                move |o| {
                    let _ = told.send((o.produced().len(), o.produced_count()));
                },
            );
        for _ in 0..2 {
            let frame = std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await;
            assert!(matches!(frame, Some(Ok(Frame::Item(_)))));
        }
        drop(stream); // the caller went away
        assert_eq!(
            outcome.recv().await,
            Some((0, 2)),
            "none kept, two produced"
        );
    }

    /// Reads a stream to its end: each frame, or the status's code.
    async fn read_to_end(
        stream: &mut ProgressStream<u32, Result<Frame<u32>, tonic::Status>>,
    ) -> Vec<Result<Frame<u32>, tonic::Code>> {
        let mut got = Vec::new();
        while let Some(frame) =
            std::future::poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)).await
        {
            got.push(frame.map_err(|s| s.code()));
        }
        got
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_panics_ends_its_stream_internal_not_as_finished() {
        let mut stream = LongWork::new().stream(
            |out: Output<u32>| async move {
                out.push(1);
                tokio::task::yield_now().await;
                panic!("the tool broke");
            },
            Ok,
        );
        let got = read_to_end(&mut stream).await;
        assert_eq!(got, [Ok(Frame::Item(1)), Err(tonic::Code::Internal)]);
    }

    /// A caller that stops reading (hyper stops polling the stream when the HTTP/2
    /// window closes): the deadline still ends the work, and its future is dropped.
    #[tokio::test(start_paused = true)]
    async fn a_reader_that_stops_reading_does_not_keep_the_work_running() {
        struct Flag(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Flag(dropped.clone());
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut stream = crate::scope::with_deadline(deadline, async {
            LongWork::new().idle_limit(Duration::from_secs(10)).stream(
                |out: Output<u32>| async move {
                    let _flag = flag;
                    for i in 0.. {
                        out.push(i);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                Ok,
            )
        })
        .await;
        // One message read, then nobody reads.
        let first = std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await;
        assert!(matches!(first, Some(Ok(Frame::Item(0)))));
        tokio::time::sleep(Duration::from_millis(999)).await;
        assert!(!dropped.load(std::sync::atomic::Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert!(
            dropped.load(std::sync::atomic::Ordering::SeqCst),
            "ended at the deadline"
        );
        // Read later, the stream gives what was produced, then the deadline's status.
        let rest = read_to_end(&mut stream).await;
        assert_eq!(rest.last(), Some(&Err(tonic::Code::DeadlineExceeded)));
        // Items 1 to 10 (the tenth pushed at the deadline's very instant), then the status.
        assert_eq!(rest.len(), 11, "{rest:?}");
    }

    /// Outside `InboundDeadlineLayer` the guard says so once; inside, never.
    #[tokio::test]
    async fn long_work_outside_the_layer_is_said_once() {
        use std::sync::atomic::AtomicBool;
        let said = AtomicBool::new(false);
        assert!(first_outside_the_layer(&said), "said the first time");
        assert!(!first_outside_the_layer(&said), "once");
        let inside = AtomicBool::new(false);
        let signal = crate::scope::task::inbound_signal();
        let within =
            crate::scope::task::serving(None, signal, async { first_outside_the_layer(&inside) });
        assert!(!within.await, "inside the layer's scope: nothing to say");
    }
}
