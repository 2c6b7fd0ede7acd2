//! How a call its scope cancelled ends its record: `CANCELLED` with
//! [`CancelDetails`], unless a deadline passed first (the earlier of the two, the
//! cancel dated when it was made, decides), counted by its cause.

use tokio::time::Instant;
use tonic::{Code, Status};

use super::{Record, State};
use crate::policy::cancel::CancelReason;
use crate::policy::deadline::{Phase, Received};
use crate::policy::streaming::millis;
use crate::scope::Watch;
use crate::wire::cancel::CancelDetails;
use crate::wire::details::DetectedBy;

impl Record {
    /// The call was cancelled by its scope after it was sent: ends the record and
    /// gives the status (the caller drops the call, and hyper resets the stream).
    #[cold]
    pub(in crate::timeout) fn cancelled(
        &mut self,
        reason: CancelReason,
        seen: &Received,
    ) -> Status {
        self.end_cancelled(reason, seen, true)
    }

    /// The call was made in a scope already cancelled: not sent.
    #[cold]
    pub(crate) fn not_sent(&mut self, reason: CancelReason) -> Status {
        self.end_cancelled(reason, &Received::default(), false)
    }

    #[cold]
    fn end_cancelled(&mut self, reason: CancelReason, seen: &Received, sent: bool) -> Status {
        if reason.is_deadline() {
            return self.timed_out(Phase::Total, seen, DetectedBy::Client);
        }
        // The earlier of the cancel and the deadline decides: on a busy runtime the
        // call's task can first run after both, so the cancel is dated when it was
        // made, not when the task saw it.
        let cancelled_at = self.cancel.as_ref().and_then(Watch::cancelled_at);
        let at = cancelled_at.unwrap_or_else(Instant::now);
        if let Some(due) = self.next_due(*seen).filter(|d| d.at <= at) {
            return self.timed_out(due.phase, seen, DetectedBy::Client);
        }
        let elapsed_ms = millis(self.start.elapsed());
        self.end_record(reason, elapsed_ms, sent);
        let profile = self.shared.profiles.by_id(self.profile);
        let labels = self.labels();
        let details = CancelDetails {
            reason,
            profile_name: profile.profile.name.to_string(),
            service: labels.service.to_string(),
            method: labels.method.to_string(),
            elapsed_ms,
            sent,
            effect: Some(self.effect(seen, sent)),
        };
        let mut status = details.to_status();
        self.mark_attempts(&mut status);
        status
    }

    /// Ends the record of a cancelled call, once: the duration (as `CANCELLED`), the
    /// cancel counter by cause, and an INFO event.
    #[cold]
    pub(super) fn end_record(&mut self, reason: CancelReason, elapsed_ms: u64, sent: bool) {
        if self.state != State::Open {
            return;
        }
        self.state = State::Ended;
        self.record(false, || Code::Cancelled);
        if let Some(instruments) = &self.shared.settings.instruments {
            instruments.cancelled(reason, &self.labels().attrs);
        }
        let labels = self.labels();
        let profile = &self.shared.profiles.by_id(self.profile).profile.name;
        call_event!(
            info,
            self.span,
            self.correlation(),
            (labels.service, labels.method, profile),
            elapsed_ms,
            cancel_reason = reason.as_str(),
            sent,
            "SW4RM RPC cancelled by its scope"
        );
    }
}
