//! How a call that timed out ends its record: the configured value and where it came
//! from, the details, the count, the `warn!` and the status, once; and a transport
//! timer shorter than every profile, said once per layer.

use std::num::NonZeroU32;
use std::sync::atomic::Ordering;

use tonic::{Code, Status};

use super::{Record, State};
use crate::policy::deadline::{Cap, Phase, Received};
use crate::policy::source::Source;
use crate::policy::streaming::millis;
#[cfg(feature = "otel")]
use crate::timeout::span::{record_late, Late};
use crate::wire::details::{DetectedBy, TimeoutDetails};
use crate::wire::long_work::LongWorkDetails;

impl Record {
    /// The cap whose end is `phase`.
    #[cold]
    fn cap(&self, phase: Phase) -> Option<&Cap> {
        match phase {
            Phase::Initial => self.timers().initial(),
            Phase::Gap => self.timers().gap(),
            Phase::Total => self.timers().total.as_ref(),
            Phase::Idle => self.timers().idle_limit(),
            Phase::Attempt => self.attempt.as_ref(),
        }
    }

    /// The call timed out in `phase`: counts it, logs it and builds the status, once.
    #[cold]
    pub(crate) fn timed_out(
        &mut self,
        phase: Phase,
        seen: &Received,
        detected_by: DetectedBy,
    ) -> Status {
        let profile = self.shared.profiles.by_id(self.profile);
        let (configured, source) = match self.cap(phase) {
            Some(cap) => (cap.limit(), cap.source.clone()),
            None => (Default::default(), profile.default_source().clone()),
        };
        let elapsed = self.start.elapsed();
        self.end_with(phase, configured, elapsed, source, seen, detected_by)
    }

    /// tonic's transport timer fired before any deadline of ours: a shorter deadline
    /// set below the layer (`Endpoint::timeout`, or a `grpc-timeout` written under
    /// it). Reported as what it is, with the time it fired, and warned about once
    /// per layer: it caps every profile.
    #[cold]
    pub(crate) fn transport_capped(&mut self) -> Status {
        let elapsed = self.start.elapsed();
        if !self.shared.transport_warned.swap(true, Ordering::Relaxed) {
            logged!(
                self,
                warn,
                elapsed_ms = millis(elapsed),
                "SW4RM call ended by a transport timeout shorter than its profile: \
                 tonic's Endpoint::timeout (or a grpc-timeout set below the layer) \
                 caps every profile; leave it unset and let the profiles decide"
            );
        }
        // What fired is known only by when: the configured value is that instant.
        self.end_with(
            Phase::Total,
            elapsed,
            elapsed,
            Source::Transport,
            &Received::default(),
            DetectedBy::Transport,
        )
    }

    #[cold]
    fn end_with(
        &mut self,
        phase: Phase,
        configured: std::time::Duration,
        elapsed: std::time::Duration,
        source: Source,
        seen: &Received,
        detected_by: DetectedBy,
    ) -> Status {
        let profile = self.shared.profiles.by_id(self.profile);
        let long_work = self
            .timers()
            .idle_limit()
            .map(|idle| LongWorkDetails {
                idle_limit_ms: millis(idle.limit()),
                cap_ms: self.timers().total.as_ref().map(|c| millis(c.limit())),
                progress_count: seen.progress,
                since_progress_ms: millis(
                    elapsed.saturating_sub(seen.last_progress.unwrap_or_default()),
                ),
                progress_marker: seen.marker,
            })
            .filter(|_| self.streaming);
        let details = TimeoutDetails {
            profile_name: profile.profile.name.to_string(),
            configured_timeout_ms: millis(configured),
            elapsed_ms: millis(elapsed),
            service: self.labels().service.to_string(),
            method: self.labels().method.to_string(),
            source,
            phase,
            message_count: self.streaming.then_some(seen.messages),
            long_work,
            detected_by,
            attempts: self.attempts.map(NonZeroU32::get),
            attempt_timeout_ms: self.attempt.as_ref().map(|c| millis(c.limit())),
            budget_paused_ms: self.budget.map(|b| u64::from(b.paused_ms)),
            budget_elapsed_ms: self.budget.map(|b| u64::from(b.elapsed_ms)),
            connect_wait_ms: self.connect_wait().map(millis),
            effect: Some(self.effect(seen, self.sent)),
        };
        #[cfg(feature = "otel")]
        if let Some(effect) = &details.effect {
            record_late(&self.span, Late::TimeoutPhase, phase.as_str());
            record_late(&self.span, Late::Effect, effect.as_str());
        }
        if self.state == State::Open {
            self.state = State::Ended;
            // A call that ended at its deadline is counted at it, not a hair later (the
            // timer's own lag): with a histogram bound at the timeout, it falls in the
            // timeout's bucket, and no percentile of calls that all ended by their
            // deadline reads above it.
            let counted = match phase {
                Phase::Total => elapsed.min(configured),
                _ => elapsed,
            };
            self.record_at(Some(counted), true, || Code::DeadlineExceeded);
            call_event!(
                warn,
                self.span,
                self.correlation(),
                (details.service, details.method, details.profile_name),
                configured_timeout_ms = details.configured_timeout_ms,
                elapsed_ms = details.elapsed_ms,
                phase = phase.as_str(),
                source = %details.source,
                detected_by = detected_by.as_str(),
                "SW4RM RPC timed out"
            );
        }
        let mut status = details.to_status();
        self.mark_attempts(&mut status);
        status
    }
}
