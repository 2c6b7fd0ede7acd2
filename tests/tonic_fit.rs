//! The SDK used as tonic users use tonic: an interceptor above the layer (the
//! generated client's `with_interceptor`), and the re-exported `tonic` and `prost`
//! naming the same types the generated clients use.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::server;
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::TimeoutProfileLayer;

#[tokio::test]
async fn an_interceptor_over_the_layer_builds_and_runs() {
    let server = server().await;
    let sw4rm = common::connect(&server, TimeoutProfileLayer::standard()).await;
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let auth = move |mut req: sw4rm_timeouts::tonic::Request<()>| {
        counter.fetch_add(1, Ordering::SeqCst);
        req.metadata_mut()
            .insert("authorization", "Bearer agent-7".parse().unwrap());
        Ok(req)
    };
    let mut client = RegistryServiceClient::with_interceptor(sw4rm.channel(), auth);
    client.heartbeat(HeartbeatRequest::default()).await.unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    // The layer still planned the call: the profile's deadline is on the wire, and
    // the interceptor's metadata reached the server.
    let call = &server.calls()[0];
    assert_eq!(call.grpc_timeout.as_deref(), Some("5000000u"));
    assert_eq!(call.deadline, Some(std::time::Duration::from_secs(5)));
    assert!(
        call.metadata
            .contains(&("authorization".to_owned(), "Bearer agent-7".to_owned())),
        "{:?}",
        call.metadata
    );

    // An interceptor that rejects: the call never reaches the layer or the server,
    // and the caller gets the interceptor's status.
    let deny = |_: sw4rm_timeouts::tonic::Request<()>| {
        Err(sw4rm_timeouts::tonic::Status::permission_denied("no token"))
    };
    let mut client = RegistryServiceClient::with_interceptor(sw4rm.channel(), deny);
    let status = client
        .heartbeat(HeartbeatRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), sw4rm_timeouts::tonic::Code::PermissionDenied);
    assert_eq!(server.calls().len(), 1);
}

#[test]
fn re_exports_name_the_generated_clients_types() {
    use sw4rm_timeouts::prost::Message;
    let msg = HeartbeatRequest {
        agent_id: "a".into(),
        ..Default::default()
    };
    let bytes = msg.encode_to_vec();
    assert_eq!(HeartbeatRequest::decode(bytes.as_slice()).unwrap(), msg);
    let _: sw4rm_timeouts::prost_types::Duration = sw4rm_timeouts::prost_types::Duration {
        seconds: 1,
        nanos: 0,
    };
}

#[tokio::test]
async fn the_test_server_answers_as_scripted() {
    use std::time::Duration;
    use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatResponse;
    use sw4rm_timeouts::testing::Script;
    let server = server().await;
    let answer = HeartbeatResponse { ok: true };
    server
        .script(
            "Heartbeat",
            Script::slow_first(1, Duration::from_millis(300)).respond_with(&answer),
        )
        .unwrap();
    let sw4rm = common::connect(&server, TimeoutProfileLayer::standard()).await;
    let start = tokio::time::Instant::now();
    let got = answer_of(&sw4rm).await;
    assert_eq!(got, answer);
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "the first is slow"
    );
    let got = answer_of(&sw4rm).await;
    assert_eq!(
        got, answer,
        "the rest answer at once, with the same message"
    );
}

async fn answer_of(
    sw4rm: &sw4rm_timeouts::Sw4rm,
) -> sw4rm_timeouts::proto::sw4rm::registry::HeartbeatResponse {
    sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await
        .unwrap()
        .into_inner()
}
