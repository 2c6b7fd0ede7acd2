//! SW4-002 §4.1 over loopback with the embedded server's scripted pacing: each
//! streaming phase, partial results, a slow-but-steady stream, cancellation,
//! metrics and tracing for stream timeouts, and a caller dropping the stream.

mod common;

use std::time::Duration;

use common::{capture_events, connect, server, Metrics, WAIT};
use sw4rm_timeouts::proto::sw4rm::tool::{ToolCall, ToolFrame};
use sw4rm_timeouts::testing::{Script, ServedEnd, StreamScript, TestServer};
use sw4rm_timeouts::{
    CallStreamingPolicy, DetectedBy, Phase, ProfileSet, StreamingTimeoutPolicy, Sw4rm,
    TimeoutDetails, TimeoutProfileLayer,
};
use tonic::{Code, Status};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn policy(initial: u32, gap: u32, total: u32) -> StreamingTimeoutPolicy {
    StreamingTimeoutPolicy {
        initial_timeout_ms: initial,
        message_gap_timeout_ms: gap,
        total_timeout_ms: total,
        idle_timeout_ms: 0,
    }
}

async fn setup(
    stream: StreamScript,
    streaming: StreamingTimeoutPolicy,
) -> (TestServer, Sw4rm, Metrics) {
    let server = server().await;
    server
        .script("CallStream", Script::stream(stream))
        .expect("a known RPC");
    let profiles = ProfileSet::builder()
        .without_global()
        .streaming("tool_call", streaming)
        .build()
        .unwrap();
    let metrics = Metrics::new();
    let sw4rm = connect(
        &server,
        TimeoutProfileLayer::new(profiles).with_meter_provider(&metrics.provider),
    )
    .await;
    (server, sw4rm, metrics)
}

/// Drains the stream: the frames received, then the error (if any).
async fn drain(sw4rm: &Sw4rm, req: tonic::Request<ToolCall>) -> (Vec<ToolFrame>, Option<Status>) {
    let mut frames = Vec::new();
    let mut stream = match sw4rm.tool().call_stream(req).await {
        Ok(r) => r.into_inner(),
        Err(status) => return (frames, Some(status)),
    };
    loop {
        match stream.message().await {
            Ok(Some(f)) => frames.push(f),
            Ok(None) => return (frames, None),
            Err(status) => {
                // After the error the stream is over.
                assert!(matches!(stream.message().await, Ok(None) | Err(_)));
                return (frames, Some(status));
            }
        }
    }
}

fn details(status: &Status) -> TimeoutDetails {
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    TimeoutDetails::from_status(status).expect("timeout details")
}

#[tokio::test]
async fn initial_timeout_fires_before_the_first_message() {
    let script = StreamScript {
        first_after: Duration::from_secs(30),
        ..StreamScript::default()
    };
    let (server, sw4rm, metrics) = setup(script, policy(300, 5_000, 0)).await;
    let (frames, err) = drain(&sw4rm, tonic::Request::new(ToolCall::default())).await;
    assert!(frames.is_empty());
    let d = details(&err.expect("timeout"));
    assert_eq!(
        (d.phase(), d.configured_timeout_ms(), d.message_count()),
        (Phase::Initial, 300, Some(0))
    );
    assert_eq!(
        (d.profile_name(), d.method(), d.detected_by()),
        ("tool_call", "CallStream", DetectedBy::Client)
    );
    assert_eq!(d.source().to_string(), "client");
    assert!(d.elapsed_ms() >= 300, "{}", d.elapsed_ms());
    assert_eq!(
        server.calls()[0].grpc_timeout,
        None,
        "no total cap: no deadline on the wire"
    );
    assert_eq!(
        server.wait_for_end(0, WAIT).await.unwrap().outcome,
        ServedEnd::Cancelled
    );
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "CallStream"), 1);
}

#[tokio::test]
async fn gap_timeout_keeps_the_messages_received_before_it() {
    let script = StreamScript {
        first_after: ms(10),
        gap: ms(10),
        messages: 4,
        stall_after: true,
        ..StreamScript::default()
    };
    let (server, sw4rm, metrics) = setup(script, policy(5_000, 1_000, 0)).await;
    let (events, _guard) = capture_events();
    let (frames, err) = drain(&sw4rm, tonic::Request::new(ToolCall::default())).await;
    assert_eq!(
        frames.iter().map(|f| f.frame_no).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    let d = details(&err.expect("timeout"));
    assert_eq!(
        (d.phase(), d.configured_timeout_ms(), d.message_count()),
        (Phase::Gap, 1_000, Some(4))
    );
    let end = server.wait_for_end(0, WAIT).await.unwrap();
    assert_eq!((end.outcome, end.messages_sent), (ServedEnd::Cancelled, 4));
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "CallStream"), 1);
    assert_eq!(metrics.value("sw4rm_rpc_duration_ms", "CallStream"), 1);
    let warned = events.with_message("SW4RM RPC timed out");
    assert_eq!(warned.len(), 1);
    assert_eq!(warned[0]["phase"], "gap");
    assert_eq!(warned[0]["configured_timeout_ms"], "1000");
    assert_eq!(warned[0]["span.method"], "CallStream");
}

#[tokio::test]
async fn total_cap_is_on_the_wire_and_ends_a_healthy_stream() {
    let script = StreamScript {
        first_after: ms(0),
        gap: ms(20),
        messages: 10_000,
        stall_after: false,
        ..StreamScript::default()
    };
    let (server, sw4rm, _metrics) = setup(script, policy(0, 0, 500)).await;
    let (frames, err) = drain(&sw4rm, tonic::Request::new(ToolCall::default())).await;
    let d = details(&err.expect("timeout"));
    assert_eq!(d.phase(), Phase::Total);
    assert_eq!(d.configured_timeout_ms(), 500);
    assert!(!frames.is_empty() && frames.len() < 10_000);
    assert_eq!(d.message_count(), Some(frames.len() as u64));
    assert!(d.elapsed_ms() >= 500, "{}", d.elapsed_ms());
    assert_eq!(server.calls()[0].grpc_timeout.as_deref(), Some("500000u"));
    assert_eq!(
        server.wait_for_end(0, WAIT).await.unwrap().outcome,
        ServedEnd::Cancelled
    );
}

/// 30 messages 100 ms apart take 3 s: five times the 600 ms initial and gap values,
/// and the stream completes because every message resets the gap timer.
#[tokio::test]
async fn slow_but_steady_stream_is_not_killed() {
    let script = StreamScript {
        first_after: ms(100),
        gap: ms(100),
        messages: 30,
        stall_after: false,
        ..StreamScript::default()
    };
    let (server, sw4rm, metrics) = setup(script, policy(600, 600, 0)).await;
    let started = std::time::Instant::now();
    let (frames, err) = drain(&sw4rm, tonic::Request::new(ToolCall::default())).await;
    assert!(err.is_none(), "{err:?}");
    assert_eq!(frames.len(), 30);
    assert!(started.elapsed() >= ms(3_000));
    assert_eq!(server.calls()[0].outcome, ServedEnd::Completed);
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "CallStream"), 0);
    assert_eq!(metrics.value("sw4rm_rpc_duration_ms", "CallStream"), 1);
}

#[tokio::test]
async fn per_call_policy_overrides_each_field() {
    let script = StreamScript {
        first_after: ms(10),
        gap: ms(10),
        messages: 2,
        stall_after: true,
        ..StreamScript::default()
    };
    let (server, sw4rm, _metrics) = setup(script, policy(5_000, 5_000, 0)).await;
    let mut req = tonic::Request::new(ToolCall::default());
    CallStreamingPolicy(policy(0, 1_000, 60_000)).apply(&mut req);
    let (frames, err) = drain(&sw4rm, req).await;
    assert_eq!(frames.len(), 2);
    let d = details(&err.expect("timeout"));
    assert_eq!(
        (
            d.phase(),
            d.configured_timeout_ms(),
            d.source().to_string().as_str()
        ),
        (Phase::Gap, 1_000, "per_call")
    );
    assert_eq!(server.calls()[0].grpc_timeout.as_deref(), Some("60000000u"));
}

/// Defaults with nothing configured: initial and gap = the effective timeout (here
/// the per-call 1.2 s), total unlimited.
#[tokio::test]
async fn defaults_follow_the_effective_timeout() {
    let script = StreamScript {
        first_after: Duration::from_secs(30),
        ..StreamScript::default()
    };
    let (server, sw4rm, _metrics) = setup(script, StreamingTimeoutPolicy::default()).await;
    let mut req = tonic::Request::new(ToolCall::default());
    req.set_timeout(ms(1_200));
    let (_, err) = drain(&sw4rm, req).await;
    let d = details(&err.expect("timeout"));
    assert_eq!(
        (
            d.phase(),
            d.configured_timeout_ms(),
            d.source().to_string().as_str()
        ),
        (Phase::Initial, 1_200, "per_call")
    );
    assert_eq!(server.calls()[0].grpc_timeout, None);
}

#[tokio::test]
async fn dropping_the_stream_midway_cancels_and_leaves_nothing_behind() {
    let script = StreamScript {
        first_after: ms(0),
        gap: ms(10),
        messages: 1_000,
        stall_after: false,
        ..StreamScript::default()
    };
    let (server, sw4rm, metrics) = setup(script, policy(1_000, 1_000, 0)).await;
    let rt = tokio::runtime::Handle::current().metrics();
    let mut stream = sw4rm
        .tool()
        .call_stream(ToolCall::default())
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().unwrap();
    stream.message().await.unwrap().unwrap();
    let baseline_before_drop = rt.num_alive_tasks();
    drop(stream);
    assert_eq!(
        server.wait_for_end(0, WAIT).await.unwrap().outcome,
        ServedEnd::Cancelled
    );
    // The server's producer task ends; nothing of ours was ever spawned.
    let deadline = tokio::time::Instant::now() + WAIT;
    while rt.num_alive_tasks() >= baseline_before_drop && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(ms(10)).await;
    }
    assert!(rt.num_alive_tasks() < baseline_before_drop);
    // A dropped stream is a finished call, not a timeout.
    assert_eq!(metrics.value("sw4rm_rpc_duration_ms", "CallStream"), 1);
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "CallStream"), 0);
}
