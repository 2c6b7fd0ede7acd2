//! `TimeoutProfileLayer::with_answer_deadlines` over real calls on loopback: every
//! answer carries the deadline it came under (`Answered`): the timeout and where it
//! came from, the attempts, the time to the answer and what was left. Off by default.

mod common;

use std::time::Duration;

use common::server;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::testing::Script;
use sw4rm_timeouts::{Answered, Source, TimeoutProfileLayer};

#[tokio::test]
async fn every_answer_says_the_deadline_it_came_under() {
    let server = server().await;
    let sw4rm = common::connect(
        &server,
        TimeoutProfileLayer::standard().with_answer_deadlines(),
    )
    .await;

    // The standard heartbeat, answered after 100 ms.
    server
        .script("Heartbeat", Script::latency(Duration::from_millis(100)))
        .unwrap();
    let answer = sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await
        .unwrap();
    let under = answer
        .extensions()
        .get::<Answered>()
        .expect("an Answered on the answer")
        .clone();
    assert_eq!(
        (under.profile(), under.timeout(), under.source()),
        (
            "heartbeat",
            Some(Duration::from_secs(5)),
            Some(&Source::Standard)
        )
    );
    assert_eq!(under.attempts(), 1);
    assert!(under.elapsed() >= Duration::from_millis(100), "{under}");
    assert!(
        under.left().unwrap() <= Duration::from_millis(4_900),
        "{under}"
    );
    assert!(under.to_string().starts_with("answered in 0."), "{under}");
    assert!(
        under
            .to_string()
            .ends_with(" s of 5 s (heartbeat, standard)"),
        "{under}"
    );

    // A per-call timeout, and a retry: the answer says both.
    server
        .script("Heartbeat", Script::fail_first(1, tonic::Code::Unavailable))
        .unwrap();
    let mut request = tonic::Request::new(HeartbeatRequest::default());
    request.set_timeout(Duration::from_secs(2));
    let answer = sw4rm.registry().heartbeat(request).await.unwrap();
    let under = answer.extensions().get::<Answered>().unwrap();
    assert_eq!(
        (under.timeout(), under.source(), under.attempts()),
        (Some(Duration::from_secs(2)), Some(&Source::PerCall), 2)
    );
    assert!(
        under
            .to_string()
            .ends_with("(heartbeat, per_call) after 2 attempts"),
        "{under}"
    );

    // A server stream: on the stream's response.
    let stream = sw4rm.tool().call_stream(ToolCall::default()).await.unwrap();
    let under = stream.extensions().get::<Answered>().unwrap();
    assert_eq!(under.profile(), "tool_call");
}

#[tokio::test]
async fn off_by_default() {
    let server = server().await;
    let sw4rm = common::connect(&server, TimeoutProfileLayer::standard()).await;
    let answer = sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await
        .unwrap();
    assert!(answer.extensions().get::<Answered>().is_none());
}
