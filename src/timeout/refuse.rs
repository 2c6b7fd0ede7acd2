//! A call a layer above this one refused before it was sent (`sw4rm-swarm`'s handoff
//! layer: a delegation beyond its envelope's depth, or with nothing left): the call's
//! record ends here as any other call's does, so the caller sees the status, the
//! details and the metrics it would see had the layer itself refused it.

use tonic::{Code, Status};

use super::record::CallRecord;
use crate::policy::deadline::{Phase, Received};
use crate::wire::details::DetectedBy;

/// Put in a request's extensions by a layer stacked over the timeout layer: the
/// call is not sent, and ends as this says. For `sw4rm-swarm` (reached through
/// [`crate::seams`]); not part of the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefuseSending {
    /// Nothing (less than a millisecond) is left to grant: `DEADLINE_EXCEEDED` with
    /// the call's timeout details, counted as a timeout of the whole call.
    Spent,
    /// The delegation would run at depth `next`, beyond the envelope's `max`:
    /// `FAILED_PRECONDITION`, naming both.
    TooDeep {
        /// The depth it would run at.
        next: u32,
        /// The envelope's `max_delegation_depth`.
        max: u32,
    },
}

/// Ends `call`'s record as `refusal` says, and gives the status the caller sees.
#[cold]
pub(crate) fn refused(call: &mut CallRecord, refusal: RefuseSending) -> Status {
    match refusal {
        RefuseSending::Spent => {
            call.timed_out(Phase::Total, &Received::default(), DetectedBy::Client)
        }
        RefuseSending::TooDeep { next, max } => {
            call.finish(|| Code::FailedPrecondition);
            Status::failed_precondition(format!(
                "RequestHandoff refused before sending: the delegation would run at \
                 depth {next}, beyond the BudgetEnvelope's max_delegation_depth {max}"
            ))
        }
    }
}
