//! The handoff step of a call: whether a `HandoffRequest` made inside a scope is
//! stamped with the scope's envelope and remembered for the cancel cascade, and
//! doing both before it is sent.

use std::sync::Arc;
use std::time::Duration;

use super::cascade::{remember, CascadeSender};
use super::stamp::{refused, stamp_handoff};
use crate::policy::message::MessageField;
use crate::scope::{CancelSignal, Current};
use crate::timeout::per_call::{CallBudgetEnvelope, CallOptions};
use crate::timeout::plan::CallPlan;
use crate::timeout::record::CallRecord;
use crate::timeout::state::shared::Shared;
use crate::wire::envelope::peek_request_id;

/// What the layer does for a handoff (a `HandoffRequest`) made inside a scope.
pub(crate) struct Handoff {
    /// The scope whose envelope the handoff carries.
    delegation: Option<Current>,
    /// The cancel cascade's grace, when the handoff is remembered for the cascade.
    cascade: Option<Duration>,
}

impl Handoff {
    /// Whether the call is a handoff to stamp or to remember, from its plan.
    #[inline(always)]
    pub(crate) fn of(
        shared: &Shared,
        plan: &CallPlan<'_>,
        options: CallOptions<'_>,
        scope: Option<Current>,
        cancellable: bool,
    ) -> Self {
        let handoff = plan.route.message_field == Some(MessageField::HandoffTimeout);
        let stamped = handoff && shared.settings.envelopes;
        Handoff {
            delegation: scope.filter(|_| stamped && options.get::<CallBudgetEnvelope>().is_none()),
            cascade: shared.settings.cascade.filter(|_| handoff && cancellable),
        }
    }

    /// Stamps the handoff's envelope with what the scope has left, and remembers its
    /// `request_id` for the cancel cascade. A refusal (nothing left, too deep) is the
    /// call's answer.
    #[inline(always)]
    pub(crate) fn stamp(
        &self,
        shared: &Shared,
        body: &mut tonic::body::Body,
        call: &mut CallRecord,
        (cancel, sender): (&Option<Arc<CancelSignal>>, &Option<CascadeSender>),
    ) -> Result<(), tonic::Status> {
        let mut request_id = None;
        if let Some(scope) = &self.delegation {
            match stamp_handoff(body, scope, &shared.settings.propagation) {
                Err(refusal) => return Err(refused(call, refusal)),
                Ok(id) => request_id = id,
            }
        }
        if let (Some(grace), Some(signal)) = (self.cascade, cancel) {
            if let Some(id) = request_id.or_else(|| peek_request_id(body)) {
                let instruments = shared.settings.instruments.clone();
                remember(signal, id, grace, sender.clone(), instruments);
            }
        }
        Ok(())
    }
}
