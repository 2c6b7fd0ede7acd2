//! Timeouts carried inside request messages: which fields, and the margin rule.
//!
//! Rule: when such a field is set (non-zero) and the caller gave no per-call
//! override, the call's deadline becomes the message timeout plus
//! [`MESSAGE_DEADLINE_MARGIN`], then clamped into the profile's bounds like any other
//! override (source `message`). The server's own wait therefore ends, and its answer
//! arrives, before the transport deadline, unless the profile's `max_timeout_ms`
//! forbids it, in which case the bound wins and a warning is logged.
//!
//! The layer reads the field from the first frame of the encoded request body (see
//! [`MessageField::read`]), so it works under any client, including clients generated
//! from the upstream protos. A compressed request, or a body not ready at once, is
//! left alone (no message timeout, profile default).

use std::time::Duration;

/// Added to a message-level timeout so the server's answer beats the deadline.
pub const MESSAGE_DEADLINE_MARGIN: Duration = Duration::from_secs(1);

/// A timeout field inside a request message.
///
/// When it is set (non-zero) and the caller gave no per-call override, the call's
/// deadline is the field's value plus [`MESSAGE_DEADLINE_MARGIN`], clamped into the
/// profile's bounds like any override (source `message`). The layer reads it from the
/// encoded request, so it works under clients generated from the upstream protos too;
/// a compressed request is left alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MessageField {
    /// `WaitForDecisionRequest.timeout_seconds` (field 3, seconds, 0 = unset).
    WaitForDecisionSeconds,
    /// `HandoffRequest.timeout` (field 8, `google.protobuf.Duration`).
    HandoffTimeout,
    /// `ToolCall.policy.timeout` (fields 6 → 1).
    ToolCallPolicy,
    /// `InvokeToolRequest.call.policy.timeout` (fields 1 → 6 → 1).
    InvokeToolPolicy,
}
