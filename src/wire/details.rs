//! The structured details of a timeout (SW4-002 §5.1), carried as a standard
//! `google.rpc.ErrorInfo` in the `DEADLINE_EXCEEDED` status so any gRPC stack can
//! read them.

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::policy::deadline::Phase;
use crate::policy::effect::CallEffect;
use crate::policy::route::split_path;
use crate::policy::source::Source;

use super::long_work::LongWorkDetails;

/// `ErrorInfo.reason` of every SW4-002 timeout.
pub const TIMEOUT_REASON: &str = "SW4RM_RPC_TIMEOUT";
/// `ErrorInfo.domain` of every SW4-002 timeout.
pub const TIMEOUT_DOMAIN: &str = "sw4rm.timeouts";

/// Which timer noticed the deadline (the guide's tonic chapter has a table of when
/// each appears).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DetectedBy {
    /// This crate's timer: the call's deadline, an attempt's timeout, a stream's
    /// timers, or a scope's cap spent at or before the send.
    Client,
    /// tonic's transport timer (reported by tonic as `Cancelled`) fired before the
    /// layer's: a `grpc-timeout` it enforces, or an `Endpoint::timeout`.
    Transport,
    /// The server answered `DEADLINE_EXCEEDED` (or `CANCELLED`) at or after our
    /// deadline, or a server's `LongWork` guard stopped the work at its idle limit or
    /// cap.
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
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
/// use sw4rm_timeouts::testing::{Script, TestServer};
/// use sw4rm_timeouts::{Phase, Source, Sw4rm, TimeoutDetails, TimeoutProfileLayer};
///
/// let server = TestServer::start().await?;
/// server.script("Heartbeat", Script::latency(Duration::from_secs(5)))?;
/// let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard()).await?;
/// let mut req = tonic::Request::new(HeartbeatRequest::default());
/// req.set_timeout(Duration::from_secs(1));
/// let status = sw4rm.registry().heartbeat(req).await.unwrap_err();
///
/// let d = TimeoutDetails::from_status(&status).expect("an SW4-002 timeout");
/// assert_eq!((d.profile_name(), d.method(), d.phase()), ("heartbeat", "Heartbeat", Phase::Total));
/// assert_eq!((d.configured_timeout_ms(), d.source()), (1_000, &Source::PerCall));
/// assert!(d.elapsed_ms() >= 1_000);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimeoutDetails {
    pub(crate) profile_name: String,
    pub(crate) configured_timeout_ms: u64,
    pub(crate) elapsed_ms: u64,
    pub(crate) service: String,
    pub(crate) method: String,
    pub(crate) source: Source,
    pub(crate) phase: Phase,
    pub(crate) message_count: Option<u64>,
    pub(crate) detected_by: DetectedBy,
    pub(crate) attempts: Option<u32>,
    pub(crate) attempt_timeout_ms: Option<u64>,
    pub(crate) budget_paused_ms: Option<u64>,
    pub(crate) budget_elapsed_ms: Option<u64>,
    pub(crate) connect_wait_ms: Option<u64>,
    pub(crate) long_work: Option<LongWorkDetails>,
    pub(crate) effect: Option<CallEffect>,
}

impl TimeoutDetails {
    /// The profile used.
    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    /// The timeout that was exceeded, in ms (for streams, that of the phase).
    pub fn configured_timeout_ms(&self) -> u64 {
        self.configured_timeout_ms
    }

    /// Time from the call's start to the timeout, in ms.
    pub fn elapsed_ms(&self) -> u64 {
        self.elapsed_ms
    }

    /// Full gRPC service name, e.g. `sw4rm.registry.RegistryService`.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// Method name, e.g. `Heartbeat`.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Where the configured value came from (on the wire as its `Display` text, e.g.
    /// `per_call` or `global (env SW4RM_PROFILES__HEARTBEAT__DEFAULT_TIMEOUT_MS)`).
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Which timer fired; `Total` for unary calls.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Messages received before a stream timed out (streams only).
    pub fn message_count(&self) -> Option<u64> {
        self.message_count
    }

    /// Which timer noticed first.
    pub fn detected_by(&self) -> DetectedBy {
        self.detected_by
    }

    /// Whether these details describe the call to `path` (`/package.Service/Method`):
    /// false when they name another RPC — a server that timed out on its own
    /// downstream call and passed that call's details on (another hop's timeout, not
    /// this call's).
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use sw4rm_timeouts::{TimeoutDetails, TIMEOUT_DOMAIN, TIMEOUT_REASON};
    /// use tonic_types::{ErrorDetails, StatusExt};
    /// // A Heartbeat answered with the details of the server's own downstream call.
    /// let metadata: HashMap<String, String> = [
    ///     ("profile_name", "workflow_status"), ("configured_timeout_ms", "10000"),
    ///     ("elapsed_ms", "10001"), ("service", "sw4rm.scheduler.SchedulerService"),
    ///     ("method", "GetTaskStatus"), ("source", "standard"),
    /// ].into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
    /// let status = tonic::Status::with_error_details(
    ///     tonic::Code::DeadlineExceeded,
    ///     "downstream timed out",
    ///     ErrorDetails::with_error_info(TIMEOUT_REASON, TIMEOUT_DOMAIN, metadata),
    /// );
    /// let details = TimeoutDetails::from_status(&status).unwrap();
    /// assert!(!details.describes("/sw4rm.registry.RegistryService/Heartbeat")); // another hop's
    /// assert!(details.describes("/sw4rm.scheduler.SchedulerService/GetTaskStatus"));
    /// ```
    pub fn describes(&self, path: &str) -> bool {
        split_path(path) == Some((self.service.as_str(), self.method.as_str()))
    }

    /// Attempts made, when the call was under a retry policy (SW4-002 §5.2): `Some(1)`
    /// for a call that was never retried, `None` for a call sent once by design
    /// (retries off, or a policy of one attempt).
    pub fn attempts(&self) -> Option<u32> {
        self.attempts
    }

    /// The timeout of the last attempt in ms, when it was shorter than the call's
    /// deadline.
    pub fn attempt_timeout_ms(&self) -> Option<u64> {
        self.attempt_timeout_ms
    }

    /// When an operation budget was the cap: the time it had been paused when the
    /// call started, in ms.
    pub fn budget_paused_ms(&self) -> Option<u64> {
        self.budget_paused_ms
    }

    /// When an operation budget was the cap: how long it had run when the call
    /// started (paused time included), in ms.
    pub fn budget_elapsed_ms(&self) -> Option<u64> {
        self.budget_elapsed_ms
    }

    /// How much of the call's time, in ms, its channel had no connection and the
    /// call waited for one (gRFC A121's `connecting` delay), when it waited: a
    /// timeout spent connecting, told from a slow server.
    pub fn connect_wait_ms(&self) -> Option<u64> {
        self.connect_wait_ms
    }

    /// The idle limit, the cap and how far the work had come, when the call ran under
    /// an idle limit (phase [`Phase::Idle`] says the idle limit fired, [`Phase::Total`]
    /// the cap).
    pub fn long_work(&self) -> Option<&LongWorkDetails> {
        self.long_work.as_ref()
    }
}

impl TimeoutDetails {
    /// What the call left behind (`None` in details from an older peer, or from a
    /// server's own long work).
    pub fn effect(&self) -> Option<CallEffect> {
        self.effect
    }

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
        metadata.insert("source".to_owned(), self.source.to_string());
        metadata.insert("phase".to_owned(), self.phase.as_str().to_owned());
        metadata.insert(
            "detected_by".to_owned(),
            self.detected_by.as_str().to_owned(),
        );
        if let Some(n) = self.message_count {
            metadata.insert("message_count".to_owned(), n.to_string());
        }
        if let Some(n) = self.attempts {
            metadata.insert("attempts".to_owned(), n.to_string());
        }
        if let Some(ms) = self.attempt_timeout_ms {
            metadata.insert("attempt_timeout_ms".to_owned(), ms.to_string());
        }
        if let Some(ms) = self.budget_paused_ms {
            metadata.insert("budget_paused_ms".to_owned(), ms.to_string());
        }
        if let Some(ms) = self.budget_elapsed_ms {
            metadata.insert("budget_elapsed_ms".to_owned(), ms.to_string());
        }
        if let Some(ms) = self.connect_wait_ms {
            metadata.insert("connect_wait_ms".to_owned(), ms.to_string());
        }
        if let Some(work) = &self.long_work {
            work.write(&mut metadata);
        }
        if let Some(effect) = &self.effect {
            write_effect(effect, &mut metadata);
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
            source: m.get("source").and_then(|s| Source::parse(s))?,
            phase: m
                .get("phase")
                .and_then(|p| Phase::parse(p))
                .unwrap_or(Phase::Total),
            message_count: num("message_count"),
            detected_by: m
                .get("detected_by")
                .and_then(|p| DetectedBy::parse(p))
                .unwrap_or(DetectedBy::Client),
            attempts: m.get("attempts").and_then(|v| v.parse().ok()),
            attempt_timeout_ms: num("attempt_timeout_ms"),
            budget_paused_ms: num("budget_paused_ms"),
            budget_elapsed_ms: num("budget_elapsed_ms"),
            connect_wait_ms: num("connect_wait_ms"),
            long_work: LongWorkDetails::read(m),
            effect: read_effect(m),
        })
    }
}

/// Writes `effect` into an `ErrorInfo`'s metadata: `effect`, and for a stream (or
/// work stopped by its guard) `effect_messages` (the results) and
/// `effect_progress_marker`.
pub(crate) fn write_effect(effect: &CallEffect, metadata: &mut HashMap<String, String>) {
    metadata.insert("effect".to_owned(), effect.as_str().to_owned());
    let counts = match *effect {
        CallEffect::StreamEnded {
            messages,
            progress_marker,
        } => Some((messages, progress_marker)),
        CallEffect::WorkStopped {
            results,
            progress_marker,
        } => Some((results, progress_marker)),
        _ => None,
    };
    if let Some((n, marker)) = counts {
        metadata.insert("effect_messages".to_owned(), n.to_string());
        if let Some(m) = marker {
            metadata.insert("effect_progress_marker".to_owned(), m.to_string());
        }
    }
}

/// Reads what [`write_effect`] wrote.
pub(crate) fn read_effect(metadata: &HashMap<String, String>) -> Option<CallEffect> {
    let num = |k: &str| metadata.get(k).and_then(|v| v.parse::<u64>().ok());
    CallEffect::parse(
        metadata.get("effect")?,
        num("effect_messages"),
        num("effect_progress_marker"),
    )
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
            source: Source::PerCall,
            phase: Phase::Gap,
            message_count: Some(3),
            detected_by: DetectedBy::Client,
            attempts: None,
            attempt_timeout_ms: None,
            budget_paused_ms: None,
            connect_wait_ms: None,
            budget_elapsed_ms: None,
            long_work: None,
            effect: Some(CallEffect::StreamEnded {
                messages: 3,
                progress_marker: Some(9),
            }),
        };
        let status = d.to_status();
        assert_eq!(
            status.message(),
            "/sw4rm.tool.ToolService/CallStream exceeded its message-gap timeout of 200 ms (tool_call profile, from per_call) after 1400 ms, 3 messages received"
        );
        assert_eq!(TimeoutDetails::from_status(&status), Some(d.clone()));
        let env = TimeoutDetails {
            source: Source::Env("SW4RM_PROFILES__TOOL_CALL__DEFAULT_TIMEOUT_MS".into()),
            phase: Phase::Total,
            message_count: None,
            ..d
        };
        let info = env.to_status();
        let info = info.get_details_error_info().unwrap();
        assert_eq!(
            info.metadata["source"],
            "global (env SW4RM_PROFILES__TOOL_CALL__DEFAULT_TIMEOUT_MS)"
        );
        assert_eq!(
            TimeoutDetails::from_status(&env.to_status()).map(|d| d.source),
            Some(env.source.clone())
        );
        let retried = TimeoutDetails {
            phase: Phase::Attempt,
            attempts: Some(3),
            attempt_timeout_ms: Some(150),
            ..env
        };
        let status = retried.to_status();
        assert!(status
            .message()
            .contains("exceeded its attempt timeout of 200 ms"));
        assert!(
            status.message().ends_with(", 3 attempts"),
            "{}",
            status.message()
        );
        let info = status.get_details_error_info().unwrap();
        assert_eq!(
            (
                info.metadata["attempts"].as_str(),
                info.metadata["attempt_timeout_ms"].as_str()
            ),
            ("3", "150")
        );
        assert_eq!(TimeoutDetails::from_status(&status), Some(retried));
    }

    /// Long work: the message names which limit fired with both numbers, how many
    /// messages arrived (and were delivered), how many were progress and the marker;
    /// everything round-trips through the `ErrorInfo`.
    #[test]
    fn long_work_details_round_trip() {
        let idle = TimeoutDetails {
            profile_name: "tool_call".into(),
            configured_timeout_ms: 10_000,
            elapsed_ms: 41_250,
            service: "sw4rm.tool.ToolService".into(),
            method: "CallStream".into(),
            source: Source::PerCall,
            phase: Phase::Idle,
            message_count: Some(37),
            detected_by: DetectedBy::Client,
            attempts: None,
            attempt_timeout_ms: None,
            budget_paused_ms: None,
            connect_wait_ms: None,
            budget_elapsed_ms: None,
            long_work: Some(LongWorkDetails {
                idle_limit_ms: 10_000,
                cap_ms: Some(600_000),
                progress_count: 12,
                since_progress_ms: 10_000,
                progress_marker: Some(11),
            }),
            effect: None,
        };
        let status = idle.to_status();
        assert_eq!(status.code(), Code::DeadlineExceeded);
        assert_eq!(
            status.message(),
            "/sw4rm.tool.ToolService/CallStream: no progress for 10000 ms (idle limit; cap 600000 ms) \
             after 37 messages, all delivered (12 progress, last marker 11, last 10000 ms ago; \
             tool_call profile, from per_call, 41250 ms in all)"
        );
        assert_eq!(TimeoutDetails::from_status(&status), Some(idle.clone()));
        let info = status.get_details_error_info().unwrap();
        for (key, want) in [
            ("phase", "idle"),
            ("idle_limit_ms", "10000"),
            ("cap_ms", "600000"),
            ("progress_count", "12"),
            ("since_progress_ms", "10000"),
            ("progress_marker", "11"),
        ] {
            assert_eq!(info.metadata[key], want, "{key}");
        }
        // The cap fired: the wall-clock words, both numbers. Handler-side work without
        // messages counts progress reports.
        let capped = TimeoutDetails {
            phase: Phase::Total,
            configured_timeout_ms: 1_800_000,
            message_count: None,
            detected_by: DetectedBy::Server,
            long_work: Some(LongWorkDetails {
                idle_limit_ms: 120_000,
                cap_ms: Some(1_800_000),
                progress_count: 1,
                since_progress_ms: 3,
                progress_marker: None,
            }),
            ..idle
        };
        let status = capped.to_status();
        assert_eq!(
            status.message(),
            "/sw4rm.tool.ToolService/CallStream: exceeded the wall-clock cap of 1800000 ms (idle limit 120000 ms) \
             after 1 progress report (last 3 ms ago; tool_call profile, from per_call, 41250 ms in all)"
        );
        assert_eq!(TimeoutDetails::from_status(&status), Some(capped));
    }
}
