//! [`Outcome`]: how a piece of long work ended ([`Ending`]), what it produced so far,
//! and the status a handler answers with: `DEADLINE_EXCEEDED` with the details our
//! caller decodes for the idle limit and the cap, `CANCELLED` only when the caller
//! went away.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;

use super::work_state::WorkState;
use crate::policy::deadline::Phase;
use crate::policy::effect::CallEffect;
use crate::policy::route::{split_path, STANDARD_ROUTES};
use crate::policy::source::Source;
use crate::policy::streaming::millis;
use crate::wire::details::{DetectedBy, TimeoutDetails};
use crate::wire::long_work::LongWorkDetails;

/// How a piece of long work ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ending<R> {
    /// The work finished with this value.
    Finished(R),
    /// No progress for the idle limit: the work's future was dropped.
    Idle,
    /// The cap (or the inbound deadline, when smaller) passed: the work's future was
    /// dropped.
    Capped,
    /// The caller went away (reset the call, or the connection closed): the work's
    /// future was dropped. Told to [`LongWork::run_or_tell`](super::LongWork::run_or_tell).
    CallerGone,
    /// The guard was dropped for another reason (the handler stopped awaiting it):
    /// the work's future was dropped. Told to [`LongWork::run_or_tell`](super::LongWork::run_or_tell).
    Dropped,
}

/// What became of a piece of long work: how it ended, what it produced so far, and
/// how far it had come.
#[derive(Debug)]
pub struct Outcome<R, T> {
    ending: Ending<R>,
    produced: Vec<T>,
    limits: Limits,
    progress_count: u64,
    marker: Option<u64>,
    elapsed: Duration,
    since_progress: Duration,
    messages: Option<u64>,
    /// Items sent on as they came (under `LongWork::stream`), not kept.
    sent: u64,
    rpc: Arc<str>,
    /// It finished after its wrap-up notice.
    wrapped_up: bool,
}

/// The limits the work ran under, with where the cap came from.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    pub(super) idle: Option<Duration>,
    pub(super) cap: Option<(Duration, CapFrom)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CapFrom {
    Guard,
    Inbound,
}

/// The outcome of work that ended with `ending` having `produced` this (what was
/// kept of it), as far as `state` tells.
pub(super) fn outcome<R, T>(
    ending: Ending<R>,
    state: &WorkState,
    produced: Vec<T>,
    limits: Limits,
    rpc: Arc<str>,
) -> Outcome<R, T> {
    let now = Instant::now();
    Outcome {
        ending,
        produced,
        limits,
        progress_count: state.count(),
        marker: state.marker(),
        elapsed: now.saturating_duration_since(state.start()),
        since_progress: now.saturating_duration_since(state.last()),
        messages: None,
        sent: 0,
        rpc,
        wrapped_up: false,
    }
}

impl<R, T> Outcome<R, T> {
    /// How the work ended.
    pub fn ending(&self) -> &Ending<R> {
        &self.ending
    }

    /// What the work produced (pushed to its [`Output`](super::Output)) before it
    /// ended and the guard kept: under [`LongWork::run`](super::LongWork::run) every
    /// item; under [`LongWork::stream`](super::LongWork::stream) none, as each item
    /// went out as a stream message when it was pushed (see
    /// [`produced_count`](Self::produced_count)).
    pub fn produced(&self) -> &[T] {
        &self.produced
    }

    /// How many items the work produced, kept or already sent: the same count under
    /// [`LongWork::run`](super::LongWork::run) and
    /// [`LongWork::stream`](super::LongWork::stream).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use sw4rm_timeouts::scope::LongWork;
    /// let outcome = LongWork::new().run(|out| async move { out.push(1); out.push(2) }).await;
    /// assert_eq!((outcome.produced().len(), outcome.produced_count()), (2, 2));
    /// # }
    /// ```
    pub fn produced_count(&self) -> u64 {
        (self.produced.len() as u64).saturating_add(self.sent)
    }

    /// [`Partial::TimeBudget`](crate::wire::partial::Partial::TimeBudget) when the work finished after
    /// it was told to wrap up ([`LongWork::wrap_up`](super::LongWork::wrap_up)): its
    /// answer is what it had then; mark it with [`Partial::mark`](crate::wire::partial::Partial::mark) so the caller
    /// can tell.
    pub fn partial(&self) -> Option<crate::wire::partial::Partial> {
        self.wrapped_up
            .then_some(crate::wire::partial::Partial::TimeBudget)
    }

    pub(crate) fn with_wrapped_up(mut self, wrapped_up: bool) -> Self {
        self.wrapped_up = wrapped_up;
        self
    }

    pub(crate) fn with_sent(mut self, sent: u64) -> Self {
        self.sent = sent;
        self
    }

    /// How it ended and what it produced, taken apart.
    pub fn into_parts(self) -> (Ending<R>, Vec<T>) {
        (self.ending, self.produced)
    }

    /// Progress reports made.
    pub fn progress_count(&self) -> u64 {
        self.progress_count
    }

    /// The last progress marker reported.
    pub fn progress_marker(&self) -> Option<u64> {
        self.marker
    }

    pub(crate) fn with_messages(mut self, n: u64) -> Self {
        self.messages = Some(n);
        self
    }

    /// What the caller may know of the work the guard stopped: a stream that
    /// delivered messages ended after them (resume from there); otherwise the work
    /// was stopped, with what it had produced and its last marker.
    fn effect(&self) -> CallEffect {
        match self.messages {
            Some(messages) if messages > 0 => CallEffect::StreamEnded {
                messages,
                progress_marker: self.marker,
            },
            _ => CallEffect::WorkStopped {
                results: self.produced_count(),
                progress_marker: self.marker,
            },
        }
    }

    /// The status to answer when the work did not finish: `DEADLINE_EXCEEDED` with
    /// [`TimeoutDetails`] (phase [`Phase::Idle`] or [`Phase::Total`], the idle limit
    /// and the cap, the progress made; the RPC named by [`LongWork::for_rpc`](super::LongWork::for_rpc)) for the
    /// idle limit and the cap; `CANCELLED` only when the caller really went away;
    /// `None` when it finished.
    pub fn status(&self) -> Option<Status> {
        let path = &*self.rpc;
        let phase = match self.ending {
            Ending::Finished(_) => return None,
            Ending::Idle => Phase::Idle,
            Ending::Capped => Phase::Total,
            Ending::CallerGone => {
                return Some(Status::cancelled(
                    "the caller went away before the long work ended",
                ))
            }
            Ending::Dropped => {
                return Some(Status::aborted("the long work was stopped by its handler"))
            }
        };
        let (service, method) = split_path(path).unwrap_or(("", ""));
        let profile = STANDARD_ROUTES
            .iter()
            .find(|r| r.path == path)
            .map_or("", |r| r.profile);
        let cap = self.limits.cap;
        // The guard's own limits are the server's setting, not the caller's.
        let (configured, source) = match phase {
            Phase::Idle => (self.limits.idle.unwrap_or_default(), Source::Server),
            _ => match cap {
                Some((c, CapFrom::Inbound)) => (c, Source::Inherited),
                Some((c, CapFrom::Guard)) => (c, Source::Server),
                None => (Duration::ZERO, Source::Server),
            },
        };
        let details = TimeoutDetails {
            profile_name: profile.to_owned(),
            configured_timeout_ms: millis(configured),
            elapsed_ms: millis(self.elapsed),
            service: service.to_owned(),
            method: method.to_owned(),
            source,
            phase,
            message_count: self.messages,
            detected_by: DetectedBy::Server,
            attempts: None,
            attempt_timeout_ms: None,
            budget_paused_ms: None,
            connect_wait_ms: None,
            budget_elapsed_ms: None,
            long_work: Some(LongWorkDetails {
                idle_limit_ms: self.limits.idle.map_or(0, millis),
                cap_ms: cap.map(|(c, _)| millis(c)),
                progress_count: self.progress_count,
                since_progress_ms: millis(self.since_progress),
                progress_marker: self.marker,
            }),
            effect: Some(self.effect()),
        };
        Some(details.to_status())
    }
}
