//! One call path, whatever the log level and however the call was planned: a property
//! test over scripted plays × how the caller ends the call × the layer's settings.
//! Each case runs four times — planned by its route's plan (the common call) or
//! planned apart (as a call with a value of its own is), each under a subscriber at
//! `INFO` (the call's span off) and at `DEBUG` (on) — and every observable is the
//! same in all four: the caller's answer or status (details and `sw4rm-attempts`
//! included), how the body ended, the attempts the server saw and when each was
//! dropped, the time taken, the metrics, the advisor's observations, the retry
//! budget, and the `INFO` and `WARN` events (with the call's names, which an enabled
//! span carries and a disabled one leaves to the event). What is observed, and the inner
//! service played against, is `observe.rs`.

mod observe;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Context;
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use proptest::prelude::*;
use tokio::time::Instant;
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tracing_subscriber::layer::SubscriberExt;

use crate::config::ProfileSet;
use crate::observe::metrics::MetricFamily;
use crate::policy::retry::RetryPolicy;
use crate::testing::{Play, Scripted};
use crate::timeout::service::PLANNED_APART;
use crate::timeout::TimeoutProfileLayer;
use observe::{described, metrics, read, status, Events, NotReadyAtFirst};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
pub(super) type Request = http::Request<tonic::body::Body>;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// What the caller does with the call.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Then {
    /// Reads the body to its end (a scripted body ends without trailers).
    Read,
    /// Reads it while the server sends nothing more (the deadline ends it).
    Wait,
    /// The server sends one message, then trailers with this status.
    Trailers(u8),
    /// The server sends `DEADLINE_EXCEEDED` in the trailers at the deadline.
    ServerTimeout,
    /// Drops the body unread.
    DropBody,
    /// Drops the call before its answer.
    DropCall,
    /// Cancels through tonic's `Request::cancellation_handle()` after 100 ms (the
    /// call goes through the generated client).
    Cancel,
}

/// The layer's settings for one case.
#[derive(Clone, Copy, Debug)]
struct Settings {
    retries: bool,
    attempt_timeout: bool,
    budget: bool,
    /// 0: no metrics; 1: the default families; 2: with gRPC's per-attempt family.
    metrics: u8,
    observations: bool,
    /// The inner service is not ready when the call is made.
    not_ready: bool,
    /// A second call follows, after the table was reloaded with a shorter deadline.
    reload: bool,
}

/// How one run was made.
#[derive(Clone, Copy, Debug)]
struct Way {
    apart: bool,
    debug: bool,
}

/// What the caller got of one call: the response head or the status, and how the
/// body ended (when it was read).
type Got = (
    Result<String, String>,
    Option<Result<Option<String>, String>>,
);

/// The caller's answer, the server's view, the time and what was recorded.
#[derive(Debug, PartialEq)]
struct Seen {
    calls: Vec<Got>,
    server: Vec<(Option<String>, Option<String>, Option<Duration>)>,
    took: Duration,
    metrics: Vec<String>,
    observed: String,
    budget: String,
    events: Vec<String>,
}

fn profiles(settings: Settings, deadline_ms: u32) -> ProfileSet {
    let mut policy = RetryPolicy::builder()
        .max_attempts(3)
        .initial_backoff(ms(1))
        .max_backoff(ms(1));
    if settings.attempt_timeout {
        policy = policy.attempt_timeout(ms(300));
    }
    ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", deadline_ms)
        .min_timeout_ms("heartbeat", 50)
        .retry("heartbeat", policy.build().unwrap())
        .build()
        .unwrap()
}

type Svc = crate::timeout::TimeoutProfileService<NotReadyAtFirst>;

/// One call through `svc`, ended by the caller as `then`.
async fn one_call(svc: &mut Svc, inner: &Scripted, then: Then) -> Got {
    let start = Instant::now();
    if then == Then::Cancel {
        use crate::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
        let mut client = RegistryServiceClient::new(svc.clone());
        let mut request = tonic::Request::new(Default::default());
        let handle = request.cancellation_handle();
        tokio::spawn(async move {
            tokio::time::sleep(ms(100)).await;
            handle.cancel();
        });
        return match client.heartbeat(request).await {
            Ok(_) => (Ok("answered".to_owned()), None),
            Err(status) => (Err(described(&status)), None),
        };
    }
    let request = crate::testing::generated_request(HEARTBEAT);
    let mut future = Box::pin(svc.ready().await.unwrap().call(request));
    if then == Then::DropCall {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let _ = future.as_mut().poll(&mut cx);
        tokio::time::sleep(ms(100)).await;
        drop(future);
        return (Err("dropped".to_owned()), None);
    }
    let response = match future.await {
        Err(err) => return (Err(status(err)), None),
        Ok(response) => response,
    };
    let mut headers: Vec<String> = response
        .headers()
        .iter()
        .map(|(k, v)| format!("{k}={}", v.to_str().unwrap_or("?")))
        .collect();
    headers.sort();
    let mut body = response.into_body();
    let feed = match then {
        Then::Wait | Then::Trailers(_) | Then::ServerTimeout => Some(inner.next_feed().await),
        _ => None,
    };
    if let (Some(feed), Then::Trailers(code)) = (&feed, then) {
        feed.send(Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0])));
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from(u16::from(code)));
        feed.send(Frame::trailers(trailers));
    }
    if let (Some(feed), Then::ServerTimeout) = (&feed, then) {
        tokio::time::sleep_until(start + ms(1_000)).await;
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", 4.into());
        feed.send(Frame::trailers(trailers));
    }
    let ended = match then {
        Then::DropBody => None,
        _ => Some(read(&mut body).await),
    };
    drop(body);
    drop(feed);
    (Ok(headers.join(";")), ended)
}

/// A case run one way.
async fn run(plays: &[Play], then: Then, settings: Settings, way: Way) -> Seen {
    PLANNED_APART.with(|apart| apart.set(way.apart));
    let events = Events::default();
    let level = match way.debug {
        true => tracing_subscriber::filter::LevelFilter::DEBUG,
        false => tracing_subscriber::filter::LevelFilter::INFO,
    };
    // A subscriber of this thread's own: tracing caches each callsite's interest
    // across the subscribers alive, and another test's must not decide.
    let subscriber = tracing_subscriber::registry()
        .with(level)
        .with(events.clone());
    let _subscriber = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    let exporter = InMemoryMetricExporter::default();
    let reader = PeriodicReader::builder(exporter.clone()).build();
    let provider = SdkMeterProvider::builder().with_reader(reader).build();
    let budget = crate::attempts::RetryBudget::new(10).with_token_ratio(0.5);
    // Below its top, so that an answer's payment shows.
    assert!(budget.fail() && budget.fail());
    let mut layer = TimeoutProfileLayer::new(profiles(settings, 1_000));
    layer = match settings.metrics {
        0 => layer.without_metrics(),
        1 => layer.with_meter_provider(&provider),
        _ => layer
            .with_meter_provider(&provider)
            .with_metric_family(MetricFamily::GrpcAttempts),
    };
    if !settings.retries {
        layer = layer.without_retries();
    }
    if settings.budget {
        layer = layer.with_retry_budget(budget.clone());
    }
    if settings.observations {
        layer = layer.with_observations();
    }
    if then == Then::Cancel {
        layer = layer.with_tonic_cancel_watch();
    }
    let (layer, reload) = layer.reloadable();
    let observations = layer.observations();
    let start = Instant::now();
    let (mut calls, mut server) = (Vec::new(), Vec::new());
    for n in 0..1 + usize::from(settings.reload) {
        if n == 1 {
            let _ = reload.reload(profiles(settings, 600));
        }
        // Each call meets the plays from the first, through the same layer.
        let inner = Scripted::new(plays.iter().copied());
        let refusals = Arc::new(AtomicUsize::new(usize::from(settings.not_ready)));
        let mut svc = layer.layer(NotReadyAtFirst {
            inner: inner.clone(),
            refusals: refusals.clone(),
        });
        calls.push(one_call(&mut svc, &inner, then).await);
        // The call did meet an inner service that was not ready.
        assert_eq!(refusals.load(Ordering::SeqCst), 0, "the refusal was seen");
        // What the server holds is dropped before it is read.
        tokio::time::sleep(ms(10)).await;
        server.extend(inner.seen().iter().map(|s| {
            let header = |name| s.header(name).map(str::to_owned);
            (
                header("grpc-timeout"),
                header("grpc-previous-rpc-attempts"),
                s.dropped.map(|d| d - start),
            )
        }));
    }
    PLANNED_APART.with(|apart| apart.set(false));
    let seen = Seen {
        calls,
        server,
        took: start.elapsed(),
        metrics: metrics(&provider, &exporter),
        observed: format!("{:?}", observations.map(|o| o.routes())),
        budget: format!("{}", budget.tokens()),
        events: std::mem::take(&mut events.0.lock().unwrap()),
    };
    seen
}

fn play() -> impl Strategy<Value = Play> {
    prop_oneof![
        Just(Play::answer()),
        Just(Play::answer().after(ms(40))),
        Just(Play::answer().status(tonic::Code::Unavailable)),
        Just(
            Play::answer()
                .status(tonic::Code::Unavailable)
                .pushback("5")
        ),
        Just(Play::answer().status(tonic::Code::InvalidArgument)),
        Just(Play::hang()),
        Just(Play::answer().fed()),
    ]
}

fn then() -> impl Strategy<Value = Then> {
    prop_oneof![
        Just(Then::Read),
        Just(Then::Wait),
        Just(Then::Trailers(0)),
        Just(Then::Trailers(13)),
        Just(Then::ServerTimeout),
        Just(Then::DropBody),
        Just(Then::DropCall),
        Just(Then::Cancel),
    ]
}

fn settings() -> impl Strategy<Value = Settings> {
    (any::<[bool; 6]>(), 0u8..3).prop_map(|(b, metrics)| Settings {
        retries: b[0],
        attempt_timeout: b[1],
        budget: b[2],
        metrics,
        observations: b[3],
        not_ready: b[4],
        reload: b[5],
    })
}

/// A body-fed play read for trailers is meaningful only when the call is answered by
/// a fed body; anything else reads what there is.
fn runnable(plays: &[Play], then: Then) -> bool {
    match then {
        Then::Wait | Then::Trailers(_) | Then::ServerTimeout => {
            plays.first().is_some_and(Play::is_fed)
        }
        _ => true,
    }
}

/// Every way gives the same observables: what they are.
fn alike(plays: Vec<Play>, then: Then, settings: Settings) -> Result<Seen, TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let ways = [(false, false), (false, true), (true, false), (true, true)]
        .map(|(apart, debug)| Way { apart, debug });
    let seen: Vec<Seen> = ways
        .iter()
        .map(|way| runtime.block_on(run(&plays, then, settings, *way)))
        .collect();
    for (way, other) in ways.iter().zip(&seen).skip(1) {
        prop_assert_eq!(
            &seen[0],
            other,
            "{:?} {:?} {:?} {:?}",
            plays,
            then,
            settings,
            way
        );
    }
    Ok(seen.into_iter().next().expect("four ways"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_call_ends_alike_however_it_was_planned_and_whatever_the_log_level(
        plays in proptest::collection::vec(play(), 1..4),
        then in then(),
        settings in settings(),
    ) {
        prop_assume!(runnable(&plays, then));
        alike(plays, then, settings)?;
    }
}

/// The cases the old equivalence test played, each under one fixed setting: they run
/// on every `cargo test`, whatever proptest draws.
#[test]
fn the_fixed_cases_end_alike() {
    let unavailable = Play::answer().status(tonic::Code::Unavailable);
    let settings = Settings {
        retries: true,
        attempt_timeout: true,
        budget: true,
        metrics: 1,
        observations: true,
        not_ready: false,
        reload: false,
    };
    // Each case with what its first call must show (in its answer or its status, or
    // in how its body ended), so that four ways alike are also four ways right.
    let cases: &[(&[Play], Then, &str)] = &[
        (
            &[Play::answer()],
            Then::Read,
            "content-type=application/grpc",
        ),
        (&[Play::answer().after(ms(40))], Then::Read, "x-attempt=1"),
        (
            &[unavailable, Play::answer()],
            Then::Read,
            "sw4rm-attempts=2",
        ),
        (
            &[unavailable],
            Then::Read,
            "grpc-status=14;sw4rm-attempts=3",
        ),
        (
            &[Play::answer().status(tonic::Code::InvalidArgument)],
            Then::Read,
            "grpc-status=3",
        ),
        (
            &[Play::hang(), Play::answer()],
            Then::Read,
            "sw4rm-attempts=2",
        ),
        (&[Play::hang()], Then::Read, "DeadlineExceeded"),
        (&[Play::answer().fed()], Then::Wait, "DeadlineExceeded"),
        (&[Play::answer().fed()], Then::Trailers(0), "Some(\"0\")"),
        (&[Play::answer().fed()], Then::Trailers(13), "Some(\"13\")"),
        (
            &[Play::answer().fed()],
            Then::ServerTimeout,
            "detected_by: Server",
        ),
        (&[Play::answer().fed()], Then::DropBody, "x-attempt=1"),
        (&[Play::hang()], Then::DropCall, "dropped"),
        (&[Play::hang()], Then::Cancel, "Cancelled"),
    ];
    for (plays, then, shows) in cases {
        let seen = alike(plays.to_vec(), *then, settings).unwrap();
        let first = format!("{:?}", seen.calls[0]);
        assert!(first.contains(shows), "{plays:?} {then:?}: {first}");
    }
    // A reload between two calls, each meeting an inner service not ready: the
    // second call goes out under the reloaded deadline.
    let reloaded = Settings {
        not_ready: true,
        reload: true,
        ..settings
    };
    let seen = alike(vec![Play::answer()], Then::Read, reloaded).unwrap();
    let sent: Vec<_> = seen.server.iter().map(|s| s.0.as_deref()).collect();
    assert_eq!(sent, [Some("300000u"), Some("300000u")], "attempt timeouts");
    let seen = alike(
        vec![Play::answer()],
        Then::Read,
        Settings {
            attempt_timeout: false,
            ..reloaded
        },
    )
    .unwrap();
    let sent: Vec<_> = seen.server.iter().map(|s| s.0.as_deref()).collect();
    assert_eq!(
        sent,
        [Some("1000000u"), Some("600000u")],
        "the reload applies"
    );
}
