//! What the attempt engine and the response body report, and to whom: one [`Event`]
//! type for what happens to a call's attempts and for its end with an answer, one
//! [`CallEnd`] for how the call fails, and the [`Sink`] that receives both. The engine
//! decides; the sink (the layer's call record, `timeout/record/`) turns what it is
//! told into metrics, logs and the timeout details, the way tower-http's `on_*`
//! callbacks keep tracing out of its services.
//! The engine never imports the layer: it knows the sink only by this trait.

use std::time::Duration;

use tokio::time::Instant;

use super::retry_budget::RetryBudget;
use crate::policy::cancel::CancelReason;
use crate::policy::deadline::{Cap, Due, Phase, Received};
use crate::wire::details::DetectedBy;
use crate::wire::error::BoxError;

/// What happened to a call's attempts, and how its answer ended.
#[derive(Debug)]
pub(crate) enum Event {
    /// Attempt `attempt` (from 1) is sent under `cap` (`None`: no attempt timeout
    /// shorter than the call's deadline).
    Attempt { attempt: u32, cap: Option<Cap> },
    /// A retry was decided: attempt `attempt` follows after `backoff`; the attempt
    /// before it ended with `status` (`reason` says why it may be retried).
    Retried {
        attempt: u32,
        backoff: Duration,
        reason: &'static str,
        status: tonic::Code,
    },
    /// The failure of attempt `attempt` is the call's answer.
    NotRetried { attempt: u32, reason: &'static str },
    /// Hedge `attempt` was sent: after `delay` without an answer, or at once after a
    /// non-fatal one (`None`).
    Hedged {
        attempt: u32,
        delay: Option<Duration>,
    },
    /// Hedge `attempt` (from 2) answered first.
    HedgeWon { attempt: u32 },
    /// No further hedge is sent after `attempts`.
    NotHedged { attempts: u32, reason: &'static str },
    /// Attempt `attempt` of a hedged call ended with `status`, a non-fatal one, and
    /// the call goes on with the others.
    HedgeEnded { attempt: u32, status: tonic::Code },
    /// The response body ended with the call's answer (reported by the body, after
    /// the engine is done): its trailers' status or the transport's error, `code`, or
    /// (`None`) no trailers, the status being in the response headers if anywhere.
    Finished { code: Option<tonic::Code> },
}

/// How a call fails; the sink ends the call's record and gives the error the caller
/// sees.
#[derive(Debug)]
pub(crate) enum CallEnd {
    /// A deadline of the call passed in `phase`, noticed by `detected_by`, after the
    /// call had received `seen` (nothing, before its response headers).
    TimedOut {
        phase: Phase,
        detected_by: DetectedBy,
        seen: Received,
    },
    /// tonic's transport timer fired before any deadline of the call's: a shorter
    /// deadline below the layer.
    TransportCapped,
    /// The inner service failed with this error.
    Failed(BoxError),
    /// The scope the call was made in was cancelled while it waited, after the call
    /// had received `seen`.
    Cancelled {
        reason: CancelReason,
        seen: Received,
    },
}

/// Where the engine reports what happens to the call. Besides events and the call's
/// end it is asked two things the engine cannot hold itself: whether the scope the
/// call was made in was cancelled (a signal the record watches), and the layer's
/// retry budget (shared by its calls).
pub(crate) trait Sink {
    /// Something happened to the call's attempts.
    fn on(&mut self, event: Event);

    /// The call fails: the error its caller gets.
    fn end(&mut self, end: CallEnd) -> BoxError;

    /// Ready with the reason once the scope the call was made in is cancelled (never,
    /// for a call made outside a scope with a cancel signal).
    fn poll_cancel(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<CancelReason>;

    /// The layer's retry budget, shared by its calls (`None`: retries without one).
    fn retry_budget(&self) -> Option<&RetryBudget>;

    /// The call's deadlines as values, asked only when an instant is needed (a call
    /// answered at once never asks).
    fn deadlines(&self) -> Deadlines;
}

/// The call's deadlines as values: the plan's caps, from the call's start. The engine
/// asks the sink for them, and places them on the clock, only when it needs an
/// instant (a call answered at once never does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadlines {
    /// When the call started.
    pub(crate) start: Instant,
    /// The call's own deadline, from its start: its total timer, if any.
    pub(crate) total: Option<Duration>,
    /// The call's first timer to fire while it waits for its answer (no message has
    /// arrived yet), from its start: a stream's initial timer or the call's total.
    pub(crate) first: Option<Due>,
    /// The phase to report when the server says the call's deadline passed.
    pub(crate) server_phase: Phase,
}

/// The call as the engine runs it: where it reports, and where its deadlines are.
pub(crate) struct Run<'a, R> {
    sink: &'a mut R,
}

impl<'a, R: Sink> Run<'a, R> {
    /// The call reporting to `sink`, under the deadlines it holds.
    #[inline(always)]
    pub(crate) fn new(sink: &'a mut R) -> Self {
        Run { sink }
    }

    /// Reports `event`.
    #[inline(always)]
    pub(crate) fn on(&mut self, event: Event) {
        self.sink.on(event);
    }

    /// Ends the call: the error its caller gets.
    #[inline(always)]
    pub(crate) fn end(&mut self, end: CallEnd) -> BoxError {
        self.sink.end(end)
    }

    /// See [`Sink::poll_cancel`].
    #[inline(always)]
    pub(crate) fn poll_cancel(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<CancelReason> {
        self.sink.poll_cancel(cx)
    }

    /// See [`Sink::retry_budget`].
    #[inline(always)]
    pub(crate) fn retry_budget(&self) -> Option<&RetryBudget> {
        self.sink.retry_budget()
    }

    /// The call's own deadline (`None` also when it is too far to be an instant).
    #[inline]
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let Deadlines { start, total, .. } = self.sink.deadlines();
        start.checked_add(total?)
    }

    /// The call's first timer to fire while it waits for its answer.
    #[inline]
    pub(crate) fn first_due(&self) -> Option<Due<Instant>> {
        let Deadlines { start, first, .. } = self.sink.deadlines();
        first.map(|due| due.map(|after| start + after))
    }

    /// The phase to report when the server says the call's deadline passed.
    #[inline(always)]
    pub(crate) fn server_phase(&self) -> Phase {
        self.sink.deadlines().server_phase
    }
}
