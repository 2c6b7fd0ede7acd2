//! The record of one call in flight. It moves from the response future into the
//! response body and emits its end event (duration metric, and for a timeout the
//! counter, the `warn!` and the status) exactly once: when the call finishes, times
//! out, or is dropped by the caller.
//!
//! The record also watches for the caller's cancels (`cancel_watch.rs`): the cancel
//! signal of the scope the call was made in, and tonic's cancellation handle. Its
//! clock (`clock.rs`) says where the call's timers are and what they say.
//! How a call ends when it timed out is in `timed_out.rs`, when its scope cancelled it
//! in `cancelled.rs`.
//!
//! Every call has this one record, whatever its plan and whatever the log level. A
//! call its route alone plans reads its timers from the route's plan, shared by the
//! route's calls ([`CallTimers::Route`]); any other call owns the timers its own plan
//! made ([`CallTimers::Own`]). The record lives in a box reused per thread
//! (`boxed.rs`); what it makes of what the engine and the body tell it (metrics, logs,
//! the end) is `events.rs`.

/// Logs one of the call's events in its span (`call_event!`), naming the call by the
/// record's labels and profile, as the span does when it is on.
macro_rules! logged {
    ($record:expr, $level:ident, $($rest:tt)+) => {{
        let labels = $record.labels();
        let profile = &$record.shared.profiles.by_id($record.profile).profile.name;
        call_event!($level, $record.span, $record.correlation(), (labels.service, labels.method, profile), $($rest)+)
    }};
}

mod boxed;
mod cancel_watch;
mod cancelled;
mod clock;
#[cfg(all(test, feature = "testing"))]
mod differential;
mod events;
mod timed_out;

pub(crate) use boxed::CallRecord;
use clock::CallTimers;

use std::num::NonZeroU32;
use std::sync::Arc;

use tokio::time::Instant;
use tonic::{Code, Status};

use super::state::shared::Shared;
use super::state::{Labels, LabelsRef};
use crate::attempts::{RetryBudget, ATTEMPTS_HEADER};
use crate::observe::metrics::CallTally;
use crate::policy::deadline::{Cap, Received};
use crate::policy::effect::{effect_of, CallEffect};
use crate::policy::route::ProfileId;
use crate::policy::streaming::millis;
use crate::scope::{BudgetNow, Watch};

#[cfg(feature = "otel")]
use crate::timeout::span::{record_late, Late};
use crate::wire::error::BoxError;
use crate::wire::message_ids::CallIds;
use crate::wire::status::{code_of_error, lost_connection, unreachable};

/// Whether the call's end event has been emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    Ended,
}

/// What the layer knows of one call in flight, and the end event it owes: kept in a
/// [`CallRecord`]'s box.
#[derive(Debug)]
pub(crate) struct Record {
    shared: Arc<Shared>,
    labels: LabelsRef,
    profile: ProfileId,
    start: Instant,
    timers: CallTimers,
    streaming: bool,
    span: tracing::Span,
    state: State,
    /// Attempts made (numbered from 1), and the attempt timeout in force, under a
    /// retry policy.
    attempts: Option<NonZeroU32>,
    attempt: Option<Cap>,
    /// What the budget had spent at the call's start, when a budget caps the call.
    budget: Option<BudgetSpent>,
    /// The `grpc-status` of the response headers (a trailers-only answer), kept only
    /// when a metric family records statuses.
    header_code: Option<Code>,
    /// The cancel signal of the scope the call was made in, if it has one.
    cancel: Option<Watch>,
    /// The request body as tonic made it, after the layer took its bytes for replay:
    /// it fails when the caller cancels with tonic's `Request::cancellation_handle()`
    /// (empty when there is nothing to watch).
    request: tonic::body::Body,
    /// The call's attempts as gRPC's metrics count them, once sent, when a gRPC
    /// family is on (boxed: a call without one pays a null pointer).
    tally: Option<Box<CallTally>>,
    /// Whether the call was handed to the transport (its first attempt started).
    sent: bool,
    /// The SW4-003 ids its request carried (boxed: a call without any pays a null
    /// pointer).
    ids: Option<Box<CallIds>>,
}

/// What a budget that caps the call had spent at the call's start, as its timeout
/// details report it (the record keeps these two figures, not the budget's state).
#[derive(Clone, Copy, Debug)]
struct BudgetSpent {
    /// Milliseconds, saturated at `u32::MAX` (49 days, far past any budget): two
    /// `u32`s keep the call's future within its size.
    paused_ms: u32,
    elapsed_ms: u32,
}

impl From<BudgetNow> for BudgetSpent {
    fn from(budget: BudgetNow) -> Self {
        BudgetSpent {
            paused_ms: u32::try_from(millis(budget.paused)).unwrap_or(u32::MAX),
            elapsed_ms: u32::try_from(millis(budget.ran)).unwrap_or(u32::MAX),
        }
    }
}

/// What a record is opened with besides the layer's state, the labels, the start
/// and the span.
struct Opening {
    profile: ProfileId,
    timers: CallTimers,
    streaming: bool,
    budget: Option<BudgetSpent>,
}

impl Record {
    /// The record of a call that started at `start`, open.
    #[inline(always)]
    fn new(
        shared: Arc<Shared>,
        labels: LabelsRef,
        opening: Opening,
        start: Instant,
        span: tracing::Span,
    ) -> Self {
        Record {
            shared,
            labels,
            profile: opening.profile,
            start,
            timers: opening.timers,
            streaming: opening.streaming,
            span,
            state: State::Open,
            attempts: None,
            attempt: None,
            budget: opening.budget,
            header_code: None,
            sent: false,
            cancel: None,
            request: tonic::body::Body::empty(),
            tally: None,
            ids: None,
        }
    }

    /// The SW4-003 ids the call's request carried: written onto its span, and its
    /// `correlation_id` kept for its log lines.
    #[inline(always)]
    pub(crate) fn identify(&mut self, ids: Option<Box<CallIds>>) {
        if let Some(ids) = ids {
            self.identified(ids);
        }
    }

    /// [`Record::identify`] with ids.
    #[cold]
    fn identified(&mut self, ids: Box<CallIds>) {
        ids.record_on(&self.span);
        self.ids = Some(ids);
    }

    /// The `correlation_id` of the call's request, if it had one.
    pub(super) fn correlation(&self) -> Option<&str> {
        self.ids.as_deref().and_then(CallIds::correlation)
    }

    /// The call's first attempt is being sent.
    #[inline]
    pub(crate) fn sending(&mut self) {
        self.sent = true;
        let instruments = self.shared.settings.instruments.as_ref();
        if let Some(i) = instruments.filter(|i| i.wants_tally() && self.tally.is_none()) {
            let mut tally = Box::<CallTally>::default();
            tally.started(1, self.start);
            self.tally = Some(tally);
            // In flight from its first attempt until the tally ends with the call.
            i.call_began(&self.shared.paths.get(&self.labels).attrs);
        }
    }

    /// Response headers arrived: remembers a trailers-only status for the metrics
    /// that record one.
    pub(crate) fn answered(&mut self, headers: &http::HeaderMap) {
        if self
            .shared
            .settings
            .instruments
            .as_ref()
            .is_some_and(|i| i.wants_status())
        {
            self.header_code = crate::wire::status::code_of_headers(headers);
        }
    }

    /// The deadline the call's answer came under, when the layer puts it on answers
    /// ([`crate::TimeoutProfileLayer::with_answer_deadlines`]).
    #[inline]
    pub(crate) fn answered_under(&self) -> Option<crate::Answered> {
        if !self.shared.settings.answered {
            return None;
        }
        Some(self.answer_note())
    }

    /// The deadline the call's answer came under.
    #[cold]
    fn answer_note(&self) -> crate::Answered {
        let total = self.timers.get().total.as_ref();
        crate::Answered {
            profile: self.labels().profile.clone(),
            timeout: total.map(Cap::limit),
            source: total.map(|c| c.source.clone()),
            attempts: self.attempts.map_or(1, NonZeroU32::get),
            elapsed: self.start.elapsed(),
        }
    }

    /// A retried call sends attempt `n` under `cap` (`None`: no attempt timeout
    /// shorter than the call's deadline).
    pub(crate) fn attempt(&mut self, n: u32, cap: Option<Cap>) {
        self.attempts = NonZeroU32::new(n);
        self.attempt = cap;
        if let Some(tally) = &mut self.tally {
            tally.started(n, Instant::now());
        }
    }

    /// What the call leaves behind if it ends now, having `sent` it or not
    /// (SW4-002's timeouts and cancels say it in their details).
    pub(super) fn effect(&self, seen: &Received, sent: bool) -> CallEffect {
        let messages = self.streaming.then_some(seen.messages);
        effect_of(sent, self.labels().idempotent, messages, seen.marker)
    }

    /// What metrics, logs and details say about the call's path.
    pub(super) fn labels(&self) -> &Labels {
        self.shared.paths.get(&self.labels)
    }

    /// How long the call has waited for a connection, when its client marks it.
    #[cold]
    pub(super) fn connect_wait(&self) -> Option<std::time::Duration> {
        let clock = self.shared.settings.connect_clock.as_ref()?;
        clock.waited(self.start, Instant::now())
    }

    /// The layer's retry budget, shared by its calls (`None`: retries without one).
    pub(crate) fn retry_budget(&self) -> Option<&RetryBudget> {
        self.shared.settings.retry.budget.as_ref()
    }

    pub(crate) fn is_open(&self) -> bool {
        self.state == State::Open
    }

    /// The call finished (success or a non-timeout error) with the status `code`
    /// gives (asked for only when a metric family records it).
    pub(crate) fn finish(&mut self, code: impl FnOnce() -> Code) {
        if self.state == State::Open {
            self.state = State::Ended;
            self.record(false, code);
        }
    }

    /// The call failed below the layer with `err`: ends the record, and gives the error
    /// the caller sees (a failed connect as `UNAVAILABLE` naming the endpoint, a
    /// connection lost as `UNAVAILABLE` naming the cause, as the body does).
    /// A call that sent more than one attempt says how many whatever ended it: the
    /// error becomes the `Status` tonic would have made of it, with `sw4rm-attempts`.
    pub(crate) fn failed(&mut self, err: BoxError) -> BoxError {
        self.finish(|| code_of_error(&*err));
        let settings = &self.shared.settings;
        let heard = settings.heard.as_ref().map(|h| h.get());
        let err = match unreachable(err, settings.endpoint.as_deref(), heard) {
            Ok(status) => status.into(),
            Err(err) => lost_connection(err),
        };
        if self.attempts_after_the_first().is_none() {
            return err;
        }
        let mut status = Status::from_error(err);
        self.mark_attempts(&mut status);
        status.into()
    }

    /// The attempts sent, when more than one.
    fn attempts_after_the_first(&self) -> Option<u32> {
        self.attempts.map(NonZeroU32::get).filter(|n| *n > 1)
    }

    /// Puts `sw4rm-attempts` on a final status when more than one attempt was sent, as
    /// on a final answer.
    pub(super) fn mark_attempts(&self, status: &mut Status) {
        if let Some(n) = self.attempts_after_the_first() {
            status
                .metadata_mut()
                .insert(ATTEMPTS_HEADER, tonic::metadata::MetadataValue::from(n));
        }
    }

    /// The body ended without trailers: the status was in the headers, or missing.
    fn finish_without_trailers(&mut self) {
        let code = self.header_code.unwrap_or(Code::Unknown);
        self.finish(|| code);
    }

    pub(super) fn record(&mut self, timed_out: bool, code: impl FnOnce() -> Code) {
        self.record_at(None, timed_out, code);
    }

    /// [`record`](Self::record), counting the call as lasting `counted` when given
    /// (else the time since it started, read only where a metric or an observation
    /// wants it: a call of a layer that records nothing reads no clock here).
    fn record_at(
        &mut self,
        counted: Option<std::time::Duration>,
        timed_out: bool,
        code: impl FnOnce() -> Code,
    ) {
        if let Some(mut tally) = self.tally.take() {
            let code = if timed_out {
                Code::DeadlineExceeded
            } else {
                code()
            };
            if let Some(instruments) = &self.shared.settings.instruments {
                if instruments.wants_connect_wait() {
                    tally.connecting = self.connect_wait().unwrap_or_default();
                }
                instruments.tally_ended(&mut tally, code, &self.labels().attrs);
            }
            return self.record_ended(counted, timed_out, || code);
        }
        self.record_ended(counted, timed_out, code)
    }

    /// Records the end of the call: its duration (and timeout) and what it observed,
    /// counting it as lasting `counted` when given (else the time since it started,
    /// read only where a metric or an observation wants it: a call of a layer that
    /// records nothing reads no clock here).
    fn record_ended(
        &self,
        counted: Option<std::time::Duration>,
        timed_out: bool,
        code: impl FnOnce() -> Code,
    ) {
        // The status, asked for once whoever asks first: the span (when it records)
        // and the metrics read the same one.
        #[cfg(feature = "otel")]
        let mut code = {
            let (mut code, mut known) = (Some(code), None);
            let mut once =
                move || *known.get_or_insert_with(|| code.take().map_or(Code::Unknown, |f| f()));
            span_status(&self.span, self.attempts, timed_out, &mut once);
            once
        };
        let elapsed = || counted.unwrap_or_else(|| self.start.elapsed());
        let instruments = self.shared.settings.instruments.as_ref();
        let attrs = || &self.shared.paths.get(&self.labels).attrs;
        // Unary calls only: a stream's duration is not what its timers bound.
        let Some(observed) = self.shared.observed.as_ref().filter(|_| !self.streaming) else {
            if let Some(instruments) = instruments {
                instruments.record(elapsed(), timed_out, code, attrs());
            }
            return;
        };
        let elapsed = elapsed();
        let code = if timed_out {
            Code::DeadlineExceeded
        } else {
            code()
        };
        observed.record(self.labels.slot(), elapsed, timed_out, code == Code::Ok);
        if let Some(instruments) = instruments {
            instruments.record(elapsed, timed_out, || code, attrs());
        }
    }
}

/// The call's final status on its span, as OpenTelemetry's RPC conventions name it:
/// `rpc.response.status_code`, and on failure `error.type` and an error status
/// (nothing to do for a span no one records).
#[cfg(feature = "otel")]
fn span_status(
    span: &tracing::Span,
    attempts: Option<NonZeroU32>,
    timed_out: bool,
    code: &mut impl FnMut() -> Code,
) {
    if span.is_disabled() {
        return;
    }
    if let Some(n) = attempts {
        record_late(span, Late::Attempts, n.get());
    }
    let code = if timed_out {
        Code::DeadlineExceeded
    } else {
        code()
    };
    let name = crate::wire::status::code_name(code);
    record_late(span, Late::StatusCode, name);
    if code != Code::Ok {
        record_late(span, Late::ErrorType, name);
        record_late(span, Late::OtelStatus, "ERROR");
    }
}

impl Drop for Record {
    /// A call the caller abandoned still counts in the duration histogram (as
    /// `CANCELLED` where the status is recorded), and as a cancel by its cause when
    /// its scope was cancelled. A trailers-only answer ends here
    /// too: tonic reads its status from the headers and drops the empty body.
    fn drop(&mut self) {
        // Ended already (as every answered call is): nothing left to count.
        if self.state != State::Open {
            return;
        }
        if self.header_code.is_none() && self.dropped_by_cancel() {
            return;
        }
        let code = self.header_code.unwrap_or(Code::Cancelled);
        self.finish(|| code);
    }
}
