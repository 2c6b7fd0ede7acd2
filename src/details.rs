//! The structured details of a timeout (SW4-002 §5.1), carried as a standard
//! `google.rpc.ErrorInfo` in the `DEADLINE_EXCEEDED` status so any gRPC stack can
//! read them.

use std::collections::HashMap;
use std::fmt;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// `ErrorInfo.reason` of every SW4-002 timeout.
pub const TIMEOUT_REASON: &str = "SW4RM_RPC_TIMEOUT";
/// `ErrorInfo.domain` of every SW4-002 timeout.
pub const TIMEOUT_DOMAIN: &str = "sw4rm.timeouts";

/// Which streaming timer fired (SW4-002 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// No message arrived within `initial_timeout_ms`.
    Initial,
    /// No message arrived within `message_gap_timeout_ms` of the previous one.
    Gap,
    /// The whole call exceeded its deadline (unary calls, or a stream's total cap).
    Total,
}

impl Phase {
    /// `initial`, `gap` or `total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Initial => "initial",
            Phase::Gap => "gap",
            Phase::Total => "total",
        }
    }

    fn parse(s: &str) -> Option<Phase> {
        match s {
            "initial" => Some(Phase::Initial),
            "gap" => Some(Phase::Gap),
            "total" => Some(Phase::Total),
            _ => None,
        }
    }
}

/// Which timer noticed the deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DetectedBy {
    /// This crate's timer.
    Client,
    /// tonic's transport timer (reported by tonic as `Cancelled`).
    Transport,
    /// The server answered `DEADLINE_EXCEEDED`.
    Server,
}

impl DetectedBy {
    /// `client`, `transport` or `server`.
    pub fn as_str(self) -> &'static str {
        match self {
            DetectedBy::Client => "client",
            DetectedBy::Transport => "transport",
            DetectedBy::Server => "server",
        }
    }

    fn parse(s: &str) -> Option<DetectedBy> {
        match s {
            "client" => Some(DetectedBy::Client),
            "transport" => Some(DetectedBy::Transport),
            "server" => Some(DetectedBy::Server),
            _ => None,
        }
    }
}

/// What a timed-out call was, read back from (or written into) its status.
///
/// ```
/// use sw4rm_timeouts::{DetectedBy, Phase, TimeoutDetails};
/// let d = TimeoutDetails {
///     profile_name: "heartbeat".into(),
///     configured_timeout_ms: 5_000,
///     elapsed_ms: 5_001,
///     service: "sw4rm.registry.RegistryService".into(),
///     method: "Heartbeat".into(),
///     source: "standard".into(),
///     phase: Phase::Total,
///     message_count: None,
///     detected_by: DetectedBy::Client,
/// };
/// let status = d.to_status();
/// assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
/// assert_eq!(TimeoutDetails::from_status(&status), Some(d));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeoutDetails {
    /// The profile used.
    pub profile_name: String,
    /// The timeout that was exceeded, in ms (for streams, that of the phase).
    pub configured_timeout_ms: u64,
    /// Time from the call's start to the timeout, in ms.
    pub elapsed_ms: u64,
    /// Full gRPC service name, e.g. `sw4rm.registry.RegistryService`.
    pub service: String,
    /// Method name, e.g. `Heartbeat`.
    pub method: String,
    /// Where the configured value came from, e.g. `per_call`,
    /// `global (env SW4RM_PROFILES__HEARTBEAT__DEFAULT_TIMEOUT_MS)`.
    pub source: String,
    /// Which timer fired; `Total` for unary calls.
    pub phase: Phase,
    /// Messages received before a stream timed out (streams only).
    pub message_count: Option<u64>,
    /// Which timer noticed first.
    pub detected_by: DetectedBy,
}

impl TimeoutDetails {
    /// A `DEADLINE_EXCEEDED` status with a one-line message and an `ErrorInfo`.
    pub fn to_status(&self) -> Status {
        let mut metadata = HashMap::with_capacity(9);
        metadata.insert("profile_name".to_owned(), self.profile_name.clone());
        metadata.insert(
            "configured_timeout_ms".to_owned(),
            self.configured_timeout_ms.to_string(),
        );
        metadata.insert("elapsed_ms".to_owned(), self.elapsed_ms.to_string());
        metadata.insert("service".to_owned(), self.service.clone());
        metadata.insert("method".to_owned(), self.method.clone());
        metadata.insert("source".to_owned(), self.source.clone());
        metadata.insert("phase".to_owned(), self.phase.as_str().to_owned());
        metadata.insert(
            "detected_by".to_owned(),
            self.detected_by.as_str().to_owned(),
        );
        if let Some(n) = self.message_count {
            metadata.insert("message_count".to_owned(), n.to_string());
        }
        let details = ErrorDetails::with_error_info(TIMEOUT_REASON, TIMEOUT_DOMAIN, metadata);
        Status::with_error_details(Code::DeadlineExceeded, self.to_string(), details)
    }

    /// Reads the details back; `None` unless the status is `DEADLINE_EXCEEDED` with
    /// an SW4-002 `ErrorInfo`.
    pub fn from_status(status: &Status) -> Option<TimeoutDetails> {
        if status.code() != Code::DeadlineExceeded {
            return None;
        }
        let info = status.get_details_error_info()?;
        if info.reason != TIMEOUT_REASON {
            return None;
        }
        let m = &info.metadata;
        let text = |k: &str| m.get(k).cloned();
        let num = |k: &str| m.get(k).and_then(|v| v.parse::<u64>().ok());
        Some(TimeoutDetails {
            profile_name: text("profile_name")?,
            configured_timeout_ms: num("configured_timeout_ms")?,
            elapsed_ms: num("elapsed_ms")?,
            service: text("service")?,
            method: text("method")?,
            source: text("source")?,
            phase: m
                .get("phase")
                .and_then(|p| Phase::parse(p))
                .unwrap_or(Phase::Total),
            message_count: num("message_count"),
            detected_by: m
                .get("detected_by")
                .and_then(|p| DetectedBy::parse(p))
                .unwrap_or(DetectedBy::Client),
        })
    }
}

impl fmt::Display for TimeoutDetails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "/{}/{} exceeded its {} of {} ms ({} profile, from {}) after {} ms",
            self.service,
            self.method,
            match self.phase {
                Phase::Total => "deadline",
                Phase::Initial => "first-message timeout",
                Phase::Gap => "message-gap timeout",
            },
            self.configured_timeout_ms,
            self.profile_name,
            self.source,
            self.elapsed_ms
        )?;
        if let Some(n) = self.message_count {
            write!(f, ", {n} message{} received", if n == 1 { "" } else { "s" })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_other_statuses() {
        assert_eq!(
            TimeoutDetails::from_status(&Status::deadline_exceeded("plain")),
            None
        );
        assert_eq!(TimeoutDetails::from_status(&Status::cancelled("x")), None);
        let foreign = Status::with_error_details(
            Code::DeadlineExceeded,
            "x",
            ErrorDetails::with_error_info("OTHER", "d", HashMap::new()),
        );
        assert_eq!(TimeoutDetails::from_status(&foreign), None);
    }

    #[test]
    fn stream_details_round_trip() {
        let d = TimeoutDetails {
            profile_name: "tool_call".into(),
            configured_timeout_ms: 200,
            elapsed_ms: 1_400,
            service: "sw4rm.tool.ToolService".into(),
            method: "CallStream".into(),
            source: "per_call".into(),
            phase: Phase::Gap,
            message_count: Some(3),
            detected_by: DetectedBy::Client,
        };
        let status = d.to_status();
        assert_eq!(
            status.message(),
            "/sw4rm.tool.ToolService/CallStream exceeded its message-gap timeout of 200 ms (tool_call profile, from per_call) after 1400 ms, 3 messages received"
        );
        assert_eq!(TimeoutDetails::from_status(&status), Some(d));
    }
}
