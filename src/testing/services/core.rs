//! The five services of SW4-002's profile table.

use tonic::{Request, Response, Status};

use super::{unary, Embedded, Frames};
use crate::proto::sw4rm::{common, handoff, negotiation_room as nr, registry, scheduler, tool};

#[tonic::async_trait]
impl registry::registry_service_server::RegistryService for Embedded {
    unary!(
        register_agent,
        registry::RegisterAgentRequest,
        registry::RegisterAgentResponse,
        "/sw4rm.registry.RegistryService/RegisterAgent"
    );
    unary!(
        heartbeat,
        registry::HeartbeatRequest,
        registry::HeartbeatResponse,
        "/sw4rm.registry.RegistryService/Heartbeat"
    );
    unary!(
        deregister_agent,
        registry::DeregisterAgentRequest,
        registry::DeregisterAgentResponse,
        "/sw4rm.registry.RegistryService/DeregisterAgent"
    );
}

#[tonic::async_trait]
impl scheduler::scheduler_service_server::SchedulerService for Embedded {
    unary!(
        submit_task,
        scheduler::SubmitTaskRequest,
        scheduler::SubmitTaskResponse,
        "/sw4rm.scheduler.SchedulerService/SubmitTask"
    );
    unary!(
        request_preemption,
        scheduler::PreemptRequest,
        scheduler::PreemptResponse,
        "/sw4rm.scheduler.SchedulerService/RequestPreemption"
    );
    unary!(
        shutdown_agent,
        scheduler::ShutdownAgentRequest,
        scheduler::ShutdownAgentResponse,
        "/sw4rm.scheduler.SchedulerService/ShutdownAgent"
    );
    unary!(
        poll_activity_buffer,
        scheduler::PollActivityBufferRequest,
        scheduler::PollActivityBufferResponse,
        "/sw4rm.scheduler.SchedulerService/PollActivityBuffer"
    );
    unary!(
        purge_activity,
        scheduler::PurgeActivityRequest,
        scheduler::PurgeActivityResponse,
        "/sw4rm.scheduler.SchedulerService/PurgeActivity"
    );
    unary!(
        cancel_task,
        scheduler::CancelTaskRequest,
        scheduler::CancelTaskResponse,
        "/sw4rm.scheduler.SchedulerService/CancelTask"
    );
    unary!(
        get_task_status,
        scheduler::GetTaskStatusRequest,
        scheduler::GetTaskStatusResponse,
        "/sw4rm.scheduler.SchedulerService/GetTaskStatus"
    );
}

#[tonic::async_trait]
impl nr::negotiation_room_service_server::NegotiationRoomService for Embedded {
    unary!(
        submit_proposal,
        nr::SubmitProposalRequest,
        nr::SubmitProposalResponse,
        "/sw4rm.negotiation_room.NegotiationRoomService/SubmitProposal"
    );
    unary!(
        submit_vote,
        nr::SubmitVoteRequest,
        nr::SubmitVoteResponse,
        "/sw4rm.negotiation_room.NegotiationRoomService/SubmitVote"
    );
    unary!(
        get_votes,
        nr::GetVotesRequest,
        nr::GetVotesResponse,
        "/sw4rm.negotiation_room.NegotiationRoomService/GetVotes"
    );
    unary!(
        get_decision,
        nr::GetDecisionRequest,
        nr::GetDecisionResponse,
        "/sw4rm.negotiation_room.NegotiationRoomService/GetDecision"
    );
    unary!(
        wait_for_decision,
        nr::WaitForDecisionRequest,
        nr::WaitForDecisionResponse,
        "/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision"
    );
}

#[tonic::async_trait]
impl handoff::handoff_service_server::HandoffService for Embedded {
    unary!(
        request_handoff,
        handoff::HandoffRequest,
        common::Empty,
        "/sw4rm.handoff.HandoffService/RequestHandoff"
    );
    unary!(
        accept_handoff,
        handoff::HandoffResponse,
        common::Empty,
        "/sw4rm.handoff.HandoffService/AcceptHandoff"
    );
    unary!(
        reject_handoff,
        handoff::HandoffResponse,
        common::Empty,
        "/sw4rm.handoff.HandoffService/RejectHandoff"
    );
    unary!(
        get_pending_handoffs,
        handoff::GetPendingHandoffsRequest,
        handoff::GetPendingHandoffsResponse,
        "/sw4rm.handoff.HandoffService/GetPendingHandoffs"
    );
    unary!(
        complete_handoff,
        handoff::CompleteHandoffRequest,
        handoff::CompleteHandoffResponse,
        "/sw4rm.handoff.HandoffService/CompleteHandoff"
    );
    unary!(
        cancel_delegation,
        handoff::CancelDelegation,
        handoff::CancelDelegationResponse,
        "/sw4rm.handoff.HandoffService/CancelDelegation"
    );
}

const CALL_STREAM: &str = "/sw4rm.tool.ToolService/CallStream";

#[tonic::async_trait]
impl tool::tool_service_server::ToolService for Embedded {
    unary!(
        call,
        tool::ToolCall,
        tool::ToolFrame,
        "/sw4rm.tool.ToolService/Call"
    );
    unary!(
        cancel,
        tool::ToolCall,
        tool::ToolError,
        "/sw4rm.tool.ToolService/Cancel"
    );
    unary!(
        invoke_tool,
        tool::InvokeToolRequest,
        tool::InvokeToolResponse,
        "/sw4rm.tool.ToolService/InvokeTool"
    );
    unary!(
        describe_tool,
        tool::DescribeToolRequest,
        tool::DescribeToolResponse,
        "/sw4rm.tool.ToolService/DescribeTool"
    );

    type CallStreamStream = Frames<tool::ToolFrame>;

    async fn call_stream(
        &self,
        request: Request<tool::ToolCall>,
    ) -> Result<Response<Self::CallStreamStream>, Status> {
        let call_id = request.get_ref().call_id.clone();
        let frames = self.stream(
            CALL_STREAM,
            &request,
            move |i, last| tool::ToolFrame {
                call_id: call_id.clone(),
                frame_no: u64::from(i),
                r#final: last,
                data: vec![0; 16],
                ..Default::default()
            },
            |_| {},
        );
        Ok(Response::new(frames))
    }
}
