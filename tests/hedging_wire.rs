//! Hedging over loopback against the embedded `TestServer`: what the server saw of
//! every attempt (its `grpc-timeout`, `grpc-previous-rpc-attempts`, the loser's
//! reset), what the caller got (the winner, `sw4rm-attempts`), the metrics (one
//! duration point, the hedge counters) and the INFO event per hedge. A mutation is
//! never hedged; a non-fatal status lets the other attempt win.

mod common;

use std::time::Duration;

use common::{capture_events, server, Metrics, WAIT};
use sw4rm_timeouts::metrics::{DURATION_MS, HEDGES_TOTAL, HEDGE_WINS_TOTAL, TIMEOUT_TOTAL};
use sw4rm_timeouts::proto::sw4rm::scheduler::{GetTaskStatusRequest, SubmitTaskRequest};
use sw4rm_timeouts::testing::{Script, ServedEnd, TestServer};
use sw4rm_timeouts::{HedgingPolicy, ProfileSet, Sw4rm, TimeoutProfileLayer, ATTEMPTS_HEADER};
use tokio::time::Instant;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// `workflow_status` (GetTaskStatus) and `task_submit` (SubmitTask) hedge once after
/// a fixed `delay`.
async fn connect(server: &TestServer, delay: u64, metrics: &Metrics) -> Sw4rm {
    let policy = HedgingPolicy::builder()
        .max_attempts(2)
        .delay(ms(delay))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .hedging("workflow_status", policy)
        .hedging("task_submit", policy)
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles).with_meter_provider(&metrics.provider);
    common::connect(server, layer).await
}

/// Waits until the server has seen call `id` end (answered or reset), up to `WAIT`.
async fn ended(server: &TestServer, rpc: &str, id: usize) -> ServedEnd {
    let give_up = Instant::now() + WAIT;
    loop {
        let calls = server.calls_to(rpc);
        let outcome = calls.iter().find(|c| c.id == id).map(|c| c.outcome);
        match outcome {
            Some(o) if o != ServedEnd::Running || Instant::now() >= give_up => return o,
            _ => tokio::time::sleep(ms(10)).await,
        }
    }
}

#[tokio::test]
async fn a_hedge_wins_and_the_server_sees_the_first_attempt_reset() {
    let server = server().await;
    server
        .script(
            "GetTaskStatus",
            Script::slow_first(1, Duration::from_secs(30)),
        )
        .unwrap();
    let metrics = Metrics::new();
    let sw4rm = connect(&server, 200, &metrics).await;
    let (events, _guard) = capture_events();
    let start = Instant::now();
    let response = sw4rm
        .scheduler()
        .get_task_status(GetTaskStatusRequest::default())
        .await
        .expect("the hedge answers");
    assert!(start.elapsed() >= ms(200), "no hedge before its delay");
    assert_eq!(
        response
            .metadata()
            .get(ATTEMPTS_HEADER)
            .map(|v| v.to_str().unwrap()),
        Some("2")
    );
    let calls = server.calls_to("GetTaskStatus");
    assert_eq!(calls.len(), 2, "{calls:?}");
    let (first, hedge) = (&calls[0], &calls[1]);
    assert_eq!(first.previous_attempts, None);
    assert_eq!(hedge.previous_attempts, Some(1));
    // Both under the call's one 10 s deadline: the hedge carries what remained of it
    // when it was sent, at least the delay later.
    let (a, b) = (first.deadline.unwrap(), hedge.deadline.unwrap());
    assert_eq!(a, Duration::from_secs(10));
    assert!(b <= a - ms(200), "{b:?}");
    assert_eq!(hedge.outcome, ServedEnd::Completed);
    assert_eq!(
        ended(&server, "GetTaskStatus", first.id).await,
        ServedEnd::Cancelled
    );
    // One call: one duration point, no timeout; one hedge sent, and it won.
    assert_eq!(metrics.value(DURATION_MS, "GetTaskStatus"), 1);
    assert_eq!(metrics.value(TIMEOUT_TOTAL, "GetTaskStatus"), 0);
    assert_eq!(metrics.value(HEDGES_TOTAL, "GetTaskStatus"), 1);
    assert_eq!(metrics.value(HEDGE_WINS_TOTAL, "GetTaskStatus"), 1);
    let hedged = events.with_message("SW4RM hedging the call");
    assert_eq!(hedged.len(), 1, "{:?}", events.all());
    assert_eq!(hedged[0]["attempt"], "2");
    assert_eq!(hedged[0]["delay_ms"], "200");
    assert_eq!(hedged[0]["reason"], "delay");
}

#[tokio::test]
async fn a_mutation_is_never_hedged() {
    let server = server().await;
    server
        .script("SubmitTask", Script::slow_first(1, ms(600)))
        .unwrap();
    let metrics = Metrics::new();
    let sw4rm = connect(&server, 50, &metrics).await;
    sw4rm
        .scheduler()
        .submit_task(SubmitTaskRequest::default())
        .await
        .expect("answered");
    assert_eq!(server.calls_to("SubmitTask").len(), 1);
    assert_eq!(metrics.value(HEDGES_TOTAL, "SubmitTask"), 0);
}

#[tokio::test]
async fn a_non_fatal_status_lets_the_other_attempt_win() {
    // The first attempt answers UNAVAILABLE at once: the hedge is sent then, long
    // before its 5 s delay, and its answer is the call's.
    let server = server().await;
    server
        .script(
            "GetTaskStatus",
            Script::fail_first(1, tonic::Code::Unavailable),
        )
        .unwrap();
    let metrics = Metrics::new();
    let sw4rm = connect(&server, 5_000, &metrics).await;
    let (events, _guard) = capture_events();
    sw4rm
        .scheduler()
        .get_task_status(GetTaskStatusRequest::default())
        .await
        .expect("the hedge answers");
    let calls = server.calls_to("GetTaskStatus");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].previous_attempts, Some(1));
    assert_eq!(metrics.value(HEDGE_WINS_TOTAL, "GetTaskStatus"), 1);
    let hedged = events.with_message("SW4RM hedging the call");
    assert_eq!(hedged.len(), 1, "{:?}", events.all());
    assert_eq!(hedged[0]["reason"], "non_fatal");
}

#[tokio::test]
async fn a_fatal_status_is_the_answer_and_no_hedge_follows() {
    let server = server().await;
    server
        .script(
            "GetTaskStatus",
            Script::fail_first(1, tonic::Code::NotFound),
        )
        .unwrap();
    let metrics = Metrics::new();
    let sw4rm = connect(&server, 300, &metrics).await;
    let status = sw4rm
        .scheduler()
        .get_task_status(GetTaskStatusRequest::default())
        .await
        .expect_err("NOT_FOUND is final");
    assert_eq!(status.code(), tonic::Code::NotFound);
    // Past the delay: still one attempt.
    tokio::time::sleep(ms(400)).await;
    assert_eq!(server.calls_to("GetTaskStatus").len(), 1);
}
