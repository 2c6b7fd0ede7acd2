//! Retries inside one deadline (SW4-002 §5.2) over loopback: what the server saw of
//! each attempt (its `grpc-timeout`, its body, the cancel), what the caller got, and
//! the metrics. A raw HTTP/2 server plays the failing peer; the embedded
//! `TestServer` plays a real SW4RM server for the idempotency rules.

mod common;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::{server, Metrics, WAIT};
use prost::Message;
use sw4rm_timeouts::proto::sw4rm::registry::{HeartbeatRequest, HeartbeatResponse};
use sw4rm_timeouts::proto::sw4rm::scheduler::SubmitTaskRequest;
use sw4rm_timeouts::testing::Script;
use sw4rm_timeouts::wire::grpc_timeout;
use sw4rm_timeouts::{
    CallRetry, Phase, ProfileSet, RetryBudget, RetryPolicy, Sw4rm, TimeoutDetails,
    TimeoutProfileLayer, ATTEMPTS_HEADER,
};
use tokio::time::Instant;
use tonic::Code;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

// ---------------------------------------------------------------------------------
// A raw server that answers each attempt as the test says, and records it.

/// What the server does with one attempt.
#[derive(Clone, Copy, Debug)]
enum Answer {
    /// Trailers-only `UNAVAILABLE`, with this `grpc-retry-pushback-ms` if any.
    Unavailable(Option<&'static str>),
    /// An empty message and `OK`.
    Ok,
    /// Never answers; waits for the client's reset.
    Hang,
}

/// One attempt as the server saw it.
#[derive(Clone, Debug)]
struct Attempt {
    grpc_timeout: Option<String>,
    /// Request headers other than the pseudo-headers, by name.
    header_names: Vec<String>,
    headers: http::HeaderMap,
    body: Bytes,
    at: Instant,
    reset: bool,
}

type Log = Arc<Mutex<Vec<Attempt>>>;
type Plan = Arc<dyn Fn(usize) -> Answer + Send + Sync>;

async fn raw_server(plan: impl Fn(usize) -> Answer + Send + Sync + 'static) -> (SocketAddr, Log) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Log::default();
    let plan: Plan = Arc::new(plan);
    let log2 = log.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let (log, plan) = (log2.clone(), plan.clone());
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(socket).await else {
                    return;
                };
                while let Some(Ok((request, respond))) = conn.accept().await {
                    tokio::spawn(serve(request, respond, log.clone(), plan.clone()));
                }
            });
        }
    });
    (addr, log)
}

fn serve(
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    log: Log,
    plan: Plan,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let grpc_timeout = request
            .headers()
            .get("grpc-timeout")
            .map(|v| v.to_str().unwrap().to_owned());
        let header_names = request
            .headers()
            .keys()
            .map(|k| k.as_str().to_owned())
            .collect();
        let headers = request.headers().clone();
        let mut body = request.into_body();
        let mut bytes = BytesMut::new();
        while let Some(Ok(data)) = body.data().await {
            let _ = body.flow_control().release_capacity(data.len());
            bytes.extend_from_slice(&data);
        }
        let index = {
            let mut log = log.lock().unwrap();
            log.push(Attempt {
                grpc_timeout,
                header_names,
                headers,
                body: bytes.freeze(),
                at: Instant::now(),
                reset: false,
            });
            log.len() - 1
        };
        match plan(index) {
            Answer::Unavailable(pushback) => {
                let mut head = http::Response::builder()
                    .header("content-type", "application/grpc")
                    .header("grpc-status", "14")
                    .header("grpc-message", "try again");
                if let Some(p) = pushback {
                    head = head.header("grpc-retry-pushback-ms", p);
                }
                let _ = respond.send_response(head.body(()).unwrap(), true);
            }
            Answer::Ok => {
                let head = http::Response::builder()
                    .header("content-type", "application/grpc")
                    .body(())
                    .unwrap();
                let Ok(mut send) = respond.send_response(head, false) else {
                    return;
                };
                let _ = send.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                let _ = send.send_trailers(trailers);
            }
            Answer::Hang => {
                if std::future::poll_fn(|cx| respond.poll_reset(cx))
                    .await
                    .is_ok()
                {
                    log.lock().unwrap()[index].reset = true;
                }
            }
        }
    })
}

fn sw4rm(addr: SocketAddr, layer: TimeoutProfileLayer) -> Sw4rm {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap();
    Sw4rm::builder(endpoint)
        .layer(layer)
        .connect_lazy()
        .unwrap()
}

/// Heartbeats get `deadline`, a minimum of 10 ms, and this retry policy.
fn heartbeat_layer(deadline: u32, policy: RetryPolicy, metrics: &Metrics) -> TimeoutProfileLayer {
    let profiles = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", deadline)
        .min_timeout_ms("heartbeat", 10)
        .retry("heartbeat", policy)
        .build()
        .unwrap();
    TimeoutProfileLayer::new(profiles).with_meter_provider(&metrics.provider)
}

/// `attempts` attempts with a short backoff (tests wait on the server, not on it).
fn quick(attempts: u32, initial_backoff_ms: u64) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .initial_backoff(ms(initial_backoff_ms))
        .build()
        .unwrap()
}

/// The standard table with this retry policy for `task_submit` (and `SubmitTask`
/// marked idempotent if asked).
fn task_submit_with(policy: RetryPolicy, idempotent: bool) -> ProfileSet {
    let mut builder = ProfileSet::builder()
        .without_global()
        .retry("task_submit", policy);
    if idempotent {
        builder = builder.idempotent("/sw4rm.scheduler.SchedulerService/SubmitTask", true);
    }
    builder.build().unwrap()
}

async fn heartbeat(client: &Sw4rm) -> Result<tonic::Response<HeartbeatResponse>, tonic::Status> {
    client.registry().heartbeat(heartbeat_request()).await
}

fn heartbeat_request() -> HeartbeatRequest {
    HeartbeatRequest {
        agent_id: "agent-7".into(),
        ..Default::default()
    }
}

fn micros(header: &Option<String>) -> Duration {
    grpc_timeout::parse(
        header
            .as_deref()
            .expect("a deadline on the wire")
            .as_bytes(),
    )
    .unwrap()
}

// ---------------------------------------------------------------------------------

#[tokio::test]
async fn unavailable_twice_then_answered_inside_one_deadline() {
    let (addr, log) = raw_server(|i| {
        if i < 2 {
            Answer::Unavailable(None)
        } else {
            Answer::Ok
        }
    })
    .await;
    let metrics = Metrics::new();
    let policy = quick(3, 20);
    let client = sw4rm(addr, heartbeat_layer(3_000, policy, &metrics));
    let start = Instant::now();
    let response = heartbeat(&client).await.expect("the third attempt answers");
    assert_eq!(
        response
            .metadata()
            .get(ATTEMPTS_HEADER)
            .map(|v| v.to_str().unwrap()),
        Some("3")
    );
    let attempts = log.lock().unwrap().clone();
    assert_eq!(attempts.len(), 3, "the server saw each attempt");
    // Byte-identical replay, as a generated client encoded it.
    let mut framed = vec![0u8];
    let encoded = heartbeat_request().encode_to_vec();
    framed.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
    framed.extend_from_slice(&encoded);
    for a in &attempts {
        assert_eq!(a.body, framed, "replayed body");
        // The same head as tonic sends: no content-length on a gRPC request.
        assert!(
            !a.header_names.iter().any(|h| h == "content-length"),
            "{:?}",
            a.header_names
        );
    }
    // Each attempt's deadline is what remains of the one deadline: never more than
    // the previous one, and all inside the first.
    let timeouts: Vec<Duration> = attempts.iter().map(|a| micros(&a.grpc_timeout)).collect();
    assert_eq!(timeouts[0], ms(3_000));
    assert!(timeouts.windows(2).all(|w| w[1] <= w[0]), "{timeouts:?}");
    // Attempt n+1 left the client after the server had answered attempt n, so it can
    // have had no more than what remained of the 3 s at that answer.
    for pair in attempts.windows(2) {
        let spent = pair[0].at - start;
        let sent = micros(&pair[1].grpc_timeout);
        assert!(sent <= ms(3_000) - spent, "{sent:?} after {spent:?}");
    }
    assert_eq!(metrics.value("sw4rm_rpc_retries_total", "Heartbeat"), 2);
    assert_eq!(metrics.value("sw4rm_rpc_duration_ms", "Heartbeat"), 1);
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "Heartbeat"), 0);
}

#[tokio::test]
async fn an_attempt_that_hangs_is_cancelled_at_its_attempt_timeout_and_retried() {
    let (addr, log) = raw_server(|i| if i == 0 { Answer::Hang } else { Answer::Ok }).await;
    let metrics = Metrics::new();
    let policy = RetryPolicy::builder()
        .attempt_timeout(ms(300))
        .initial_backoff(ms(10))
        .build()
        .unwrap();
    let client = sw4rm(addr, heartbeat_layer(5_000, policy, &metrics));
    let start = Instant::now();
    heartbeat(&client)
        .await
        .expect("the second attempt answers");
    assert!(start.elapsed() >= ms(300));
    let deadline = tokio::time::Instant::now() + WAIT;
    while !log.lock().unwrap()[0].reset && Instant::now() < deadline {
        tokio::time::sleep(ms(5)).await;
    }
    let attempts = log.lock().unwrap().clone();
    assert_eq!(attempts.len(), 2);
    assert!(
        attempts[0].reset,
        "the server saw the hung attempt cancelled"
    );
    assert_eq!(attempts[0].grpc_timeout.as_deref(), Some("300000u"));
    assert!(micros(&attempts[1].grpc_timeout) <= ms(300));
    assert!(
        attempts[1].at - start >= ms(300),
        "sent only after the first timed out"
    );
    assert_eq!(metrics.value("sw4rm_rpc_retries_total", "Heartbeat"), 1);
}

#[tokio::test]
async fn attempts_that_all_hang_end_in_one_deadline_exceeded_naming_the_attempts() {
    let (addr, log) = raw_server(|_| Answer::Hang).await;
    let metrics = Metrics::new();
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .attempt_timeout(ms(150))
        .initial_backoff(ms(10))
        .max_backoff(ms(10))
        .build()
        .unwrap();
    let client = sw4rm(addr, heartbeat_layer(400, policy, &metrics));
    let start = Instant::now();
    let status = heartbeat(&client).await.unwrap_err();
    assert!(start.elapsed() >= ms(300), "at least two attempt timeouts");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    let d = TimeoutDetails::from_status(&status).expect("details");
    let attempts = d.attempts().expect("attempts in the details");
    assert!(attempts >= 2, "{d:?}");
    assert!(matches!(d.phase(), Phase::Attempt | Phase::Total), "{d:?}");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len() as u32, attempts);
    let timeouts: Vec<Duration> = seen.iter().map(|a| micros(&a.grpc_timeout)).collect();
    assert!(timeouts.iter().all(|t| *t <= ms(150)), "{timeouts:?}");
    assert!(timeouts.windows(2).all(|w| w[1] <= w[0]), "{timeouts:?}");
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "Heartbeat"), 1);
    assert_eq!(metrics.value("sw4rm_rpc_duration_ms", "Heartbeat"), 1);
    assert_eq!(
        metrics.value("sw4rm_rpc_retries_total", "Heartbeat"),
        u64::from(attempts - 1)
    );
}

#[tokio::test]
async fn pushback_replaces_the_backoff_and_a_negative_one_stops() {
    let (addr, log) = raw_server(|i| {
        if i == 0 {
            Answer::Unavailable(Some("250"))
        } else {
            Answer::Ok
        }
    })
    .await;
    let metrics = Metrics::new();
    let policy = quick(3, 1);
    let client = sw4rm(addr, heartbeat_layer(5_000, policy, &metrics));
    heartbeat(&client)
        .await
        .expect("answered after the pushback");
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(
        seen[1].at - seen[0].at >= ms(250),
        "waited the server's 250 ms"
    );

    let (addr, log) = raw_server(|_| Answer::Unavailable(Some("-1"))).await;
    let client = sw4rm(addr, heartbeat_layer(5_000, policy, &metrics));
    let status = heartbeat(&client).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(
        status.message(),
        "try again",
        "the server's status, unchanged"
    );
    assert_eq!(
        log.lock().unwrap().len(),
        1,
        "a negative pushback: no retry"
    );
}

#[tokio::test]
async fn an_empty_budget_returns_the_original_error() {
    let (addr, log) = raw_server(|_| Answer::Unavailable(None)).await;
    let metrics = Metrics::new();
    let policy = quick(5, 1);
    // 4 tokens: retries while more than 2 are left.
    let budget = RetryBudget::new(4);
    let layer = heartbeat_layer(5_000, policy, &metrics).with_retry_budget(budget.clone());
    let client = sw4rm(addr, layer);
    for expected_total in [2, 3] {
        let status = heartbeat(&client).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(log.lock().unwrap().len(), expected_total);
    }
    assert_eq!(budget.tokens(), 1.0);
    assert_eq!(metrics.value("sw4rm_rpc_retries_total", "Heartbeat"), 1);
}

#[tokio::test]
async fn a_mutation_that_reached_the_server_is_not_repeated_unless_marked() {
    let server = server().await;
    server
        .script(
            "SubmitTask",
            Script {
                fail_with: Some(Code::Unavailable),
                ..Script::default()
            },
        )
        .expect("a known RPC");
    let profiles = task_submit_with(quick(3, 1), false);
    let client = common::connect(&server, TimeoutProfileLayer::new(profiles)).await;
    let status = client
        .scheduler()
        .submit_task(SubmitTaskRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(server.calls_to("SubmitTask").len(), 1, "sent once");

    // The caller knows this one is safe (an idempotency key, say).
    let mut req = tonic::Request::new(SubmitTaskRequest::default());
    CallRetry::idempotent().apply(&mut req);
    let status = client.scheduler().submit_task(req).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(
        server.calls_to("SubmitTask").len(),
        1 + 3,
        "retried up to max attempts"
    );

    // The same for a route marked idempotent by the client.
    let profiles = task_submit_with(quick(2, 1), true);
    let client = common::connect(&server, TimeoutProfileLayer::new(profiles)).await;
    let _ = client
        .scheduler()
        .submit_task(SubmitTaskRequest::default())
        .await;
    assert_eq!(server.calls_to("SubmitTask").len(), 4 + 2);
}

#[tokio::test]
async fn a_request_that_never_reached_a_server_is_retried_even_when_it_mutates() {
    // A port with nothing listening: every attempt is refused before it is sent.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let metrics = Metrics::new();
    let profiles = task_submit_with(quick(3, 1), false);
    let layer = TimeoutProfileLayer::new(profiles)
        .with_meter_provider(&metrics.provider)
        .without_retry_budget();
    let client = sw4rm(closed, layer);
    let status = client
        .scheduler()
        .submit_task(SubmitTaskRequest::default())
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(metrics.value("sw4rm_rpc_retries_total", "SubmitTask"), 2);
}

#[tokio::test]
async fn retries_off_sends_once() {
    let (addr, log) = raw_server(|_| Answer::Unavailable(None)).await;
    let metrics = Metrics::new();
    let client = sw4rm(
        addr,
        heartbeat_layer(2_000, RetryPolicy::standard(), &metrics).without_retries(),
    );
    let status = heartbeat(&client).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(log.lock().unwrap().len(), 1);
    let mut req = tonic::Request::new(heartbeat_request());
    CallRetry::off().apply(&mut req);
    let client = sw4rm(
        addr,
        heartbeat_layer(2_000, RetryPolicy::standard(), &metrics),
    );
    let _ = client.registry().heartbeat(req).await;
    assert_eq!(log.lock().unwrap().len(), 2, "CallRetry::off sends once");
}

/// A script counts the calls made after it was set: re-scripting after a call starts
/// the count over.
#[tokio::test]
async fn a_new_script_counts_calls_from_when_it_was_set() {
    use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
    use sw4rm_timeouts::testing::Script;

    let server = common::server().await;
    let sw4rm = common::connect(&server, TimeoutProfileLayer::standard().without_retries()).await;
    let beat = || async {
        sw4rm
            .registry()
            .heartbeat(HeartbeatRequest::default())
            .await
    };
    beat().await.unwrap();
    server
        .script("Heartbeat", Script::fail_first(1, tonic::Code::Unavailable))
        .unwrap();
    assert_eq!(beat().await.unwrap_err().code(), tonic::Code::Unavailable);
    beat().await.unwrap();
    // Set again: its first call fails again.
    server
        .script("Heartbeat", Script::fail_first(1, tonic::Code::Unavailable))
        .unwrap();
    assert_eq!(beat().await.unwrap_err().code(), tonic::Code::Unavailable);
    beat().await.unwrap();
}

/// `attempts` in a timeout's details: 1 for a call under a retry policy that was never
/// retried, none for a call sent once by design.
#[tokio::test]
async fn a_timeout_never_retried_reports_one_attempt() {
    use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
    use sw4rm_timeouts::testing::Script;
    use sw4rm_timeouts::{ProfileSet, TimeoutDetails};

    let server = common::server().await;
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(5)))
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", 1_000)
        .build()
        .unwrap();
    for (layer, want) in [
        (TimeoutProfileLayer::new(profiles.clone()), Some(1)),
        (TimeoutProfileLayer::new(profiles).without_retries(), None),
    ] {
        let sw4rm = common::connect(&server, layer).await;
        let status = sw4rm
            .registry()
            .heartbeat(HeartbeatRequest::default())
            .await
            .unwrap_err();
        let details = TimeoutDetails::from_status(&status).unwrap();
        assert_eq!(details.attempts(), want);
        assert!(
            !status.message().contains("attempts"),
            "{}",
            status.message()
        );
    }
}

/// Attempts after the first carry gRPC A6's `grpc-previous-rpc-attempts`, so the
/// server can tell a retry from a new call.
#[tokio::test]
async fn retries_say_how_many_attempts_came_before() {
    use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
    use sw4rm_timeouts::testing::Script;

    let server = common::server().await;
    server
        .script("Heartbeat", Script::fail_first(2, tonic::Code::Unavailable))
        .unwrap();
    let sw4rm = common::connect(&server, TimeoutProfileLayer::standard()).await;
    sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await
        .unwrap();
    let seen: Vec<Option<u32>> = server
        .calls_to("Heartbeat")
        .iter()
        .map(|c| c.previous_attempts)
        .collect();
    assert_eq!(seen, [None, Some(1), Some(2)]);
}

/// Every attempt carries the first attempt's head and bytes, whatever the caller added:
/// a request kept with its headers inline and its message inline, one whose headers
/// and message are copied, and one whose message is larger than 4 KiB.
#[tokio::test]
async fn every_attempt_carries_the_callers_metadata_and_the_same_bytes() {
    let rows: [(&[(&str, &str)], usize); 4] = [
        (&[], 7),
        (
            &[
                ("authorization", "Bearer t"),
                ("traceparent", "00-ab-cd-01"),
            ],
            7,
        ),
        (
            &[
                ("authorization", "Bearer t"),
                ("x-tag", "a"),
                ("x-tag", "b"),
                ("x-tenant", "acme"),
            ],
            300,
        ),
        (&[("x-tag", "a")], 5_000),
    ];
    for (metadata, id_len) in rows {
        let (addr, log) = raw_server(|i| match i {
            0 | 1 => Answer::Unavailable(None),
            _ => Answer::Ok,
        })
        .await;
        let metrics = Metrics::new();
        let client = sw4rm(addr, heartbeat_layer(3_000, quick(3, 5), &metrics));
        let mut request = tonic::Request::new(HeartbeatRequest {
            agent_id: "a".repeat(id_len),
            ..Default::default()
        });
        for (name, value) in metadata {
            request.metadata_mut().append(*name, value.parse().unwrap());
        }
        client
            .registry()
            .heartbeat(request)
            .await
            .expect("answered");
        let attempts = log.lock().unwrap().clone();
        assert_eq!(attempts.len(), 3, "{metadata:?}");
        let without_own = |a: &Attempt| {
            let mut h = a.headers.clone();
            h.remove("grpc-timeout");
            h.remove("grpc-previous-rpc-attempts");
            h
        };
        let first = without_own(&attempts[0]);
        for (name, value) in metadata {
            let sent: Vec<_> = first.get_all(*name).iter().collect();
            assert!(sent.iter().any(|v| v == value), "{name}: {sent:?}");
        }
        assert_eq!(first["te"], "trailers");
        assert_eq!(first["content-type"], "application/grpc");
        for a in &attempts[1..] {
            assert_eq!(without_own(a), first, "{metadata:?}");
            assert_eq!(a.body, attempts[0].body, "{id_len}");
        }
        assert!(attempts[0].body.len() > id_len, "{id_len}");
    }
}
