//! SW4RM's wire contract for Rust: prost messages and tonic clients (and, with the
//! feature `server`, servers) for the fifteen SW4RM services, wire-identical to the
//! upstream SW4RM protos, plus the SW4-002 additions. Agents use them through
//! [`sw4rm-timeouts`](https://docs.rs/sw4rm-timeouts), which re-exports this crate as
//! `sw4rm_timeouts::proto` and runs every client over its timeout layer; depend on this
//! crate alone for the messages without the layer.
//!
//! The code is generated from the crate's `*.proto` files by `build/generate.rs` and
//! ships in `src/generated/` (`tests/generated_code.rs` keeps it current), so building
//! the crate runs no code generator (feature `regenerate`: it writes it anew).
//!
//! ```
//! use prost::Message;
//! use sw4rm_proto::sw4rm::registry::HeartbeatRequest;
//! let beat = HeartbeatRequest { agent_id: "agent-7".into(), ..Default::default() };
//! let bytes = beat.encode_to_vec();
//! assert_eq!(HeartbeatRequest::decode(bytes.as_slice()).unwrap(), beat);
//! ```
#![allow(missing_docs, clippy::all, clippy::pedantic)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The README's code, compiled as a doctest so it cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

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
