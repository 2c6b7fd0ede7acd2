//! Hedging under paused tokio time, over an in-memory inner service whose every
//! attempt follows a script (how long it takes, what it answers) and records when it
//! came, its `grpc-timeout`, its `grpc-previous-rpc-attempts`, and whether it was
//! dropped before it answered (cancelled). No socket: every instant is exact.

use std::time::Duration;

use sw4rm_timeouts::testing::{Play, Scripted, Seen, ATTEMPT_HEADER};
use sw4rm_timeouts::{
    CallHedging, HedgingPolicy, ProfileSet, RetryBudget, TimeoutDetails, TimeoutProfileLayer,
    DEFAULT_HEDGE_BURST,
};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

const STATUS: &str = "/sw4rm.scheduler.SchedulerService/GetTaskStatus";
const CANCEL: &str = "/sw4rm.scheduler.SchedulerService/CancelTask";
const SUBMIT: &str = "/sw4rm.scheduler.SchedulerService/SubmitTask";

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Answers `OK` after `v` ms.
fn ok_after(v: u64) -> Play {
    Play::answer().after(ms(v))
}

/// Answers trailers-only with `code` after `v` ms.
fn status_after(v: u64, code: tonic::Code) -> Play {
    Play::answer().after(ms(v)).status(code)
}

/// Whether the attempt was dropped before it answered.
fn cancelled(seen: &Seen) -> bool {
    seen.dropped.is_some()
}

/// The attempt's `grpc-previous-rpc-attempts`.
fn previous(seen: &Seen) -> Option<&str> {
    seen.header("grpc-previous-rpc-attempts")
}

fn request(path: &str) -> http::Request<tonic::body::Body> {
    http::Request::builder()
        .uri(format!("http://sw4rm.test{path}"))
        .body(tonic::body::Body::empty())
        .unwrap()
}

fn fixed(attempts: u32, delay: u64) -> HedgingPolicy {
    HedgingPolicy::builder()
        .max_attempts(attempts)
        .delay(ms(delay))
        .build()
        .unwrap()
}

/// A layer whose `workflow_status` and `task_submit` profiles hedge with `policy`
/// (10 s deadline), without a budget unless given, and without the layer's cap on the
/// share of calls that hedge: these tests send every call one after another, each a
/// hedge candidate, to test the policy itself (the cap is tested below, with it on).
fn layer(policy: HedgingPolicy) -> TimeoutProfileLayer {
    let profiles = ProfileSet::builder()
        .without_global()
        .hedging("workflow_status", policy)
        .hedging("task_submit", policy)
        .build()
        .unwrap();
    TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .without_retry_budget()
        .without_hedge_cap()
}

/// A step change makes every call slow: with the default cap, 10 % of the calls of
/// each second (plus the burst of 10) send a hedge (every one would without it), and the learned delay
/// follows the route within 30 s.
#[tokio::test(start_paused = true)]
async fn after_a_step_change_the_cap_holds_hedges_to_a_tenth_each_second_plus_the_burst() {
    let profiles = ProfileSet::builder()
        .without_global()
        .hedging("workflow_status", learned(95))
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .without_retry_budget();
    // 40 calls a second (one every 25 ms, concurrently), fast for 10 s, then every
    // first attempt takes 500 ms (its hedge 1 ms) for 40 s.
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..2_000u64 {
        let at = start + ms(25 * i);
        let layer = layer.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let first = if i < 400 { ok_after(10) } else { ok_after(500) };
            let server = Scripted::new([first, ok_after(1)]);
            call(&layer, &server, request(STATUS)).await.unwrap();
            (at - start, server.seen().len() > 1)
        }));
    }
    let mut per_second = vec![(0u32, 0u32); 50];
    for task in tasks {
        let (at, hedged) = task.await.unwrap();
        let s = &mut per_second[(at.as_secs() as usize).min(49)];
        s.0 += 1;
        s.1 += u32::from(hedged);
    }
    // Calls counted by when they started; a hedge falls in the cap's window of the
    // moment it is sent, so count by the calls of each second as a share.
    let slow: Vec<(u32, u32)> = per_second[10..].to_vec();
    for (second, (calls, hedged)) in slow.iter().enumerate() {
        // 10 % of the second's calls plus the burst (one more for the window's edge).
        assert!(
            *hedged * 10 <= *calls + 10 * (DEFAULT_HEDGE_BURST + 1),
            "second {}: {hedged} of {calls} hedged",
            second + 10
        );
    }
    // Without the cap, every slow call would hedge until the delay caught up; with
    // it, after 30 s the learned delay is the new p95 (500 ms): no call hedges.
    let last: u32 = per_second[45..].iter().map(|s| s.1).sum();
    assert_eq!(last, 0, "{per_second:?}");
}

/// The default cap on a layer with few calls: reads 300 ms apart hedge as their
/// policy says, every one of them; a read whose only attempt answers `UNAVAILABLE` at
/// once is hedged at once and answered, not failed with its deadline left.
#[tokio::test(start_paused = true)]
async fn a_layer_with_few_calls_hedges_as_configured_under_the_default_cap() {
    let profiles = ProfileSet::builder()
        .without_global()
        .hedging("workflow_status", fixed(3, 50))
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .without_retry_budget();
    for i in 0..20 {
        let server = Scripted::new([ok_after(500), ok_after(500), ok_after(10)]);
        let response = call(&layer, &server, request(STATUS)).await.unwrap();
        assert_eq!(server.seen().len(), 3, "read {i}: every attempt sent");
        assert_eq!(header(&response, ATTEMPT_HEADER), Some("3"));
        tokio::time::sleep(ms(300)).await;
    }
    for i in 0..20 {
        let server = Scripted::new([status_after(0, tonic::Code::Unavailable), ok_after(1)]);
        let response = call(&layer, &server, request(STATUS)).await.unwrap();
        assert_eq!(header(&response, "grpc-status"), None, "read {i}");
        assert_eq!(server.seen().len(), 2, "read {i}");
        tokio::time::sleep(ms(300)).await;
    }
}

async fn call(
    layer: &TimeoutProfileLayer,
    server: &Scripted,
    req: http::Request<tonic::body::Body>,
) -> Result<
    http::Response<sw4rm_timeouts::timeout::TimeoutBody<tonic::body::Body>>,
    sw4rm_timeouts::BoxError,
> {
    let mut svc = ServiceBuilder::new()
        .layer(layer.clone())
        .service(server.clone());
    svc.ready().await.unwrap().call(req).await
}

fn header<'a, B>(response: &'a http::Response<B>, name: &str) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().unwrap())
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_hedged_after_the_delay_and_the_first_answer_wins() {
    let server = Scripted::new([ok_after(1_000), ok_after(10)]);
    let start = Instant::now();
    let response = call(&layer(fixed(2, 50)), &server, request(STATUS))
        .await
        .unwrap();
    assert_eq!(
        start.elapsed(),
        ms(60),
        "the hedge answered 10 ms after its send"
    );
    assert_eq!(header(&response, ATTEMPT_HEADER), Some("2"));
    assert_eq!(header(&response, "sw4rm-attempts"), Some("2"));
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].at - seen[0].at, ms(50));
    // Both inside the one 10 s deadline: the hedge carries what remains of it.
    assert_eq!(seen[0].grpc_timeout(), Some(ms(10_000)));
    assert_eq!(seen[1].grpc_timeout(), Some(ms(9_950)));
    assert_eq!(previous(&seen[0]), None);
    assert_eq!(previous(&seen[1]), Some("1"));
    // The loser was cancelled when the winner answered.
    assert!(cancelled(&seen[0]), "{seen:?}");
    assert!(!cancelled(&seen[1]));
}

#[tokio::test(start_paused = true)]
async fn an_answer_before_the_delay_sends_no_hedge() {
    let server = Scripted::new([ok_after(49)]);
    let response = call(&layer(fixed(3, 50)), &server, request(STATUS))
        .await
        .unwrap();
    assert_eq!(header(&response, "sw4rm-attempts"), None);
    // Well past the delay: nothing more was sent.
    tokio::time::sleep(ms(500)).await;
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn attempts_stop_at_max_attempts_and_the_first_to_answer_wins() {
    // Every attempt takes 1 s: three are sent, one delay apart, and the first wins.
    let server = Scripted::new([ok_after(1_000)]);
    let start = Instant::now();
    let response = call(&layer(fixed(3, 100)), &server, request(STATUS))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), ms(1_000));
    assert_eq!(header(&response, ATTEMPT_HEADER), Some("1"));
    assert_eq!(header(&response, "sw4rm-attempts"), Some("3"));
    let seen = server.seen();
    let sent: Vec<Duration> = seen.iter().map(|s| s.at - start).collect();
    assert_eq!(sent, [ms(0), ms(100), ms(200)]);
    let dropped: Vec<bool> = seen.iter().map(cancelled).collect();
    assert_eq!(dropped, [false, true, true]);
    let previous: Vec<Option<&str>> = seen.iter().map(previous).collect();
    assert_eq!(previous, [None, Some("1"), Some("2")]);
}

#[tokio::test(start_paused = true)]
async fn a_fatal_status_is_a_final_answer_and_ends_the_others() {
    // The hedge answers NOT_FOUND first: that is the call's answer.
    let server = Scripted::new([ok_after(300), status_after(10, tonic::Code::NotFound)]);
    let response = call(&layer(fixed(2, 50)), &server, request(STATUS))
        .await
        .unwrap();
    assert_eq!(header(&response, "grpc-status"), Some("5"));
    assert_eq!(header(&response, ATTEMPT_HEADER), Some("2"));
    assert!(cancelled(&server.seen()[0]));
}

#[tokio::test(start_paused = true)]
async fn a_non_fatal_status_sends_the_next_hedge_at_once_and_lets_it_win() {
    // The first attempt answers UNAVAILABLE after 10 ms: the hedge goes out then, not
    // at the 50 ms delay, and its answer is the call's.
    let server = Scripted::new([status_after(10, tonic::Code::Unavailable), ok_after(20)]);
    let start = Instant::now();
    let response = call(&layer(fixed(2, 50)), &server, request(STATUS))
        .await
        .unwrap();
    assert_eq!(header(&response, "grpc-status"), None);
    assert_eq!(header(&response, ATTEMPT_HEADER), Some("2"));
    let seen = server.seen();
    assert_eq!(seen[1].at - start, ms(10));
    assert_eq!(start.elapsed(), ms(30));
}

#[tokio::test(start_paused = true)]
async fn the_last_non_fatal_answer_is_the_calls_when_no_attempt_is_left() {
    let server = Scripted::new([status_after(10, tonic::Code::Unavailable)]);
    let response = call(&layer(fixed(2, 50)), &server, request(STATUS))
        .await
        .unwrap();
    assert_eq!(header(&response, "grpc-status"), Some("14"));
    assert_eq!(header(&response, "sw4rm-attempts"), Some("2"));
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_pushback_stops_further_hedges() {
    // Attempt 2 answers UNAVAILABLE with a pushback: no attempt 3, at once or at its
    // delay; attempt 1 still answers.
    let pushed = status_after(10, tonic::Code::Unavailable).pushback("1000");
    let server = Scripted::new([ok_after(300), pushed]);
    let response = call(&layer(fixed(3, 50)), &server, request(STATUS))
        .await
        .unwrap();
    assert_eq!(header(&response, ATTEMPT_HEADER), Some("1"));
    assert_eq!(server.seen().len(), 2, "{:?}", server.seen());
}

#[tokio::test(start_paused = true)]
async fn no_hedge_while_the_retry_budget_is_low() {
    // A budget of one token: one non-fatal answer spends it.
    let budget = RetryBudget::new(1);
    let layer = layer(fixed(2, 50)).with_retry_budget(budget.clone());
    let server = Scripted::new([status_after(10, tonic::Code::Unavailable)]);
    let response = call(&layer, &server, request(STATUS)).await.unwrap();
    assert_eq!(header(&response, "grpc-status"), Some("14"));
    assert_eq!(server.seen().len(), 1, "no hedge after the budget ran out");
    assert_eq!(budget.tokens(), 0.0);
    // A slow call now: its delay passes, but no hedge is sent.
    let server = Scripted::new([ok_after(400)]);
    let response = call(&layer, &server, request(STATUS)).await.unwrap();
    assert_eq!(header(&response, ATTEMPT_HEADER), Some("1"));
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_mutation_is_never_hedged() {
    // task_submit hedges, but SubmitTask is not idempotent; CancelTask is.
    let server = Scripted::new([ok_after(400)]);
    let layer = layer(fixed(2, 50));
    call(&layer, &server, request(SUBMIT)).await.unwrap();
    assert_eq!(server.seen().len(), 1);
    let server = Scripted::new([ok_after(400)]);
    call(&layer, &server, request(CANCEL)).await.unwrap();
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn per_call_settings_turn_hedging_on_and_off() {
    // Standard profiles do not hedge; one call asks to.
    let layer = TimeoutProfileLayer::standard()
        .without_metrics()
        .without_retry_budget();
    let server = Scripted::new([ok_after(400)]);
    call(&layer, &server, request(STATUS)).await.unwrap();
    assert_eq!(server.seen().len(), 1, "standard: off");
    let mut req = request(STATUS);
    req.extensions_mut()
        .insert(CallHedging::policy(fixed(2, 50)));
    let server = Scripted::new([ok_after(400)]);
    call(&layer, &server, req).await.unwrap();
    assert_eq!(server.seen().len(), 2, "per call: on");
    // A hedging profile, one call off; and the layer off for all.
    let hedging = self::layer(fixed(2, 50));
    let mut req = request(STATUS);
    req.extensions_mut().insert(CallHedging::off());
    let server = Scripted::new([ok_after(400)]);
    call(&hedging, &server, req).await.unwrap();
    assert_eq!(server.seen().len(), 1, "per call: off");
    let server = Scripted::new([ok_after(400)]);
    call(&hedging.clone().without_hedging(), &server, request(STATUS))
        .await
        .unwrap();
    assert_eq!(server.seen().len(), 1, "layer: off");
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_every_attempt_with_one_timeout() {
    let profiles = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("workflow_status", 1_000)
        .min_timeout_ms("workflow_status", 100)
        .hedging("workflow_status", fixed(3, 100))
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles).without_metrics();
    let server = Scripted::new([ok_after(5_000)]);
    let start = Instant::now();
    let err = call(&layer, &server, request(STATUS)).await.unwrap_err();
    assert_eq!(start.elapsed(), ms(1_000));
    let status = tonic::Status::from_error(err);
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
    let details = TimeoutDetails::from_status(&status).expect("details");
    assert_eq!(details.attempts(), Some(3));
    assert_eq!(details.configured_timeout_ms(), 1_000);
    let seen = server.seen();
    assert!(seen.iter().all(cancelled), "{seen:?}");
    let timeouts: Vec<_> = seen.iter().map(Seen::grpc_timeout).collect();
    assert_eq!(timeouts, [Some(ms(1_000)), Some(ms(900)), Some(ms(800))]);
}

/// A learned policy: this percentile of the route's recent calls, between 5 ms and
/// 2 s.
fn learned(percentile: u32) -> HedgingPolicy {
    HedgingPolicy::builder()
        .max_attempts(2)
        .learned_delay(percentile)
        .min_delay(ms(5))
        .max_delay(ms(2_000))
        .build()
        .unwrap()
}

/// When the hedge of one call with a 3 s first attempt is sent, after the route
/// learned from `history` calls answered after `each`.
async fn hedge_sent_after(layer: &TimeoutProfileLayer, history: usize, each: u64) -> Duration {
    let server = Scripted::new([ok_after(each)]);
    for _ in 0..history {
        call(layer, &server, request(STATUS)).await.unwrap();
    }
    let slow = Scripted::new([ok_after(3_000), ok_after(1)]);
    let start = Instant::now();
    call(layer, &slow, request(STATUS)).await.unwrap();
    let seen = slow.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    seen[1].at - start
}

#[tokio::test(start_paused = true)]
async fn a_learned_delay_follows_the_routes_recent_latency() {
    let layer = layer(learned(95));
    // Before the route has 20 answered calls: the cap.
    assert_eq!(hedge_sent_after(&layer, 5, 40).await, ms(2_000));
    // After: the route's p95.
    assert_eq!(hedge_sent_after(&layer, 30, 40).await, ms(40));
    // The route slows down: the delay follows once the window has turned over.
    assert_eq!(hedge_sent_after(&layer, 300, 700).await, ms(700));
    // Held at the floor when the route is faster than it.
    assert_eq!(hedge_sent_after(&layer, 300, 1).await, ms(5));
}

/// Runs 400 calls on a route where 1 call in 20 takes 200 ms and the others 20 ms,
/// each slow one's hedge answering in 20 ms; of the last 300: how many were hedged,
/// and the slowest call.
async fn tail_under(policy: HedgingPolicy) -> (usize, Duration) {
    let layer = layer(policy);
    let mut hedged = 0;
    let mut slowest = Duration::ZERO;
    for i in 0..400 {
        let first = if i % 20 == 19 {
            ok_after(200)
        } else {
            ok_after(20)
        };
        let server = Scripted::new([first, ok_after(20)]);
        let start = Instant::now();
        call(&layer, &server, request(STATUS)).await.unwrap();
        if i >= 100 {
            hedged += usize::from(server.seen().len() > 1);
            slowest = slowest.max(start.elapsed());
        }
    }
    (hedged, slowest)
}

#[tokio::test(start_paused = true)]
async fn a_learned_delay_hedges_only_the_tail() {
    // 15 of the last 300 calls are slow; each is hedged at the p90 (20 ms) and
    // answered 20 ms later. No fast call is hedged.
    assert_eq!(tail_under(learned(90)).await, (15, ms(40)));
    // At p95 the tail is exactly the percentile's share: the delay still settles on
    // the fast calls, because a call a hedge answered is recorded at the delay (at
    // delay + hedge it would hold the delay above them, and the slowest call later).
    assert_eq!(tail_under(learned(95)).await, (15, ms(40)));
}

/// A call through the generated client (tonic encodes the request body, and attaches
/// the cancellation token to it), cancelled with tonic's `CancellationHandle` at
/// `cancel_at`: the status it ends with, and when.
async fn cancelled_by_tonic(
    layer: &TimeoutProfileLayer,
    server: &Scripted,
    cancel_at: Duration,
) -> (tonic::Status, Duration) {
    use sw4rm_timeouts::proto::sw4rm::scheduler::scheduler_service_client::SchedulerServiceClient;
    use sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest;
    let svc = ServiceBuilder::new()
        .layer(layer.clone())
        .service(server.clone());
    let mut client = SchedulerServiceClient::new(svc);
    let mut request = tonic::Request::new(GetTaskStatusRequest::default());
    let handle = request.cancellation_handle();
    let start = Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(cancel_at).await;
        handle.cancel();
    });
    let status = client.get_task_status(request).await.unwrap_err();
    (status, start.elapsed())
}

fn cancelled_by_the_caller(status: &tonic::Status) {
    assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
    let details = sw4rm_timeouts::CancelDetails::from_status(status).expect("CancelDetails");
    assert_eq!(
        details.reason(),
        sw4rm_timeouts::CancelReason::CallCancelled
    );
}

/// A hedging layer that watches for tonic's cancel.
fn watching(policy: HedgingPolicy) -> TimeoutProfileLayer {
    layer(policy).with_tonic_cancel_watch()
}

/// Without the watch (the default), tonic's cancel works as in plain tonic: only
/// while the request is still being written. A unary request is written at once, so
/// the call goes on to its answer, and tonic's encode buffer is not held meanwhile.
#[tokio::test(start_paused = true)]
async fn without_the_watch_tonics_cancel_after_the_send_is_as_plain_tonics() {
    let server = Scripted::new([ok_after(1_000)]);
    let svc = ServiceBuilder::new()
        .layer(layer(fixed(3, 5_000)))
        .service(server.clone());
    let mut client = sw4rm_timeouts::proto::sw4rm::scheduler::scheduler_service_client::SchedulerServiceClient::new(svc);
    let mut request = tonic::Request::new(
        sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest::default(),
    );
    let handle = request.cancellation_handle();
    tokio::spawn(async move {
        tokio::time::sleep(ms(100)).await;
        handle.cancel();
    });
    let start = Instant::now();
    let answer = client.get_task_status(request).await;
    // The server's own answer (its scripted empty body), at its time: not a cancel.
    let code = answer.err().map(|s| s.code());
    assert_ne!(code, Some(tonic::Code::Cancelled));
    assert_eq!(start.elapsed(), ms(1_000));
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert!(!cancelled(&seen[0]), "the attempt was not reset");
}

/// With [`TimeoutProfileLayer::with_tonic_cancel_watch`], tonic's own cancel
/// (`Request::cancellation_handle()`) ends a call at once in every state the layer
/// holds it in — waiting for headers, during a hedge delay, between retries — with
/// `CANCELLED` and `CancelDetails`, and no further attempt is sent.
#[tokio::test(start_paused = true)]
async fn tonics_cancel_ends_the_call_at_once_in_every_state() {
    // Waiting for headers (a hedged call, its hedge not yet due).
    let server = Scripted::new([ok_after(10_000)]);
    let (status, took) = cancelled_by_tonic(&watching(fixed(3, 500)), &server, ms(100)).await;
    cancelled_by_the_caller(&status);
    assert_eq!(took, ms(100));
    tokio::time::sleep(ms(2_000)).await;
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "no hedge after the cancel");
    assert!(cancelled(&seen[0]), "the attempt in flight is reset");

    // During a hedge delay, after the first hedge: no third attempt.
    let server = Scripted::new([ok_after(10_000)]);
    let (status, took) = cancelled_by_tonic(&watching(fixed(3, 500)), &server, ms(700)).await;
    cancelled_by_the_caller(&status);
    assert_eq!(took, ms(700));
    tokio::time::sleep(ms(2_000)).await;
    assert_eq!(server.seen().len(), 2);
    assert!(server.seen().iter().all(cancelled));

    // Between retries: the backoff is cut, and the retry never goes out.
    let retry = sw4rm_timeouts::RetryPolicy::builder()
        .max_attempts(3)
        .initial_backoff(ms(1_000))
        .max_backoff(ms(1_000))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .retry("workflow_status", retry)
        .build()
        .unwrap();
    let retrying = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .without_retry_budget()
        .with_tonic_cancel_watch();
    // The server's pushback fixes the wait at 1 s (a jittered backoff could be shorter
    // than the 100 ms before the cancel).
    let pushed = status_after(0, tonic::Code::Unavailable).pushback("1000");
    let server = Scripted::new([pushed]);
    let (status, took) = cancelled_by_tonic(&retrying, &server, ms(100)).await;
    cancelled_by_the_caller(&status);
    assert_eq!(took, ms(100));
    tokio::time::sleep(ms(5_000)).await;
    assert_eq!(server.seen().len(), 1, "no retry after the cancel");
}
