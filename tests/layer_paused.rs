//! The layer and its body wrapper under paused tokio time, over an in-memory inner
//! service (no socket): exact deadlines, exact elapsed times, every streaming phase,
//! and the inner call dropped on expiry.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

mod common;

use bytes::Bytes;
use http_body::{Body, Frame};
use sw4rm_timeouts::testing::{Feed, Play, Scripted};
use sw4rm_timeouts::timeout::body::TimeoutBody;
use sw4rm_timeouts::{
    DetectedBy, Phase, ProfileSet, StreamingTimeoutPolicy, TimeoutDetails, TimeoutProfile,
    TimeoutProfileLayer,
};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
const CALL_STREAM: &str = "/sw4rm.tool.ToolService/CallStream";

fn message(n: usize) -> Frame<Bytes> {
    let mut v = vec![0u8];
    v.extend_from_slice(&(n as u32).to_be_bytes());
    v.extend(std::iter::repeat_n(1u8, n));
    Frame::data(Bytes::from(v))
}

fn request(path: &str) -> http::Request<tonic::body::Body> {
    http::Request::builder()
        .uri(format!("http://sw4rm.test{path}"))
        .body(tonic::body::Body::empty())
        .unwrap()
}

/// The layered service of a test, and the scripted inner service under it.
struct Harness<S> {
    svc: S,
    inner: Scripted,
}

impl<S> Harness<S> {
    /// The `grpc-timeout` the inner service got with each call, as sent.
    fn timeouts(&self) -> Vec<Option<String>> {
        let seen = self.inner.seen();
        seen.iter()
            .map(|s| s.header("grpc-timeout").map(str::to_owned))
            .collect()
    }
}

/// The layered service's response body.
type Wrapped = Pin<Box<TimeoutBody<tonic::body::Body>>>;

fn harness(
    profiles: ProfileSet,
    headers_after: Option<Duration>,
) -> Harness<
    impl Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<TimeoutBody<tonic::body::Body>>,
        Error = sw4rm_timeouts::BoxError,
    >,
> {
    harness_with(
        TimeoutProfileLayer::new(profiles).without_metrics(),
        headers_after,
    )
}

/// The layer over an inner service that answers with headers after `headers_after`
/// (never if `None`) and a body the test feeds.
fn harness_with(
    layer: TimeoutProfileLayer,
    headers_after: Option<Duration>,
) -> Harness<
    impl Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<TimeoutBody<tonic::body::Body>>,
        Error = sw4rm_timeouts::BoxError,
    >,
> {
    let play = match headers_after {
        Some(d) => Play::answer().after(d).fed(),
        None => Play::hang(),
    };
    let inner = Scripted::new([play]);
    let svc = ServiceBuilder::new().layer(layer).service(inner.clone());
    Harness { svc, inner }
}

fn standard() -> ProfileSet {
    ProfileSet::builder().without_global().build().unwrap()
}

fn details(err: sw4rm_timeouts::BoxError) -> TimeoutDetails {
    let status = tonic::Status::from_error(err);
    TimeoutDetails::from_status(&status).unwrap_or_else(|| panic!("no details in {status:?}"))
}

#[tokio::test(start_paused = true)]
async fn unary_deadline_is_exact_and_drops_the_inner_call() {
    let mut h = harness(standard(), None);
    let start = Instant::now();
    let err = respond(&mut h.svc, request(HEARTBEAT)).await.unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    let d = details(err);
    assert_eq!(
        (d.elapsed_ms(), d.configured_timeout_ms(), d.phase()),
        (5_000, 5_000, Phase::Total)
    );
    assert_eq!(
        (d.source().to_string().as_str(), d.detected_by()),
        ("standard", DetectedBy::Client)
    );
    let seen = h.inner.seen();
    assert_eq!(
        seen[0].dropped,
        Some(start + Duration::from_secs(5)),
        "the inner call must be dropped (HTTP/2 reset)"
    );
    assert_eq!(seen[0].header("grpc-timeout"), Some("5000000u"));
}

/// tonic's own timer stops at the response headers; ours covers a stalled body too.
#[tokio::test(start_paused = true)]
async fn unary_deadline_covers_a_stalled_body() {
    let mut h = harness(standard(), Some(Duration::from_secs(1)));
    let start = Instant::now();
    let resp = respond(&mut h.svc, request(HEARTBEAT)).await.unwrap();
    let _tx = h.inner.next_feed().await; // keep the body open, send nothing
    let mut body: Wrapped = Box::pin(resp.into_body());
    let err = next(&mut body).await.unwrap().unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(details(err).elapsed_ms(), 5_000);
    assert!(next(&mut body).await.is_none());
    assert!(body.is_end_stream());
}

/// One call through the layered service: the response, or the layer's error.
async fn respond<S, B>(
    svc: &mut S,
    req: http::Request<tonic::body::Body>,
) -> Result<http::Response<B>, sw4rm_timeouts::BoxError>
where
    S: Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<B>,
        Error = sw4rm_timeouts::BoxError,
    >,
{
    svc.ready().await?.call(req).await
}

async fn call_body<S>(
    svc: &mut S,
    req: http::Request<tonic::body::Body>,
) -> TimeoutBody<tonic::body::Body>
where
    S: Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<TimeoutBody<tonic::body::Body>>,
        Error = sw4rm_timeouts::BoxError,
    >,
{
    respond(svc, req).await.unwrap().into_body()
}

async fn next(body: &mut Wrapped) -> Option<Result<Frame<Bytes>, sw4rm_timeouts::BoxError>> {
    std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await
}

fn streaming(initial: u32, gap: u32, total: u32) -> ProfileSet {
    let p = StreamingTimeoutPolicy {
        initial_timeout_ms: initial,
        message_gap_timeout_ms: gap,
        total_timeout_ms: total,
        idle_timeout_ms: 0,
    };
    ProfileSet::builder()
        .without_global()
        .streaming("tool_call", p)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn initial_phase_counts_from_the_call_start_and_needs_a_whole_message() {
    let mut h = harness(streaming(1_000, 200, 0), Some(Duration::from_millis(100)));
    let start = Instant::now();
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(CALL_STREAM)).await);
    let tx = h.inner.next_feed().await;
    // Half a message (the prefix only) is progress, but not a message.
    let whole = message(4).into_data().unwrap();
    assert!(tx.send(Frame::data(whole.slice(..5))));
    assert!(next(&mut body).await.unwrap().is_ok());
    let err = next(&mut body).await.unwrap().unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_millis(1_000));
    let d = details(err);
    assert_eq!(
        (
            d.phase(),
            d.elapsed_ms(),
            d.configured_timeout_ms(),
            d.message_count()
        ),
        (Phase::Initial, 1_000, 1_000, Some(0))
    );
    assert_eq!(h.timeouts()[0], None);
    assert!(tx.is_closed(), "the inner body is dropped on expiry");
}

#[tokio::test(start_paused = true)]
async fn gap_resets_on_every_message_and_total_never_does() {
    let mut h = harness(streaming(1_000, 350, 2_000), Some(Duration::ZERO));
    let start = Instant::now();
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(CALL_STREAM)).await);
    let tx = h.inner.next_feed().await;
    // A message every 300 ms (< 350 ms gap) keeps the stream alive until the 2 s cap;
    // no send falls on the 2 s instant itself.
    let mut received = 0;
    let err = loop {
        tokio::select! {
            frame = next(&mut body) => match frame.unwrap() {
                Ok(_) => received += 1,
                Err(e) => break e,
            },
            _ = tokio::time::sleep(Duration::from_millis(300)) => { let _ = tx.send(message(3)); }
        }
    };
    let d = details(err);
    assert_eq!(
        (d.phase(), d.elapsed_ms(), d.configured_timeout_ms()),
        (Phase::Total, 2_000, 2_000)
    );
    assert_eq!(d.message_count(), Some(received));
    assert_eq!(received, 6, "messages at 300, 600, ... 1800 ms");
    assert_eq!(start.elapsed(), Duration::from_millis(2_000));
    assert_eq!(h.timeouts()[0].as_deref(), Some("2000000u"));
}

#[tokio::test(start_paused = true)]
async fn gap_fires_exactly_gap_after_the_last_message() {
    let mut h = harness(streaming(1_000, 300, 0), Some(Duration::ZERO));
    let start = Instant::now();
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(CALL_STREAM)).await);
    let tx = h.inner.next_feed().await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(tx.send(message(1)));
    assert!(tx.send(message(2)));
    assert!(next(&mut body).await.unwrap().is_ok());
    assert!(next(&mut body).await.unwrap().is_ok());
    let err = next(&mut body).await.unwrap().unwrap_err();
    let d = details(err);
    assert_eq!(
        (
            d.phase(),
            d.elapsed_ms(),
            d.configured_timeout_ms(),
            d.message_count()
        ),
        (Phase::Gap, 1_000, 300, Some(2))
    );
    assert_eq!(start.elapsed(), Duration::from_millis(1_000));
}

#[tokio::test(start_paused = true)]
async fn gap_above_total_is_clamped_with_a_warning() {
    // Config rejects gap > total; a per-call policy can still ask for it. A gap timer
    // runs from the last message, so once lowered to the total it can never fire
    // before the total: what the clamp changes is what the caller is told (the
    // warning), and the call still ends at the total.
    for (gap_ms, warned) in [(5_000, true), (300, false)] {
        let (events, _guard) = common::capture_events();
        let mut h = harness(standard(), Some(Duration::ZERO));
        let mut req = request(CALL_STREAM);
        let p = StreamingTimeoutPolicy {
            initial_timeout_ms: 100,
            message_gap_timeout_ms: gap_ms,
            // Within tool_call's bounds (1 s to 1 h), so only the gap is clamped.
            total_timeout_ms: 1_500,
            idle_timeout_ms: 0,
        };
        req.extensions_mut()
            .insert(sw4rm_timeouts::CallStreamingPolicy(p));
        let start = Instant::now();
        let mut body: Wrapped = Box::pin(call_body(&mut h.svc, req).await);
        let tx = h.inner.next_feed().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(tx.send(message(1)));
        assert!(next(&mut body).await.unwrap().is_ok());
        let d = details(next(&mut body).await.unwrap().unwrap_err());
        let warnings = events.with_message("gap timeout clamped to the total");
        if warned {
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            let w = &warnings[0];
            assert_eq!(
                (
                    w["level"].as_str(),
                    w["bound"].as_str(),
                    w["effective_ms"].as_str()
                ),
                ("WARN", "total", "1500")
            );
            assert_eq!(
                (d.phase(), d.elapsed_ms(), d.configured_timeout_ms()),
                (Phase::Total, 1_500, 1_500)
            );
            assert_eq!(start.elapsed(), Duration::from_millis(1_500));
        } else {
            assert!(warnings.is_empty(), "{warnings:?}");
            // 50 ms + 300 ms gap, before the total.
            assert_eq!(
                (d.phase(), d.elapsed_ms(), d.configured_timeout_ms()),
                (Phase::Gap, 350, 300)
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_finished_body_fires_nothing_later() {
    let mut h = harness(standard(), Some(Duration::ZERO));
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(HEARTBEAT)).await);
    let tx = h.inner.next_feed().await;
    assert!(tx.send(message(2)));
    drop(tx);
    assert!(next(&mut body).await.unwrap().is_ok());
    assert!(next(&mut body).await.is_none());
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(next(&mut body).await.is_none());
}

/// A server's DEADLINE_EXCEEDED, or CANCELLED (how tonic servers report their own
/// deadline), is ours at or after our deadline, and the server's own before it:
/// passed through untouched.
#[tokio::test(start_paused = true)]
async fn a_server_timeout_status_is_ours_only_from_our_deadline_on() {
    let answer = |after_ms: u64, code: tonic::Code| {
        Scripted::new([Play::answer()
            .after(Duration::from_millis(after_ms))
            .status(code)
            .message("downstream timed out")])
    };
    let layer = || TimeoutProfileLayer::new(standard()).without_metrics();
    for (code, text) in [
        (tonic::Code::Cancelled, "1"),
        (tonic::Code::DeadlineExceeded, "4"),
    ] {
        let mut at_deadline = ServiceBuilder::new()
            .layer(layer())
            .service(answer(5_000, code));
        let err = respond(&mut at_deadline, request(HEARTBEAT))
            .await
            .unwrap_err();
        let d = details(err);
        assert_eq!(
            (d.detected_by(), d.elapsed_ms()),
            (DetectedBy::Server, 5_000),
            "grpc-status {text}"
        );

        let mut early = ServiceBuilder::new()
            .layer(layer())
            .service(answer(1_000, code));
        let resp = respond(&mut early, request(HEARTBEAT)).await.unwrap();
        assert_eq!(
            (
                resp.headers()["grpc-status"].to_str().unwrap(),
                resp.headers()["grpc-message"].to_str().unwrap()
            ),
            (text, "downstream timed out"),
            "an early answer is the server's own"
        );
    }
}

/// The same rule for a status in the trailers of a stream.
#[tokio::test(start_paused = true)]
async fn a_server_timeout_in_trailers_is_ours_only_from_our_deadline_on() {
    let trailers = || {
        let mut t = http::HeaderMap::new();
        t.insert("grpc-status", http::HeaderValue::from_static("4"));
        t.insert(
            "grpc-message",
            http::HeaderValue::from_static("downstream timed out"),
        );
        Frame::trailers(t)
    };
    // Before the deadline: one message, then the server's own DEADLINE_EXCEEDED.
    let mut h = harness(standard(), Some(Duration::ZERO));
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(CALL_STREAM)).await);
    let tx = h.inner.next_feed().await;
    assert!(tx.send(message(3)));
    assert!(tx.send(trailers()));
    assert!(next(&mut body).await.unwrap().unwrap().is_data());
    let frame = next(&mut body).await.unwrap().unwrap();
    assert_eq!(
        frame.trailers_ref().unwrap()["grpc-message"],
        "downstream timed out"
    );

    // At our deadline (a 2 s total): the same trailers are our timeout.
    let profiles = ProfileSet::builder()
        .without_global()
        .streaming(
            "tool_call",
            StreamingTimeoutPolicy {
                total_timeout_ms: 2_000,
                ..Default::default()
            },
        )
        .build()
        .unwrap();
    let mut h = harness(profiles, Some(Duration::ZERO));
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(CALL_STREAM)).await);
    let tx = h.inner.next_feed().await;
    assert!(tx.send(message(3)));
    assert!(next(&mut body).await.unwrap().unwrap().is_data());
    tokio::time::advance(Duration::from_millis(2_000)).await;
    assert!(tx.send(trailers()));
    let d = details(next(&mut body).await.unwrap().unwrap_err());
    assert_eq!(
        (d.detected_by(), d.phase(), d.message_count()),
        (DetectedBy::Server, Phase::Total, Some(1))
    );
}

/// Any server-streaming path routed to a profile gets the streaming timers, e.g. the
/// upstream `RouterService/StreamIncoming` under this layer.
#[tokio::test(start_paused = true)]
async fn a_custom_streaming_route_gets_the_stream_timers() {
    const STREAM_INCOMING: &str = "/sw4rm.router.RouterService/StreamIncoming";
    let profiles = ProfileSet::builder()
        .without_global()
        .streaming_route(STREAM_INCOMING, "message_route")
        .streaming(
            "message_route",
            StreamingTimeoutPolicy {
                initial_timeout_ms: 2_000,
                message_gap_timeout_ms: 500,
                total_timeout_ms: 0,
                idle_timeout_ms: 0,
            },
        )
        .build()
        .unwrap();
    let mut h = harness(profiles, Some(Duration::ZERO));
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(STREAM_INCOMING)).await);
    let tx = h.inner.next_feed().await;
    assert!(tx.send(message(8)));
    assert!(next(&mut body).await.unwrap().is_ok());
    let d = details(next(&mut body).await.unwrap().unwrap_err());
    assert_eq!(
        (d.profile_name(), d.service(), d.method()),
        (
            "message_route",
            "sw4rm.router.RouterService",
            "StreamIncoming"
        )
    );
    assert_eq!(
        (d.phase(), d.elapsed_ms(), d.message_count()),
        (Phase::Gap, 500, Some(1))
    );
    assert_eq!(d.source().to_string(), "client");
    assert_eq!(
        h.timeouts()[0],
        None,
        "no total cap: no deadline on the wire"
    );
}

/// SW4-002 §4.1 measures the gap between *messages*: a server trickling one byte of an
/// unfinished message every 100 ms does not reset a 500 ms gap timer (nor, before the
/// first message, the initial timer).
#[tokio::test(start_paused = true)]
async fn a_byte_trickle_is_not_progress() {
    let profiles = ProfileSet::builder()
        .without_global()
        .streaming(
            "tool_call",
            StreamingTimeoutPolicy {
                initial_timeout_ms: 500,
                message_gap_timeout_ms: 500,
                total_timeout_ms: 0,
                idle_timeout_ms: 0,
            },
        )
        .build()
        .unwrap();
    for complete_first in [true, false] {
        let mut h = harness(profiles.clone(), Some(Duration::ZERO));
        let start = Instant::now();
        let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(CALL_STREAM)).await);
        let tx = h.inner.next_feed().await;
        if complete_first {
            assert!(tx.send(message(4)));
            assert!(next(&mut body).await.unwrap().is_ok());
        }
        // A 40-byte message, one byte every 100 ms: complete only after 4.5 s.
        let trickled = match message(40).into_data() {
            Ok(bytes) => bytes,
            Err(_) => unreachable!("a data frame"),
        };
        let feeder = tokio::spawn(async move {
            for i in 0..trickled.len() {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if !tx.send(Frame::data(trickled.slice(i..i + 1))) {
                    return i;
                }
            }
            trickled.len()
        });
        let err = loop {
            match next(&mut body).await {
                Some(Ok(_)) => continue, // the trickled bytes are delivered as they come
                Some(Err(e)) => break e,
                None => panic!("the trickle kept the stream alive to its end"),
            }
        };
        let d = details(err);
        let (phase, messages) = if complete_first {
            (Phase::Gap, 1)
        } else {
            (Phase::Initial, 0)
        };
        assert_eq!(
            (d.phase(), d.elapsed_ms(), d.message_count()),
            (phase, 500, Some(messages)),
            "complete_first={complete_first}"
        );
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        drop(body);
        // The feeder stops when a send fails: the inner body was dropped.
        let sent = feeder.await.unwrap();
        assert!(sent < 10, "the trickle was cut short: {sent} bytes sent");
    }
}

/// Every value at its largest (profile bounds of `u32::MAX` ms, `Duration::MAX` per
/// call, a stream policy of `u32::MAX` ms): nothing panics, the deadline is the
/// profile's maximum, and it is on the wire.
#[tokio::test(start_paused = true)]
async fn extreme_values_never_panic() {
    let huge = TimeoutProfile::builder("huge")
        .default_timeout(Duration::from_millis(u64::from(u32::MAX)))
        .min_timeout(Duration::from_millis(1))
        .max_timeout(Duration::from_millis(u64::from(u32::MAX)))
        .allow_infinite(true)
        .build()
        .unwrap();
    let max = u32::MAX;
    let profiles = ProfileSet::builder()
        .without_global()
        .profile(&huge)
        .streaming(
            "huge",
            StreamingTimeoutPolicy {
                initial_timeout_ms: max,
                message_gap_timeout_ms: max,
                total_timeout_ms: max,
                idle_timeout_ms: 0,
            },
        )
        .route(HEARTBEAT, "huge")
        .streaming_route(CALL_STREAM, "huge")
        .build()
        .unwrap();
    let mut h = harness(profiles, Some(Duration::ZERO));
    for path in [HEARTBEAT, CALL_STREAM] {
        let mut req = request(path);
        req.extensions_mut()
            .insert(sw4rm_timeouts::CallTimeout::After(Duration::MAX));
        let body = call_body(&mut h.svc, req).await;
        drop(body);
    }
    let mut req = request(HEARTBEAT);
    req.headers_mut()
        .insert("grpc-timeout", http::HeaderValue::from_static("99999999H"));
    drop(call_body(&mut h.svc, req).await);
    // u32::MAX ms, rounded up to whole seconds on the wire.
    assert_eq!(h.timeouts(), vec![Some("4294968S".to_owned()); 3]);
}

/// The inbox (`RouterService/StreamIncoming`, long-lived) under the standard table: an
/// initial and a gap of 0 mean no timer there, as `StreamingTimeoutPolicy` documents
/// (elsewhere 0 is the profile's timeout, 10 s for `message_route`). An hour without a
/// message does not end it, and what then arrives is delivered; no deadline goes on
/// the wire.
#[tokio::test(start_paused = true)]
async fn the_inbox_runs_no_initial_or_gap_timer_by_default() {
    const STREAM_INCOMING: &str = "/sw4rm.router.RouterService/StreamIncoming";
    let mut h = harness(standard(), Some(Duration::ZERO));
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(STREAM_INCOMING)).await);
    let tx = h.inner.next_feed().await;
    let idle = tokio::time::timeout(Duration::from_secs(3_600), next(&mut body)).await;
    assert!(idle.is_err(), "still open after an hour of quiet: {idle:?}");
    assert!(tx.send(message(8)));
    assert!(next(&mut body).await.unwrap().is_ok());
    let idle = tokio::time::timeout(Duration::from_secs(3_600), next(&mut body)).await;
    assert!(idle.is_err(), "no gap timer either");
    assert_eq!(h.timeouts()[0], None, "no deadline on the wire");
}

/// A `ToolFrame` as one gRPC message: progress when it carries a summary, a keep-alive
/// when it is empty (the crate's reading of `ToolFrame`).
fn tool_frame(frame_no: u64, progress: bool) -> Bytes {
    use prost::Message;
    let frame = sw4rm_timeouts::proto::sw4rm::tool::ToolFrame {
        frame_no,
        summary: if progress {
            b"rows".to_vec()
        } else {
            Vec::new()
        },
        ..Default::default()
    };
    let payload = frame.encode_to_vec();
    let mut v = vec![0u8];
    v.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    v.extend_from_slice(&payload);
    Bytes::from(v)
}

/// The layer over the standard table with tool_call's streams under `policy`, reading
/// `ToolFrame`s with the crate's rule.
fn long_work_harness(
    policy: StreamingTimeoutPolicy,
) -> Harness<
    impl Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<TimeoutBody<tonic::body::Body>>,
        Error = sw4rm_timeouts::BoxError,
    >,
> {
    let profiles = ProfileSet::builder()
        .without_global()
        .streaming("tool_call", policy)
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .with_progress(
            sw4rm_timeouts::route::RoutePattern::parse(CALL_STREAM).unwrap(),
            sw4rm_timeouts::ProgressRule::of::<sw4rm_timeouts::proto::sw4rm::tool::ToolFrame>(),
        );
    harness_with(layer, Some(Duration::ZERO))
}

fn long_policy(gap: u32, total: u32, idle: u32) -> StreamingTimeoutPolicy {
    StreamingTimeoutPolicy {
        initial_timeout_ms: 0,
        message_gap_timeout_ms: gap,
        total_timeout_ms: total,
        idle_timeout_ms: idle,
    }
}

/// Sends `frames` (at their offsets from now) and reads the body to its end: the
/// messages delivered and the timeout.
async fn run_frames(
    body: &mut Wrapped,
    tx: &Feed,
    frames: &[(u64, Bytes)],
) -> (u64, TimeoutDetails) {
    let start = Instant::now();
    let mut plan = frames.iter();
    let mut delivered = 0;
    loop {
        let wait = plan
            .clone()
            .next()
            .map(|(at, _)| start + Duration::from_millis(*at));
        tokio::select! {
            frame = next(body) => match frame.unwrap() {
                Ok(_) => delivered += 1,
                Err(e) => return (delivered, details(e)),
            },
            _ = tokio::time::sleep_until(wait.unwrap_or(start + Duration::from_secs(3_600))), if wait.is_some() => {
                let (_, f) = plan.next().unwrap();
                let _ = tx.send(Frame::data(f.clone()));
            }
        }
    }
}

/// Keep-alive frames keep the gap timer happy but never the idle limit: the stream
/// ends at last progress + idle limit, every frame received is delivered, and the
/// details say idle with both numbers, the count and the marker.
#[tokio::test(start_paused = true)]
async fn keep_alives_do_not_reset_the_idle_limit_and_progress_does() {
    let mut h = long_work_harness(long_policy(400, 10_000, 1_000));
    let start = Instant::now();
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(CALL_STREAM)).await);
    let tx = h.inner.next_feed().await;
    // Progress at 200 and 500 ms (marker 7), then keep-alives every 300 ms.
    let frames: Vec<_> = [(200, 6, true), (500, 7, true)]
        .into_iter()
        .chain((1..=8).map(|i| (500 + 300 * i, 7, false)))
        .map(|(at, n, p)| (at, tool_frame(n, p)))
        .collect();
    let (delivered, d) = run_frames(&mut body, &tx, &frames).await;
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(1_500),
        "500 ms + 1 s idle"
    );
    assert_eq!((d.phase(), d.configured_timeout_ms()), (Phase::Idle, 1_000));
    // Progress at 200, 500; keep-alives at 800, 1100, 1400: all delivered.
    assert_eq!((delivered, d.message_count()), (5, Some(5)));
    let w = d.long_work().expect("long-work details");
    assert_eq!(
        (
            w.idle_limit_ms(),
            w.cap_ms(),
            w.progress_count(),
            w.since_progress_ms(),
            w.progress_marker()
        ),
        (1_000, Some(10_000), 2, 1_000, Some(7))
    );
    let text = d.to_string();
    assert!(
        text.starts_with("/sw4rm.tool.ToolService/CallStream: no progress for 1000 ms (idle limit; cap 10000 ms) after 5 messages, all delivered (2 progress, last marker 7"),
        "{text}"
    );
    assert!(tx.is_closed(), "the inner body is dropped on expiry");
    // With a rule that counts every message as progress (what a stream without any
    // rule does), the same frames run to the cap.
    let profiles = ProfileSet::builder()
        .without_global()
        .streaming("tool_call", long_policy(400, 3_000, 1_000))
        .build()
        .unwrap();
    let every = sw4rm_timeouts::ProgressRule::decoded(
        |_: &sw4rm_timeouts::proto::sw4rm::tool::ToolFrame| sw4rm_timeouts::Heard::progress(None),
    );
    let layer = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .with_progress(
            sw4rm_timeouts::route::RoutePattern::parse(CALL_STREAM).unwrap(),
            every,
        );
    let mut h = harness_with(layer, Some(Duration::ZERO));
    let start = Instant::now();
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(CALL_STREAM)).await);
    let tx = h.inner.next_feed().await;
    let (delivered, d) = run_frames(&mut body, &tx, &frames).await;
    // Every frame moved the idle limit; the last at 2900 ms, so the 3 s cap fires.
    assert_eq!(
        (d.phase(), start.elapsed()),
        (Phase::Total, Duration::from_secs(3))
    );
    assert_eq!(
        (delivered, d.long_work().unwrap().progress_count()),
        (10, 10)
    );
    assert_eq!(
        d.long_work().unwrap().progress_marker(),
        None,
        "no rule, no marker"
    );
}

/// Progress every 300 ms under a 1 s idle limit: the idle limit never fires and the
/// cap does not move: the stream ends at the cap, in the cap's words.
#[tokio::test(start_paused = true)]
async fn the_cap_never_moves_for_progress() {
    let mut h = long_work_harness(long_policy(0, 2_000, 1_000));
    let start = Instant::now();
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, request(CALL_STREAM)).await);
    let tx = h.inner.next_feed().await;
    let frames: Vec<_> = (1..=9).map(|i| (300 * i, tool_frame(i, true))).collect();
    let (delivered, d) = run_frames(&mut body, &tx, &frames).await;
    assert_eq!(start.elapsed(), Duration::from_millis(2_000));
    assert_eq!(
        (d.phase(), d.configured_timeout_ms()),
        (Phase::Total, 2_000)
    );
    assert_eq!(delivered, 6);
    let w = d.long_work().unwrap();
    assert_eq!(
        (
            w.progress_count(),
            w.progress_marker(),
            w.since_progress_ms()
        ),
        (6, Some(6), 200)
    );
    assert!(
        d.to_string().starts_with("/sw4rm.tool.ToolService/CallStream: exceeded the wall-clock cap of 2000 ms (idle limit 1000 ms) after 6 messages"),
        "{d}"
    );
}

/// An idle limit above the cap could never fire: a per-call one is lowered to the
/// cap with a warning naming both values and their sources.
#[tokio::test(start_paused = true)]
async fn an_idle_limit_above_the_cap_is_clamped_with_a_warning() {
    for (idle_ms, warned) in [(5_000, true), (700, false)] {
        let (events, _guard) = common::capture_events();
        let mut h = long_work_harness(long_policy(0, 0, 0));
        let mut req = request(CALL_STREAM);
        req.extensions_mut().insert(
            sw4rm_timeouts::CallStreamingPolicy::default()
                .with_idle(Duration::from_millis(idle_ms))
                .with_total(Duration::from_millis(1_500)),
        );
        let start = Instant::now();
        let mut body: Wrapped = Box::pin(call_body(&mut h.svc, req).await);
        let _tx = h.inner.next_feed().await;
        let d = details(next(&mut body).await.unwrap().unwrap_err());
        let warnings = events.with_message("idle limit above its cap");
        if warned {
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            // The override clamp's fields, field for field.
            assert_eq!(
                clamp_fields(&warnings[0]),
                ["5000", "per_call", "1500", "total", "per_call"]
            );
            assert_eq!(
                (d.phase(), start.elapsed()),
                (Phase::Total, Duration::from_millis(1_500))
            );
            assert_eq!(d.long_work().unwrap().idle_limit_ms(), 1_500);
        } else {
            assert!(warnings.is_empty(), "{warnings:?}");
            assert_eq!(
                (d.phase(), start.elapsed()),
                (Phase::Idle, Duration::from_millis(700))
            );
        }
    }
}

/// A gap above the total is lowered to it with the warning fields every clamp has:
/// what was asked and by whom, what is used, the bound, the rule and its source (the
/// gap clamp said neither what was asked nor by whom).
#[tokio::test(start_paused = true)]
async fn a_gap_above_the_total_is_clamped_with_the_fields_every_clamp_has() {
    let (events, _guard) = common::capture_events();
    let mut h = long_work_harness(long_policy(0, 0, 0));
    let mut req = request(CALL_STREAM);
    req.extensions_mut().insert(
        sw4rm_timeouts::CallStreamingPolicy::default()
            .with_message_gap(Duration::from_millis(5_000))
            .with_total(Duration::from_millis(1_500)),
    );
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, req).await);
    let _tx = h.inner.next_feed().await;
    let _ = next(&mut body).await;
    let warnings = events.with_message("stream gap timeout clamped");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    // The override clamp's fields, field for field.
    assert_eq!(
        clamp_fields(&warnings[0]),
        ["5000", "per_call", "1500", "total", "per_call"]
    );
}

/// What every clamp warning says: what was asked and by whom, what is used, the
/// bound and its source (and a rule, in words).
fn clamp_fields(w: &std::collections::BTreeMap<String, String>) -> Vec<&str> {
    assert!(w.contains_key("rule"), "{w:?}");
    [
        "requested_ms",
        "source",
        "effective_ms",
        "bound",
        "bound_source",
    ]
    .iter()
    .map(|f| w[*f].as_str())
    .collect()
}

/// A progress rule runs once per complete message, however the message is split into
/// data frames, and never for a partial one.
#[tokio::test(start_paused = true)]
async fn the_progress_rule_runs_once_per_complete_message() {
    use std::sync::atomic::AtomicUsize;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let rule = sw4rm_timeouts::ProgressRule::decoded(
        move |f: &sw4rm_timeouts::proto::sw4rm::tool::ToolFrame| {
            counted.fetch_add(1, Ordering::SeqCst);
            sw4rm_timeouts::Heard::progress(Some(f.frame_no))
        },
    );
    let mut h = long_work_harness(long_policy(0, 0, 1_000));
    let mut req = request(CALL_STREAM);
    req.extensions_mut()
        .insert(sw4rm_timeouts::CallProgress(rule));
    let mut body: Wrapped = Box::pin(call_body(&mut h.svc, req).await);
    let tx = h.inner.next_feed().await;
    // Three messages: one whole, one split in three frames, one in a frame with a
    // fourth message's first bytes.
    let (a, b, c, d) = (
        tool_frame(1, true),
        tool_frame(2, true),
        tool_frame(3, true),
        tool_frame(4, true),
    );
    assert!(tx.send(Frame::data(a)));
    assert!(tx.send(Frame::data(b.slice(..2))));
    assert!(tx.send(Frame::data(b.slice(2..7))));
    assert!(tx.send(Frame::data(b.slice(7..))));
    let mut joined = c.to_vec();
    joined.extend_from_slice(&d[..4]);
    assert!(tx.send(Frame::data(Bytes::from(joined))));
    for _ in 0..5 {
        assert!(next(&mut body).await.unwrap().is_ok());
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "three complete messages, one call each"
    );
    // The idle limit then fires: three progress messages, the last marker 3.
    let d = details(next(&mut body).await.unwrap().unwrap_err());
    let w = d.long_work().unwrap();
    assert_eq!(
        (d.phase(), w.progress_count(), w.progress_marker()),
        (Phase::Idle, 3, Some(3))
    );
}

/// Polls `fut` once, the way a runtime would before its task goes quiet.
async fn poll_once<F: std::future::Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx))).await
}

/// The call's deadline passes while its task does not run (a busy runtime); then its
/// scope is cancelled. The deadline came first, so the call timed out.
#[tokio::test(start_paused = true)]
async fn a_cancel_after_the_deadline_is_reported_as_the_timeout_waiting_for_headers() {
    for late_ms in [2, 5, 20] {
        let mut h = harness(standard(), None);
        let budget = sw4rm_timeouts::OperationBudget::new(Duration::from_secs(60));
        h.svc.ready().await.unwrap();
        let svc = &mut h.svc;
        // Made inside the budget's scope, as `budget.run(client.heartbeat(..))` is.
        let mut call = Box::pin(budget.run(async move { svc.call(request(HEARTBEAT)).await }));
        assert!(poll_once(&mut call).await.is_pending(), "sent, waiting");
        // The heartbeat's 5 s pass with nobody polling the call, then the cancel.
        tokio::time::advance(Duration::from_millis(5_000 + late_ms)).await;
        assert!(budget.cancel());
        let status = tonic::Status::from_error(call.await.unwrap_err());
        assert_eq!(
            status.code(),
            tonic::Code::DeadlineExceeded,
            "{late_ms} ms late: {status:?}"
        );
        let d = TimeoutDetails::from_status(&status).unwrap();
        assert_eq!(
            (d.phase(), d.configured_timeout_ms()),
            (Phase::Total, 5_000)
        );
    }
}

/// The same race while the response body is read: the deadline still wins.
#[tokio::test(start_paused = true)]
async fn a_cancel_after_the_deadline_is_reported_as_the_timeout_reading_the_body() {
    let mut h = harness(standard(), Some(Duration::from_secs(1)));
    let budget = sw4rm_timeouts::OperationBudget::new(Duration::from_secs(60));
    let resp = budget
        .run(respond(&mut h.svc, request(HEARTBEAT)))
        .await
        .unwrap();
    let _tx = h.inner.next_feed().await; // the body stays open, silent
    let mut body: Wrapped = Box::pin(resp.into_body());
    let mut read = Box::pin(next(&mut body));
    assert!(poll_once(&mut read).await.is_pending());
    drop(read);
    tokio::time::advance(Duration::from_millis(4_000 + 10)).await;
    assert!(budget.cancel());
    let status = tonic::Status::from_error(next(&mut body).await.unwrap().unwrap_err());
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
}

/// A cancel before the deadline is still a cancel (the other half of the promise).
#[tokio::test(start_paused = true)]
async fn a_cancel_before_the_deadline_is_reported_as_a_cancel() {
    let mut h = harness(standard(), None);
    let budget = sw4rm_timeouts::OperationBudget::new(Duration::from_secs(60));
    h.svc.ready().await.unwrap();
    let svc = &mut h.svc;
    let mut call = Box::pin(budget.run(async move { svc.call(request(HEARTBEAT)).await }));
    assert!(poll_once(&mut call).await.is_pending());
    tokio::time::advance(Duration::from_millis(4_990)).await;
    assert!(budget.cancel());
    let status = tonic::Status::from_error(call.await.unwrap_err());
    assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
}

/// A cancel made 2–20 ms before the deadline, on a runtime so busy that the call's
/// task first runs after the deadline too: the cancel came first, so the call was
/// cancelled (it read as a timeout when the task's own view of the time decided).
#[tokio::test(start_paused = true)]
async fn a_cancel_before_the_deadline_seen_after_it_is_still_a_cancel() {
    for early_ms in [2, 5, 20] {
        let mut h = harness(standard(), None);
        let budget = sw4rm_timeouts::OperationBudget::new(Duration::from_secs(60));
        h.svc.ready().await.unwrap();
        let svc = &mut h.svc;
        let mut call = Box::pin(budget.run(async move { svc.call(request(HEARTBEAT)).await }));
        assert!(poll_once(&mut call).await.is_pending(), "sent, waiting");
        tokio::time::advance(Duration::from_millis(5_000 - early_ms)).await;
        assert!(budget.cancel());
        // The deadline passes before the call's task runs again.
        tokio::time::advance(Duration::from_millis(early_ms + 10)).await;
        let status = tonic::Status::from_error(call.await.unwrap_err());
        assert_eq!(
            status.code(),
            tonic::Code::Cancelled,
            "{early_ms} ms early: {status:?}"
        );
    }
    // The same while the response body is read.
    let mut h = harness(standard(), Some(Duration::from_secs(1)));
    let budget = sw4rm_timeouts::OperationBudget::new(Duration::from_secs(60));
    let resp = budget
        .run(respond(&mut h.svc, request(HEARTBEAT)))
        .await
        .unwrap();
    let _tx = h.inner.next_feed().await;
    let mut body: Wrapped = Box::pin(resp.into_body());
    let mut read = Box::pin(next(&mut body));
    assert!(poll_once(&mut read).await.is_pending());
    drop(read);
    tokio::time::advance(Duration::from_millis(4_000 - 5)).await;
    assert!(budget.cancel());
    tokio::time::advance(Duration::from_millis(20)).await;
    let status = tonic::Status::from_error(next(&mut body).await.unwrap().unwrap_err());
    assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
}

/// A request body as tonic's client makes one with a `CancellationHandle`: one frame,
/// then the end, and an error once the caller cancels (tonic's `EncodeBody` does
/// this; it never says it has ended).
struct CancellableBody {
    frame: Option<Bytes>,
    cancel: Arc<Cancel>,
}

/// The cancel of a [`CancellableBody`]: a flag, and the waker of whoever polled last.
#[derive(Default)]
struct Cancel {
    fired: AtomicBool,
    waker: Mutex<Option<std::task::Waker>>,
}

impl Cancel {
    fn fire(&self) {
        self.fired.store(true, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().unwrap().take() {
            w.wake();
        }
    }
}

impl Body for CancellableBody {
    type Data = Bytes;
    type Error = tonic::Status;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        *self.cancel.waker.lock().unwrap() = Some(cx.waker().clone());
        if self.cancel.fired.load(Ordering::SeqCst) {
            return Poll::Ready(Some(Err(tonic::Status::cancelled("client cancelled"))));
        }
        Poll::Ready(self.frame.take().map(|b| Ok(Frame::data(b))))
    }
}

/// tonic's cancel while the response body is read, with the layer watching for it
/// (`with_tonic_cancel_watch`): the body ends `CANCELLED` with `CancelDetails` at
/// once, not at the deadline.
#[tokio::test(start_paused = true)]
async fn tonics_cancel_ends_a_call_while_its_response_body_is_read() {
    let layer = TimeoutProfileLayer::new(standard())
        .without_metrics()
        .with_tonic_cancel_watch();
    let mut h = harness_with(layer, Some(Duration::from_secs(1)));
    let cancel = Arc::new(Cancel::default());
    let body = CancellableBody {
        frame: Some(Bytes::from_static(b"\0\0\0\0\0")),
        cancel: cancel.clone(),
    };
    let request = http::Request::builder()
        .uri(format!("http://sw4rm.test{HEARTBEAT}"))
        .body(tonic::body::Body::new(body))
        .unwrap();
    let resp = respond(&mut h.svc, request).await.unwrap();
    let _tx = h.inner.next_feed().await; // the body stays open, silent
    let mut body: Wrapped = Box::pin(resp.into_body());
    let start = Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.fire();
    });
    let err = next(&mut body).await.unwrap().unwrap_err();
    let status = tonic::Status::from_error(err);
    assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
    let details = sw4rm_timeouts::CancelDetails::from_status(&status).unwrap();
    assert_eq!(
        details.reason(),
        sw4rm_timeouts::CancelReason::CallCancelled
    );
    assert_eq!(start.elapsed(), Duration::from_millis(500));
}

/// A budget run inside another's scope: both cap the calls, the smaller wins (the
/// outer one was dropped, and a heartbeat under a 1 s budget ran its 4 s).
#[tokio::test(start_paused = true)]
async fn a_budget_inside_another_is_capped_by_both() {
    use sw4rm_timeouts::OperationBudget;
    for (outer_ms, inner_ms) in [(1_000, 60_000), (60_000, 1_000)] {
        let mut h = harness(standard(), Some(Duration::from_secs(4)));
        h.svc.ready().await.unwrap();
        let svc = &mut h.svc;
        let outer = OperationBudget::new(Duration::from_millis(outer_ms));
        let inner = OperationBudget::new(Duration::from_millis(inner_ms));
        let start = Instant::now();
        // The inner budget is made to run inside the outer one's scope.
        let answer = outer
            .run(async move {
                inner
                    .run(async move { svc.call(request(HEARTBEAT)).await })
                    .await
            })
            .await;
        let Err(err) = answer else {
            panic!(
                "{outer_ms} / {inner_ms}: answered after {:?}",
                start.elapsed()
            )
        };
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(1),
            "{outer_ms} / {inner_ms}"
        );
        let d = details(err);
        assert_eq!(
            (d.configured_timeout_ms(), d.source()),
            (1_000, &sw4rm_timeouts::Source::Budget),
            "{outer_ms} / {inner_ms}"
        );
    }
    // `scope::remaining` says the least of both.
    let outer = OperationBudget::new(Duration::from_secs(2));
    let inner = OperationBudget::new(Duration::from_secs(30));
    let left = outer
        .run(async {
            inner
                .run(async { sw4rm_timeouts::scope::remaining() })
                .await
        })
        .await;
    assert_eq!(left, Some(Duration::from_secs(2)));
}
