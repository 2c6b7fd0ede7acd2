//! [`TimeoutProfileService`]: per call, plan it, put the deadline on the wire, open
//! the call record and start the timer.

use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::time::Instant;
use tower_service::Service;

use super::cascade::{remember, CascadeSender};
use super::delegation::{refused, stamp_handoff};
use super::future::ResponseFuture;
use super::paths::LabelsRef;
use super::per_call::CallBudgetEnvelope;
use super::plan::{asked, not_a_grpc_path, plan, CallPlan, Outer};
use super::record::CallRecord;
use super::reload::CurrentProfiles;
use super::shared::Shared;
use super::table::{Reader, Table};
use crate::attempts::RecentLatency;
use crate::attempts::{HedgeContext, HedgePlan, Kept, Retries, RetryPlan, SpareSlot};
use crate::policy::deadline::{Phase, Progress};
use crate::policy::hedge::HedgingDelay;
use crate::policy::message::MessageField;
use crate::policy::streaming::millis;
use crate::wire::details::DetectedBy;
use crate::wire::envelope::peek_request_id;
use crate::wire::error::BoxError;
use crate::wire::message_field;
use crate::wire::replay::take_whole;
use crate::wire::stream_idle;

/// The service produced by [`super::TimeoutProfileLayer`].
#[derive(Clone, Debug)]
pub struct TimeoutProfileService<S> {
    /// The handle every call's first attempt goes through.
    inner: S,
    /// The handle attempts after a call's first take theirs from: one per layered
    /// service and its clones, made from `inner` when a call first needs it.
    spare: SpareSlot<S>,
    /// The layer's state, read once per call (a reload swaps it between calls).
    table: Reader,
    /// How this client sends `CancelDelegation` for the layer's cancel cascade.
    cascade: Option<CascadeSender>,
}

impl<S> TimeoutProfileService<S> {
    pub(crate) fn from_table(inner: S, table: Table) -> Self {
        TimeoutProfileService {
            inner,
            spare: SpareSlot::default(),
            table: Reader::new(table),
            cascade: None,
        }
    }

    /// Sends the cancel cascade's `CancelDelegation` through `send`.
    pub(crate) fn set_cascade(&mut self, send: CascadeSender) {
        self.cascade = Some(send);
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably. Attempts after a call's first go through the
    /// service as it is after this borrow, for calls made after it.
    pub fn get_mut(&mut self) -> &mut S {
        self.spare = SpareSlot::default();
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The profile table in use now (after a reload, the new one).
    pub fn profiles(&self) -> CurrentProfiles {
        CurrentProfiles(self.table.full())
    }
}

type Request = http::Request<tonic::body::Body>;

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
        // for replay, stamped for a handoff) and goes back before the request is sent:
        // 16 bytes moved twice, where taking the request apart would move its 224-byte
        // head twice.
        let mut body = std::mem::take(req.body_mut());
        let shared: &Arc<Shared> = self.table.current();
        let path = req.uri().path();
        let instruments = shared.settings.instruments.as_ref();
        let Some(found) = shared.paths.find(&shared.profiles, path, instruments) else {
            return ResponseFuture::failed(not_a_grpc_path(path));
        };
        let asked = match asked(req.extensions(), req.headers()) {
            Ok(asked) => asked,
            Err(status) => return ResponseFuture::failed(status),
        };
        let (scope, cancel) = crate::scope::current(start);
        let mut planned = plan(
            &shared.profiles,
            found.route,
            req.extensions(),
            asked,
            &Outer {
                retries: shared.settings.retry.on,
                hedging: shared.settings.hedging,
                scope,
                propagation: shared.settings.propagation,
                progress: &shared.settings.progress,
            },
            |field| message_field::peek(&mut body, field),
        );
        let span = rpc_span(shared.settings.span_level, &planned);
        planned.log_clamps(&span);
        let wire = planned.take_wire();
        let retry_plan = planned.retry.take();
        let hedge_plan = planned.hedge.take();
        let recent = hedge_plan
            .as_ref()
            .and_then(|p| window(shared, p, &found.labels));
        let deadline = planned.timers.total.as_ref().map(|c| start + c.limit());
        let exhausted = planned.exhausted;
        // A handoff (its request is a `HandoffRequest`) made inside a scope.
        let handoff = planned.route.message_field == Some(MessageField::HandoffTimeout);
        let delegation = scope.filter(|_| {
            handoff
                && shared.settings.envelopes
                && req.extensions().get::<CallBudgetEnvelope>().is_none()
        });
        // ...remembered for the cancel cascade when the layer has one.
        let cascade = shared
            .settings
            .cascade
            .filter(|_| handoff && cancel.is_some());
        let quiet = planned.timers.quiet_limit();
        let mut call = CallRecord::open(shared.clone(), found.labels, &mut planned, start, span);
        if exhausted {
            // Nothing (or less than the floor) is left of the inherited deadline or
            // the budget: fail at once, without sending.
            let status = call.timed_out(Phase::Total, &Progress::default(), DetectedBy::Client);
            return ResponseFuture::failed(status);
        }
        if let Some(signal) = &cancel {
            // Made in a cancelled scope: not sent.
            if let Some(reason) = signal.reason() {
                return ResponseFuture::failed(call.not_sent(reason));
            }
        }
        // The plan (which borrows the path) is done with: the head can change.
        wire.apply(req.headers_mut());
        if let Some(limit) = quiet {
            stream_idle::write(req.headers_mut(), limit);
        }
        let mut request_id = None;
        if let Some(scope) = delegation {
            let propagation = &shared.settings.propagation;
            match stamp_handoff(&mut body, &scope, propagation) {
                Err(refusal) => return ResponseFuture::failed(refused(&mut call, refusal)),
                Ok(id) => request_id = id,
            }
        }
        if let (Some(grace), Some(signal)) = (cascade, &cancel) {
            let id = request_id.or_else(|| peek_request_id(&mut body));
            if let Some(id) = id {
                remember(signal, id, grace, self.cascade.clone());
            }
        }
        if let Some(signal) = cancel {
            call.watch_cancel(signal);
        }
        // Hedges and retries need the whole request kept for replay; a body that is
        // not all there yet (client streaming) or too large is sent once.
        if let Some(plan) = hedge_plan {
            let context = (recent, deadline, start);
            let watch = call.request_watch();
            if let Some(hedges) = hedges(shared, plan, context, &req, &mut body, watch) {
                call.sending();
                call.attempt(1, None);
                *req.body_mut() = body;
                let spare = self.spare.share(&self.inner);
                return ResponseFuture::hedged(&mut self.inner, spare, req, hedges, call);
            }
        }
        let limit = shared.settings.retry.replay_limit;
        let watch = call.request_watch();
        let retry = retry_plan.and_then(|plan| {
            retries(
                &self.spare,
                &self.inner,
                plan,
                limit,
                &req,
                &mut body,
                watch,
            )
        });
        call.sending();
        if let Some(retries) = &retry {
            call.attempt(1, retries.first_cap());
        }
        *req.body_mut() = body;
        ResponseFuture::start(&mut self.inner, req, call, retry)
    }
}

/// A call's retry state: the request kept for replay (the head of `head`, the bytes of
/// `body`) and a share of the spare handle; `None` when the body is not whole (client
/// streaming) or too large to keep.
fn retries<S: Clone>(
    spare: &SpareSlot<S>,
    inner: &S,
    plan: RetryPlan,
    limit: usize,
    head: &Request,
    body: &mut tonic::body::Body,
    watch: &mut tonic::body::Body,
) -> Option<Retries<S>> {
    take_whole(
        body,
        limit,
        |bytes| Retries::new(spare.share(inner), plan, head, bytes),
        watch,
    )
}

/// The route's recent latency, for a learned delay (allocated on first use).
fn window(shared: &Shared, plan: &HedgePlan, labels: &LabelsRef) -> Option<Arc<RecentLatency>> {
    match plan.policy.delay() {
        HedgingDelay::Learned { .. } => shared.learned.route(labels),
        _ => None,
    }
}

/// What a hedged call needs besides its first request: the request kept for the
/// hedges (the head of `head`, the bytes of `body`), the route's window, the deadline and the start; `None` when the body is
/// not whole (client streaming) or too large to keep.
fn hedges(
    shared: &Shared,
    plan: HedgePlan,
    (recent, deadline, start): (Option<Arc<RecentLatency>>, Option<Instant>, Instant),
    head: &Request,
    body: &mut tonic::body::Body,
    watch: &mut tonic::body::Body,
) -> Option<(Kept, HedgePlan, HedgeContext)> {
    let limit = shared.settings.retry.replay_limit;
    let kept = take_whole(body, limit, |bytes| Kept::new(head, bytes), watch)?;
    let context = HedgeContext {
        deadline,
        recent,
        start,
        rate: shared.settings.hedge_cap.clone(),
    };
    Some((kept, plan, context))
}

/// The RPC's span (clamp and timeout events are emitted inside it), at the layer's
/// level: a disabled level costs nothing.
fn rpc_span(level: tracing::Level, plan: &CallPlan<'_>) -> tracing::Span {
    macro_rules! span {
        ($make:ident) => {
            tracing::$make!(
                "sw4rm_rpc",
                service = plan.route.service,
                method = plan.route.method,
                profile = %plan.profile.profile.name,
                timeout_ms = plan.timers.total.as_ref().map(|c| millis(c.limit())),
                streaming = plan.streaming,
            )
        };
    }
    match level {
        tracing::Level::ERROR => span!(error_span),
        tracing::Level::WARN => span!(warn_span),
        tracing::Level::INFO => span!(info_span),
        tracing::Level::DEBUG => span!(debug_span),
        _ => span!(trace_span),
    }
}
