//! Every one of the 26 RPCs reaches the server with its profile's default as the
//! `grpc-timeout` header (real HTTP/2 over loopback), and the RPCs of the other
//! upstream SW4RM services are routed to theirs.

mod common;

use common::{call, connect, server, standard, Opts};
use sw4rm_timeouts::route::STANDARD_ROUTES;
use sw4rm_timeouts::{TimeoutProfile, TimeoutProfileLayer};

/// The design's routing table, written out independently of the crate's constant.
const EXPECTED: [(&str, &str); 26] = [
    (
        "/sw4rm.registry.RegistryService/RegisterAgent",
        "registration",
    ),
    ("/sw4rm.registry.RegistryService/Heartbeat", "heartbeat"),
    (
        "/sw4rm.registry.RegistryService/DeregisterAgent",
        "registration",
    ),
    (
        "/sw4rm.scheduler.SchedulerService/SubmitTask",
        "task_submit",
    ),
    (
        "/sw4rm.scheduler.SchedulerService/CancelTask",
        "task_submit",
    ),
    (
        "/sw4rm.scheduler.SchedulerService/GetTaskStatus",
        "workflow_status",
    ),
    (
        "/sw4rm.scheduler.SchedulerService/RequestPreemption",
        "task_submit",
    ),
    (
        "/sw4rm.scheduler.SchedulerService/ShutdownAgent",
        "task_submit",
    ),
    (
        "/sw4rm.scheduler.SchedulerService/PollActivityBuffer",
        "workflow_status",
    ),
    (
        "/sw4rm.scheduler.SchedulerService/PurgeActivity",
        "task_submit",
    ),
    (
        "/sw4rm.negotiation_room.NegotiationRoomService/SubmitProposal",
        "negotiation_open",
    ),
    (
        "/sw4rm.negotiation_room.NegotiationRoomService/SubmitVote",
        "negotiation_vote",
    ),
    (
        "/sw4rm.negotiation_room.NegotiationRoomService/GetVotes",
        "negotiation_decision",
    ),
    (
        "/sw4rm.negotiation_room.NegotiationRoomService/GetDecision",
        "negotiation_decision",
    ),
    (
        "/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision",
        "negotiation_vote",
    ),
    ("/sw4rm.handoff.HandoffService/RequestHandoff", "handoff"),
    ("/sw4rm.handoff.HandoffService/AcceptHandoff", "handoff"),
    (
        "/sw4rm.handoff.HandoffService/RejectHandoff",
        "message_route",
    ),
    (
        "/sw4rm.handoff.HandoffService/GetPendingHandoffs",
        "workflow_status",
    ),
    ("/sw4rm.handoff.HandoffService/CompleteHandoff", "handoff"),
    ("/sw4rm.handoff.HandoffService/CancelDelegation", "handoff"),
    ("/sw4rm.tool.ToolService/InvokeTool", "tool_call"),
    ("/sw4rm.tool.ToolService/DescribeTool", "message_route"),
    ("/sw4rm.tool.ToolService/Call", "tool_call"),
    ("/sw4rm.tool.ToolService/CallStream", "tool_call"),
    ("/sw4rm.tool.ToolService/Cancel", "message_route"),
];

/// The other upstream services (SW4RM 0.6.0), written out independently: path,
/// profile, idempotent.
const UPSTREAM: [(&str, &str, bool); 29] = [
    (
        "/sw4rm.scheduler.SchedulerPolicyService/SetNegotiationPolicy",
        "task_submit",
        true,
    ),
    (
        "/sw4rm.scheduler.SchedulerPolicyService/GetNegotiationPolicy",
        "workflow_status",
        true,
    ),
    (
        "/sw4rm.scheduler.SchedulerPolicyService/SetPolicyProfiles",
        "task_submit",
        true,
    ),
    (
        "/sw4rm.scheduler.SchedulerPolicyService/ListPolicyProfiles",
        "workflow_status",
        true,
    ),
    (
        "/sw4rm.scheduler.SchedulerPolicyService/GetEffectivePolicy",
        "workflow_status",
        true,
    ),
    (
        "/sw4rm.scheduler.SchedulerPolicyService/SubmitEvaluation",
        "negotiation_vote",
        false,
    ),
    (
        "/sw4rm.scheduler.SchedulerPolicyService/HitlAction",
        "message_route",
        false,
    ),
    (
        "/sw4rm.negotiation.NegotiationService/Open",
        "negotiation_open",
        false,
    ),
    (
        "/sw4rm.negotiation.NegotiationService/Propose",
        "negotiation_open",
        false,
    ),
    (
        "/sw4rm.negotiation.NegotiationService/Counter",
        "negotiation_open",
        false,
    ),
    (
        "/sw4rm.negotiation.NegotiationService/Evaluate",
        "negotiation_vote",
        false,
    ),
    (
        "/sw4rm.negotiation.NegotiationService/Decide",
        "negotiation_decision",
        false,
    ),
    (
        "/sw4rm.negotiation.NegotiationService/Abort",
        "negotiation_decision",
        true,
    ),
    (
        "/sw4rm.router.RouterService/SendMessage",
        "message_route",
        false,
    ),
    ("/sw4rm.hitl.HitlService/Decide", "hitl_escalate", false),
    (
        "/sw4rm.worktree.WorktreeService/Bind",
        "registration",
        false,
    ),
    (
        "/sw4rm.worktree.WorktreeService/Unbind",
        "registration",
        true,
    ),
    (
        "/sw4rm.worktree.WorktreeService/RequestSwitch",
        "message_route",
        false,
    ),
    (
        "/sw4rm.worktree.WorktreeService/ApproveSwitch",
        "message_route",
        false,
    ),
    (
        "/sw4rm.worktree.WorktreeService/RejectSwitch",
        "message_route",
        false,
    ),
    (
        "/sw4rm.worktree.WorktreeService/Status",
        "workflow_status",
        true,
    ),
    (
        "/sw4rm.activity.ActivityService/AppendArtifact",
        "task_submit",
        false,
    ),
    (
        "/sw4rm.activity.ActivityService/ListArtifacts",
        "workflow_status",
        true,
    ),
    (
        "/sw4rm.connector.ConnectorService/RegisterProvider",
        "registration",
        false,
    ),
    (
        "/sw4rm.connector.ConnectorService/DescribeTools",
        "message_route",
        true,
    ),
    (
        "/sw4rm.logging.LoggingService/Ingest",
        "message_route",
        false,
    ),
    (
        "/sw4rm.reasoning.ReasoningProxy/CheckParallelism",
        "tool_call",
        true,
    ),
    (
        "/sw4rm.reasoning.ReasoningProxy/EvaluateDebate",
        "tool_call",
        true,
    ),
    (
        "/sw4rm.reasoning.ReasoningProxy/Summarize",
        "tool_call",
        true,
    ),
];

#[test]
fn the_other_upstream_services_are_routed() {
    let set = standard();
    for (path, profile, idempotent) in UPSTREAM {
        assert_eq!(set.profile_for_path(path).name, profile, "{path}");
        assert_eq!(set.is_idempotent(path), idempotent, "{path}");
    }
    // Still outside the table: the long-lived inbound stream (see the README).
    assert_eq!(
        set.profile_for_path("/sw4rm.router.RouterService/StreamIncoming")
            .name,
        "universal"
    );
}

/// Under a client generated from the upstream protos the layer sends the profile's
/// default: HITL's `Decide` waits for a human for up to 300 s by default.
#[tokio::test]
async fn an_upstream_rpc_goes_out_with_its_profile() {
    use tower::{Layer, Service, ServiceExt};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen2 = seen.clone();
    let inner = tower::service_fn(move |req: http::Request<tonic::body::Body>| {
        *seen2.lock().unwrap() = req
            .headers()
            .get("grpc-timeout")
            .map(|v| v.to_str().unwrap().to_owned());
        async { Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty())) }
    });
    let mut svc = TimeoutProfileLayer::new(standard()).layer(inner);
    let req = http::Request::builder()
        .uri("http://agent/sw4rm.hitl.HitlService/Decide")
        .body(tonic::body::Body::empty())
        .unwrap();
    svc.ready().await.unwrap().call(req).await.unwrap();
    assert_eq!(seen.lock().unwrap().as_deref(), Some("300000m"));
}

/// The spec's default of each profile as gRPC writes it (finest unit of ≤ 8 digits).
fn wire(profile: &str) -> &'static str {
    match profile {
        "heartbeat" => "5000000u",
        "registration" | "task_submit" | "tool_call" => "30000000u",
        "message_route" | "workflow_status" => "10000000u",
        "negotiation_open" | "negotiation_decision" | "handoff" => "60000000u",
        "negotiation_vote" => "300000m",
        other => panic!("no default for {other}"),
    }
}

#[test]
fn routing_table_matches_the_design() {
    assert_eq!(STANDARD_ROUTES.len(), EXPECTED.len() + UPSTREAM.len());
    let set = standard();
    for (path, profile) in EXPECTED {
        assert_eq!(set.profile_for_path(path).name, profile, "{path}");
        assert!(TimeoutProfile::standard_named(profile).is_some());
    }
}

#[tokio::test]
async fn every_rpc_carries_its_profile_default_on_the_wire() {
    let server = server().await;
    let sw4rm = connect(&server, TimeoutProfileLayer::new(standard())).await;
    for (path, _) in EXPECTED {
        call(&sw4rm, path, Opts::default())
            .await
            .unwrap_or_else(|s| panic!("{path}: {s}"));
    }
    let calls = server.calls();
    assert_eq!(calls.len(), EXPECTED.len());
    for ((path, profile), seen) in EXPECTED.iter().zip(&calls) {
        assert_eq!(seen.path, *path);
        // CallStream is a stream: only a total cap goes on the wire, and by default
        // there is none.
        let want = if path.ends_with("/CallStream") {
            None
        } else {
            Some(wire(profile))
        };
        assert_eq!(seen.grpc_timeout.as_deref(), want, "{path}");
    }
}
