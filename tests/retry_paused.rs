//! Retry timing under paused tokio time, over an in-memory inner service that
//! answers every attempt with a trailers-only `UNAVAILABLE` at once: the backoff
//! before retry n lies in `[0, min(initial · multiplier^(n−1), max)]` (full jitter),
//! it varies, and no attempt runs past the call's deadline. Over one that never answers
//! (and no timer below the layer), the layer's own timer ends each attempt at its
//! attempt timeout, and the last at the call's deadline.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sw4rm_timeouts::{ProfileSet, RetryPolicy, TimeoutProfileLayer};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

type Calls = Arc<Mutex<Vec<(Instant, Option<String>)>>>;

/// The in-memory inner services of these tests: what the layer wraps.
trait Inner:
    Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<tonic::body::Body>,
        Error = Infallible,
        Future: Send,
    > + Clone
{
}

impl<T> Inner for T where
    T: Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
            Future: Send,
        > + Clone
{
}

/// Answers every attempt with a trailers-only `UNAVAILABLE` (and this pushback),
/// recording when each came and its `grpc-timeout`.
fn unavailable(calls: Calls, pushback: Option<&'static str>) -> impl Inner {
    tower::service_fn(move |req: http::Request<tonic::body::Body>| {
        let timeout = req
            .headers()
            .get("grpc-timeout")
            .map(|v| v.to_str().unwrap().to_owned());
        calls.lock().unwrap().push((Instant::now(), timeout));
        async move { Ok::<_, Infallible>(unavailable_answer(pushback)) }
    })
}

/// A trailers-only `UNAVAILABLE`, with this pushback.
fn unavailable_answer(pushback: Option<&'static str>) -> http::Response<tonic::body::Body> {
    let mut response = http::Response::new(tonic::body::Body::empty());
    let h = response.headers_mut();
    h.insert(
        "content-type",
        http::HeaderValue::from_static("application/grpc"),
    );
    h.insert("grpc-status", http::HeaderValue::from_static("14"));
    if let Some(p) = pushback {
        h.insert("grpc-retry-pushback-ms", http::HeaderValue::from_static(p));
    }
    response
}

fn request() -> http::Request<tonic::body::Body> {
    http::Request::builder()
        .uri(format!("http://sw4rm.test{HEARTBEAT}"))
        .body(tonic::body::Body::empty())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn backoff_is_full_jitter_under_its_ceiling() {
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .initial_backoff(ms(100))
        .max_backoff(ms(300))
        .backoff_multiplier(2)
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", 60_000)
        .max_timeout_ms("heartbeat", 60_000)
        .retry("heartbeat", policy)
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .without_retry_budget();
    let ceilings = [ms(100), ms(200), ms(300), ms(300)];
    let mut all_gaps = Vec::new();
    for _ in 0..20 {
        let calls = Calls::default();
        let mut svc = ServiceBuilder::new()
            .layer(layer.clone())
            .service(unavailable(calls.clone(), None));
        let response = svc.ready().await.unwrap().call(request()).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "14");
        assert_eq!(response.headers()["sw4rm-attempts"], "5");
        let calls = calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 5);
        for (n, pair) in calls.windows(2).enumerate() {
            let gap = pair[1].0 - pair[0].0;
            assert!(
                gap <= ceilings[n],
                "backoff {n}: {gap:?} > {:?}",
                ceilings[n]
            );
            all_gaps.push(gap);
        }
        // Each attempt is sent with what remains of the one 60 s deadline.
        let start = calls[0].0;
        for (at, timeout) in &calls {
            let expected = ms(60_000) - (*at - start);
            let sent =
                sw4rm_timeouts::wire::grpc_timeout::parse(timeout.as_deref().unwrap().as_bytes())
                    .unwrap();
            assert_eq!(sent, expected);
        }
    }
    // Full jitter: the backoffs are spread, not fixed.
    let distinct: std::collections::BTreeSet<_> = all_gaps.iter().collect();
    assert!(distinct.len() > all_gaps.len() / 2, "{all_gaps:?}");
}

#[tokio::test(start_paused = true)]
async fn no_retry_when_the_backoff_would_leave_less_than_the_profile_minimum() {
    // 300 ms deadline, 250 ms minimum, backoff ceiling 100 ms: a retry is sent only
    // when at least 250 ms remain after its backoff.
    let policy = RetryPolicy::builder()
        .initial_backoff(ms(100))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", 300)
        .min_timeout_ms("heartbeat", 250)
        .retry("heartbeat", policy)
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .without_retry_budget();
    let mut once = 0;
    for _ in 0..20 {
        let calls = Calls::default();
        let mut svc = ServiceBuilder::new()
            .layer(layer.clone())
            .service(unavailable(calls.clone(), None));
        let _ = svc.ready().await.unwrap().call(request()).await.unwrap();
        let calls = calls.lock().unwrap().clone();
        once += usize::from(calls.len() == 1);
        for (at, _) in &calls[1..] {
            assert!(
                ms(300) - (*at - calls[0].0) >= ms(250),
                "a retry was sent with less than the minimum left"
            );
        }
    }
    // A backoff above 50 ms leaves less than 250 ms: most calls stop after one attempt.
    assert!(once > 0);
}

/// A server's pushback is peer input: one longer than any profile allows (here the
/// largest a header can say, on a call without any deadline) ends the retries; it
/// neither waits for ever nor overflows the clock.
#[tokio::test(start_paused = true)]
async fn an_absurd_pushback_ends_the_retries() {
    let calls = Calls::default();
    let inner = unavailable(calls.clone(), Some("18446744073709551615"));
    let layer = TimeoutProfileLayer::new(ProfileSet::standard())
        .without_metrics()
        .without_retry_budget();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner);
    let mut req = http::Request::builder()
        .uri("http://sw4rm.test/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision")
        .body(tonic::body::Body::empty())
        .unwrap();
    req.extensions_mut()
        .insert(sw4rm_timeouts::CallTimeout::Infinite);
    let response = svc.ready().await.unwrap().call(req).await.unwrap();
    assert_eq!(response.headers()["grpc-status"], "14");
    assert_eq!(calls.lock().unwrap().len(), 1);
}

/// An inner service that never answers its first `hang` attempts (it keeps them
/// pending, as a peer that never replies would, and records when each is dropped),
/// then answers `OK` at once. No timer below the layer: only the layer's own
/// timers end an attempt.
fn hanging(hang: usize, calls: Calls, dropped: Arc<Mutex<Vec<Instant>>>) -> impl Inner {
    struct OnDrop(Arc<Mutex<Vec<Instant>>>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.lock().unwrap().push(Instant::now());
        }
    }
    tower::service_fn(move |req: http::Request<tonic::body::Body>| {
        let timeout = req
            .headers()
            .get("grpc-timeout")
            .map(|v| v.to_str().unwrap().to_owned());
        let n = {
            let mut calls = calls.lock().unwrap();
            calls.push((Instant::now(), timeout));
            calls.len()
        };
        let guard = (n <= hang).then(|| OnDrop(dropped.clone()));
        async move {
            if let Some(_guard) = guard {
                std::future::pending::<()>().await;
            }
            let mut response = http::Response::new(tonic::body::Body::empty());
            response.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("application/grpc"),
            );
            Ok::<_, Infallible>(response)
        }
    })
}

fn attempt_timeout_layer(deadline_ms: u32, attempt_ms: u64) -> TimeoutProfileLayer {
    let policy = RetryPolicy::builder()
        .max_attempts(4)
        .attempt_timeout(ms(attempt_ms))
        .initial_backoff(ms(1))
        .max_backoff(ms(1))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", deadline_ms)
        .min_timeout_ms("heartbeat", 50)
        .retry("heartbeat", policy)
        .build()
        .unwrap();
    TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .without_retry_budget()
}

#[tokio::test(start_paused = true)]
async fn the_layer_ends_an_attempt_at_its_own_timeout_and_retries() {
    let (calls, dropped) = (Calls::default(), Arc::default());
    let mut svc = ServiceBuilder::new()
        .layer(attempt_timeout_layer(5_000, 300))
        .service(hanging(1, calls.clone(), Arc::clone(&dropped)));
    let start = Instant::now();
    let response = svc.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(response.headers()["sw4rm-attempts"], "2");
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].1.as_deref(), Some("300000u"));
    // The first attempt was dropped (its stream reset) exactly at its timeout, and the
    // second sent after the backoff (at most 1 ms).
    assert_eq!(dropped.lock().unwrap().clone(), vec![start + ms(300)]);
    let resent = calls[1].0 - start;
    assert!(resent >= ms(300) && resent <= ms(301), "{resent:?}");
}

#[tokio::test(start_paused = true)]
async fn attempts_that_all_hang_end_at_the_call_deadline_naming_the_attempt() {
    let (calls, dropped) = (Calls::default(), Arc::default());
    let mut svc = ServiceBuilder::new()
        .layer(attempt_timeout_layer(1_000, 300))
        .service(hanging(usize::MAX, calls.clone(), Arc::clone(&dropped)));
    let start = Instant::now();
    let err = svc
        .ready()
        .await
        .unwrap()
        .call(request())
        .await
        .unwrap_err();
    let status = tonic::Status::from_error(err);
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    let details = sw4rm_timeouts::TimeoutDetails::from_status(&status).expect("details");
    // Three attempts of 300 ms (plus backoffs of at most 1 ms) fit; the fourth gets
    // what remains (at least the profile's 50 ms minimum), so its timeout is the call's
    // deadline: it ends exactly then, as the attempt's timeout.
    assert_eq!(details.attempts(), Some(4), "{details:?}");
    assert_eq!(
        details.phase(),
        sw4rm_timeouts::Phase::Attempt,
        "{details:?}"
    );
    assert_eq!(start.elapsed(), ms(1_000));
    assert_eq!(
        dropped.lock().unwrap().len(),
        4,
        "every attempt was dropped"
    );
    assert_eq!(calls.lock().unwrap().len(), 4);
}

/// Answers every attempt with a trailers-only `UNAVAILABLE`, logging `tag`: which
/// service the attempt went through.
fn tagged(log: Arc<Mutex<Vec<&'static str>>>, tag: &'static str) -> impl Inner {
    tower::service_fn(move |_: http::Request<tonic::body::Body>| {
        log.lock().unwrap().push(tag);
        async move { Ok::<_, Infallible>(unavailable_answer(None)) }
    })
}

/// A call's attempts after the first go through a handle taken from the layered
/// service's own; after `get_mut` hands the service out (here to replace it), later
/// calls' retries go through it as it was left, never through the one before.
#[tokio::test(start_paused = true)]
async fn retries_go_through_the_service_as_get_mut_left_it() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let layer = TimeoutProfileLayer::new(ProfileSet::standard())
        .without_metrics()
        .without_retry_budget();
    let mut svc = ServiceBuilder::new()
        .layer(layer)
        .service(tagged(log.clone(), "first"));
    let mut copy = svc.clone();
    let response = svc.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(response.headers()["sw4rm-attempts"], "3");
    *svc.get_mut() = tagged(log.clone(), "second");
    let _ = svc.ready().await.unwrap().call(request()).await.unwrap();
    // A clone made before keeps the service it was made with, for all its attempts.
    let _ = copy.ready().await.unwrap().call(request()).await.unwrap();
    let log = log.lock().unwrap().clone();
    let expected: Vec<_> = ["first"; 3]
        .into_iter()
        .chain(["second"; 3])
        .chain(["first"; 3])
        .collect();
    assert_eq!(log, expected);
}

/// Which timer fired, and where its value came from, for the rows below: a retried
/// call whose later attempt hangs until the call's deadline, under a retry policy with
/// or without an attempt timeout of its own.
struct Fired {
    phase: sw4rm_timeouts::Phase,
    source: sw4rm_timeouts::Source,
    configured_ms: std::ops::RangeInclusive<u64>,
    attempts: Option<u32>,
}

/// Answers its first attempt with a trailers-only `UNAVAILABLE`, and never answers
/// the others.
fn unavailable_then_hanging() -> impl Inner {
    let seen = Arc::new(Mutex::new(0usize));
    tower::service_fn(move |_: http::Request<tonic::body::Body>| {
        let n = {
            let mut seen = seen.lock().unwrap();
            *seen += 1;
            *seen
        };
        async move {
            if n > 1 {
                std::future::pending::<()>().await;
            }
            Ok::<_, Infallible>(unavailable_answer(None))
        }
    })
}

/// A later attempt runs under what remains of the call's deadline. Without an attempt
/// timeout in the policy, the deadline that ends it is the call's own: phase `total`,
/// the source that set the deadline. With one, the attempt's own timer runs to the
/// deadline and ends it (as `attempts_that_all_hang_end_at_the_call_deadline_naming_the_attempt`
/// pins): phase `attempt`, the source of the policy's attempt timeout, and what
/// remained when the attempt started (the backoff is jittered, up to 10 ms).
#[tokio::test(start_paused = true)]
async fn a_later_attempt_ended_by_the_deadline_names_the_timer_that_set_it() {
    let policy = |attempt: Option<u64>| {
        let b = RetryPolicy::builder()
            .initial_backoff(ms(10))
            .max_backoff(ms(10));
        match attempt {
            Some(t) => b.attempt_timeout(ms(t)),
            None => b,
        }
        .build()
        .unwrap()
    };
    use sw4rm_timeouts::{Phase, Source};
    // Rows: the policy's attempt timeout, what the details name.
    let rows = [
        (
            None,
            Fired {
                phase: Phase::Total,
                source: Source::Client,
                configured_ms: 300..=300,
                attempts: Some(2),
            },
        ),
        // 5 s fits the profile's bounds and outlasts the 300 ms deadline.
        (
            Some(5_000),
            Fired {
                phase: Phase::Attempt,
                source: Source::Client,
                configured_ms: 290..=300,
                attempts: Some(2),
            },
        ),
    ];
    for (attempt_timeout, want) in rows {
        let profiles = ProfileSet::builder()
            .without_global()
            .default_timeout_ms("heartbeat", 300)
            .min_timeout_ms("heartbeat", 50)
            .retry("heartbeat", policy(attempt_timeout))
            .build()
            .unwrap();
        let layer = TimeoutProfileLayer::new(profiles)
            .without_metrics()
            .without_retry_budget();
        let mut svc = ServiceBuilder::new()
            .layer(layer)
            .service(unavailable_then_hanging());
        let start = Instant::now();
        let Err(err) = svc.ready().await.unwrap().call(request()).await else {
            panic!("attempt timeout {attempt_timeout:?}: answered");
        };
        assert_eq!(start.elapsed(), ms(300), "{attempt_timeout:?}");
        let status = tonic::Status::from_error(err);
        let details = sw4rm_timeouts::TimeoutDetails::from_status(&status).expect("details");
        let got = (
            details.phase(),
            details.source().clone(),
            details.attempts(),
        );
        let expected = (want.phase, want.source, want.attempts);
        assert_eq!(
            got, expected,
            "attempt timeout {attempt_timeout:?}: {details:?}"
        );
        assert!(
            want.configured_ms
                .contains(&details.configured_timeout_ms()),
            "attempt timeout {attempt_timeout:?}: {details:?}"
        );
    }
}

/// The layer's budget, shared by its calls: a failure the policy retries takes a token,
/// and a call answered without one gives the ratio back, whichever service of the
/// layer made the call.
#[tokio::test(start_paused = true)]
async fn the_layers_budget_is_charged_by_failures_and_refilled_by_answers() {
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let inner = {
        let failing = failing.clone();
        tower::service_fn(move |_: http::Request<tonic::body::Body>| {
            let fail = failing.load(std::sync::atomic::Ordering::Relaxed);
            async move {
                Ok::<_, Infallible>(match fail {
                    true => unavailable_answer(None),
                    false => http::Response::new(tonic::body::Body::empty()),
                })
            }
        })
    };
    let policy = RetryPolicy::builder()
        .max_attempts(2)
        .initial_backoff(ms(10))
        .max_backoff(ms(10))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .retry("heartbeat", policy)
        .build()
        .unwrap();
    let budget = sw4rm_timeouts::RetryBudget::new(10).with_token_ratio(0.5);
    let layer = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .with_retry_budget(budget.clone());
    // Two services of the layer, one budget.
    let mut first = ServiceBuilder::new()
        .layer(layer.clone())
        .service(inner.clone());
    let mut second = ServiceBuilder::new().layer(layer).service(inner);
    for svc in [&mut first, &mut second] {
        let response = svc.ready().await.unwrap().call(request()).await.unwrap();
        assert_eq!(response.headers()["sw4rm-attempts"], "2");
    }
    // Each call's first failure was retried (a token each); its last was not.
    assert_eq!(budget.tokens(), 8.0);
    failing.store(false, std::sync::atomic::Ordering::Relaxed);
    for svc in [&mut first, &mut second] {
        let response = svc.ready().await.unwrap().call(request()).await.unwrap();
        assert!(response.headers().get("sw4rm-attempts").is_none());
    }
    assert_eq!(budget.tokens(), 9.0);
}
