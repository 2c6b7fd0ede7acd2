//! What a `CancelDelegation` came to, read from its answer: the delegate's
//! acknowledgement, `UNIMPLEMENTED` (SW4-004 §5.7: the deadline ends the work), and,
//! when the parent asked to wait until the delegate's work ended, how it ended (two
//! metadata entries of this crate's: [`CANCEL_WAIT_KEY`] on the request,
//! [`CANCEL_OUTCOME_KEY`] on the answer; a delegate that does not know them answers
//! at once and the end stays unknown).

use std::fmt;

use tonic::metadata::MetadataMap;
use tonic::{Code, Status};

use sw4rm_timeouts::proto::sw4rm::handoff::CancelDelegationResponse;
use sw4rm_timeouts::seams::{cut, QUOTE_LIMIT};

/// Request metadata asking the delegate to answer a `CancelDelegation` only once the
/// cancelled work has ended (value [`WAIT_ENDED`]), at most its grace later.
pub const CANCEL_WAIT_KEY: &str = "sw4rm-cancel-wait";
/// The value of [`CANCEL_WAIT_KEY`].
pub const WAIT_ENDED: &str = "ended";
/// Answer metadata saying how the cancelled work ended: [`ENDED_IN_GRACE`] or
/// [`ENDED_FORCED`].
pub const CANCEL_OUTCOME_KEY: &str = "sw4rm-cancel-outcome";
/// The work ended within its grace.
pub const ENDED_IN_GRACE: &str = "ended";
/// The work still ran when its grace expired and was dropped (`FORCED_PREEMPTION`).
pub const ENDED_FORCED: &str = "forced";

/// What a `CancelDelegation` came to, as far as the parent can know.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelOutcome {
    /// Sent without waiting for the answer (`CancelWait::Abandon` of the parent's cancel).
    Abandoned,
    /// The delegate answered that it runs no such delegation (it may not have
    /// arrived yet: a delegate built on [`crate::Delegations`] remembers the
    /// cancel for a while and applies it when the handoff comes).
    NotAcknowledged {
        /// The delegate's message, cut to a bound.
        message: String,
    },
    /// The delegate took the cancel; how its work ended is not known (the parent did
    /// not wait for it, or the delegate does not say).
    Acknowledged,
    /// The delegate took the cancel and its work ended within the grace.
    EndedInGrace,
    /// The delegate took the cancel; its work still ran when the grace expired and
    /// was dropped (SW4-004 `FORCED_PREEMPTION`).
    Forced,
    /// The delegate does not implement `CancelDelegation` (`UNIMPLEMENTED`): its work
    /// ends when its budget does (SW4-004 §5.7).
    DeadlineFallback,
    /// The cancel could not be delivered, or its answer was lost: the work may run on
    /// until its budget ends.
    Unknown {
        /// The status the send ended with.
        code: Code,
        /// Its message, cut to a bound.
        message: String,
    },
}

impl CancelOutcome {
    /// The name used in logs and the `outcome` metric attribute.
    ///
    /// ```
    /// assert_eq!(sw4rm_swarm::CancelOutcome::DeadlineFallback.as_str(), "deadline_fallback");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            CancelOutcome::Abandoned => "abandoned",
            CancelOutcome::NotAcknowledged { .. } => "not_acknowledged",
            CancelOutcome::Acknowledged => "acknowledged",
            CancelOutcome::EndedInGrace => "ended_in_grace",
            CancelOutcome::Forced => "forced",
            CancelOutcome::DeadlineFallback => "deadline_fallback",
            CancelOutcome::Unknown { .. } => "unknown",
        }
    }

    /// Whether the delegate entered cancellation handling (SW4-015 §7.2: only then
    /// may the parent report the operation cancelled).
    pub fn acknowledged(&self) -> bool {
        matches!(
            self,
            CancelOutcome::Acknowledged | CancelOutcome::EndedInGrace | CancelOutcome::Forced
        )
    }

    /// The outcome of one send: the delegate's answer and its metadata, or the status.
    pub(crate) fn of(answer: Result<(&MetadataMap, &CancelDelegationResponse), &Status>) -> Self {
        match answer {
            Ok((_, response)) if !response.acknowledged => CancelOutcome::NotAcknowledged {
                message: cut(&response.message, QUOTE_LIMIT).to_string(),
            },
            Ok((metadata, _)) => match metadata.get(CANCEL_OUTCOME_KEY).map(|v| v.as_bytes()) {
                Some(v) if v == ENDED_IN_GRACE.as_bytes() => CancelOutcome::EndedInGrace,
                Some(v) if v == ENDED_FORCED.as_bytes() => CancelOutcome::Forced,
                _ => CancelOutcome::Acknowledged,
            },
            Err(status) if status.code() == Code::Unimplemented => CancelOutcome::DeadlineFallback,
            Err(status) => CancelOutcome::Unknown {
                code: status.code(),
                message: cut(status.message(), QUOTE_LIMIT).to_string(),
            },
        }
    }
}

impl fmt::Display for CancelOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CancelOutcome::NotAcknowledged { message } => {
                write!(f, "not acknowledged: {message}")
            }
            CancelOutcome::Unknown { code, message } => {
                write!(f, "unknown: the cancel ended with {code:?} {message}")
            }
            CancelOutcome::DeadlineFallback => f.write_str(
                "deadline fallback: the delegate does not implement CancelDelegation; its \
                 work ends when its budget does",
            ),
            other => f.write_str(other.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_read_as_an_outcome() {
        let ack = CancelDelegationResponse {
            acknowledged: true,
            message: String::new(),
        };
        let nack = CancelDelegationResponse {
            acknowledged: false,
            message: "x".repeat(10_000),
        };
        let with = |value: Option<&'static str>| {
            let mut m = MetadataMap::new();
            if let Some(v) = value {
                m.insert(CANCEL_OUTCOME_KEY, v.parse().unwrap());
            }
            m
        };
        let table = [
            (Ok((with(None), ack.clone())), "acknowledged"),
            (Ok((with(Some("ended")), ack.clone())), "ended_in_grace"),
            (Ok((with(Some("forced")), ack.clone())), "forced"),
            (Ok((with(Some("other")), ack.clone())), "acknowledged"),
            // Not acknowledged wins over what the metadata says.
            (Ok((with(Some("ended")), nack.clone())), "not_acknowledged"),
            (Err(Status::unimplemented("no")), "deadline_fallback"),
            (Err(Status::unavailable("down")), "unknown"),
        ];
        for (answer, want) in table {
            let outcome = CancelOutcome::of(answer.as_ref().map(|(m, r)| (m, r)));
            assert_eq!(outcome.as_str(), want);
        }
        // A peer's message is bounded before it is kept.
        let long = CancelOutcome::of(Ok((&with(None), &nack)));
        assert!(long.to_string().len() < 1_000);
        assert!(!long.acknowledged());
        assert!(CancelOutcome::Forced.acknowledged());
    }
}
