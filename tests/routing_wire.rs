//! Every one of the 26 RPCs reaches the server with its profile's default as the
//! `grpc-timeout` header (real HTTP/2 over loopback).

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
    assert_eq!(STANDARD_ROUTES.len(), EXPECTED.len());
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
