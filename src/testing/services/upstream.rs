//! The other eleven services of upstream SW4RM (policy administration, negotiation
//! rounds, router, HITL, worktrees, activity, connectors, logging, reasoning,
//! workflows).

use tonic::{Request, Response, Status};

use super::{unary, Embedded, Frames};
use crate::proto::sw4rm::{
    activity, common, connector, hitl, logging, negotiation, reasoning, router, scheduler,
    workflow, worktree,
};

/// The router's long-lived inbound stream of one agent.
const STREAM_INCOMING: &str = "/sw4rm.router.RouterService/StreamIncoming";
/// The consumer's acknowledgement of one inbound message.
const ACK_DELIVERY: &str = "/sw4rm.router.RouterService/AckDelivery";

#[tonic::async_trait]
impl scheduler::scheduler_policy_service_server::SchedulerPolicyService for Embedded {
    unary!(
        set_negotiation_policy,
        scheduler::SetNegotiationPolicyRequest,
        scheduler::SetNegotiationPolicyResponse,
        "/sw4rm.scheduler.SchedulerPolicyService/SetNegotiationPolicy"
    );
    unary!(
        get_negotiation_policy,
        scheduler::GetNegotiationPolicyRequest,
        scheduler::GetNegotiationPolicyResponse,
        "/sw4rm.scheduler.SchedulerPolicyService/GetNegotiationPolicy"
    );
    unary!(
        set_policy_profiles,
        scheduler::SetPolicyProfilesRequest,
        scheduler::SetPolicyProfilesResponse,
        "/sw4rm.scheduler.SchedulerPolicyService/SetPolicyProfiles"
    );
    unary!(
        list_policy_profiles,
        scheduler::ListPolicyProfilesRequest,
        scheduler::ListPolicyProfilesResponse,
        "/sw4rm.scheduler.SchedulerPolicyService/ListPolicyProfiles"
    );
    unary!(
        get_effective_policy,
        scheduler::GetEffectivePolicyRequest,
        scheduler::GetEffectivePolicyResponse,
        "/sw4rm.scheduler.SchedulerPolicyService/GetEffectivePolicy"
    );
    unary!(
        submit_evaluation,
        scheduler::SubmitEvaluationRequest,
        scheduler::SubmitEvaluationResponse,
        "/sw4rm.scheduler.SchedulerPolicyService/SubmitEvaluation"
    );
    unary!(
        hitl_action,
        scheduler::HitlActionRequest,
        scheduler::HitlActionResponse,
        "/sw4rm.scheduler.SchedulerPolicyService/HitlAction"
    );
}

#[tonic::async_trait]
impl negotiation::negotiation_service_server::NegotiationService for Embedded {
    unary!(
        open,
        negotiation::NegotiationOpen,
        common::Empty,
        "/sw4rm.negotiation.NegotiationService/Open"
    );
    unary!(
        propose,
        negotiation::Proposal,
        common::Empty,
        "/sw4rm.negotiation.NegotiationService/Propose"
    );
    unary!(
        counter,
        negotiation::CounterProposal,
        common::Empty,
        "/sw4rm.negotiation.NegotiationService/Counter"
    );
    unary!(
        evaluate,
        negotiation::Evaluation,
        common::Empty,
        "/sw4rm.negotiation.NegotiationService/Evaluate"
    );
    unary!(
        decide,
        negotiation::Decision,
        common::Empty,
        "/sw4rm.negotiation.NegotiationService/Decide"
    );
    unary!(
        abort,
        negotiation::AbortRequest,
        common::Empty,
        "/sw4rm.negotiation.NegotiationService/Abort"
    );
}

#[tonic::async_trait]
impl hitl::hitl_service_server::HitlService for Embedded {
    unary!(
        decide,
        hitl::HitlInvocation,
        hitl::HitlDecision,
        "/sw4rm.hitl.HitlService/Decide"
    );
}

#[tonic::async_trait]
impl worktree::worktree_service_server::WorktreeService for Embedded {
    unary!(
        bind,
        worktree::BindRequest,
        worktree::BindResponse,
        "/sw4rm.worktree.WorktreeService/Bind"
    );
    unary!(
        unbind,
        worktree::UnbindRequest,
        worktree::UnbindResponse,
        "/sw4rm.worktree.WorktreeService/Unbind"
    );
    unary!(
        request_switch,
        worktree::SwitchRequest,
        worktree::StatusResponse,
        "/sw4rm.worktree.WorktreeService/RequestSwitch"
    );
    unary!(
        approve_switch,
        worktree::SwitchApprove,
        worktree::StatusResponse,
        "/sw4rm.worktree.WorktreeService/ApproveSwitch"
    );
    unary!(
        reject_switch,
        worktree::SwitchReject,
        worktree::StatusResponse,
        "/sw4rm.worktree.WorktreeService/RejectSwitch"
    );
    unary!(
        status,
        worktree::StatusRequest,
        worktree::StatusResponse,
        "/sw4rm.worktree.WorktreeService/Status"
    );
}

#[tonic::async_trait]
impl activity::activity_service_server::ActivityService for Embedded {
    unary!(
        append_artifact,
        activity::AppendArtifactRequest,
        activity::AppendArtifactResponse,
        "/sw4rm.activity.ActivityService/AppendArtifact"
    );
    unary!(
        list_artifacts,
        activity::ListArtifactsRequest,
        activity::ListArtifactsResponse,
        "/sw4rm.activity.ActivityService/ListArtifacts"
    );
}

#[tonic::async_trait]
impl connector::connector_service_server::ConnectorService for Embedded {
    unary!(
        register_provider,
        connector::ProviderRegisterRequest,
        connector::ProviderRegisterResponse,
        "/sw4rm.connector.ConnectorService/RegisterProvider"
    );
    unary!(
        describe_tools,
        connector::DescribeToolsRequest,
        connector::DescribeToolsResponse,
        "/sw4rm.connector.ConnectorService/DescribeTools"
    );
}

#[tonic::async_trait]
impl logging::logging_service_server::LoggingService for Embedded {
    unary!(
        ingest,
        logging::LogEvent,
        logging::IngestResponse,
        "/sw4rm.logging.LoggingService/Ingest"
    );
}

#[tonic::async_trait]
impl reasoning::reasoning_proxy_server::ReasoningProxy for Embedded {
    unary!(
        check_parallelism,
        reasoning::ParallelismCheckRequest,
        reasoning::ParallelismCheckResponse,
        "/sw4rm.reasoning.ReasoningProxy/CheckParallelism"
    );
    unary!(
        evaluate_debate,
        reasoning::DebateEvaluateRequest,
        reasoning::DebateEvaluateResponse,
        "/sw4rm.reasoning.ReasoningProxy/EvaluateDebate"
    );
    unary!(
        summarize,
        reasoning::SummarizeRequest,
        reasoning::SummarizeResponse,
        "/sw4rm.reasoning.ReasoningProxy/Summarize"
    );
}

#[tonic::async_trait]
impl router::router_service_server::RouterService for Embedded {
    unary!(
        send_message,
        router::SendMessageRequest,
        router::SendMessageResponse,
        "/sw4rm.router.RouterService/SendMessage"
    );

    type StreamIncomingStream = Frames<router::StreamItem>;

    /// Numbered messages, each with a `seq` new to this server; every `seq` sent is
    /// pending until `AckDelivery` acknowledges it.
    async fn stream_incoming(
        &self,
        request: Request<router::StreamRequest>,
    ) -> Result<Response<Self::StreamIncomingStream>, Status> {
        let agent_id = request.get_ref().agent_id.clone();
        let (state, pending) = (self.state.clone(), self.state.clone());
        let agent = agent_id.clone();
        let frames = self.stream(
            STREAM_INCOMING,
            &request,
            move |i, _| router::StreamItem {
                msg: Some(common::Envelope {
                    message_id: format!("{agent_id}-{i}"),
                    ..Default::default()
                }),
                seq: state.next_seq(),
            },
            move |item| pending.delivered(&agent, item.seq),
        );
        Ok(Response::new(frames))
    }

    /// `recorded` is true for a `seq` this agent's stream delivered and nobody has
    /// acknowledged yet; false otherwise (acknowledging twice changes nothing).
    async fn ack_delivery(
        &self,
        request: Request<router::DeliveryAckRequest>,
    ) -> Result<Response<router::DeliveryAckResponse>, Status> {
        let state = self.state.clone();
        self.unary_with(request, ACK_DELIVERY, move |ack| {
            router::DeliveryAckResponse {
                recorded: state.acknowledge(&ack.agent_id, ack.seq),
            }
        })
        .await
    }
}

#[tonic::async_trait]
impl workflow::workflow_service_server::WorkflowService for Embedded {
    unary!(
        create_workflow,
        workflow::CreateWorkflowRequest,
        workflow::CreateWorkflowResponse,
        "/sw4rm.workflow.WorkflowService/CreateWorkflow"
    );
    unary!(
        start_workflow,
        workflow::StartWorkflowRequest,
        workflow::StartWorkflowResponse,
        "/sw4rm.workflow.WorkflowService/StartWorkflow"
    );
    unary!(
        get_workflow_state,
        workflow::GetWorkflowStateRequest,
        workflow::GetWorkflowStateResponse,
        "/sw4rm.workflow.WorkflowService/GetWorkflowState"
    );
    unary!(
        resume_workflow,
        workflow::ResumeWorkflowRequest,
        workflow::ResumeWorkflowResponse,
        "/sw4rm.workflow.WorkflowService/ResumeWorkflow"
    );
}
