//! Every one of the 26 RPCs reaches the server with its profile's default as the
//! `grpc-timeout` header (real HTTP/2 over loopback), and so does every RPC of the
//! other eleven upstream SW4RM services, through the clients `Sw4rm` hands out.

mod common;

use common::{call, connect, server, standard, Opts};
use sw4rm_timeouts::route::STANDARD_ROUTES;
use sw4rm_timeouts::{Sw4rm, TimeoutProfile, TimeoutProfileLayer};

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

/// The other upstream services (SW4RM 0.6.0, and the newer Workflow service and
/// router acknowledgement), written out independently: path, profile, idempotent.
const UPSTREAM: [(&str, &str, bool); 34] = [
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
    (
        "/sw4rm.router.RouterService/AckDelivery",
        "message_route",
        true,
    ),
    (
        "/sw4rm.workflow.WorkflowService/CreateWorkflow",
        "workflow_submit",
        false,
    ),
    (
        "/sw4rm.workflow.WorkflowService/StartWorkflow",
        "workflow_submit",
        false,
    ),
    (
        "/sw4rm.workflow.WorkflowService/GetWorkflowState",
        "workflow_status",
        true,
    ),
    (
        "/sw4rm.workflow.WorkflowService/ResumeWorkflow",
        "workflow_submit",
        false,
    ),
];

#[test]
fn the_other_upstream_services_are_routed() {
    let set = standard();
    for (path, profile, idempotent) in UPSTREAM {
        assert_eq!(set.profile_for_path(path).name, profile, "{path}");
        assert_eq!(set.is_idempotent(path), idempotent, "{path}");
    }
    // The long-lived inbound stream: the router's profile, watched as a stream that
    // may stay idle.
    let inbox = set
        .routes()
        .find(|r| r.pattern == STREAM_INCOMING)
        .expect("StreamIncoming is routed");
    assert_eq!(
        (
            inbox.profile,
            inbox.streaming,
            inbox.long_lived,
            inbox.idempotent
        ),
        ("message_route", true, true, false)
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
        "registration" | "task_submit" | "tool_call" | "workflow_submit" => "30000000u",
        "message_route" | "workflow_status" => "10000000u",
        "negotiation_open" | "negotiation_decision" | "handoff" => "60000000u",
        "negotiation_vote" | "hitl_escalate" => "300000m",
        other => panic!("no default for {other}"),
    }
}

#[test]
fn routing_table_matches_the_design() {
    // And StreamIncoming.
    assert_eq!(STANDARD_ROUTES.len(), EXPECTED.len() + UPSTREAM.len() + 1);
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

const STREAM_INCOMING: &str = "/sw4rm.router.RouterService/StreamIncoming";

/// Calls one unary RPC of the other eleven upstream services with a default message.
async fn call_upstream(sw4rm: &Sw4rm, path: &str) -> Result<(), tonic::Status> {
    use sw4rm_timeouts::proto::sw4rm::{
        activity, connector, hitl, logging, negotiation as neg, reasoning, router, scheduler,
        workflow, worktree,
    };
    macro_rules! rpc {
        ($client:expr, $method:ident, $req:ty) => {
            $client.$method(<$req>::default()).await.map(drop)
        };
    }
    let (service, method) = sw4rm_timeouts::route::split_path(path).unwrap_or(("", ""));
    match (service, method) {
        ("sw4rm.scheduler.SchedulerPolicyService", m) => {
            let mut c = sw4rm.scheduler_policy();
            match m {
                "SetNegotiationPolicy" => {
                    rpc!(
                        c,
                        set_negotiation_policy,
                        scheduler::SetNegotiationPolicyRequest
                    )
                }
                "GetNegotiationPolicy" => {
                    rpc!(
                        c,
                        get_negotiation_policy,
                        scheduler::GetNegotiationPolicyRequest
                    )
                }
                "SetPolicyProfiles" => {
                    rpc!(c, set_policy_profiles, scheduler::SetPolicyProfilesRequest)
                }
                "ListPolicyProfiles" => {
                    rpc!(
                        c,
                        list_policy_profiles,
                        scheduler::ListPolicyProfilesRequest
                    )
                }
                "GetEffectivePolicy" => {
                    rpc!(
                        c,
                        get_effective_policy,
                        scheduler::GetEffectivePolicyRequest
                    )
                }
                "SubmitEvaluation" => {
                    rpc!(c, submit_evaluation, scheduler::SubmitEvaluationRequest)
                }
                "HitlAction" => rpc!(c, hitl_action, scheduler::HitlActionRequest),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.negotiation.NegotiationService", m) => {
            let mut c = sw4rm.negotiation();
            match m {
                "Open" => rpc!(c, open, neg::NegotiationOpen),
                "Propose" => rpc!(c, propose, neg::Proposal),
                "Counter" => rpc!(c, counter, neg::CounterProposal),
                "Evaluate" => rpc!(c, evaluate, neg::Evaluation),
                "Decide" => rpc!(c, decide, neg::Decision),
                "Abort" => rpc!(c, abort, neg::AbortRequest),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.router.RouterService", "SendMessage") => {
            rpc!(sw4rm.router(), send_message, router::SendMessageRequest)
        }
        ("sw4rm.router.RouterService", "AckDelivery") => {
            rpc!(sw4rm.router(), ack_delivery, router::DeliveryAckRequest)
        }
        ("sw4rm.workflow.WorkflowService", m) => {
            let mut c = sw4rm.workflow();
            match m {
                "CreateWorkflow" => rpc!(c, create_workflow, workflow::CreateWorkflowRequest),
                "StartWorkflow" => rpc!(c, start_workflow, workflow::StartWorkflowRequest),
                "GetWorkflowState" => {
                    rpc!(c, get_workflow_state, workflow::GetWorkflowStateRequest)
                }
                "ResumeWorkflow" => rpc!(c, resume_workflow, workflow::ResumeWorkflowRequest),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.hitl.HitlService", "Decide") => rpc!(sw4rm.hitl(), decide, hitl::HitlInvocation),
        ("sw4rm.worktree.WorktreeService", m) => {
            let mut c = sw4rm.worktree();
            match m {
                "Bind" => rpc!(c, bind, worktree::BindRequest),
                "Unbind" => rpc!(c, unbind, worktree::UnbindRequest),
                "RequestSwitch" => rpc!(c, request_switch, worktree::SwitchRequest),
                "ApproveSwitch" => rpc!(c, approve_switch, worktree::SwitchApprove),
                "RejectSwitch" => rpc!(c, reject_switch, worktree::SwitchReject),
                "Status" => rpc!(c, status, worktree::StatusRequest),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.activity.ActivityService", m) => {
            let mut c = sw4rm.activity();
            match m {
                "AppendArtifact" => rpc!(c, append_artifact, activity::AppendArtifactRequest),
                "ListArtifacts" => rpc!(c, list_artifacts, activity::ListArtifactsRequest),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.connector.ConnectorService", m) => {
            let mut c = sw4rm.connector();
            match m {
                "RegisterProvider" => {
                    rpc!(c, register_provider, connector::ProviderRegisterRequest)
                }
                "DescribeTools" => rpc!(c, describe_tools, connector::DescribeToolsRequest),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.logging.LoggingService", "Ingest") => {
            rpc!(sw4rm.logging(), ingest, logging::LogEvent)
        }
        ("sw4rm.reasoning.ReasoningProxy", m) => {
            let mut c = sw4rm.reasoning();
            match m {
                "CheckParallelism" => {
                    rpc!(c, check_parallelism, reasoning::ParallelismCheckRequest)
                }
                "EvaluateDebate" => rpc!(c, evaluate_debate, reasoning::DebateEvaluateRequest),
                "Summarize" => rpc!(c, summarize, reasoning::SummarizeRequest),
                _ => panic!("unknown {path}"),
            }
        }
        _ => panic!("unknown {path}"),
    }
}

#[tokio::test]
async fn every_upstream_rpc_carries_its_profile_default_on_the_wire() {
    let server = server().await;
    let sw4rm = connect(&server, TimeoutProfileLayer::new(standard())).await;
    for (path, _, _) in UPSTREAM {
        call_upstream(&sw4rm, path)
            .await
            .unwrap_or_else(|s| panic!("{path}: {s}"));
    }
    let calls = server.calls();
    assert_eq!(calls.len(), UPSTREAM.len());
    for ((path, profile, _), seen) in UPSTREAM.iter().zip(&calls) {
        assert_eq!(seen.path, *path);
        assert_eq!(seen.grpc_timeout.as_deref(), Some(wire(profile)), "{path}");
    }
}

/// Standard profiles with a 1 s router profile; the inbox sends two messages, then
/// stays idle.
async fn idle_inbox() -> (sw4rm_timeouts::testing::TestServer, Sw4rm) {
    use sw4rm_timeouts::testing::{Script, StreamScript};
    use sw4rm_timeouts::ProfileSet;

    let server = server().await;
    server
        .script(
            "StreamIncoming",
            Script::stream(StreamScript {
                messages: 2,
                stall_after: true,
                ..StreamScript::default()
            }),
        )
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("message_route", 1_000)
        .build()
        .unwrap();
    let sw4rm = connect(&server, TimeoutProfileLayer::new(profiles)).await;
    (server, sw4rm)
}

/// An agent's inbound stream is not ended for being idle: no `grpc-timeout`, and
/// still open after more than twice the profile's timeout without a message (a
/// route without `long_lived` would end it after 1 s); dropping it cancels it.
#[tokio::test]
async fn the_inbound_stream_stays_open_while_idle() {
    use std::time::Duration;
    use sw4rm_timeouts::proto::sw4rm::router::StreamRequest;
    use sw4rm_timeouts::testing::ServedEnd;

    let (server, sw4rm) = idle_inbox().await;
    let mut stream = sw4rm
        .router()
        .stream_incoming(StreamRequest {
            agent_id: "agent-7".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert_eq!(first.msg.unwrap().message_id, "agent-7-0");
    assert!(stream.message().await.unwrap().is_some());
    let idle = tokio::time::timeout(Duration::from_millis(2_500), stream.message()).await;
    assert!(idle.is_err(), "the idle stream ended: {idle:?}");
    let calls = server.calls_to("StreamIncoming");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].grpc_timeout, None);
    assert_eq!(calls[0].outcome, ServedEnd::Running);
    drop(stream);
    assert!(
        server
            .wait_until(common::WAIT, |c| c[0].outcome == ServedEnd::Cancelled)
            .await
    );
}

/// An idle limit the caller asks for still ends it, with the details naming the gap.
#[tokio::test]
async fn an_idle_limit_set_for_the_call_ends_the_inbound_stream() {
    use std::time::Duration;
    use sw4rm_timeouts::proto::sw4rm::router::StreamRequest;
    use sw4rm_timeouts::{CallStreamingPolicy, Phase, Source, TimeoutDetails};

    let (server, sw4rm) = idle_inbox().await;
    let mut request = tonic::Request::new(StreamRequest {
        agent_id: "agent-7".into(),
    });
    CallStreamingPolicy::default()
        .with_message_gap(Duration::from_millis(1_000))
        .apply(&mut request);
    let mut stream = sw4rm
        .router()
        .stream_incoming(request)
        .await
        .unwrap()
        .into_inner();
    assert!(stream.message().await.unwrap().is_some());
    assert!(stream.message().await.unwrap().is_some());
    let status = stream.message().await.unwrap_err();
    let details = TimeoutDetails::from_status(&status).unwrap();
    assert_eq!(details.phase(), Phase::Gap);
    assert_eq!(details.profile_name(), "message_route");
    assert_eq!(details.configured_timeout_ms(), 1_000);
    assert_eq!(details.source(), &Source::PerCall);
    assert!(details.elapsed_ms() >= 1_000);
    assert_eq!(details.message_count(), Some(2));
    assert_eq!(server.calls_to("StreamIncoming")[0].grpc_timeout, None);
}

/// A newcomer's first workflow call: the `workflow_submit` default on the wire, and a
/// 200 ms override clamped up to the profile's 5 s minimum with the usual warning.
#[tokio::test]
async fn a_workflow_call_goes_out_with_workflow_submit() {
    use std::time::Duration;
    use sw4rm_timeouts::proto::sw4rm::workflow::CreateWorkflowRequest;

    let server = server().await;
    let sw4rm = connect(&server, TimeoutProfileLayer::new(standard())).await;
    sw4rm
        .workflow()
        .create_workflow(CreateWorkflowRequest::default())
        .await
        .unwrap();
    let (events, _guard) = common::capture_events();
    let mut request = tonic::Request::new(CreateWorkflowRequest::default());
    request.set_timeout(Duration::from_millis(200));
    sw4rm.workflow().create_workflow(request).await.unwrap();

    let seen: Vec<_> = server
        .calls_to("CreateWorkflow")
        .into_iter()
        .map(|c| c.grpc_timeout)
        .collect();
    assert_eq!(
        seen,
        [Some("30000000u".to_owned()), Some("5000000u".to_owned())]
    );
    let warnings = events.with_message("clamped to the profile's bounds");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = &warnings[0];
    assert_eq!(
        (
            w["level"].as_str(),
            w["span.profile"].as_str(),
            w["bound"].as_str(),
            w["requested_ms"].as_str(),
            w["effective_ms"].as_str()
        ),
        ("WARN", "workflow_submit", "min", "200", "5000")
    );
}

/// An agent's inbox as agents run it: `StreamIncoming` open under the standard
/// profiles, quiet for longer than `message_route`'s 10 s between two messages, and
/// each item acknowledged by its `seq` with `AckDelivery` under its own profile. A
/// second acknowledgement of the same `seq` is recorded as nothing new.
#[tokio::test]
async fn an_agent_reads_its_inbox_and_acknowledges_each_item() {
    use std::time::{Duration, Instant};
    use sw4rm_timeouts::proto::sw4rm::router::{DeliveryAckRequest, StreamRequest};
    use sw4rm_timeouts::testing::{Script, ServedEnd, StreamScript};

    const QUIET: Duration = Duration::from_millis(10_500);
    let server = server().await;
    server
        .script(
            "StreamIncoming",
            Script::stream(StreamScript {
                messages: 2,
                gap: QUIET,
                ..StreamScript::default()
            }),
        )
        .unwrap();
    let sw4rm = connect(&server, TimeoutProfileLayer::new(standard())).await;
    let mut router = sw4rm.router();
    let mut inbox = router
        .stream_incoming(StreamRequest {
            agent_id: "agent-7".into(),
        })
        .await
        .unwrap()
        .into_inner();

    let mut seqs = Vec::new();
    let mut arrivals = Vec::new();
    while let Some(item) = inbox.message().await.unwrap() {
        arrivals.push(Instant::now());
        let ack = DeliveryAckRequest {
            agent_id: "agent-7".into(),
            seq: item.seq,
            message_id: item.msg.map(|m| m.message_id).unwrap_or_default(),
            ..Default::default()
        };
        assert!(
            router
                .ack_delivery(ack.clone())
                .await
                .unwrap()
                .into_inner()
                .recorded
        );
        // Idempotent: the same acknowledgement again changes nothing.
        assert!(
            !router
                .ack_delivery(ack)
                .await
                .unwrap()
                .into_inner()
                .recorded
        );
        seqs.push(item.seq);
    }

    assert_eq!(seqs.len(), 2, "both items arrived");
    assert_ne!(seqs[0], seqs[1], "each delivery has its own seq");
    assert!(arrivals[1] - arrivals[0] >= QUIET - Duration::from_millis(50));
    let stream = &server.calls_to("StreamIncoming")[0];
    assert_eq!(
        (stream.grpc_timeout.as_deref(), stream.outcome),
        (None, ServedEnd::Completed)
    );
    let acks = server.calls_to("AckDelivery");
    assert_eq!(acks.len(), 4);
    for ack in acks {
        assert_eq!(ack.grpc_timeout.as_deref(), Some("10000000u"));
    }
}
