//! A timeout's details as the sentence its status carries ("/pkg.Svc/Method exceeded
//! its deadline of 1000 ms (heartbeat profile, from standard) after 1001 ms"), and
//! long work's own wording.

use std::fmt;

use crate::policy::deadline::Phase;

use super::details::{DetectedBy, TimeoutDetails};
use super::long_work::{CapWords, Count, LongWorkDetails};

impl fmt::Display for TimeoutDetails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Refused at the start: the scope's cap was spent before the call began.
        let spent = match self.source.level() {
            "budget" => Some("its operation budget was spent"),
            "inherited" => Some("too little of its inherited deadline was left"),
            _ => None,
        }
        .filter(|_| {
            self.elapsed_ms == 0
                && self.phase == Phase::Total
                && self.detected_by == DetectedBy::Client
        });
        if let Some(why) = spent {
            write!(
                f,
                "/{}/{} was not sent: {why} before the call started ({} profile, from {}, {} ms left",
                self.service, self.method, self.profile_name, self.source, self.configured_timeout_ms
            )?;
            if let (Some(ran), Some(paused)) = (self.budget_elapsed_ms, self.budget_paused_ms) {
                write!(f, "; the budget ran {ran} ms, {paused} ms of them paused")?;
            }
            return f.write_str(")");
        }
        if let Some(work) = &self.long_work {
            return self.fmt_long_work(work, f);
        }
        write!(
            f,
            "/{}/{} exceeded its {} of {} ms ({} profile, from {}) after {} ms",
            self.service,
            self.method,
            match self.phase {
                Phase::Total => "deadline",
                Phase::Initial => "first-message timeout",
                Phase::Gap => "message-gap timeout",
                Phase::Idle => "idle limit",
                Phase::Attempt => "attempt timeout",
            },
            self.configured_timeout_ms,
            self.profile_name,
            self.source,
            self.elapsed_ms
        )?;
        if let Some(n) = self.message_count {
            write!(f, ", {n} message{} received", if n == 1 { "" } else { "s" })?;
        }
        if let Some(n) = self.attempts.filter(|n| *n > 1) {
            write!(f, ", {n} attempts")?;
        }
        if let Some(ms) = self.connect_wait_ms {
            write!(f, ", {ms} ms of it waiting for a connection")?;
        }
        Ok(())
    }
}

impl TimeoutDetails {
    /// Long work: which limit fired, with both numbers, and how far the work had come:
    /// "no progress for 10000 ms (idle limit; cap 600000 ms) after 37 messages".
    fn fmt_long_work(&self, work: &LongWorkDetails, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (service, method) = (&self.service, &self.method);
        match self.phase {
            Phase::Idle => write!(
                f,
                "/{service}/{method}: no progress for {} ms (idle limit; {})",
                work.idle_limit_ms,
                CapWords(work.cap_ms)
            )?,
            Phase::Total => write!(
                f,
                "/{service}/{method}: exceeded the wall-clock cap of {} ms ({})",
                self.configured_timeout_ms,
                IdleWords(work.idle_limit_ms)
            )?,
            phase => write!(
                f,
                "/{service}/{method}: exceeded its {} timeout of {} ms ({}; {})",
                phase.as_str(),
                self.configured_timeout_ms,
                IdleWords(work.idle_limit_ms),
                CapWords(work.cap_ms)
            )?,
        }
        match self.message_count {
            Some(n) => write!(
                f,
                " after {}, all delivered ({} progress, ",
                Count(n, "message"),
                work.progress_count
            )?,
            None => write!(
                f,
                " after {} (",
                Count(work.progress_count, "progress report")
            )?,
        }
        if let Some(marker) = work.progress_marker {
            write!(f, "last marker {marker}, ")?;
        }
        write!(f, "last {} ms ago; ", work.since_progress_ms)?;
        if !self.profile_name.is_empty() {
            write!(f, "{} profile, ", self.profile_name)?;
        }
        write!(f, "from {}, {} ms in all)", self.source, self.elapsed_ms)
    }
}

/// "idle limit N ms", or "no idle limit" for 0.
struct IdleWords(u64);

impl fmt::Display for IdleWords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("no idle limit"),
            ms => write!(f, "idle limit {ms} ms"),
        }
    }
}
