//! What the follow helper drives: an operation that is submitted once and then asked
//! for its status ([`LongOperation`]), and the SW4RM scheduler's tasks as one
//! ([`SchedulerTask`]).

use std::future::Future;
use std::time::Duration;

use tonic::Status;

use crate::clients::Sw4rm;
use crate::proto::sw4rm::scheduler::{
    CancelTaskRequest, GetTaskStatusRequest, GetTaskStatusResponse, SubmitTaskRequest, TaskState,
};

/// How a submit was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Submitted {
    /// The server took it.
    Accepted,
    /// The server answered and did not take it (its reason, as it gave it).
    Refused(String),
}

/// An operation that outlives a request: submitted once, then followed by its status
/// RPC until a terminal state, cancelled by its cancel RPC. [`SchedulerTask`] is the
/// SW4RM scheduler's; implement it for others (a workflow: `StartWorkflow`, then
/// `GetWorkflowState`).
pub trait LongOperation {
    /// What the status RPC answers.
    type Status: Send;

    /// Sends the submit RPC (the helper calls it once, never again).
    fn submit(&mut self) -> impl Future<Output = Result<Submitted, Status>> + Send;

    /// Asks for the operation's status (by the id or token the submit carried).
    fn status(&mut self) -> impl Future<Output = Result<Self::Status, Status>> + Send;

    /// Asks the server to cancel the operation; `true` when it says it did.
    fn cancel(&mut self) -> impl Future<Output = Result<bool, Status>> + Send;

    /// Whether `status` is final.
    fn is_terminal(&self, status: &Self::Status) -> bool;

    /// The wait before the next poll the server suggests in `status`, where its
    /// protocol carries one (default: none).
    fn suggested_poll(&self, status: &Self::Status) -> Option<Duration> {
        let _ = status;
        None
    }
}

/// A SW4RM scheduler task: `SubmitTask` once, then `GetTaskStatus` by its `task_id`
/// until `SUCCEEDED`, `FAILED`, `CANCELLED` or `PREEMPTED`; `CancelTask` to cancel it.
/// Each RPC goes through the client's layer under its profile (`task_submit`,
/// `workflow_status`).
///
/// `GetTaskStatus` and `CancelTask` are SW4-002 additions that upstream SW4RM's 0.6.0
/// `scheduler.proto` lacks: against a scheduler built from upstream's protos the first
/// poll fails `UNIMPLEMENTED` ([`FollowError::Poll`](super::FollowError::Poll)).
/// Implement [`LongOperation`] over the RPCs such a scheduler serves instead.
#[derive(Clone, Debug)]
pub struct SchedulerTask {
    client: Sw4rm,
    request: SubmitTaskRequest,
}

impl SchedulerTask {
    /// The task `request` submits. Its `task_id` is what the status is asked by:
    /// an empty one is given a random id ([`task_id`](Self::task_id) reads it), so
    /// no submit or poll ever carries `""`.
    pub fn new(client: Sw4rm, mut request: SubmitTaskRequest) -> Self {
        if request.task_id.is_empty() {
            request.task_id = crate::policy::ids::random_id();
        }
        SchedulerTask { client, request }
    }

    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.request.task_id
    }
}

impl LongOperation for SchedulerTask {
    type Status = GetTaskStatusResponse;

    fn submit(&mut self) -> impl Future<Output = Result<Submitted, Status>> + Send {
        let mut client = self.client.scheduler();
        let request = self.request.clone();
        async move {
            let answer = client.submit_task(request).await?.into_inner();
            Ok(match answer.accepted {
                true => Submitted::Accepted,
                false => Submitted::Refused(answer.reason),
            })
        }
    }

    fn status(&mut self) -> impl Future<Output = Result<Self::Status, Status>> + Send {
        let mut client = self.client.scheduler();
        let request = GetTaskStatusRequest {
            agent_id: self.request.agent_id.clone(),
            task_id: self.request.task_id.clone(),
        };
        async move { Ok(client.get_task_status(request).await?.into_inner()) }
    }

    fn cancel(&mut self) -> impl Future<Output = Result<bool, Status>> + Send {
        let mut client = self.client.scheduler();
        let request = CancelTaskRequest {
            agent_id: self.request.agent_id.clone(),
            task_id: self.request.task_id.clone(),
            reason: "the caller's scope was cancelled".to_owned(),
        };
        async move { Ok(client.cancel_task(request).await?.into_inner().cancelled) }
    }

    fn is_terminal(&self, status: &Self::Status) -> bool {
        matches!(
            status.state(),
            TaskState::TaskSucceeded
                | TaskState::TaskFailed
                | TaskState::TaskCancelled
                | TaskState::TaskPreempted
        )
    }
}
