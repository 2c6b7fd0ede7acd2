//! What a call that timed out or was cancelled left behind, as far as the caller can
//! know: from whether anything was handed to the transport, whether the RPC is
//! idempotent (the route's rule, the one retries and hedging follow) and how many
//! messages a stream delivered.

use std::fmt;

/// What a `DEADLINE_EXCEEDED` or `CANCELLED` from the layer left behind
/// (`TimeoutDetails::effect`, `CancelDetails::effect`); a caller's
/// `match` on it decides what to do next.
///
/// ```
/// use sw4rm_timeouts::CallEffect;
/// # fn next(effect: CallEffect) -> &'static str {
/// match effect {
///     CallEffect::NotSent => "send it again",
///     CallEffect::ReadAborted => "retry",
///     CallEffect::MutationIndeterminate => "ask for its state (same id or token) before re-sending",
///     CallEffect::StreamEnded { .. } => "resume from the last message or marker",
///     _ => "treat as indeterminate",
/// }
/// # }
/// assert_eq!(CallEffect::MutationIndeterminate.as_str(), "mutation_indeterminate");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallEffect {
    /// Nothing reached the transport (cancelled before sending, or the scope's
    /// deadline spent before the call started): safe to send again.
    NotSent,
    /// An idempotent RPC (by its route: a read, or a write that may be repeated)
    /// was cut before its answer: safe to retry.
    ReadAborted,
    /// A mutation may have reached the server and no answer came: it may have taken
    /// effect. Reconcile (ask for its state with the same id or idempotency token)
    /// before sending it again.
    MutationIndeterminate,
    /// A server stream was cut after delivering messages: resume from what arrived.
    StreamEnded {
        /// Messages delivered before the end.
        messages: u64,
        /// The last progress marker the stream reported, if any.
        progress_marker: Option<u64>,
    },
    /// The server's own guard (`scope::LongWork`, feature `long-work`) stopped the work at its
    /// idle limit or cap: it does not run on, and what it did up to its last progress
    /// marker may stand. Reconcile (from the marker) before sending it again.
    WorkStopped {
        /// Results the work had produced (delivered as messages on a stream, kept on
        /// a unary call) when it was stopped.
        results: u64,
        /// The last progress marker the work reported, if any.
        progress_marker: Option<u64>,
    },
}

impl CallEffect {
    /// The name used in the `ErrorInfo` metadata (`effect`) and in logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            CallEffect::NotSent => "not_sent",
            CallEffect::ReadAborted => "read_aborted",
            CallEffect::MutationIndeterminate => "mutation_indeterminate",
            CallEffect::StreamEnded { .. } => "stream_ended",
            CallEffect::WorkStopped { .. } => "work_stopped",
        }
    }

    /// Reads a name back (with the stream's counts, which travel beside it).
    pub(crate) fn parse(name: &str, messages: Option<u64>, marker: Option<u64>) -> Option<Self> {
        Some(match name {
            "not_sent" => CallEffect::NotSent,
            "read_aborted" => CallEffect::ReadAborted,
            "mutation_indeterminate" => CallEffect::MutationIndeterminate,
            "stream_ended" => CallEffect::StreamEnded {
                messages: messages.unwrap_or(0),
                progress_marker: marker,
            },
            "work_stopped" => CallEffect::WorkStopped {
                results: messages.unwrap_or(0),
                progress_marker: marker,
            },
            _ => return None,
        })
    }

    /// Whether sending the same request again is safe without asking first.
    pub fn safe_to_resend(&self) -> bool {
        matches!(self, CallEffect::NotSent | CallEffect::ReadAborted)
    }
}

impl fmt::Display for CallEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallEffect::NotSent => f.write_str("not sent: safe to send again"),
            CallEffect::ReadAborted => f.write_str("read aborted: safe to retry"),
            CallEffect::MutationIndeterminate => f.write_str(
                "mutation indeterminate: it may have taken effect; reconcile before re-sending",
            ),
            CallEffect::StreamEnded {
                messages,
                progress_marker,
            } => {
                write!(f, "stream ended after {messages} message(s)")?;
                if let Some(m) = progress_marker {
                    write!(f, ", last progress marker {m}")?;
                }
                f.write_str(": resume from there")
            }
            CallEffect::WorkStopped {
                results,
                progress_marker,
            } => {
                write!(f, "work stopped by the server after {results} result(s)")?;
                if let Some(m) = progress_marker {
                    write!(f, ", last progress marker {m}")?;
                }
                f.write_str(": it does not run on; reconcile before re-sending")
            }
        }
    }
}

/// The effect of a call that ended early: `sent` whether it was handed to the
/// transport; `idempotent` the route's rule; `messages` and `marker` what a server
/// stream delivered (`None` for a unary call).
pub(crate) fn effect_of(
    sent: bool,
    idempotent: bool,
    messages: Option<u64>,
    marker: Option<u64>,
) -> CallEffect {
    match (sent, messages) {
        (false, _) => CallEffect::NotSent,
        (true, Some(n)) if n > 0 => CallEffect::StreamEnded {
            messages: n,
            progress_marker: marker,
        },
        (true, _) if idempotent => CallEffect::ReadAborted,
        (true, _) => CallEffect::MutationIndeterminate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effect_of_a_call_that_ended_early() {
        use CallEffect::*;
        let stream = |n, m| StreamEnded {
            messages: n,
            progress_marker: m,
        };
        // (sent, idempotent, messages, marker, effect)
        let table = [
            (false, false, None, None, NotSent),
            (false, true, Some(3), None, NotSent),
            (true, true, None, None, ReadAborted),
            (true, false, None, None, MutationIndeterminate),
            // A stream that delivered nothing is read as its RPC is.
            (true, true, Some(0), None, ReadAborted),
            (true, false, Some(0), None, MutationIndeterminate),
            (true, false, Some(3), Some(40), stream(3, Some(40))),
            (true, true, Some(1), None, stream(1, None)),
        ];
        for (sent, idem, messages, marker, want) in table {
            let got = effect_of(sent, idem, messages, marker);
            assert_eq!(got, want, "{sent} {idem} {messages:?}");
            assert_eq!(CallEffect::parse(got.as_str(), messages, marker), Some(got));
        }
        assert!(NotSent.safe_to_resend() && ReadAborted.safe_to_resend());
        assert!(!MutationIndeterminate.safe_to_resend() && !stream(1, None).safe_to_resend());
        assert_eq!(CallEffect::parse("other", None, None), None);
    }
}
