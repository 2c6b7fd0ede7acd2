//! The five SW4RM services, answering with default messages after the scripted
//! latency, and recording every call.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::state::State;
use crate::proto::sw4rm::{common, handoff, negotiation_room as nr, registry, scheduler, tool};

/// Implements every service trait of the embedded server.
#[derive(Clone, Debug)]
pub(crate) struct Embedded {
    pub(crate) state: Arc<State>,
}

impl Embedded {
    async fn unary<Req, Resp: Default + prost::Message>(
        &self,
        req: Request<Req>,
        path: &'static str,
    ) -> Result<Response<Resp>, Status> {
        let guard = self.state.begin(path, req.metadata());
        let script = self.state.script(path);
        let nth = guard.nth_of_path();
        if !script.latency.is_zero() && script.slow_first.is_none_or(|n| nth < n) {
            tokio::time::sleep(script.latency).await;
        }
        guard.finish();
        match script.fail_with {
            Some(code) if script.fail_first.is_none_or(|n| nth < n) => {
                Err(Status::new(code, format!("scripted failure of {path}")))
            }
            _ => {
                let message = script
                    .response
                    .and_then(|bytes| Resp::decode(bytes).ok())
                    .unwrap_or_default();
                Ok(Response::new(message))
            }
        }
    }
}

/// One unary handler, written in the shape `#[async_trait]` gives trait methods
/// (the attribute does not see inside macro expansions).
macro_rules! unary {
    ($name:ident, $req:ty, $resp:ty, $path:literal) => {
        fn $name<'life0, 'async_trait>(
            &'life0 self,
            request: Request<$req>,
        ) -> Pin<Box<dyn Future<Output = Result<Response<$resp>, Status>> + Send + 'async_trait>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(self.unary(request, $path))
        }
    };
}

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

    type CallStreamStream = ReceiverStream<Result<tool::ToolFrame, Status>>;

    async fn call_stream(
        &self,
        request: Request<tool::ToolCall>,
    ) -> Result<Response<Self::CallStreamStream>, Status> {
        let guard = self.state.begin(CALL_STREAM, request.metadata());
        let script = self.state.script(CALL_STREAM).stream;
        let call_id = request.into_inner().call_id;
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            for i in 0..script.messages {
                let wait = if i == 0 {
                    script.first_after
                } else {
                    script.gap
                };
                if !wait.is_zero() {
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = tx.closed() => return, // guard drops: Cancelled
                    }
                }
                let frame = tool::ToolFrame {
                    call_id: call_id.clone(),
                    frame_no: u64::from(i),
                    r#final: i + 1 == script.messages && !script.stall_after,
                    data: vec![0; 16],
                    ..Default::default()
                };
                if tx.send(Ok(frame)).await.is_err() {
                    return;
                }
                guard.sent_message();
            }
            if script.stall_after {
                tx.closed().await; // until the client goes away
                return;
            }
            guard.finish();
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
