//! Retry timing under paused tokio time, over an in-memory inner service that
//! answers every attempt with a trailers-only `UNAVAILABLE` at once: the backoff
//! before retry n lies in `[0, min(initial · multiplier^(n−1), max)]` (full jitter),
//! it varies, and no attempt runs past the call's deadline. Over one that never answers
//! (and no timer below the layer), the layer's own timer ends each attempt at its
//! attempt timeout, and the last at the call's deadline.

use std::time::Duration;

use sw4rm_timeouts::testing::{Play, Scripted, Seen};
use sw4rm_timeouts::{ProfileSet, RetryPolicy, TimeoutProfileLayer};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A trailers-only `UNAVAILABLE`, at once.
fn unavailable() -> Play {
    Play::answer().status(tonic::Code::Unavailable)
}

/// Answers every attempt with a trailers-only `UNAVAILABLE` (and this pushback).
fn always_unavailable(pushback: Option<&'static str>) -> Scripted {
    Scripted::new([match pushback {
        Some(p) => unavailable().pushback(p),
        None => unavailable(),
    }])
}

/// When each attempt came, from the first.
fn arrivals(seen: &[Seen]) -> Vec<Duration> {
    seen.iter().map(|s| s.at - seen[0].at).collect()
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
        let inner = always_unavailable(None);
        let mut svc = ServiceBuilder::new()
            .layer(layer.clone())
            .service(inner.clone());
        let response = svc.ready().await.unwrap().call(request()).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "14");
        assert_eq!(response.headers()["sw4rm-attempts"], "5");
        let calls = inner.seen();
        assert_eq!(calls.len(), 5);
        for (n, pair) in calls.windows(2).enumerate() {
            let gap = pair[1].at - pair[0].at;
            assert!(
                gap <= ceilings[n],
                "backoff {n}: {gap:?} > {:?}",
                ceilings[n]
            );
            all_gaps.push(gap);
        }
        // Each attempt is sent with what remains of the one 60 s deadline.
        for (seen, after) in calls.iter().zip(arrivals(&calls)) {
            assert_eq!(seen.grpc_timeout(), Some(ms(60_000) - after));
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
        let inner = always_unavailable(None);
        let mut svc = ServiceBuilder::new()
            .layer(layer.clone())
            .service(inner.clone());
        let _ = svc.ready().await.unwrap().call(request()).await.unwrap();
        let calls = inner.seen();
        once += usize::from(calls.len() == 1);
        for after in &arrivals(&calls)[1..] {
            assert!(
                ms(300) - *after >= ms(250),
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
    let inner = always_unavailable(Some("18446744073709551615"));
    let layer = TimeoutProfileLayer::new(ProfileSet::standard())
        .without_metrics()
        .without_retry_budget();
    let mut svc = ServiceBuilder::new().layer(layer).service(inner.clone());
    let mut req = http::Request::builder()
        .uri("http://sw4rm.test/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision")
        .body(tonic::body::Body::empty())
        .unwrap();
    req.extensions_mut()
        .insert(sw4rm_timeouts::CallTimeout::Infinite);
    let response = svc.ready().await.unwrap().call(req).await.unwrap();
    assert_eq!(response.headers()["grpc-status"], "14");
    assert_eq!(inner.seen().len(), 1);
}

/// An inner service that never answers its first `hang` attempts (it keeps them
/// pending, as a peer that never replies would; [`Seen::dropped`] says when each was
/// dropped), then answers `OK` at once (`None`: never answers any). No timer below the
/// layer: only the layer's own timers end an attempt.
fn hanging(hang: Option<usize>) -> Scripted {
    match hang {
        Some(n) => Scripted::new(std::iter::repeat_n(Play::hang(), n).chain([Play::answer()])),
        None => Scripted::new([Play::hang()]),
    }
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
    let inner = hanging(Some(1));
    let mut svc = ServiceBuilder::new()
        .layer(attempt_timeout_layer(5_000, 300))
        .service(inner.clone());
    let start = Instant::now();
    let response = svc.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(response.headers()["sw4rm-attempts"], "2");
    let calls = inner.seen();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].header("grpc-timeout"), Some("300000u"));
    // The first attempt was dropped (its stream reset) exactly at its timeout, and the
    // second sent after the backoff (at most 1 ms).
    let dropped: Vec<_> = calls.iter().map(|c| c.dropped).collect();
    assert_eq!(dropped, vec![Some(start + ms(300)), None]);
    let resent = calls[1].at - start;
    assert!(resent >= ms(300) && resent <= ms(301), "{resent:?}");
}

#[tokio::test(start_paused = true)]
async fn attempts_that_all_hang_end_at_the_call_deadline_naming_the_attempt() {
    let inner = hanging(None);
    let mut svc = ServiceBuilder::new()
        .layer(attempt_timeout_layer(1_000, 300))
        .service(inner.clone());
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
    let calls = inner.seen();
    assert_eq!(calls.len(), 4);
    assert!(
        calls.iter().all(|c| c.dropped.is_some()),
        "every attempt was dropped: {calls:?}"
    );
}

/// A call's attempts after the first go through a handle taken from the layered
/// service's own; after `get_mut` hands the service out (here to replace it), later
/// calls' retries go through it as it was left, never through the one before.
#[tokio::test(start_paused = true)]
async fn retries_go_through_the_service_as_get_mut_left_it() {
    let (first, second) = (always_unavailable(None), always_unavailable(None));
    // How many attempts each service has seen.
    let counts = || (first.seen().len(), second.seen().len());
    let layer = TimeoutProfileLayer::new(ProfileSet::standard())
        .without_metrics()
        .without_retry_budget();
    let mut svc = ServiceBuilder::new().layer(layer).service(first.clone());
    let mut copy = svc.clone();
    let response = svc.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(response.headers()["sw4rm-attempts"], "3");
    assert_eq!(counts(), (3, 0));
    *svc.get_mut() = second.clone();
    let _ = svc.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(counts(), (3, 3), "every attempt through the new service");
    // A clone made before keeps the service it was made with, for all its attempts.
    let _ = copy.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(
        counts(),
        (6, 3),
        "every attempt through the clone's service"
    );
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
fn unavailable_then_hanging() -> Scripted {
    Scripted::new([unavailable(), Play::hang()])
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
    // The first two calls' two attempts each fail, every later attempt answers.
    let inner = Scripted::new([
        unavailable(),
        unavailable(),
        unavailable(),
        unavailable(),
        Play::answer(),
    ]);
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
    for svc in [&mut first, &mut second] {
        let response = svc.ready().await.unwrap().call(request()).await.unwrap();
        assert!(response.headers().get("sw4rm-attempts").is_none());
    }
    assert_eq!(budget.tokens(), 9.0);
}
