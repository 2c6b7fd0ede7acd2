//! The details of a call cancelled by its scope: `CANCELLED` with a one-line message
//! and a `google.rpc.ErrorInfo` naming where the cancel came from.

use std::collections::HashMap;
use std::fmt;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use super::details::{read_effect, write_effect, TIMEOUT_DOMAIN};
use crate::policy::cancel::CancelReason;
use crate::policy::effect::CallEffect;

/// `ErrorInfo.reason` of a call cancelled by its scope (domain [`TIMEOUT_DOMAIN`]).
pub const CANCEL_REASON: &str = "SW4RM_RPC_CANCELLED";

/// What a call cancelled by its scope carries: why (where the cancel came from), the
/// call's profile and path, and how long it ran.
///
/// ```
/// use sw4rm_timeouts::{CancelDetails, CancelReason};
/// # fn check(status: &tonic::Status) {
/// if let Some(d) = CancelDetails::from_status(status) {
///     if d.reason() == CancelReason::CallerGone {
///         println!("{}/{} stopped after {} ms: nobody is waiting", d.service(), d.method(), d.elapsed_ms());
///     }
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CancelDetails {
    pub(crate) reason: CancelReason,
    pub(crate) profile_name: String,
    pub(crate) service: String,
    pub(crate) method: String,
    pub(crate) elapsed_ms: u64,
    pub(crate) sent: bool,
    pub(crate) effect: Option<CallEffect>,
}

impl CancelDetails {
    /// Where the cancel came from.
    pub fn reason(&self) -> CancelReason {
        self.reason
    }

    /// The call's timeout profile.
    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    /// Full gRPC service name.
    pub fn service(&self) -> &str {
        &self.service
    }

    /// Method name.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Time from the call's start to the cancel, in ms.
    pub fn elapsed_ms(&self) -> u64 {
        self.elapsed_ms
    }

    /// Whether the call had been sent (the server saw it, and then the stream reset);
    /// `false` for a call started in a scope already cancelled.
    pub fn sent(&self) -> bool {
        self.sent
    }

    /// What the call left behind (`None` in details from an older peer).
    pub fn effect(&self) -> Option<CallEffect> {
        self.effect
    }

    /// A `CANCELLED` status with a one-line message and an `ErrorInfo`.
    pub fn to_status(&self) -> Status {
        let mut metadata = HashMap::with_capacity(6);
        metadata.insert("cancel_reason".to_owned(), self.reason.as_str().to_owned());
        metadata.insert("profile_name".to_owned(), self.profile_name.clone());
        metadata.insert("service".to_owned(), self.service.clone());
        metadata.insert("method".to_owned(), self.method.clone());
        metadata.insert("elapsed_ms".to_owned(), self.elapsed_ms.to_string());
        metadata.insert("sent".to_owned(), self.sent.to_string());
        if let Some(effect) = &self.effect {
            write_effect(effect, &mut metadata);
        }
        let details = ErrorDetails::with_error_info(CANCEL_REASON, TIMEOUT_DOMAIN, metadata);
        Status::with_error_details(Code::Cancelled, self.to_string(), details)
    }

    /// Reads the details back; `None` unless the status is `CANCELLED` with this
    /// crate's `ErrorInfo`.
    pub fn from_status(status: &Status) -> Option<CancelDetails> {
        if status.code() != Code::Cancelled {
            return None;
        }
        let info = status.get_details_error_info()?;
        if info.reason != CANCEL_REASON {
            return None;
        }
        let m = &info.metadata;
        Some(CancelDetails {
            reason: CancelReason::parse(m.get("cancel_reason")?)?,
            profile_name: m.get("profile_name")?.clone(),
            service: m.get("service")?.clone(),
            method: m.get("method")?.clone(),
            elapsed_ms: m.get("elapsed_ms")?.parse().ok()?,
            sent: m.get("sent").is_none_or(|s| s == "true"),
            effect: read_effect(m),
        })
    }
}

impl fmt::Display for CancelDetails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (service, method) = (&self.service, &self.method);
        let reason = self.reason.describe();
        match self.sent {
            true => write!(
                f,
                "SW4RM {service}/{method} cancelled after {} ms",
                self.elapsed_ms
            )?,
            false => write!(f, "SW4RM {service}/{method} not sent")?,
        }
        write!(
            f,
            ": {reason} (cancel reason {}; profile {})",
            self.reason, self.profile_name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_round_trip_and_name_the_reason() {
        let d = CancelDetails {
            reason: CancelReason::CallerGone,
            profile_name: "tool_execution".into(),
            service: "sw4rm.tool.ToolService".into(),
            method: "Call".into(),
            elapsed_ms: 120,
            sent: true,
            effect: Some(CallEffect::ReadAborted),
        };
        let status = d.to_status();
        assert_eq!(status.code(), Code::Cancelled);
        assert_eq!(
            status.message(),
            "SW4RM sw4rm.tool.ToolService/Call cancelled after 120 ms: the caller of the \
             inbound call went away (cancel reason caller_gone; profile tool_execution)"
        );
        assert_eq!(CancelDetails::from_status(&status), Some(d.clone()));
        let unsent = CancelDetails {
            sent: false,
            effect: Some(CallEffect::NotSent),
            reason: CancelReason::BudgetCancelled,
            ..d
        };
        assert_eq!(
            unsent.to_string(),
            "SW4RM sw4rm.tool.ToolService/Call not sent: its operation budget was cancelled \
             (cancel reason budget_cancelled; profile tool_execution)"
        );
        assert_eq!(CancelDetails::from_status(&Status::cancelled("x")), None);
    }
}
