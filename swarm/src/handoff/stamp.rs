//! A `RequestHandoff` made inside a scope carries a `BudgetEnvelope` no larger than
//! what remains of the scope (nor than the caller wrote), one hop deeper; a delegation
//! too deep or with nothing left is refused before it is sent. The arithmetic is
//! `policy/envelope.rs`; the bytes `wire/envelope.rs`.

use crate::handoff::envelope::{stamp, Stamped};
use crate::handoff::outgoing::{base, outgoing, Refusal};
use sw4rm_timeouts::seams::RefuseSending;
use sw4rm_timeouts::seams::{epoch_ms_now, Current};
use sw4rm_timeouts::Propagation;

/// Writes the envelope into the handoff's request body and gives its `request_id`
/// (when the message was read and has one); the refusal, if the delegation must not
/// be sent.
pub(crate) fn stamp_handoff(
    body: &mut tonic::body::Body,
    scope: &Current,
    propagation: &Propagation,
) -> Result<Option<String>, RefuseSending> {
    let left = scope.left(propagation);
    let now = epoch_ms_now();
    let mut id = None;
    match stamp(body, &mut id, |written| {
        outgoing(base(written, scope.delegation), left, now)
    }) {
        Stamped::Refused(Refusal::Spent) => Err(RefuseSending::Spent),
        Stamped::Refused(Refusal::Depth { next, max }) => Err(RefuseSending::TooDeep { next, max }),
        Stamped::Written | Stamped::Untouched => Ok(id),
    }
}
