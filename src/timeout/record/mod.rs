//! The record of one call in flight. It moves from the response future into the
//! response body and emits its end event (duration metric, and for a timeout the
//! counter, the `warn!` and the status) exactly once: when the call finishes, times
//! out, or is dropped by the caller.
//!
//! The record also watches for the caller's cancels (the last part of this file): the
//! cancel signal of the scope the call was made in, and tonic's cancellation handle.
//! How a call ends when it timed out is in `timed_out.rs`, when its scope cancelled it
//! in `cancelled.rs`.
//!
//! A lean call (`lean.rs`) keeps a smaller record while its first attempt is all there
//! is to it, records its end the same way ([`Closing`]), and opens this one when that
//! attempt does not simply answer it.

/// Logs one of the call's events in its span (`call_event!`), naming the call by the
/// record's labels.
macro_rules! logged {
    ($record:expr, $level:ident, $($rest:tt)+) => {{
        let labels = $record.labels();
        call_event!($level, $record.span, (labels.service, labels.method), $($rest)+)
    }};
}

mod boxed;
mod cancelled;
mod events;
mod lean;
mod timed_out;

pub(crate) use boxed::CallRecord;
pub(crate) use lean::{Alarm, LeanCall};

use std::num::NonZeroU32;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::time::Instant;
use tonic::{Code, Status};

use super::state::shared::Shared;
use super::state::{Labels, LabelsRef};
use crate::attempts::{RetryBudget, ATTEMPTS_HEADER};
use crate::observe::metrics::{CallTally, Instruments};
use crate::policy::cancel::CancelReason;
use crate::policy::deadline::{Cap, Due, Progress, Timers};
use crate::policy::effect::{effect_of, CallEffect};
use crate::policy::route::ProfileId;
use crate::policy::streaming::millis;
use crate::scope::{BudgetNow, CancelSignal, Watch};

use crate::wire::error::BoxError;
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
    timers: Timers,
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

/// A call as its end is recorded: by its record, or by the lean record of a call
/// answered at its first attempt (`lean.rs`).
pub(super) struct Closing<'a> {
    pub(super) shared: &'a Shared,
    pub(super) labels: &'a LabelsRef,
    pub(super) start: Instant,
    pub(super) streaming: bool,
}

impl Closing<'_> {
    /// Records the end of the call: its duration (and timeout) and what it observed,
    /// counting it as lasting `counted` when given (else the time since it started,
    /// read only where a metric or an observation wants it: a call of a layer that
    /// records nothing reads no clock here).
    pub(super) fn record(
        &self,
        counted: Option<std::time::Duration>,
        timed_out: bool,
        code: impl FnOnce() -> Code,
    ) {
        let elapsed = || counted.unwrap_or_else(|| self.start.elapsed());
        let instruments = self.shared.settings.instruments.as_ref();
        let attrs = || &self.shared.paths.get(self.labels).attrs;
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

impl Record {
    /// The call's first attempt is being sent.
    #[inline]
    pub(crate) fn sending(&mut self) {
        self.sent = true;
        let instruments = self.shared.settings.instruments.as_ref();
        if instruments.is_some_and(Instruments::wants_tally) {
            let mut tally = Box::<CallTally>::default();
            tally.started(1, self.start);
            self.tally = Some(tally);
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
    pub(super) fn effect(&self, seen: &Progress, sent: bool) -> CallEffect {
        let messages = self.streaming.then_some(seen.messages);
        effect_of(sent, self.labels().idempotent, messages, seen.marker)
    }

    /// What metrics, logs and details say about the call's path.
    pub(super) fn labels(&self) -> &Labels {
        self.shared.paths.get(&self.labels)
    }

    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    /// The layer's retry budget, shared by its calls (`None`: retries without one).
    pub(crate) fn retry_budget(&self) -> Option<&RetryBudget> {
        self.shared.settings.retry.budget.as_ref()
    }

    /// The call's `sw4rm_rpc` span when its level is on. A step of the call is run
    /// inside it, so that events of the transport and of the caller's code while the
    /// call is polled are correlated to it (as tower-http's trace body does); when it
    /// is off (the common case), the step runs with no guard made or dropped.
    #[inline(always)]
    pub(crate) fn enabled_span(&self) -> Option<&tracing::Span> {
        (!self.span.is_disabled()).then_some(&self.span)
    }

    /// Runs `f` with the record inside the call's span ([`Record::enabled_span`]; an
    /// enabled span is cloned for the guard, as the record is lent to the step).
    #[inline(always)]
    pub(crate) fn in_span_mut<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        if self.span.is_disabled() {
            return f(self);
        }
        let _entered = self.span.clone().entered();
        f(self)
    }

    pub(crate) fn streaming(&self) -> bool {
        self.streaming
    }

    /// Which messages are progress (`None`: every message).
    pub(crate) fn progress_rule(&self) -> Option<&crate::policy::progress::ProgressRule> {
        self.timers.progress_rule()
    }

    pub(crate) fn is_open(&self) -> bool {
        self.state == State::Open
    }

    /// The next timer to fire, placed on the clock.
    pub(crate) fn next_due(&self, progress: Progress) -> Option<Due<Instant>> {
        let start = self.start;
        self.timers
            .next(progress)
            .map(|due| due.map(|after| start + after))
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
                instruments.tally_ended(&mut tally, code, &self.labels().attrs);
            }
            return self.record_ended(counted, timed_out, || code);
        }
        self.record_ended(counted, timed_out, code)
    }

    /// Records the end of the call: its duration (and timeout) and what it observed.
    fn record_ended(
        &self,
        counted: Option<std::time::Duration>,
        timed_out: bool,
        code: impl FnOnce() -> Code,
    ) {
        let call = Closing {
            shared: &self.shared,
            labels: &self.labels,
            start: self.start,
            streaming: self.streaming,
        };
        call.record(counted, timed_out, code);
    }
}

// The caller's cancels.
//
// What the call record does when the scope the call was made in is cancelled: it
// watches the scope's signal while the call waits, and ends the call with
// `CANCELLED` and [`CancelDetails`] naming where the cancel came from — or with
// `DEADLINE_EXCEEDED` when the cause is a deadline that passed (a timeout is never
// reported as a cancel, nor the reverse).
impl Record {
    /// Watches `signal`, the cancel signal of the scope the call was made in.
    pub(crate) fn watch_cancel(&mut self, signal: Arc<CancelSignal>) {
        self.cancel = Some(Watch::new(signal));
    }

    /// Ready with the reason once the call's scope is cancelled, or the caller
    /// cancelled the call with tonic's `Request::cancellation_handle()`; registers the
    /// waiter on the first poll that has to wait.
    #[inline]
    pub(crate) fn poll_cancel(&mut self, cx: &mut Context<'_>) -> Poll<CancelReason> {
        if let Some(watch) = &mut self.cancel {
            if let Poll::Ready(reason) = watch.poll(cx) {
                return Poll::Ready(reason);
            }
        }
        if http_body::Body::is_end_stream(&self.request) {
            return Poll::Pending;
        }
        self.poll_request_cancel(cx)
    }

    /// Where the layer puts the request body it took whole (to learn of tonic's
    /// cancel, which only fails that body).
    pub(crate) fn request_watch(&mut self) -> &mut tonic::body::Body {
        &mut self.request
    }

    /// Polls the request body tonic made ([`poll_request_cancel`]).
    #[inline(never)]
    fn poll_request_cancel(&mut self, cx: &mut Context<'_>) -> Poll<CancelReason> {
        poll_request_cancel(&mut self.request, cx)
    }

    /// The call is dropped unanswered: when its scope was cancelled (not by a
    /// deadline), the drop is that cancel (the handler holding the call was dropped
    /// with it) and is counted as one; `false` otherwise.
    pub(super) fn dropped_by_cancel(&mut self) -> bool {
        let reason = self.cancel.as_ref().and_then(Watch::reason);
        match reason.filter(|r| !r.is_deadline()) {
            Some(reason) if self.state == State::Open => {
                let elapsed_ms = millis(self.start.elapsed());
                self.end_record(reason, elapsed_ms, true);
                true
            }
            _ => false,
        }
    }
}

/// Polls `request`, the request body tonic made: it fails with `CANCELLED` once the
/// caller cancels with `Request::cancellation_handle()`. Once it has said anything
/// else, or the cancel, it is emptied: nothing more to learn from it.
pub(super) fn poll_request_cancel(
    request: &mut tonic::body::Body,
    cx: &mut Context<'_>,
) -> Poll<CancelReason> {
    use http_body::Body;
    match std::pin::Pin::new(&mut *request).poll_frame(cx) {
        Poll::Ready(Some(Err(status))) if status.code() == Code::Cancelled => {
            *request = tonic::body::Body::empty();
            Poll::Ready(CancelReason::CallCancelled)
        }
        // Anything else from a body already read: nothing more to learn from it.
        Poll::Ready(Some(_)) => {
            *request = tonic::body::Body::empty();
            Poll::Pending
        }
        Poll::Ready(None) | Poll::Pending => Poll::Pending,
    }
}

impl Drop for Record {
    /// A call the caller abandoned still counts in the duration histogram (as
    /// `CANCELLED` where the status is recorded), and as a cancel by its cause when
    /// its scope was cancelled. A trailers-only answer ends here
    /// too: tonic reads its status from the headers and drops the empty body.
    fn drop(&mut self) {
        if self.header_code.is_none() && self.dropped_by_cancel() {
            return;
        }
        let code = self.header_code.unwrap_or(Code::Cancelled);
        self.finish(|| code);
    }
}
