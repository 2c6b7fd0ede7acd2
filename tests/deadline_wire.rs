//! Timeouts over loopback: DEADLINE_EXCEEDED with every detail field, whichever timer
//! fires first; the server seeing the cancel; no leaked tasks; a plain tonic client;
//! message-level timeouts.

mod common;

use std::time::Duration;

use common::{capture_events, connect, server, standard, Metrics, WAIT};
use sw4rm_timeouts::proto::sw4rm::{handoff, negotiation_room as nr, registry, tool};
use sw4rm_timeouts::testing::{Script, ServedEnd};
use sw4rm_timeouts::{
    DetectedBy, Phase, ProfileSet, Source, Sw4rm, TimeoutDetails, TimeoutProfile,
    TimeoutProfileLayer,
};
use tonic::Code;
use tower::ServiceBuilder;

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
// Real sockets: outcomes and lower bounds only; exact times are proven under paused
// time in `layer_paused.rs`.

fn fast_heartbeat() -> ProfileSet {
    ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", 300)
        .min_timeout_ms("heartbeat", 100)
        .build()
        .unwrap()
}

fn strip_deadline(mut req: http::Request<tonic::body::Body>) -> http::Request<tonic::body::Body> {
    req.headers_mut().remove("grpc-timeout");
    req
}

async fn channel(server: &sw4rm_timeouts::testing::TestServer) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(server.url())
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn assert_heartbeat_details(d: &TimeoutDetails, detected_by: DetectedBy) {
    assert_eq!(d.profile_name(), "heartbeat");
    assert_eq!(d.configured_timeout_ms(), 300);
    assert_eq!(d.service(), "sw4rm.registry.RegistryService");
    assert_eq!(d.method(), "Heartbeat");
    assert_eq!(d.source().to_string(), "client");
    assert_eq!(d.phase(), Phase::Total);
    assert_eq!(d.message_count(), None);
    assert_eq!(d.detected_by(), detected_by);
}

#[tokio::test]
async fn timeout_returns_deadline_exceeded_with_details() {
    let server = server().await;
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    let metrics = Metrics::new();
    let layer = TimeoutProfileLayer::new(fast_heartbeat()).with_meter_provider(&metrics.provider);
    let sw4rm = connect(&server, layer).await;

    let status = sw4rm
        .registry()
        .heartbeat(registry::HeartbeatRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(
        status
            .message()
            .contains("/sw4rm.registry.RegistryService/Heartbeat"),
        "{}",
        status.message()
    );
    assert!(status.message().contains("300 ms"), "{}", status.message());
    let d = TimeoutDetails::from_status(&status).expect("details");
    // Our timer starts before tonic's and the server's, so it is normally first;
    // either way the caller gets the same code and details.
    assert!(matches!(
        d.detected_by(),
        DetectedBy::Client | DetectedBy::Transport
    ));
    assert_heartbeat_details(&d, d.detected_by());
    assert!(d.elapsed_ms() >= 300, "elapsed {}", d.elapsed_ms());
    assert_eq!(server.calls()[0].grpc_timeout.as_deref(), Some("300000u"));
    let end = server.wait_for_end(0, WAIT).await.unwrap();
    assert_eq!(end.outcome, ServedEnd::Cancelled);
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "Heartbeat"), 1);
    assert_eq!(metrics.value("sw4rm_rpc_duration_ms", "Heartbeat"), 1);
}

/// With the header removed below the layer, neither tonic nor the server has a
/// deadline: only the layer's own timer and cancellation can end the call.
#[tokio::test]
async fn the_layer_alone_times_out_and_the_server_sees_the_cancel() {
    let server = server().await;
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    let svc = ServiceBuilder::new()
        .layer(TimeoutProfileLayer::new(fast_heartbeat()))
        .map_request(strip_deadline)
        .service(channel(&server).await);
    let mut client = registry::registry_service_client::RegistryServiceClient::new(svc);
    let status = client
        .heartbeat(registry::HeartbeatRequest::default())
        .await
        .unwrap_err();
    let d = TimeoutDetails::from_status(&status).expect("details");
    assert_heartbeat_details(&d, DetectedBy::Client);
    assert_eq!(server.calls()[0].grpc_timeout, None);
    let end = server.wait_for_end(0, WAIT).await.unwrap();
    assert_eq!(
        end.outcome,
        ServedEnd::Cancelled,
        "the server must observe the cancellation"
    );
}

/// A peer that accepts TCP and never answers.
async fn silent_peer() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (addr, silent)
}

/// A shorter deadline written below the layer: tonic's channel enforces it and
/// reports `Cancelled`. The layer reports the truth — a transport timeout after
/// 50 ms, not "the 5000 ms deadline exceeded after 50 ms" — counted once.
#[tokio::test]
async fn a_shorter_transport_deadline_below_the_layer_is_reported_as_itself() {
    let (addr, silent) = silent_peer().await;
    let metrics = Metrics::new();
    let shorten = |mut req: http::Request<tonic::body::Body>| {
        req.headers_mut()
            .insert("grpc-timeout", http::HeaderValue::from_static("50m"));
        req
    };
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    let svc = ServiceBuilder::new()
        .layer(TimeoutProfileLayer::new(standard()).with_meter_provider(&metrics.provider))
        .map_request(shorten)
        .service(channel);
    let mut client = registry::registry_service_client::RegistryServiceClient::new(svc);
    let (events, _guard) = capture_events();
    let status = client
        .heartbeat(registry::HeartbeatRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    let d = TimeoutDetails::from_status(&status).expect("details");
    assert_eq!(
        (d.detected_by(), d.source(), d.phase()),
        (DetectedBy::Transport, &Source::Transport, Phase::Total)
    );
    // The heartbeat profile's own 5 s deadline is 100 times later: `source` says
    // which fired (no upper time bound needed).
    assert!(d.elapsed_ms() >= 50, "{}", d.elapsed_ms());
    assert_eq!(
        d.configured_timeout_ms(),
        d.elapsed_ms(),
        "what fired, and when"
    );
    assert!(
        !status.message().contains("5000 ms"),
        "{}",
        status.message()
    );
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "Heartbeat"), 1);
    assert_eq!(metrics.value("sw4rm_rpc_duration_ms", "Heartbeat"), 1);
    assert_eq!(
        events.with_message("caps every profile").len(),
        1,
        "warned once"
    );
    let _ = client
        .heartbeat(registry::HeartbeatRequest::default())
        .await
        .unwrap_err();
    assert_eq!(
        events.with_message("caps every profile").len(),
        1,
        "only once"
    );
    silent.abort();
}

/// `Endpoint::timeout` caps every profile the same way, infinite calls included.
#[tokio::test]
async fn endpoint_timeout_is_reported_as_itself_even_for_an_infinite_call() {
    let (addr, silent) = silent_peer().await;
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .timeout(Duration::from_millis(100));
    let sw4rm = sw4rm_timeouts::Sw4rm::builder(endpoint)
        .layer(TimeoutProfileLayer::standard().without_metrics())
        .connect_lazy()
        .unwrap();
    let mut req = tonic::Request::new(
        sw4rm_timeouts::proto::sw4rm::negotiation_room::WaitForDecisionRequest::default(),
    );
    sw4rm_timeouts::CallTimeout::Infinite.apply(&mut req);
    let status = sw4rm
        .negotiation_room()
        .wait_for_decision(req)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    let d = TimeoutDetails::from_status(&status).expect("details");
    assert_eq!(d.source(), &Source::Transport);
    assert!(
        d.configured_timeout_ms() >= 100,
        "not \"a deadline of 0 ms\""
    );
    silent.abort();
}

#[tokio::test]
async fn a_servers_own_deadline_exceeded_before_ours_passes_through() {
    // The server's downstream call timed out at 100 ms of our 300 ms deadline: the
    // caller sees the server's status unchanged, and it is not counted as a timeout.
    let server = server().await;
    server
        .script(
            "Heartbeat",
            Script {
                latency: Duration::from_millis(100),
                fail_with: Some(Code::DeadlineExceeded),
                ..Script::default()
            },
        )
        .expect("a known RPC");
    let metrics = Metrics::new();
    let sw4rm = connect(
        &server,
        TimeoutProfileLayer::new(fast_heartbeat()).with_meter_provider(&metrics.provider),
    )
    .await;
    let status = sw4rm
        .registry()
        .heartbeat(registry::HeartbeatRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert_eq!(
        status.message(),
        "scripted failure of /sw4rm.registry.RegistryService/Heartbeat"
    );
    assert_eq!(TimeoutDetails::from_status(&status), None);
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "Heartbeat"), 0);
    assert_eq!(metrics.value("sw4rm_rpc_duration_ms", "Heartbeat"), 1);
}

#[tokio::test]
async fn a_thousand_timeouts_leave_no_task_behind() {
    let server = server().await;
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(60)))
        .expect("a known RPC");
    let profiles = ProfileSet::builder()
        .without_global()
        .profile(
            &TimeoutProfile::builder("fast")
                .default_timeout(Duration::from_millis(20))
                .min_timeout(Duration::from_millis(1))
                .max_timeout(Duration::from_secs(1))
                .build()
                .unwrap(),
        )
        .route(HEARTBEAT, "fast")
        .build()
        .unwrap();
    let sw4rm = connect(
        &server,
        TimeoutProfileLayer::new(profiles).without_metrics(),
    )
    .await;
    // Let the connection tasks settle, then take the baseline.
    sw4rm
        .registry()
        .deregister_agent(registry::DeregisterAgentRequest::default())
        .await
        .unwrap();
    let metrics = tokio::runtime::Handle::current().metrics();
    let baseline = metrics.num_alive_tasks();

    for _batch in 0..10 {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..100 {
            let sw4rm = sw4rm.clone();
            set.spawn(async move {
                sw4rm
                    .registry()
                    .heartbeat(registry::HeartbeatRequest::default())
                    .await
            });
        }
        while let Some(r) = set.join_next().await {
            let status = r.unwrap().unwrap_err();
            assert_eq!(
                TimeoutDetails::from_status(&status)
                    .unwrap_or_else(|| panic!("{status:?}"))
                    .profile_name(),
                "fast"
            );
        }
    }
    // A call reset before the server accepted its stream never starts a handler (how
    // many depends on the machine's speed); every handler that did start must end
    // cancelled, none left running, none completed.
    let heartbeats = |calls: &[sw4rm_timeouts::testing::ServedCall]| -> Vec<ServedEnd> {
        calls
            .iter()
            .filter(|c| c.path == HEARTBEAT)
            .map(|c| c.outcome)
            .collect()
    };
    let settled = server
        .wait_until(WAIT, |calls| {
            !heartbeats(calls).contains(&ServedEnd::Running)
        })
        .await;
    let outcomes = heartbeats(&server.calls());
    assert!(settled, "handlers still running: {outcomes:?}");
    assert!(!outcomes.is_empty(), "no heartbeat reached the server");
    assert!(
        outcomes.iter().all(|o| *o == ServedEnd::Cancelled),
        "every handler must be cancelled: {outcomes:?}"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    while metrics.num_alive_tasks() > baseline && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        metrics.num_alive_tasks() <= baseline,
        "{} tasks alive, baseline {baseline}",
        metrics.num_alive_tasks()
    );
}

/// The layer under a client that is not ours: tonic's `Grpc` with a prost codec,
/// exactly what code generated from the upstream protos does.
#[tokio::test]
async fn works_under_a_plain_tonic_client() {
    let server = server().await;
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    let svc = ServiceBuilder::new()
        .layer(TimeoutProfileLayer::new(fast_heartbeat()))
        .service(channel(&server).await);
    let mut grpc = tonic::client::Grpc::new(svc);
    grpc.ready().await.unwrap();
    let codec =
        tonic_prost::ProstCodec::<registry::HeartbeatRequest, registry::HeartbeatResponse>::default(
        );
    let path = http::uri::PathAndQuery::from_static(HEARTBEAT);
    let status = grpc
        .unary(
            tonic::Request::new(registry::HeartbeatRequest::default()),
            path,
            codec,
        )
        .await
        .unwrap_err();
    let d = TimeoutDetails::from_status(&status).expect("details");
    assert_heartbeat_details(&d, d.detected_by());
    assert_eq!(server.calls()[0].grpc_timeout.as_deref(), Some("300000u"));
}

fn policy(secs: i64) -> Option<tool::ExecutionPolicy> {
    Some(tool::ExecutionPolicy {
        timeout: Some(prost_types::Duration {
            seconds: secs,
            nanos: 0,
        }),
        ..Default::default()
    })
}

/// Message-level timeouts keep the transport deadline above the server's own wait:
/// message timeout + 1 s, clamped; a per-call value still wins.
#[tokio::test]
async fn message_timeouts_extend_the_deadline() {
    let server = server().await;
    let sw4rm: Sw4rm = connect(&server, TimeoutProfileLayer::new(common::standard())).await;
    let wait = |secs| nr::WaitForDecisionRequest {
        timeout_seconds: secs,
        ..Default::default()
    };
    sw4rm
        .negotiation_room()
        .wait_for_decision(wait(600))
        .await
        .unwrap();
    sw4rm
        .negotiation_room()
        .wait_for_decision(wait(5))
        .await
        .unwrap();
    let mut per_call = tonic::Request::new(wait(600));
    per_call.set_timeout(Duration::from_secs(60));
    sw4rm
        .negotiation_room()
        .wait_for_decision(per_call)
        .await
        .unwrap();
    sw4rm
        .tool()
        .call(tool::ToolCall {
            policy: policy(120),
            ..Default::default()
        })
        .await
        .unwrap();
    sw4rm
        .tool()
        .call(tool::ToolCall {
            policy: policy(7_200),
            ..Default::default()
        })
        .await
        .unwrap();
    sw4rm
        .tool()
        .invoke_tool(tool::InvokeToolRequest {
            call: Some(tool::ToolCall {
                policy: policy(90),
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    let h = handoff::HandoffRequest {
        timeout: Some(prost_types::Duration {
            seconds: 45,
            nanos: 0,
        }),
        ..Default::default()
    };
    sw4rm.handoff().request_handoff(h).await.unwrap();

    let seen: Vec<_> = server
        .calls()
        .into_iter()
        .map(|c| c.grpc_timeout.unwrap_or_default())
        .collect();
    assert_eq!(
        seen,
        [
            "601000m",   // 600 s + 1 s
            "30000000u", // 5 s + 1 s, raised to negotiation_vote's 30 s minimum
            "60000000u", // per-call wins
            "121000m",   // 120 s + 1 s
            "3600000m",  // 2 h + 1 s, lowered to tool_call's 1 h maximum
            "91000000u", // 90 s + 1 s
            "46000000u", // 45 s + 1 s
        ]
    );
}
