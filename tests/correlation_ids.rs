//! SW4-003's ids from the call's own request (§4.3, §2): over loopback, the log lines
//! the layer writes for a call whose request carries a `correlation_id` name it, with
//! the call's span off (an operator's INFO filter) and on (the span carries it);
//! `agent_id` and `task_id` reach the span when the layer is asked to read them; the
//! server receives the request whole; an id is bounded before it is logged.

mod common;

use std::time::Duration;

use common::{capture_events_at, server, Events};
use sw4rm_timeouts::proto::sw4rm::{common as msg, logging, registry, router, scheduler};
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::DefaultGuard;

const TIMED_OUT: &str = "SW4RM RPC timed out";

/// Short defaults for the routes these tests time out, a wide floor under the
/// heartbeat so a clamp can be asked for.
fn profiles() -> ProfileSet {
    ProfileSet::builder()
        .without_global()
        .default_timeout_ms("message_route", 150)
        .min_timeout_ms("message_route", 100)
        .default_timeout_ms("heartbeat", 150)
        .min_timeout_ms("heartbeat", 100)
        .default_timeout_ms("task_submit", 150)
        .min_timeout_ms("task_submit", 100)
        .build()
        .expect("profiles")
}

fn envelope(correlation_id: &str) -> router::SendMessageRequest {
    router::SendMessageRequest {
        msg: Some(msg::Envelope {
            message_id: "m-1".into(),
            producer_id: "agent-a".into(),
            correlation_id: correlation_id.into(),
            payload: vec![7; 2_000],
            ..Default::default()
        }),
    }
}

async fn connect(server: &TestServer, layer: TimeoutProfileLayer) -> Sw4rm {
    common::connect(server, layer.without_metrics()).await
}

/// Events captured under an INFO filter (the call's span off), a server whose
/// `SendMessage` answers late, and a client of the default layer.
async fn routing_late_under_info() -> (Events, DefaultGuard, TestServer, Sw4rm) {
    let (events, guard) = capture_events_at(LevelFilter::INFO);
    let server = server().await;
    server
        .script("SendMessage", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    let sw4rm = connect(&server, TimeoutProfileLayer::new(profiles())).await;
    (events, guard, server, sw4rm)
}

fn timeouts(events: &Events) -> Vec<std::collections::BTreeMap<String, String>> {
    events.with_message(TIMED_OUT)
}

/// Under an INFO filter (the call's DEBUG span off), a call its route alone plans and
/// one with a timeout of its own (clamped, then timed out) each log the envelope's
/// `correlation_id`; a call without one logs none; the server got every request whole.
#[tokio::test]
async fn log_lines_name_the_requests_correlation_id_with_the_span_off() {
    let (events, _guard, server, sw4rm) = routing_late_under_info().await;

    let sent = envelope("corr-7");
    let status = sw4rm.router().send_message(sent.clone()).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
    let mut asked = tonic::Request::new(envelope("corr-8"));
    asked.set_timeout(Duration::from_millis(10)); // under the 100 ms floor: clamped
    sw4rm.router().send_message(asked).await.unwrap_err();
    sw4rm.router().send_message(envelope("")).await.unwrap_err();

    let lines = timeouts(&events);
    let ids: Vec<_> = lines
        .iter()
        .map(|e| e.get("correlation_id").cloned())
        .collect();
    assert_eq!(
        ids,
        [Some("corr-7".to_owned()), Some("corr-8".to_owned()), None],
        "{lines:#?}"
    );
    let clamped = events.with_message("clamped to the profile's bounds");
    assert_eq!(clamped.len(), 1, "{clamped:#?}");
    assert_eq!(
        clamped[0].get("correlation_id").map(String::as_str),
        Some("corr-8")
    );
    assert!(
        lines.iter().all(|e| !e.contains_key("span")),
        "the span is off"
    );

    let served: Vec<_> = server
        .calls_to("SendMessage")
        .iter()
        .map(|c| c.request_as::<router::SendMessageRequest>())
        .collect();
    assert_eq!(
        served[0],
        Some(sent),
        "the request reached the server whole"
    );
    assert_eq!(served.len(), 3);
}

/// With the span on, it carries the correlation id, and an event inside it does not
/// repeat it; a log event's own `correlation_id` and `agent_id` are read where the
/// message has both (`agent_id` only when asked for).
#[tokio::test]
async fn the_span_carries_the_ids() {
    let (events, _guard) = capture_events_at(LevelFilter::TRACE);
    let server = server().await;
    for rpc in ["Ingest", "Heartbeat", "SubmitTask"] {
        server
            .script(rpc, Script::latency(Duration::from_secs(30)))
            .expect("a known RPC");
    }
    let plain = connect(&server, TimeoutProfileLayer::new(profiles())).await;
    let reading = connect(
        &server,
        TimeoutProfileLayer::new(profiles()).with_agent_ids(true),
    )
    .await;
    let log = logging::LogEvent {
        correlation_id: "corr-9".into(),
        agent_id: "agent-b".into(),
        ..Default::default()
    };
    let beat = registry::HeartbeatRequest {
        agent_id: "agent-7".into(),
        ..Default::default()
    };
    let task = scheduler::SubmitTaskRequest {
        agent_id: "agent-c".into(),
        task_id: "t-1".into(),
        ..Default::default()
    };
    for sw4rm in [&plain, &reading] {
        sw4rm.logging().ingest(log.clone()).await.unwrap_err();
        sw4rm.registry().heartbeat(beat.clone()).await.unwrap_err();
        sw4rm
            .scheduler()
            .submit_task(task.clone())
            .await
            .unwrap_err();
    }

    let lines = timeouts(&events);
    let field =
        |line: &std::collections::BTreeMap<String, String>, name: &str| line.get(name).cloned();
    let seen: Vec<_> = lines
        .iter()
        .map(|l| {
            (
                field(l, "span.method").unwrap_or_default(),
                field(l, "span.sw4rm.correlation_id"),
                field(l, "span.sw4rm.agent_id"),
                field(l, "span.sw4rm.task_id"),
                field(l, "correlation_id"),
            )
        })
        .collect();
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        seen,
        [
            ("Ingest".into(), s("corr-9"), None, None, None),
            ("Heartbeat".into(), None, None, None, None),
            ("SubmitTask".into(), None, None, None, None),
            ("Ingest".into(), s("corr-9"), s("agent-b"), None, None),
            ("Heartbeat".into(), None, s("agent-7"), None, None),
            ("SubmitTask".into(), None, s("agent-c"), s("t-1"), None),
        ],
        "{lines:#?}"
    );
    let beats = server.calls_to("Heartbeat");
    assert!(beats
        .iter()
        .all(|c| c.request_as::<registry::HeartbeatRequest>() == Some(beat.clone())));
}

/// An id is the caller's text: one with a line break is not logged (it would forge a
/// line), a long one is cut to 128 bytes.
#[tokio::test]
async fn ids_are_bounded_before_they_are_logged() {
    let (events, _guard, _server, sw4rm) = routing_late_under_info().await;
    let long = "c".repeat(5_000);
    for id in ["corr\nlevel=ERROR message=forged", long.as_str()] {
        sw4rm.router().send_message(envelope(id)).await.unwrap_err();
    }
    let ids: Vec<_> = timeouts(&events)
        .iter()
        .map(|e| e.get("correlation_id").cloned())
        .collect();
    assert_eq!(ids, [None, Some("c".repeat(128))]);
}

/// Ids where the layer is told they are (`with_message_ids`): a whole service's route
/// reads the heartbeat's field 1 as its `correlation_id` (logged with the span off, as
/// SW4RM's own are); an exact route declared with none wins over its service's, so
/// `SendMessage` logs none, not even the envelope's own; the server got both requests
/// whole.
#[tokio::test]
async fn ids_are_read_where_the_layer_is_told_they_are() {
    use sw4rm_timeouts::route::RoutePattern;
    use sw4rm_timeouts::MessageIds;
    let (events, _guard) = capture_events_at(LevelFilter::INFO);
    let server = server().await;
    for rpc in ["Heartbeat", "SendMessage"] {
        server
            .script(rpc, Script::latency(Duration::from_secs(30)))
            .expect("a known RPC");
    }
    let route = |p: &str| RoutePattern::parse(p).unwrap();
    let layer = TimeoutProfileLayer::new(profiles())
        .with_message_ids(
            route("/sw4rm.registry.RegistryService/*"),
            MessageIds::new().correlation_id(&[1]),
        )
        .with_message_ids(
            route("/sw4rm.router.RouterService/*"),
            MessageIds::new().correlation_id(&[1, 2]),
        )
        .with_message_ids(
            route("/sw4rm.router.RouterService/SendMessage"),
            MessageIds::new(),
        );
    let sw4rm = connect(&server, layer).await;
    let beat = registry::HeartbeatRequest {
        agent_id: "agent-7".into(),
        ..Default::default()
    };
    sw4rm.registry().heartbeat(beat.clone()).await.unwrap_err();
    sw4rm
        .router()
        .send_message(envelope("corr-1"))
        .await
        .unwrap_err();

    let seen: Vec<_> = timeouts(&events)
        .iter()
        .map(|e| (e.get("method").cloned(), e.get("correlation_id").cloned()))
        .collect();
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        seen,
        [(s("Heartbeat"), s("agent-7")), (s("SendMessage"), None)]
    );
    let beats = server.calls_to("Heartbeat");
    assert_eq!(
        beats[0].request_as::<registry::HeartbeatRequest>(),
        Some(beat)
    );
    let sent = server.calls_to("SendMessage");
    assert_eq!(
        sent[0].request_as::<router::SendMessageRequest>(),
        Some(envelope("corr-1"))
    );
}
