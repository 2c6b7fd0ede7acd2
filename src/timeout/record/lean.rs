//! [`LeanCall`]: the record of a call sent the lean way while its first attempt is
//! all there is to it. A unary call its route alone plans (no per-call value, no
//! scope, no message timeout, no hedging, no clamp to log), with its span off and no
//! per-attempt metrics, is answered at its first attempt almost always: it needs its
//! deadline and its first attempt's timeout, the call's one timer, the request kept
//! for a retry, tonic's request body watched for a cancel, and at its end the
//! duration recorded where metrics or observations want it. That is what this record
//! holds, in a box reused per thread as the full record's is (`boxed.rs`).
//!
//! When anything else happens (a trailers-only status, an error, a timer, a cancel,
//! the server's timeout in the trailers) the call opens its full [`CallRecord`] from
//! what this one holds ([`LeanCall::open`]) and goes on from there as any other call,
//! under the same engine and the same rules: nothing is decided twice.

use std::cell::RefCell;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tonic::Code;

use super::boxed::KEPT_PER_THREAD;
use super::{poll_request_cancel, CallRecord, Closing};
use crate::attempts::{earliest, pop, push, Kept, Retries, RetryBudget, Spare, Timer};
use crate::policy::cancel::CancelReason;
use crate::policy::deadline::{Due, Phase, Progress};
use crate::policy::route::ProfileId;
use crate::timeout::plan::RoutePlan;
use crate::timeout::state::shared::{Settings, Shared};
use crate::timeout::state::LabelsRef;
use crate::wire::reassembled::take_whole;

pin_project! {
    /// What a box holds: the call (empty in the free list), its one timer, the request
    /// kept for a retry and tonic's request body (both emptied, not freed, when the
    /// box goes back).
    #[project = HeldProj]
    #[derive(Debug)]
    struct Held {
        #[pin]
        timer: Timer,
        kept: Kept,
        watch: tonic::body::Body,
        call: Option<Lean>,
    }
}

/// A lean call in flight.
#[derive(Debug)]
struct Lean {
    shared: Arc<Shared>,
    labels: LabelsRef,
    profile: ProfileId,
    start: Instant,
    /// The call's deadline, placed on the clock.
    due: Option<Due<Instant>>,
    /// When the first attempt's own timeout ends it.
    until: Option<Instant>,
    /// Whether the request was kept for a retry (the call is retried).
    kept: bool,
}

type Slot = Pin<Box<Held>>;

thread_local! {
    #[allow(clippy::vec_box)]
    static FREE: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
}

/// The record of a lean call in flight, in its box. Dropped before the call ended,
/// it records the call as abandoned (`CANCELLED`), as the full record does.
#[derive(Debug)]
pub(crate) struct LeanCall {
    /// Holds a call from [`LeanCall::new`] until the drop (never empty before).
    slot: Option<Slot>,
}

impl LeanCall {
    /// The record of a call on the path at `labels` that started at `start`, planned
    /// by `plan`, its route's.
    #[inline]
    pub(crate) fn new(
        shared: &Arc<Shared>,
        (labels, profile): (LabelsRef, ProfileId),
        plan: &RoutePlan,
        start: Instant,
    ) -> Self {
        let mut slot = pop(&FREE).unwrap_or_else(|| {
            Box::pin(Held {
                timer: Timer::new(),
                kept: Kept::vacant(),
                watch: tonic::body::Body::empty(),
                call: None,
            })
        });
        let decided = plan.decided();
        // Placed on the clock; past any representable instant, never.
        let due = decided.timers.next(Progress::default()).and_then(|due| {
            let at = start.checked_add(due.at)?;
            Some(Due {
                at,
                phase: due.phase,
            })
        });
        let first = decided.retry.as_ref().and_then(|retry| retry.first);
        *slot.as_mut().project().call = Some(Lean {
            shared: shared.clone(),
            labels,
            profile,
            start,
            due,
            until: first.and_then(|timeout| start.checked_add(timeout)),
            kept: false,
        });
        LeanCall { slot: Some(slot) }
    }

    #[inline(always)]
    fn held(&mut self) -> HeldProj<'_> {
        match self.slot.as_mut() {
            Some(slot) => slot.as_mut().project(),
            None => unreachable!("a lean call is read after its drop"),
        }
    }

    #[inline(always)]
    fn in_flight(&self) -> Option<&Lean> {
        self.slot.as_ref().and_then(|slot| slot.call.as_ref())
    }

    /// Keeps the request for a retry: its head and its whole `body` (when it is all
    /// there and within the replay limit), as the full path keeps it; tonic's
    /// request body is watched for its cancel when the layer was asked to
    /// ([`crate::TimeoutProfileLayer::with_tonic_cancel_watch`]). Whether it was kept
    /// (a request that is not is sent once).
    #[inline]
    pub(crate) fn keep(
        &mut self,
        request: &http::Request<tonic::body::Body>,
        body: &mut tonic::body::Body,
        settings: &Settings,
    ) -> bool {
        let HeldProj {
            kept, watch, call, ..
        } = self.held();
        let limit = settings.retry.replay_limit;
        let watch = settings.watch_tonic_cancel.then_some(watch);
        let whole = take_whole(body, limit, |bytes| kept.keep(request, bytes), watch);
        let kept = whole.is_some();
        if let Some(call) = call {
            call.kept = kept;
        }
        kept
    }

    /// The first attempt answered with response headers that are no trailers-only
    /// status: the call's answer, which pays the layer's retry budget back when the
    /// call is retried (as the rules do for any answer).
    #[inline]
    pub(crate) fn answered(&self) {
        if let Some(budget) = self
            .in_flight()
            .filter(|c| c.kept)
            .and_then(Lean::retry_budget)
        {
            budget.succeed();
        }
    }

    /// Whether the first attempt's own timeout has passed.
    pub(crate) fn expired(&self) -> bool {
        let until = self.in_flight().and_then(|call| call.until);
        until.is_some_and(|until| Instant::now() >= until)
    }

    /// When the server's answer would be the call's own deadline passing.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.in_flight()?.due.map(|due| due.at)
    }

    /// Whether the call has ended (its end recorded, or its full record opened).
    pub(crate) fn is_over(&self) -> bool {
        self.in_flight().is_none()
    }

    /// While the call waits: the caller's cancel, then the call's one timer, at the
    /// earlier of the first attempt's own timeout (while `attempt`) and the deadline.
    #[inline]
    pub(crate) fn poll_alarm(&mut self, attempt: bool, cx: &mut Context<'_>) -> Poll<Alarm> {
        let HeldProj {
            timer, watch, call, ..
        } = self.held();
        let Some(call) = call else {
            return Poll::Pending;
        };
        if !http_body::Body::is_end_stream(&*watch) {
            if let Poll::Ready(reason) = poll_request_cancel(watch, cx) {
                return Poll::Ready(Alarm::Cancelled(reason));
            }
        }
        let until = call.until.filter(|_| attempt).map(|at| Due {
            at,
            phase: Phase::Attempt,
        });
        let Some(due) = earliest(until, call.due) else {
            return Poll::Pending;
        };
        timer.poll_until(due.at, cx).map(|()| Alarm::Due(due))
    }

    /// The call ended with `code` (success or a non-timeout error): its end recorded.
    #[inline]
    pub(crate) fn finish(&mut self, code: Code) {
        let held = self.held();
        if let Some(call) = held.call.take() {
            call.closing().record(None, false, || code);
        }
        held.timer.clear();
    }

    /// Opens the call's full record from this one, which ends here: the engine takes
    /// over. With `spare`, a call that kept its request for a retry gets its retry
    /// state, as the full path makes it after sending the first attempt.
    #[cold]
    pub(crate) fn open<S: Clone>(
        &mut self,
        spare: Option<Spare<S>>,
    ) -> (CallRecord, Option<Retries<S>>) {
        let HeldProj {
            timer,
            kept,
            watch,
            call,
        } = self.held();
        timer.clear();
        let Some(call) = call.take() else {
            unreachable!("a lean call is opened once")
        };
        let plan = call.labels.slot().and_then(|at| call.shared.plans.get(at));
        let decided = plan.map(|plan| plan.decided());
        let timers = decided.map(|d| d.timers.clone()).unwrap_or_default();
        let mut retry_plan = decided.and_then(|d| d.retry.clone());
        let mut record =
            CallRecord::open_lean(call.shared, call.labels, (call.profile, timers), call.start);
        std::mem::swap(record.request_watch(), watch);
        record.sending();
        let Some(plan) = retry_plan.as_mut().filter(|_| call.kept) else {
            return (record, None);
        };
        // A retried call's first attempt, as the full path numbers it.
        record.attempt(1, plan.first_cap());
        (
            record,
            spare.map(|spare| Retries::of_kept(spare, plan, kept)),
        )
    }
}

impl Lean {
    fn closing(&self) -> Closing<'_> {
        Closing {
            shared: &self.shared,
            labels: &self.labels,
            start: self.start,
            streaming: false,
        }
    }

    fn retry_budget(&self) -> Option<&RetryBudget> {
        self.shared.settings.retry.budget.as_ref()
    }
}

/// What ended a lean call's wait.
#[derive(Debug)]
pub(crate) enum Alarm {
    /// The caller cancelled with tonic's `Request::cancellation_handle()`.
    Cancelled(CancelReason),
    /// The call's one timer fired at this.
    Due(Due<Instant>),
}

impl Drop for LeanCall {
    /// A call dropped before it ended is recorded as abandoned (`CANCELLED`), as the
    /// full record's drop does; the box goes back to the thread's free list emptied,
    /// its timer disarmed.
    fn drop(&mut self) {
        let Some(mut slot) = self.slot.take() else {
            return;
        };
        let HeldProj {
            timer,
            kept,
            watch,
            call,
        } = slot.as_mut().project();
        if let Some(call) = call.take() {
            call.closing().record(None, false, || Code::Cancelled);
        }
        timer.clear();
        kept.clear();
        *watch = tonic::body::Body::empty();
        push(&FREE, slot, KEPT_PER_THREAD);
    }
}

/// A lean call and the same call through the engine end alike: every scripted way a
/// call can go (answered, retried, not retried, an attempt's timeout, the deadline
/// before and after the answer's headers, the server's timeout, a body cut, a call or
/// a body abandoned) gives the caller the same answer or status (details and
/// `sw4rm-attempts` included), sends the server the same attempts, takes the same
/// time, and records the same metrics and observations. The engine's run is forced by
/// a subscriber that turns the call's span on; each run is checked to have gone the
/// way it was meant to.
#[cfg(test)]
#[cfg(feature = "testing")]
mod tests {
    use std::future::Future;
    use std::time::Duration;

    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::BodyExt;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
    use tokio::time::Instant;
    use tower::{Service, ServiceExt};
    use tower_layer::Layer;
    use tracing_subscriber::layer::SubscriberExt;

    use crate::testing::{Play, Scripted};
    use crate::{ProfileSet, RetryPolicy, TimeoutProfileLayer};

    const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// What the caller does with the response body.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Then {
        /// Reads it to its end.
        Read,
        /// Reads it while the server sends nothing more (the deadline ends it).
        Wait,
        /// The server sends one message, then trailers with this status.
        Trailers(u8),
        /// The server sends `DEADLINE_EXCEEDED` in the trailers at the deadline.
        ServerTimeout,
        /// Drops it unread.
        DropBody,
        /// Drops the call before its answer.
        DropCall,
    }

    /// The caller's answer, the server's view, the time and what was recorded.
    #[derive(Debug, PartialEq)]
    struct Outcome {
        head: Result<Vec<(String, String)>, String>,
        body: Option<Result<Option<String>, String>>,
        seen: Vec<(Option<String>, Option<String>, Option<Duration>)>,
        took: Duration,
        metrics: Vec<String>,
        observed: String,
        /// The retry budget's tokens after the call.
        budget: String,
    }

    fn layer() -> TimeoutProfileLayer {
        let policy = RetryPolicy::builder()
            .max_attempts(3)
            .attempt_timeout(ms(300))
            .initial_backoff(ms(1))
            .max_backoff(ms(1))
            .build()
            .unwrap();
        let profiles = ProfileSet::builder()
            .without_global()
            .default_timeout_ms("heartbeat", 1_000)
            .min_timeout_ms("heartbeat", 50)
            .retry("heartbeat", policy)
            .build()
            .unwrap();
        TimeoutProfileLayer::new(profiles).with_observations()
    }

    /// A retry budget below its top, so that an answer's payment shows.
    fn budget() -> crate::RetryBudget {
        let budget = crate::RetryBudget::new(10).with_token_ratio(0.5);
        assert!(budget.fail() && budget.fail());
        budget
    }

    fn status(err: crate::BoxError) -> String {
        let status = tonic::Status::from_error(err);
        let attempts = status.metadata().get("sw4rm-attempts").cloned();
        // The details read back (their map's order on the wire is a hash map's).
        let timeout = crate::TimeoutDetails::from_status(&status);
        let cancel = crate::wire::cancel::CancelDetails::from_status(&status);
        format!(
            "{:?} {} {timeout:?} {cancel:?} {attempts:?}",
            status.code(),
            status.message(),
        )
    }

    fn metrics(provider: &SdkMeterProvider, exporter: &InMemoryMetricExporter) -> Vec<String> {
        provider.force_flush().unwrap();
        let exported = exporter.get_finished_metrics().unwrap();
        let mut out = Vec::new();
        for scope in exported.last().iter().flat_map(|m| m.scope_metrics()) {
            for metric in scope.metrics() {
                let name = metric.name();
                let attrs = |a: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                    let mut a: Vec<String> =
                        a.map(|kv| format!("{}={}", kv.key, kv.value)).collect();
                    a.sort();
                    a.join(",")
                };
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            out.push(format!(
                                "{name} {} {}",
                                attrs(&mut p.attributes()),
                                p.value()
                            ));
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            let (count, sum) = (p.count(), p.sum());
                            out.push(format!(
                                "{name} {} {count} {sum}",
                                attrs(&mut p.attributes())
                            ));
                        }
                    }
                    other => out.push(format!("{name} {other:?}")),
                }
            }
        }
        out.sort();
        out
    }

    /// One call that the inner service plays as `plays` and the caller ends as
    /// `then`, lean or through the engine.
    async fn run(plays: &[Play], then: Then, lean: bool) -> Outcome {
        // A subscriber of this thread's own either way: tracing caches each callsite's
        // interest across the subscribers alive, and another test's must not decide.
        let _subscriber = match lean {
            true => tracing::subscriber::set_default(
                tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::OFF),
            ),
            false => tracing::subscriber::set_default(tracing_subscriber::registry()),
        };
        let exporter = InMemoryMetricExporter::default();
        let reader = PeriodicReader::builder(exporter.clone()).build();
        let provider = SdkMeterProvider::builder().with_reader(reader).build();
        let budget = budget();
        let layer = layer()
            .with_meter_provider(&provider)
            .with_retry_budget(budget.clone());
        let observations = layer.observations().unwrap();
        let inner = Scripted::new(plays.iter().copied());
        let mut svc = layer.layer(inner.clone());
        let start = Instant::now();
        let request = crate::testing::generated_request(HEARTBEAT);
        let mut future = Box::pin(svc.ready().await.unwrap().call(request));
        assert_eq!(
            future.is_lean(),
            lean,
            "{plays:?} {then:?}: the way the call went"
        );
        let (head, body) = if then == Then::DropCall {
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            assert!(future.as_mut().poll(&mut cx).is_pending());
            tokio::time::sleep(ms(100)).await;
            drop(future);
            (Err("dropped".to_owned()), None)
        } else {
            match future.await {
                Err(err) => (Err(status(err)), None),
                Ok(response) => {
                    let mut headers: Vec<(String, String)> = response
                        .headers()
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_owned()))
                        .collect();
                    headers.sort();
                    let mut body = response.into_body();
                    let feed = match then {
                        Then::Wait | Then::Trailers(_) | Then::ServerTimeout => {
                            Some(inner.next_feed().await)
                        }
                        _ => None,
                    };
                    if let (Some(feed), Then::Trailers(code)) = (&feed, then) {
                        feed.send(Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0])));
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", http::HeaderValue::from(u16::from(code)));
                        feed.send(Frame::trailers(trailers));
                    }
                    if let (Some(feed), Then::ServerTimeout) = (&feed, then) {
                        tokio::time::sleep_until(start + ms(1_000)).await;
                        let mut trailers = http::HeaderMap::new();
                        trailers.insert("grpc-status", 4.into());
                        feed.send(Frame::trailers(trailers));
                    }
                    let ended = match then {
                        Then::DropBody => None,
                        _ => Some(read(&mut body).await),
                    };
                    drop(body);
                    drop(feed);
                    (Ok(headers), ended)
                }
            }
        };
        tokio::time::sleep(ms(10)).await;
        let seen = inner
            .seen()
            .iter()
            .map(|s| {
                let header = |name| s.header(name).map(str::to_owned);
                (
                    header("grpc-timeout"),
                    header("grpc-previous-rpc-attempts"),
                    s.dropped.map(|d| d - start),
                )
            })
            .collect();
        Outcome {
            head,
            body,
            seen,
            took: start.elapsed(),
            metrics: metrics(&provider, &exporter),
            observed: format!("{:?}", observations.routes()),
            budget: format!("{}", budget.tokens()),
        }
    }

    /// Reads a body to its end: its trailers' status, or its error.
    async fn read(
        body: &mut crate::timeout::TimeoutBody<tonic::body::Body>,
    ) -> Result<Option<String>, String> {
        let mut status = None;
        while let Some(frame) = body.frame().await {
            match frame {
                Err(err) => return Err(status_of(err)),
                Ok(frame) => {
                    if let Some(trailers) = frame.trailers_ref() {
                        status = trailers
                            .get("grpc-status")
                            .map(|v| v.to_str().unwrap_or("?").to_owned());
                        // The trailers end the call (the feed stays open behind them).
                        break;
                    }
                }
            }
        }
        Ok(status)
    }

    fn status_of(err: crate::BoxError) -> String {
        status(err)
    }

    #[tokio::test(start_paused = true)]
    async fn a_lean_call_and_the_engine_end_alike() {
        let unavailable = Play::answer().status(tonic::Code::Unavailable);
        let cases: &[(&[Play], Then)] = &[
            (&[Play::answer()], Then::Read),
            (&[Play::answer().after(ms(40))], Then::Read),
            (&[unavailable, Play::answer()], Then::Read),
            (&[unavailable], Then::Read),
            (
                &[Play::answer().status(tonic::Code::InvalidArgument)],
                Then::Read,
            ),
            (&[Play::hang(), Play::answer()], Then::Read),
            (&[Play::hang()], Then::Read),
            (&[Play::answer().fed()], Then::Wait),
            (&[Play::answer().fed()], Then::Trailers(0)),
            (&[Play::answer().fed()], Then::Trailers(13)),
            (&[Play::answer().fed()], Then::ServerTimeout),
            (&[Play::answer().fed()], Then::DropBody),
            (&[Play::hang()], Then::DropCall),
        ];
        for (plays, then) in cases {
            let lean = run(plays, *then, true).await;
            let full = run(plays, *then, false).await;
            assert_eq!(lean, full, "{plays:?} {then:?}");
        }
    }
}
