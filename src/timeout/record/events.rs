//! What the call record does with what the attempt engine and the response body
//! report: each [`Event`] counted (where a metric family counts it) and logged in the
//! call's span, the answer's end recorded, each [`CallEnd`] turned into the error the
//! caller gets (`super` builds the timeout status and ends the record once).

use tokio::time::Instant;

use super::Record;
use crate::attempts::{CallEnd, Event, RetryBudget, Sink};
use crate::policy::cancel::CancelReason;
use crate::policy::streaming::millis;
#[cfg(feature = "otel")]
use crate::timeout::span::{record_late, Late};
use crate::wire::error::BoxError;

impl Record {
    /// Counts one retry and logs it.
    fn retried(
        &mut self,
        attempt: u32,
        backoff: std::time::Duration,
        reason: &str,
        status: tonic::Code,
    ) {
        if let Some(instruments) = &self.shared.settings.instruments {
            instruments.retried(&self.labels().attrs);
            let ended = self
                .tally
                .as_mut()
                .and_then(|tally| tally.retried(reason == "not_sent", backoff, Instant::now()));
            if let Some(took) = ended {
                instruments.attempt_ended(took, status, &self.labels().attrs);
            }
        }
        logged!(
            self,
            info,
            attempt,
            backoff_ms = millis(backoff),
            reason,
            "SW4RM retrying the call"
        );
    }

    /// Counts hedge `attempt` and logs it (INFO): sent after `delay` without an
    /// answer, or at once after a non-fatal one.
    fn hedged(&mut self, attempt: u32, delay: Option<std::time::Duration>) {
        if let Some(tally) = &mut self.tally {
            tally.hedged();
        }
        self.attempt(attempt, None);
        if let Some(instruments) = &self.shared.settings.instruments {
            instruments.hedged(&self.labels().attrs);
        }
        #[cfg(feature = "otel")]
        record_late(&self.span, Late::Hedges, attempt.saturating_sub(1));
        logged!(
            self,
            info,
            attempt,
            delay_ms = delay.map(millis),
            reason = if delay.is_some() {
                "delay"
            } else {
                "non_fatal"
            },
            "SW4RM hedging the call"
        );
    }

    /// Attempt `attempt` of a hedged call ended non-fatally with `status` while the
    /// call goes on: its end is recorded now, with its own status.
    fn hedge_ended(&mut self, attempt: u32, status: tonic::Code) {
        let Some(instruments) = &self.shared.settings.instruments else {
            return;
        };
        let took = self
            .tally
            .as_mut()
            .and_then(|tally| tally.attempt_ended(attempt, Instant::now()));
        if let Some(took) = took {
            instruments.attempt_ended(took, status, &self.labels().attrs);
        }
    }

    /// Hedge `attempt` (from 2) answered first: counts the win.
    fn hedge_won(&mut self, attempt: u32) {
        if let Some(tally) = &mut self.tally {
            tally.won(attempt);
        }
        if let Some(instruments) = &self.shared.settings.instruments {
            instruments.hedge_won(&self.labels().attrs);
        }
        logged!(self, debug, attempt, "SW4RM hedge answered first");
    }

    /// Logs why no further hedge was sent after `attempts`.
    fn not_hedged(&self, attempts: u32, reason: &str) {
        logged!(
            self,
            debug,
            attempts,
            reason,
            "SW4RM sending no further hedge"
        );
    }

    /// Logs why a failed attempt was not retried.
    fn not_retried(&self, attempt: u32, reason: &str) {
        logged!(self, debug, attempt, reason, "SW4RM not retrying the call");
    }
}

/// The engine and the body report to the record: each event counted and logged, each
/// ending turned into the error the caller gets.
impl Sink for Record {
    #[inline]
    fn on(&mut self, event: Event) {
        match event {
            Event::Attempt { attempt, cap } => self.attempt(attempt, cap),
            Event::Retried {
                attempt,
                backoff,
                reason,
                status,
            } => self.retried(attempt, backoff, reason, status),
            Event::NotRetried { attempt, reason } => self.not_retried(attempt, reason),
            Event::Hedged { attempt, delay } => self.hedged(attempt, delay),
            Event::HedgeWon { attempt } => self.hedge_won(attempt),
            Event::NotHedged { attempts, reason } => self.not_hedged(attempts, reason),
            Event::HedgeEnded { attempt, status } => self.hedge_ended(attempt, status),
            Event::Finished { code: Some(code) } => self.finish(|| code),
            Event::Finished { code: None } => self.finish_without_trailers(),
        }
    }

    #[inline]
    fn end(&mut self, end: CallEnd) -> BoxError {
        match end {
            CallEnd::TimedOut {
                phase,
                detected_by,
                seen,
            } => self.timed_out(phase, &seen, detected_by).into(),
            CallEnd::TransportCapped => self.transport_capped().into(),
            CallEnd::Failed(err) => self.failed(err),
            CallEnd::Cancelled { reason, seen } => self.cancelled(reason, &seen).into(),
        }
    }

    #[inline]
    fn poll_cancel(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<CancelReason> {
        Record::poll_cancel(self, cx)
    }

    #[inline]
    fn retry_budget(&self) -> Option<&RetryBudget> {
        Record::retry_budget(self)
    }

    #[inline]
    fn deadlines(&self) -> crate::attempts::Deadlines {
        Record::deadlines(self)
    }
}
