//! [`TimeoutProfileService`]: per call, plan it, put the deadline on the wire, open
//! the call record and start the timer. Every call then runs under the one engine
//! with the one record. What differs is how much there is to plan: a unary call its
//! route alone plans (the common call) is sent as its route's plan says, read from
//! the plan kept for the route, with nothing copied; any other call makes its own plan
//! first. Neither the log level nor the inner service's readiness chooses between
//! the two.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;
use tower_service::Service;

use super::future::ResponseFuture;
use super::per_call::asked;
use super::per_call::CallOptions;
use super::plan::{not_a_grpc_path, plan, CallPlan, Outer, RoutePlan};
use super::record::CallRecord;
use super::refuse::{refused, RefuseSending};
use super::span::{route_span, rpc_span};
use super::state::shared::{Found, LastPath, Reader, Shared};
use super::state::LabelsRef;
use crate::attempts::{
    Attempt, HedgeContext, HedgePlan, RecentLatency, ReplayRequest, Retries, RetryPlan, Spare,
    SpareSlot, ToKeep, WireTimeout,
};
use crate::policy::deadline::{Phase, Received};
use crate::policy::hedge::HedgingDelay;
use crate::policy::message_ids::IdFields;
use crate::policy::route::ProfileId;
use crate::scope::{CancelSignal, Current};
use crate::wire::details::DetectedBy;
use crate::wire::error::BoxError;
use crate::wire::message_field;
use crate::wire::message_ids::{self, CallIds};
use crate::wire::reassembled::take_whole;
use crate::wire::stream_idle;

/// The service produced by [`super::TimeoutProfileLayer`].
#[derive(Clone, Debug)]
pub struct TimeoutProfileService<S> {
    /// The handle every call's first attempt goes through.
    pub(super) inner: S,
    /// The handle attempts after a call's first take theirs from: one per layered
    /// service and its clones, made from `inner` when a call first needs it.
    pub(super) spare: SpareSlot<S>,
    /// The layer's state, read once per call (a reload swaps it between calls).
    pub(super) table: Reader,
    /// Where this handle's last call found its path (see `PathTable::find_after`).
    pub(super) last_path: LastPath,
}

type Request = http::Request<tonic::body::Body>;

/// tonic's `GrpcMethod`, when it is a request's one extension (`CallOptions::method_alone`).
type Alone = Option<tonic::GrpcMethod<'static>>;

/// Sends a call's first attempt through `inner` (a `&mut` of the inner service), in
/// the call's span (entering a disabled one does nothing), under the first attempt's
/// timeout of `retry`, and makes the call's future of it. A macro, not a function: the
/// request moves once, into the inner service (an inlined function's by-value request
/// is a copy), and the attempt is made where it is kept (a closure would move it out).
macro_rules! send_first {
    ($inner:expr, $req:expr, $start:expr, $record:expr, $retry:expr) => {{
        let until = $retry.as_ref().and_then(|r| r.first_until($start));
        let entered = $record.span().enter();
        let first = Attempt::start($inner, $req, until);
        drop(entered);
        ResponseFuture::start(first, $record, $retry)
    }};
}

impl<S, ResBody> Service<Request> for TimeoutProfileService<S>
where
    S: Service<Request, Response = http::Response<ResBody>> + Clone,
    S::Error: Into<BoxError>,
    ResBody: http_body::Body,
    ResBody::Error: Into<BoxError>,
{
    type Response = http::Response<super::TimeoutBody<ResBody>>;
    type Error = BoxError;
    type Future = ResponseFuture<S, S::Future>;

    /// Always ready: each call waits for the inner service inside its own timed future
    /// (as tower's `Oneshot` does), so the deadline runs from the moment the RPC is
    /// called, however long tonic's channel buffer or a pending connection makes it
    /// wait.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let start = Instant::now();
        // The body is read apart from the head (peeked for a message's timeout, kept
        // for replay) and goes back before the request is sent:
        // 16 bytes moved twice, where taking the request apart would move its 224-byte
        // head twice. The plan, the record and the request stay in this frame: each
        // step borrows them (a value returned through a step would be copied).
        let mut body = std::mem::take(req.body_mut());
        let shared: &Arc<Shared> = self.table.current();
        let path = req.uri().path();
        let instruments = shared.settings.instruments.as_ref();
        let Some(found) =
            shared
                .paths
                .find_after(&shared.profiles, path, instruments, &mut self.last_path)
        else {
            return ResponseFuture::failed(not_a_grpc_path(path));
        };
        let options = CallOptions::of(req.extensions());
        let asked = match asked(options, req.headers()) {
            Ok(asked) => asked,
            Err(status) => return ResponseFuture::failed(status),
        };
        let (scope, cancel) = crate::scope::current(start);
        let decides = RoutePlan::decides(&found.route, options, asked, scope);
        let routed = match decides && !planned_apart() {
            true => route_plan(shared, &found),
            false => None,
        };
        // Sent as its route's plan says, by that plan alone (`prepare_planned`).
        if let Some(routed) = routed.filter(|plan| plan.is_plain()) {
            let span = route_span(shared, &found, routed);
            let call = (found.labels, found.route.profile);
            let ids = shared.settings.message_ids.of_route(&found.route);
            // Copied (two `&str`s) for a request kept for retries: it is lent mutably next.
            let retries = routed.decided().retry.is_some();
            let alone = options.method_alone().filter(|_| retries).cloned();
            let (handles, sent) = ((&self.inner, &self.spare), (&mut req, body, start, alone));
            let (record, retry) = prepare_planned(handles, shared, call, (routed, span, ids), sent);
            return send_first!(&mut self.inner, req, start, record, retry);
        }
        // Each arm makes the plan where it is kept (an `Option` of it would be moved).
        let mut planned = match routed {
            Some(routed) => routed.call_plan(&shared.profiles, found.route),
            None => {
                let peek = |field| message_field::peek(&mut body, field);
                let outer = &outer(shared, scope);
                plan(&shared.profiles, found.route, options, asked, outer, peek)
            }
        };
        let settings = &shared.settings;
        let ids = settings.message_ids.of_route(&planned.route);
        let ids = message_ids::read(ids, settings.agent_ids, &settings.message_ids, &mut body);
        let span = rpc_span(settings, &planned.route, planned.profile, &planned.decided);
        planned.log_clamps(&span, ids.as_deref().and_then(CallIds::correlation));
        let mut head = Head::of(&mut planned);
        let attempts = Attempts::of(shared, &mut planned, &found.labels, head.total, start);
        let exhausted = planned.exhausted;
        // The span, kept to write its context once the path is no longer borrowed.
        #[cfg(feature = "otel")]
        let traced = shared
            .settings
            .propagator
            .as_ref()
            .map(|p| (p, span.clone()));
        let mut call = CallRecord::open(shared.clone(), found.labels, &mut planned, start, span);
        call.identify(ids);
        if let Some(status) = not_sent(&mut call, exhausted, cancel.as_deref(), options) {
            return ResponseFuture::failed(status);
        }
        // The plan (which borrows the path) is done with: the head can change.
        head.write_quiet(req.headers_mut());
        #[cfg(feature = "otel")]
        if let Some((propagator, span)) = traced {
            crate::observe::trace_context::inject(propagator, &span, req.headers_mut());
        }
        if let Some(signal) = cancel {
            call.watch_cancel(signal);
        }
        let handles = (&self.inner, &self.spare);
        let sending = keep(handles, shared, &req, &mut body, &mut call, attempts);
        *req.body_mut() = body;
        // Written once the request is kept: a kept head leaves it out anyway (each
        // attempt writes its own), and keeping then finds one header fewer to skip.
        head.write_wire(req.headers_mut());
        // The first attempt, hedged or not (`send_first!` says why in place).
        let inner = &mut self.inner;
        match sending {
            Sending::Hedged(spare, hedging) => {
                ResponseFuture::hedged(inner, spare, req, hedging, call)
            }
            Sending::Once(retry) => send_first!(inner, req, start, call, retry),
        }
    }
}

/// Why a planned call is not sent, if it is not: the status its caller gets.
#[inline(always)]
fn not_sent(
    call: &mut CallRecord,
    exhausted: bool,
    cancel: Option<&CancelSignal>,
    options: CallOptions<'_>,
) -> Option<Status> {
    if exhausted {
        // Nothing (or less than the floor) is left of the inherited deadline or the
        // budget: fail at once, without sending.
        return Some(call.timed_out(Phase::Total, &Received::default(), DetectedBy::Client));
    }
    // Made in a cancelled scope: not sent.
    if let Some(reason) = cancel.and_then(CancelSignal::reason) {
        return Some(call.not_sent(reason));
    }
    // Refused by a layer above (a delegation too deep or with nothing left).
    let refusal = options.get::<RefuseSending>()?;
    Some(refused(call, *refusal))
}

#[cfg(test)]
thread_local! {
    /// Whether this thread's calls are planned apart, as a call with a value of its own
    /// is, even when their route's plan decides them (`record/differential.rs` holds
    /// the two alike).
    pub(crate) static PLANNED_APART: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether a test asked for calls planned apart (`PLANNED_APART`); never outside tests.
#[inline(always)]
fn planned_apart() -> bool {
    #[cfg(test)]
    return PLANNED_APART.with(std::cell::Cell::get);
    #[cfg(not(test))]
    false
}

/// The route's plan, for a call it alone decides, made on the route's first such call
/// (`None`: a path without a slot in the table, planned on every call).
#[inline]
fn route_plan<'a>(shared: &'a Shared, found: &Found<'_>) -> Option<&'a Arc<RoutePlan>> {
    let make = || RoutePlan::of(&shared.profiles, found.route, &outer(shared, None));
    shared.plans.at(found.labels.slot(), make)
}

/// What the plan reads besides the request: the layer's settings and the scope's caps.
#[inline(always)]
fn outer(shared: &Shared, scope: Option<Current>) -> Outer<'_> {
    Outer {
        retries: shared.settings.retry.on,
        hedging: shared.settings.hedging,
        scope,
        propagation: shared.settings.propagation,
        progress: &shared.settings.progress,
    }
}

/// The call's deadline as the head carries it.
struct Head {
    /// The `grpc-timeout` to send.
    wire: WireTimeout,
    /// A stream's quiet limit, told to the server (`sw4rm-stream-idle-ms`).
    quiet: Option<Duration>,
    /// The call's deadline, from its start (placed on the clock only for a hedged
    /// call, the one that needs the instant).
    total: Option<Duration>,
}

impl Head {
    /// The head's part of `plan`.
    #[inline(always)]
    fn of(plan: &mut CallPlan<'_>) -> Self {
        Head {
            wire: plan.take_wire(),
            quiet: plan.decided.timers.quiet_limit(),
            total: plan.decided.timers.total.as_ref().map(|c| c.limit()),
        }
    }

    /// Writes the stream's quiet limit, a header every attempt sends as it is.
    #[inline(always)]
    fn write_quiet(&self, headers: &mut http::HeaderMap) {
        if let Some(limit) = self.quiet {
            stream_idle::write(headers, limit);
        }
    }

    /// Writes the first attempt's `grpc-timeout` (the header value moves out).
    #[inline(always)]
    fn write_wire(&mut self, headers: &mut http::HeaderMap) {
        std::mem::replace(&mut self.wire, WireTimeout::Keep).apply(headers);
    }
}

/// How the call's attempts go out: retried or hedged, under the call's deadline.
struct Attempts {
    retry: Option<RetryPlan>,
    /// The hedging plan, with the route's recent latency for a learned delay.
    hedge: Option<(HedgePlan, Option<Arc<RecentLatency>>)>,
    /// The call's deadline, from its start.
    total: Option<Duration>,
    start: Instant,
}

impl Attempts {
    /// The plan's retry and hedging plans (taken out of it), with the route's recent
    /// latency for a learned delay; `total`, the call's deadline from `start`.
    #[inline(always)]
    fn of(
        shared: &Shared,
        plan: &mut CallPlan<'_>,
        labels: &LabelsRef,
        total: Option<Duration>,
        start: Instant,
    ) -> Self {
        let hedge = plan.decided.hedge.take().map(|plan| {
            let recent = window(shared, &plan, labels);
            (plan, recent)
        });
        Attempts {
            retry: plan.decided.retry.take(),
            hedge,
            total,
            start,
        }
    }
}

/// How the call's first attempt goes out.
// Made and matched within `call`'s frame (`keep` is inlined there) and never stored:
// boxing the hedged variant would cost an allocation per hedged call for nothing.
#[allow(clippy::large_enum_variant)]
enum Sending<S> {
    /// Hedged: the request kept for the hedges, with the spare they are sent through.
    Hedged(Spare<S>, (ReplayRequest, HedgePlan, HedgeContext)),
    /// One attempt at a time, with its retries when it has any.
    Once(Option<Retries<S>>),
}

/// Keeps what the call's attempts after the first need, when the request can be kept
/// for replay (a body that is not all there yet, client streaming, or too large is
/// sent once), and marks the first attempt sent. The request is only read: it moves
/// once, into the first attempt.
#[inline(always)]
fn keep<S: Clone>(
    (inner, spare): (&S, &SpareSlot<S>),
    shared: &Shared,
    req: &Request,
    body: &mut tonic::body::Body,
    call: &mut CallRecord,
    attempts: Attempts,
) -> Sending<S> {
    let limit = shared.settings.retry.replay_limit;
    let watch_cancel = shared.settings.watch_tonic_cancel;
    if let Some((plan, recent)) = attempts.hedge {
        let context = HedgeContext {
            deadline: attempts.total.and_then(|t| attempts.start.checked_add(t)),
            recent,
            start: attempts.start,
            rate: shared.settings.hedge_cap.clone(),
        };
        let watch = watch_cancel.then(|| call.request_watch());
        let kept = |bytes: &_| ReplayRequest::new(ToKeep::new(req), bytes);
        if let Some(kept) = take_whole(body, limit, kept, watch) {
            call.sending();
            call.attempt(1, None);
            return Sending::Hedged(spare.share(inner), (kept, plan, context));
        }
    }
    let watch = watch_cancel.then(|| call.request_watch());
    let retry = attempts.retry.as_ref().and_then(|plan| {
        let keep = |bytes: &_| Retries::new(spare.share(inner), plan, ToKeep::new(req), bytes);
        take_whole(body, limit, keep, watch)
    });
    call.sending();
    if let Some(retries) = &retry {
        call.attempt(1, retries.first_cap());
    }
    Sending::Once(retry)
}

/// The route's recent latency, for a learned delay (allocated on first use).
fn window(shared: &Shared, plan: &HedgePlan, labels: &LabelsRef) -> Option<Arc<RecentLatency>> {
    match plan.policy.delay() {
        HedgingDelay::Learned { .. } => shared.learned.window(labels.slot()),
        _ => None,
    }
}

/// Makes ready a unary call its route alone plans, as the route's `plan` says: its
/// record reading the plan's timers, its request kept for a retry when the route
/// retries, its `body` put back and its deadline written. What it returns goes
/// to [`send_first!`] with the request, which is only borrowed here: a request passed
/// by value through an inlined function is copied at each level (232 bytes, some 30
/// instructions a copy).
#[inline(always)]
fn prepare_planned<S: Service<Request> + Clone>(
    (inner, spare): (&S, &SpareSlot<S>),
    shared: &Arc<Shared>,
    call: (LabelsRef, ProfileId),
    (plan, span, ids): (&Arc<RoutePlan>, tracing::Span, Option<IdFields>),
    (req, mut body, start, alone): (&mut Request, tonic::body::Body, Instant, Alone),
) -> (CallRecord, Option<Retries<S>>) {
    let decided = plan.decided();
    #[cfg(feature = "otel")]
    if let Some(propagator) = &shared.settings.propagator {
        crate::observe::trace_context::inject(propagator, &span, req.headers_mut());
    }
    let mut record = CallRecord::routed(shared.clone(), call, plan.clone(), start, span);
    let settings = &shared.settings;
    let (agents, declared) = (settings.agent_ids, &settings.message_ids);
    record.identify(message_ids::read(ids, agents, declared, &mut body));
    let watch = settings.watch_tonic_cancel.then(|| record.request_watch());
    let retry = decided.retry.as_ref().and_then(|retry| {
        let request = ToKeep {
            request: req,
            method_alone: alone.as_ref(),
        };
        let keep = |bytes: &_| Retries::new(spare.share(inner), retry, request, bytes);
        take_whole(&mut body, settings.retry.replay_limit, keep, watch)
    });
    record.sending();
    if let Some(retries) = &retry {
        record.attempt(1, retries.first_cap());
    }
    *req.body_mut() = body;
    decided.wire.clone().apply(req.headers_mut());
    (record, retry)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::{service_fn, ServiceExt};
    use tower_layer::Layer;

    use super::*;
    use crate::{CallTimeout, TimeoutProfileLayer};

    const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
    const STATE: &str = "/sw4rm.workflow.WorkflowService/GetWorkflowState";
    const STATUS: &str = "/sw4rm.scheduler.SchedulerService/GetTaskStatus";

    fn request(path: &str) -> Request {
        let mut request = http::Request::new(tonic::body::Body::empty());
        *request.uri_mut() = path.parse().unwrap();
        request
    }

    /// A call with nothing of its own (an extension of the caller's that is no override
    /// is nothing of its own) is planned by its route's plan, made on the route's first
    /// such call and kept for the next; a call with a value of its own is planned
    /// apart, and no route plan is made for it.
    #[tokio::test]
    async fn a_route_plan_is_made_once_for_the_calls_it_decides() {
        let answer = service_fn(|_: Request| async {
            Ok::<_, Infallible>(http::Response::new(tonic::body::Body::empty()))
        });
        let mut svc = TimeoutProfileLayer::standard()
            .without_metrics()
            .layer(answer);
        let mut own = request(STATE);
        own.extensions_mut()
            .insert(CallTimeout::After(Duration::from_secs(2)));
        // A value of the caller's own that is no override of ours.
        let mut other = request(STATUS);
        other.extensions_mut().insert(7u8);
        for req in [request(HEARTBEAT), own, other] {
            svc.ready().await.unwrap().call(req).await.unwrap();
        }
        let shared = svc.table.current().clone();
        let slot = |path| shared.paths.slot_of(&shared.profiles, path).unwrap();
        assert!(
            shared.plans.get(slot(STATUS)).is_some(),
            "a caller's own extension is no value of the call's"
        );
        let made = shared
            .plans
            .get(slot(HEARTBEAT))
            .expect("the route's plan")
            .clone();
        assert!(
            shared.plans.get(slot(STATE)).is_none(),
            "a call's own value"
        );
        svc.ready()
            .await
            .unwrap()
            .call(request(HEARTBEAT))
            .await
            .unwrap();
        let kept = shared.plans.get(slot(HEARTBEAT)).unwrap();
        assert!(Arc::ptr_eq(&made, kept), "made once");
    }
}
