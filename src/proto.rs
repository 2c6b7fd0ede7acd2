//! Generated prost messages and tonic clients/servers for the SW4RM services,
//! wire-identical to the upstream SW4RM protos, plus the SW4-002 additions.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

/// The `sw4rm.*` packages.
pub mod sw4rm {
    /// `sw4rm.common`: shared enums, `Envelope`, `Ack`, `Empty`.
    pub mod common {
        tonic::include_proto!("sw4rm.common");
    }
    /// `sw4rm.registry`: `RegistryService`.
    pub mod registry {
        tonic::include_proto!("sw4rm.registry");
    }
    /// `sw4rm.scheduler`: `SchedulerService`.
    pub mod scheduler {
        tonic::include_proto!("sw4rm.scheduler");
    }
    /// `sw4rm.negotiation_room`: `NegotiationRoomService`.
    pub mod negotiation_room {
        tonic::include_proto!("sw4rm.negotiation_room");
    }
    /// `sw4rm.handoff`: `HandoffService`.
    pub mod handoff {
        tonic::include_proto!("sw4rm.handoff");
    }
    /// `sw4rm.tool`: `ToolService`.
    pub mod tool {
        tonic::include_proto!("sw4rm.tool");
    }
    /// `sw4rm.timeouts`: the SW4-002 `TimeoutProfile` and `StreamingTimeoutPolicy` messages.
    pub mod timeouts {
        tonic::include_proto!("sw4rm.timeouts");
    }
}
