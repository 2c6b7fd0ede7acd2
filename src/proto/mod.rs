//! Generated prost messages and tonic clients/servers for the SW4RM services,
//! wire-identical to the upstream SW4RM protos, plus the SW4-002 additions. The code
//! is generated from `proto/` by `build/generate.rs` and ships in `src/proto/generated/`
//! (`tests/generated_code.rs` keeps it current), so building the crate runs no code
//! generator.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// The `sw4rm.*` packages.
pub mod sw4rm {
    /// `sw4rm.common`: shared enums, `Envelope`, `Ack`, `Empty`.
    pub mod common {
        include!("generated/sw4rm.common.rs");
    }
    /// `sw4rm.registry`: `RegistryService`.
    pub mod registry {
        include!("generated/sw4rm.registry.rs");
    }
    /// `sw4rm.scheduler`: `SchedulerService` and `SchedulerPolicyService`.
    pub mod scheduler {
        include!("generated/sw4rm.scheduler.rs");
    }
    /// `sw4rm.negotiation_room`: `NegotiationRoomService`.
    pub mod negotiation_room {
        include!("generated/sw4rm.negotiation_room.rs");
    }
    /// `sw4rm.handoff`: `HandoffService`.
    pub mod handoff {
        include!("generated/sw4rm.handoff.rs");
    }
    /// `sw4rm.tool`: `ToolService`.
    pub mod tool {
        include!("generated/sw4rm.tool.rs");
    }
    /// `sw4rm.negotiation`: `NegotiationService` (open, propose, counter, evaluate,
    /// decide, abort).
    pub mod negotiation {
        include!("generated/sw4rm.negotiation.rs");
    }
    /// `sw4rm.policy`: negotiation policy messages used by `SchedulerPolicyService`.
    pub mod policy {
        include!("generated/sw4rm.policy.rs");
    }
    /// `sw4rm.router`: `RouterService` (send a message, an agent's inbound stream,
    /// acknowledge a delivery).
    pub mod router {
        include!("generated/sw4rm.router.rs");
    }
    /// `sw4rm.hitl`: `HitlService` (a human's decision).
    pub mod hitl {
        include!("generated/sw4rm.hitl.rs");
    }
    /// `sw4rm.worktree`: `WorktreeService`.
    pub mod worktree {
        include!("generated/sw4rm.worktree.rs");
    }
    /// `sw4rm.activity`: `ActivityService` (negotiation artifacts).
    pub mod activity {
        include!("generated/sw4rm.activity.rs");
    }
    /// `sw4rm.connector`: `ConnectorService` (tool providers).
    pub mod connector {
        include!("generated/sw4rm.connector.rs");
    }
    /// `sw4rm.logging`: `LoggingService`.
    pub mod logging {
        include!("generated/sw4rm.logging.rs");
    }
    /// `sw4rm.reasoning`: `ReasoningProxy`.
    pub mod reasoning {
        include!("generated/sw4rm.reasoning.rs");
    }
    /// `sw4rm.workflow`: `WorkflowService` (create, start, inspect and resume
    /// workflows of agents).
    pub mod workflow {
        include!("generated/sw4rm.workflow.rs");
    }
    /// `sw4rm.timeouts`: the SW4-002 `TimeoutProfile` and `StreamingTimeoutPolicy` messages.
    pub mod timeouts {
        include!("generated/sw4rm.timeouts.rs");
    }
}

use std::time::Duration;

use crate::policy::envelope::Envelope;
use crate::policy::profile::{ProfileError, TimeoutProfile};
use crate::policy::progress::{Heard, ProgressMessage};
use crate::policy::streaming::StreamingTimeoutPolicy;
use sw4rm::timeouts as pb;

impl From<&TimeoutProfile> for pb::TimeoutProfile {
    fn from(p: &TimeoutProfile) -> Self {
        pb::TimeoutProfile {
            profile_name: p.name.to_string(),
            default_timeout_ms: p.default_timeout_ms,
            min_timeout_ms: p.min_timeout_ms,
            max_timeout_ms: p.max_timeout_ms,
            allow_infinite: p.allow_infinite,
        }
    }
}

impl TryFrom<pb::TimeoutProfile> for TimeoutProfile {
    type Error = ProfileError;

    /// Validates the wire message like [`crate::TimeoutProfileBuilder::build`].
    fn try_from(m: pb::TimeoutProfile) -> Result<Self, Self::Error> {
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        TimeoutProfile::builder(m.profile_name)
            .default_timeout(ms(m.default_timeout_ms))
            .min_timeout(ms(m.min_timeout_ms))
            .max_timeout(ms(m.max_timeout_ms))
            .allow_infinite(m.allow_infinite)
            .build()
    }
}

impl From<pb::StreamingTimeoutPolicy> for StreamingTimeoutPolicy {
    fn from(m: pb::StreamingTimeoutPolicy) -> Self {
        StreamingTimeoutPolicy {
            initial_timeout_ms: m.initial_timeout_ms,
            message_gap_timeout_ms: m.message_gap_timeout_ms,
            total_timeout_ms: m.total_timeout_ms,
            idle_timeout_ms: m.idle_timeout_ms,
        }
    }
}

impl From<StreamingTimeoutPolicy> for pb::StreamingTimeoutPolicy {
    fn from(p: StreamingTimeoutPolicy) -> Self {
        pb::StreamingTimeoutPolicy {
            initial_timeout_ms: p.initial_timeout_ms,
            message_gap_timeout_ms: p.message_gap_timeout_ms,
            total_timeout_ms: p.total_timeout_ms,
            idle_timeout_ms: p.idle_timeout_ms,
        }
    }
}

impl ProgressMessage for sw4rm::tool::ToolFrame {
    /// A frame with data, a summary, or the final flag is progress, its `frame_no`
    /// the marker; an empty frame that is not final is a keep-alive.
    fn heard(&self) -> Heard {
        match self.data.is_empty() && self.summary.is_empty() && !self.r#final {
            true => Heard::KeepAlive,
            false => Heard::progress(Some(self.frame_no)),
        }
    }
}

impl ProgressMessage for sw4rm::router::StreamItem {
    /// An item carrying a message is progress, its `seq` the marker (a negative
    /// `seq` has none); an item without one is a keep-alive.
    ///
    /// ```
    /// use sw4rm_timeouts::{Heard, ProgressMessage};
    /// use sw4rm_timeouts::proto::sw4rm::router::StreamItem;
    /// assert_eq!(StreamItem { msg: None, seq: 3 }.heard(), Heard::KeepAlive);
    /// let item = StreamItem { msg: Some(Default::default()), seq: 3 };
    /// assert_eq!(item.heard(), Heard::progress(Some(3)));
    /// ```
    fn heard(&self) -> Heard {
        match self.msg {
            None => Heard::KeepAlive,
            Some(_) => Heard::progress(u64::try_from(self.seq).ok()),
        }
    }
}

impl From<&sw4rm::handoff::BudgetEnvelope> for Envelope {
    fn from(m: &sw4rm::handoff::BudgetEnvelope) -> Self {
        Envelope {
            tokens: m.token_budget_remaining,
            wall_ms: m.wall_time_remaining_ms,
            epoch_ms: m.deadline_epoch_ms,
            depth: m.current_depth,
            max_depth: m.max_delegation_depth,
        }
    }
}

impl From<Envelope> for sw4rm::handoff::BudgetEnvelope {
    fn from(e: Envelope) -> Self {
        sw4rm::handoff::BudgetEnvelope {
            token_budget_remaining: e.tokens,
            wall_time_remaining_ms: e.wall_ms,
            deadline_epoch_ms: e.epoch_ms,
            current_depth: e.depth,
            max_delegation_depth: e.max_depth,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::profile::{ProfileField, STANDARD_PROFILES};

    #[test]
    fn proto_round_trip_and_validation() {
        for p in STANDARD_PROFILES.iter() {
            let m = pb::TimeoutProfile::from(p);
            assert_eq!(&TimeoutProfile::try_from(m).unwrap(), p);
        }
        let bad = pb::TimeoutProfile {
            profile_name: "X".into(),
            default_timeout_ms: 1,
            min_timeout_ms: 0,
            max_timeout_ms: 1,
            allow_infinite: false,
        };
        assert_eq!(
            TimeoutProfile::try_from(bad).unwrap_err().violations[0].field,
            ProfileField::Min
        );
    }

    #[test]
    fn policy_proto_round_trip() {
        let p = StreamingTimeoutPolicy {
            initial_timeout_ms: 1,
            message_gap_timeout_ms: 2,
            total_timeout_ms: 3,
            idle_timeout_ms: 4,
        };
        assert_eq!(
            StreamingTimeoutPolicy::from(pb::StreamingTimeoutPolicy::from(p)),
            p
        );
    }
}
