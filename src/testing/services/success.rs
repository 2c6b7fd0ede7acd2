//! What an unscripted call answers: the RPC's default response with its success field
//! set (`accepted`, `ok`, `success`, …), so that an agent's happy path reads as one.
//! A refusal is scripted (`Script::respond_with`).

/// The RPCs whose response says success in a bool field, and that field's number.
const SUCCESS_FIELDS: [(&str, u32); 23] = [
    ("/sw4rm.registry.RegistryService/RegisterAgent", 1), // accepted
    ("/sw4rm.registry.RegistryService/Heartbeat", 1),     // ok
    ("/sw4rm.registry.RegistryService/DeregisterAgent", 1), // ok
    ("/sw4rm.scheduler.SchedulerService/SubmitTask", 1),  // accepted
    ("/sw4rm.scheduler.SchedulerService/RequestPreemption", 1), // enqueued
    ("/sw4rm.scheduler.SchedulerService/ShutdownAgent", 1), // ok
    ("/sw4rm.scheduler.SchedulerService/CancelTask", 1),  // cancelled
    (
        "/sw4rm.scheduler.SchedulerPolicyService/SetNegotiationPolicy",
        1,
    ), // ok
    (
        "/sw4rm.scheduler.SchedulerPolicyService/SetPolicyProfiles",
        1,
    ), // ok
    (
        "/sw4rm.scheduler.SchedulerPolicyService/SubmitEvaluation",
        1,
    ), // accepted
    ("/sw4rm.scheduler.SchedulerPolicyService/HitlAction", 1), // ok
    ("/sw4rm.handoff.HandoffService/CompleteHandoff", 1), // success
    ("/sw4rm.handoff.HandoffService/CancelDelegation", 1), // acknowledged
    ("/sw4rm.router.RouterService/SendMessage", 1),       // accepted
    ("/sw4rm.activity.ActivityService/AppendArtifact", 1), // ok
    ("/sw4rm.connector.ConnectorService/RegisterProvider", 1), // ok
    ("/sw4rm.logging.LoggingService/Ingest", 1),          // ok
    ("/sw4rm.worktree.WorktreeService/Bind", 1),          // ok
    ("/sw4rm.worktree.WorktreeService/Unbind", 1),        // ok
    ("/sw4rm.workflow.WorkflowService/CreateWorkflow", 2), // success
    ("/sw4rm.workflow.WorkflowService/StartWorkflow", 3), // success
    ("/sw4rm.workflow.WorkflowService/GetWorkflowState", 2), // success
    ("/sw4rm.workflow.WorkflowService/ResumeWorkflow", 3), // success
];

/// The default response of the RPC at `path`, its success field (if it has one) true.
pub(crate) fn success<Resp: prost::Message + Default>(path: &str) -> Resp {
    let Some(&(_, field)) = SUCCESS_FIELDS.iter().find(|(p, _)| *p == path) else {
        return Resp::default();
    };
    // The field as a peer encodes it: its key (number, varint wire type), then 1.
    let mut bytes = Vec::with_capacity(3);
    prost::encoding::encode_key(field, prost::encoding::WireType::Varint, &mut bytes);
    bytes.push(1);
    Resp::decode(bytes.as_slice()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::sw4rm::{registry, scheduler, workflow};

    /// Each kind of field, read back through the typed response.
    #[test]
    fn unscripted_answers_read_as_success() {
        let r: registry::RegisterAgentResponse =
            success("/sw4rm.registry.RegistryService/RegisterAgent");
        assert!(r.accepted);
        let h: registry::HeartbeatResponse = success("/sw4rm.registry.RegistryService/Heartbeat");
        assert!(h.ok);
        let c: scheduler::CancelTaskResponse =
            success("/sw4rm.scheduler.SchedulerService/CancelTask");
        assert!(c.cancelled);
        let s: workflow::StartWorkflowResponse =
            success("/sw4rm.workflow.WorkflowService/StartWorkflow");
        assert!(s.success);
        let w: workflow::GetWorkflowStateResponse =
            success("/sw4rm.workflow.WorkflowService/GetWorkflowState");
        assert!(w.success);
        // An RPC without a success field: the default.
        let t: scheduler::GetTaskStatusResponse =
            success("/sw4rm.scheduler.SchedulerService/GetTaskStatus");
        assert_eq!(t, scheduler::GetTaskStatusResponse::default());
    }
}
