//! The layer's side of SW4-004: a `RequestHandoff` made inside a scope carries a
//! `BudgetEnvelope` no larger than what remains of the scope (nor than the caller
//! wrote), one hop deeper; a delegation too deep or with nothing left is refused
//! before it is sent. The arithmetic is `policy/envelope.rs`; the bytes
//! `wire/envelope.rs`.

use tonic::{Code, Status};

use crate::policy::deadline::{Phase, Received};
use crate::policy::envelope::{base, outgoing, Refusal};
use crate::policy::inherit::Propagation;
use crate::scope::{epoch_ms_now, Current};
use crate::timeout::record::CallRecord;
use crate::wire::details::DetectedBy;
use crate::wire::envelope::{stamp, Stamped};

/// Writes the envelope into the handoff's request body and gives its `request_id`
/// (when the message was read and has one); the refusal, if the delegation must not
/// be sent.
pub(crate) fn stamp_handoff(
    body: &mut tonic::body::Body,
    scope: &Current,
    propagation: &Propagation,
) -> Result<Option<String>, Refusal> {
    let left = scope.left(propagation);
    let now = epoch_ms_now();
    let mut id = None;
    match stamp(body, &mut id, |written| {
        outgoing(base(written, scope.delegation), left, now)
    }) {
        Stamped::Refused(refusal) => Err(refusal),
        Stamped::Written | Stamped::Untouched => Ok(id),
    }
}

/// Ends the call's record for a refused delegation and gives the status the caller
/// sees: `DEADLINE_EXCEEDED` with details (the scope's cap) when nothing is left,
/// `FAILED_PRECONDITION` naming the depth cap when it would go too deep.
pub(crate) fn refused(call: &mut CallRecord, refusal: Refusal) -> Status {
    match refusal {
        Refusal::Spent => call.timed_out(Phase::Total, &Received::default(), DetectedBy::Client),
        Refusal::Depth { next, max } => {
            call.finish(|| Code::FailedPrecondition);
            Status::failed_precondition(format!(
                "RequestHandoff refused before sending: the delegation would run at \
                 depth {next}, beyond the BudgetEnvelope's max_delegation_depth {max}"
            ))
        }
    }
}
