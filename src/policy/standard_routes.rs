//! The standard routing table: every RPC of the SW4RM services and the SW4-002 profile
//! it runs under, with what each route knows beyond its profile (a long-lived stream,
//! an idempotent RPC, a timeout field in its message). Read by `route.rs`.

use super::message::MessageField;
use super::profile::names;

/// One row of the standard routing table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StandardRoute {
    /// gRPC path, `/package.Service/Method`.
    pub path: &'static str,
    /// Profile name.
    pub profile: &'static str,
    /// Server-streaming response.
    pub streaming: bool,
    /// Timeout field inside the request message, if the RPC has one.
    pub message_field: Option<MessageField>,
    /// Read-only or naturally idempotent: sending it twice has the effect of sending
    /// it once, so it is retried after any retryable failure. Other RPCs are retried
    /// only when the request never reached the server.
    pub idempotent: bool,
    /// A long-lived server stream that may stay idle (an agent's inbound messages):
    /// no time-to-first-message or gap timer falls back to the profile's timeout;
    /// only timers configured for the profile's streaming policy, or set per call,
    /// run. Implies `streaming`.
    pub long_lived: bool,
}

const fn r(path: &'static str, profile: &'static str) -> StandardRoute {
    StandardRoute {
        path,
        profile,
        streaming: false,
        message_field: None,
        idempotent: false,
        long_lived: false,
    }
}

const fn long_lived(mut route: StandardRoute) -> StandardRoute {
    route.streaming = true;
    route.long_lived = true;
    route
}

const fn idempotent(mut route: StandardRoute) -> StandardRoute {
    route.idempotent = true;
    route
}

const fn with_field(mut route: StandardRoute, field: MessageField) -> StandardRoute {
    route.message_field = Some(field);
    route
}

/// Every RPC of Registry, Scheduler, NegotiationRoom, Handoff and Tool with its
/// SW4-002 profile (spec §3, extended to the upstream RPCs the spec does not list),
/// then the RPCs of the other upstream SW4RM services (SchedulerPolicy, Negotiation,
/// Router, HITL, Worktree, Activity, Connector, Logging, Reasoning, Workflow). Every
/// standard profile has at least one route.
/// `RouterService/StreamIncoming`, an agent's inbound stream, is a long-lived stream:
/// it is not ended for being idle (see [`StandardRoute::long_lived`]).
pub const STANDARD_ROUTES: &[StandardRoute] = &[
    r(
        "/sw4rm.registry.RegistryService/RegisterAgent",
        names::REGISTRATION,
    ),
    idempotent(r(
        "/sw4rm.registry.RegistryService/Heartbeat",
        names::HEARTBEAT,
    )),
    idempotent(r(
        "/sw4rm.registry.RegistryService/DeregisterAgent",
        names::REGISTRATION,
    )),
    r(
        "/sw4rm.scheduler.SchedulerService/SubmitTask",
        names::TASK_SUBMIT,
    ),
    idempotent(r(
        "/sw4rm.scheduler.SchedulerService/CancelTask",
        names::TASK_SUBMIT,
    )),
    idempotent(r(
        "/sw4rm.scheduler.SchedulerService/GetTaskStatus",
        names::WORKFLOW_STATUS,
    )),
    r(
        "/sw4rm.scheduler.SchedulerService/RequestPreemption",
        names::TASK_SUBMIT,
    ),
    r(
        "/sw4rm.scheduler.SchedulerService/ShutdownAgent",
        names::TASK_SUBMIT,
    ),
    idempotent(r(
        "/sw4rm.scheduler.SchedulerService/PollActivityBuffer",
        names::WORKFLOW_STATUS,
    )),
    r(
        "/sw4rm.scheduler.SchedulerService/PurgeActivity",
        names::TASK_SUBMIT,
    ),
    r(
        "/sw4rm.negotiation_room.NegotiationRoomService/SubmitProposal",
        names::NEGOTIATION_OPEN,
    ),
    r(
        "/sw4rm.negotiation_room.NegotiationRoomService/SubmitVote",
        names::NEGOTIATION_VOTE,
    ),
    idempotent(r(
        "/sw4rm.negotiation_room.NegotiationRoomService/GetVotes",
        names::NEGOTIATION_DECISION,
    )),
    idempotent(r(
        "/sw4rm.negotiation_room.NegotiationRoomService/GetDecision",
        names::NEGOTIATION_DECISION,
    )),
    idempotent(with_field(
        r(
            "/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision",
            names::NEGOTIATION_VOTE,
        ),
        MessageField::WaitForDecisionSeconds,
    )),
    with_field(
        r(
            "/sw4rm.handoff.HandoffService/RequestHandoff",
            names::HANDOFF,
        ),
        MessageField::HandoffTimeout,
    ),
    r(
        "/sw4rm.handoff.HandoffService/AcceptHandoff",
        names::HANDOFF,
    ),
    r(
        "/sw4rm.handoff.HandoffService/RejectHandoff",
        names::MESSAGE_ROUTE,
    ),
    idempotent(r(
        "/sw4rm.handoff.HandoffService/GetPendingHandoffs",
        names::WORKFLOW_STATUS,
    )),
    r(
        "/sw4rm.handoff.HandoffService/CompleteHandoff",
        names::HANDOFF,
    ),
    idempotent(r(
        "/sw4rm.handoff.HandoffService/CancelDelegation",
        names::HANDOFF,
    )),
    with_field(
        r("/sw4rm.tool.ToolService/InvokeTool", names::TOOL_CALL),
        MessageField::InvokeToolPolicy,
    ),
    idempotent(r(
        "/sw4rm.tool.ToolService/DescribeTool",
        names::MESSAGE_ROUTE,
    )),
    with_field(
        r("/sw4rm.tool.ToolService/Call", names::TOOL_CALL),
        MessageField::ToolCallPolicy,
    ),
    StandardRoute {
        path: "/sw4rm.tool.ToolService/CallStream",
        profile: names::TOOL_CALL,
        streaming: true,
        message_field: Some(MessageField::ToolCallPolicy),
        idempotent: false,
        long_lived: false,
    },
    idempotent(r("/sw4rm.tool.ToolService/Cancel", names::MESSAGE_ROUTE)),
    // The other services of upstream SW4RM 0.6.0 (no clients here; the layer routes
    // them under any client generated from the upstream protos).
    idempotent(r(
        "/sw4rm.scheduler.SchedulerPolicyService/SetNegotiationPolicy",
        names::TASK_SUBMIT,
    )),
    idempotent(r(
        "/sw4rm.scheduler.SchedulerPolicyService/GetNegotiationPolicy",
        names::WORKFLOW_STATUS,
    )),
    idempotent(r(
        "/sw4rm.scheduler.SchedulerPolicyService/SetPolicyProfiles",
        names::TASK_SUBMIT,
    )),
    idempotent(r(
        "/sw4rm.scheduler.SchedulerPolicyService/ListPolicyProfiles",
        names::WORKFLOW_STATUS,
    )),
    idempotent(r(
        "/sw4rm.scheduler.SchedulerPolicyService/GetEffectivePolicy",
        names::WORKFLOW_STATUS,
    )),
    r(
        "/sw4rm.scheduler.SchedulerPolicyService/SubmitEvaluation",
        names::NEGOTIATION_VOTE,
    ),
    r(
        "/sw4rm.scheduler.SchedulerPolicyService/HitlAction",
        names::MESSAGE_ROUTE,
    ),
    r(
        "/sw4rm.negotiation.NegotiationService/Open",
        names::NEGOTIATION_OPEN,
    ),
    r(
        "/sw4rm.negotiation.NegotiationService/Propose",
        names::NEGOTIATION_OPEN,
    ),
    r(
        "/sw4rm.negotiation.NegotiationService/Counter",
        names::NEGOTIATION_OPEN,
    ),
    r(
        "/sw4rm.negotiation.NegotiationService/Evaluate",
        names::NEGOTIATION_VOTE,
    ),
    r(
        "/sw4rm.negotiation.NegotiationService/Decide",
        names::NEGOTIATION_DECISION,
    ),
    idempotent(r(
        "/sw4rm.negotiation.NegotiationService/Abort",
        names::NEGOTIATION_DECISION,
    )),
    r(
        "/sw4rm.router.RouterService/SendMessage",
        names::MESSAGE_ROUTE,
    ),
    long_lived(r(
        "/sw4rm.router.RouterService/StreamIncoming",
        names::MESSAGE_ROUTE,
    )),
    // Acknowledging a `seq` twice answers `recorded = false` and changes nothing.
    idempotent(r(
        "/sw4rm.router.RouterService/AckDelivery",
        names::MESSAGE_ROUTE,
    )),
    r("/sw4rm.hitl.HitlService/Decide", names::HITL_ESCALATE),
    r("/sw4rm.worktree.WorktreeService/Bind", names::REGISTRATION),
    idempotent(r(
        "/sw4rm.worktree.WorktreeService/Unbind",
        names::REGISTRATION,
    )),
    r(
        "/sw4rm.worktree.WorktreeService/RequestSwitch",
        names::MESSAGE_ROUTE,
    ),
    r(
        "/sw4rm.worktree.WorktreeService/ApproveSwitch",
        names::MESSAGE_ROUTE,
    ),
    r(
        "/sw4rm.worktree.WorktreeService/RejectSwitch",
        names::MESSAGE_ROUTE,
    ),
    idempotent(r(
        "/sw4rm.worktree.WorktreeService/Status",
        names::WORKFLOW_STATUS,
    )),
    r(
        "/sw4rm.activity.ActivityService/AppendArtifact",
        names::TASK_SUBMIT,
    ),
    idempotent(r(
        "/sw4rm.activity.ActivityService/ListArtifacts",
        names::WORKFLOW_STATUS,
    )),
    r(
        "/sw4rm.connector.ConnectorService/RegisterProvider",
        names::REGISTRATION,
    ),
    idempotent(r(
        "/sw4rm.connector.ConnectorService/DescribeTools",
        names::MESSAGE_ROUTE,
    )),
    r("/sw4rm.logging.LoggingService/Ingest", names::MESSAGE_ROUTE),
    idempotent(r(
        "/sw4rm.reasoning.ReasoningProxy/CheckParallelism",
        names::TOOL_CALL,
    )),
    idempotent(r(
        "/sw4rm.reasoning.ReasoningProxy/EvaluateDebate",
        names::TOOL_CALL,
    )),
    idempotent(r(
        "/sw4rm.reasoning.ReasoningProxy/Summarize",
        names::TOOL_CALL,
    )),
    // Upstream's WorkflowService (newer than 0.6.0): the RPCs SW4-002's workflow
    // profiles exist for. Creating, starting or resuming twice runs twice.
    r(
        "/sw4rm.workflow.WorkflowService/CreateWorkflow",
        names::WORKFLOW_SUBMIT,
    ),
    r(
        "/sw4rm.workflow.WorkflowService/StartWorkflow",
        names::WORKFLOW_SUBMIT,
    ),
    idempotent(r(
        "/sw4rm.workflow.WorkflowService/GetWorkflowState",
        names::WORKFLOW_STATUS,
    )),
    r(
        "/sw4rm.workflow.WorkflowService/ResumeWorkflow",
        names::WORKFLOW_SUBMIT,
    ),
];
