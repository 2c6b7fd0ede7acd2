//! An agent's health follows its heartbeats (feature `health`), read over the wire
//! with the standard `grpc.health.v1.Health/Check` from tonic-health's client: SERVING
//! while the heartbeat target answers, NOT_SERVING once the heartbeats have failed for
//! the time set, SERVING again on the first heartbeat that succeeds.

use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::scope::health::{health_reporter, HeartbeatHealth};
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{CallTimeout, Sw4rm, TimeoutProfileLayer};
use tonic::transport::server::TcpIncoming;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// What the agent's health service answers now, over the wire.
async fn checked(url: &str) -> ServingStatus {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = HealthClient::new(channel);
    let answer = client
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    answer.into_inner().status()
}

#[tokio::test]
async fn health_turns_not_serving_when_heartbeats_fail_and_back_when_one_succeeds() {
    // The registry the agent heartbeats to.
    let registry = TestServer::start().await.unwrap();
    let sw4rm = Sw4rm::connect_with(registry.url(), TimeoutProfileLayer::standard())
        .await
        .unwrap();
    // The agent's own server, with the health service.
    let (reporter, service) = health_reporter();
    let health = HeartbeatHealth::new(reporter).unhealthy_after(Duration::from_millis(1_500));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let agent = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    let beat = || async {
        let mut request = tonic::Request::new(HeartbeatRequest::default());
        // The heartbeat profile's minimum: a beat to a silent registry fails in 1 s.
        CallTimeout::After(Duration::from_secs(1)).apply(&mut request);
        let mut registry = sw4rm.registry();
        health.beat(registry.heartbeat(request)).await
    };

    beat().await.unwrap();
    assert_eq!(checked(&agent).await, ServingStatus::Serving);

    // The registry stops answering: two failed beats span more than 1.5 s (each
    // lasts at least its 1 s timeout), so the second leaves the agent NOT_SERVING.
    registry
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .unwrap();
    for _ in 0..2 {
        let failed = beat().await.unwrap_err();
        assert_eq!(failed.code(), tonic::Code::DeadlineExceeded);
    }
    assert_eq!(checked(&agent).await, ServingStatus::NotServing);
    assert_eq!(
        health.status(),
        sw4rm_timeouts::scope::health::ServingStatus::NotServing
    );

    // It answers again: the first good beat makes the agent SERVING.
    registry
        .script("Heartbeat", Script::latency(Duration::ZERO))
        .unwrap();
    beat().await.unwrap();
    assert_eq!(checked(&agent).await, ServingStatus::Serving);
}
