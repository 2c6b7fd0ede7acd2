//! One call path, whatever the log level and however the call was planned: a property
//! test over scripted plays × how the caller ends the call × the layer's settings.
//! Each case runs four times — planned by its route's plan (the common call) or
//! planned apart (as a call with a value of its own is), each under a subscriber at
//! `INFO` (the call's span off) and at `DEBUG` (on) — and every observable is the
//! same in all four: the caller's answer or status (details and `sw4rm-attempts`
//! included), how the body ended, the attempts the server saw and when each was
//! dropped, the time taken, the metrics, the advisor's observations, the retry
//! budget, and the `INFO` and `WARN` events (with the call's names, which an enabled
//! span carries and a disabled one leaves to the event).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use http_body_util::BodyExt;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use proptest::prelude::*;
use tokio::time::Instant;
use tower::{Service, ServiceExt};
use tower_layer::Layer;
use tracing_subscriber::layer::SubscriberExt;

use crate::testing::{Play, Scripted};
use crate::timeout::service::PLANNED_APART;
use crate::MetricFamily;
use crate::{ProfileSet, RetryPolicy, TimeoutProfileLayer};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
type Request = http::Request<tonic::body::Body>;

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

/// An inner service that is not ready at the first ask of each call (it wakes the
/// caller at once), as a tonic channel whose buffer is full for a moment.
#[derive(Clone)]
struct NotReadyAtFirst {
    inner: Scripted,
    refusals: Arc<AtomicUsize>,
}

impl Service<Request> for NotReadyAtFirst {
    type Response = <Scripted as Service<Request>>::Response;
    type Error = <Scripted as Service<Request>>::Error;
    type Future = <Scripted as Service<Request>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let refuse = self
            .refusals
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if refuse.is_ok() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        self.inner.call(request)
    }
}

/// Records every event of the crate at `INFO` or above, with the call's names from
/// its span when the span is on.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

struct Names(BTreeMap<String, String>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S> tracing_subscriber::Layer<S> for Events
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        fields.retain(|k, _| ["service", "method", "profile"].contains(&k.as_str()));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Names(fields));
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() > tracing::Level::INFO || !meta.target().starts_with("sw4rm_timeouts") {
            return;
        }
        let mut fields = BTreeMap::new();
        for span in ctx
            .event_scope(event)
            .into_iter()
            .flat_map(|s| s.from_root())
        {
            if let Some(names) = span.extensions().get::<Names>() {
                fields.extend(names.0.clone());
            }
        }
        event.record(&mut Fields(&mut fields));
        let line = format!("{} {fields:?}", meta.level());
        self.0.lock().unwrap().push(line);
    }
}

fn status(err: crate::BoxError) -> String {
    let status = tonic::Status::from_error(err);
    described(&status)
}

fn described(status: &tonic::Status) -> String {
    let attempts = status.metadata().get("sw4rm-attempts").cloned();
    let timeout = crate::TimeoutDetails::from_status(status);
    let cancel = crate::wire::cancel::CancelDetails::from_status(status);
    format!(
        "{:?} {} {timeout:?} {cancel:?} {attempts:?}",
        status.code(),
        status.message(),
    )
}

fn metrics(provider: &SdkMeterProvider, exporter: &InMemoryMetricExporter) -> Vec<String> {
    provider.force_flush().unwrap();
    let exported = exporter.get_finished_metrics().unwrap();
    let mut out = Vec::new();
    for scope in exported.last().iter().flat_map(|m| m.scope_metrics()) {
        for metric in scope.metrics() {
            let name = metric.name();
            let attrs = |a: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                let mut a: Vec<String> = a.map(|kv| format!("{}={}", kv.key, kv.value)).collect();
                a.sort();
                a.join(",")
            };
            match metric.data() {
                AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                    for p in sum.data_points() {
                        out.push(format!(
                            "{name} {} {}",
                            attrs(&mut p.attributes()),
                            p.value()
                        ));
                    }
                }
                AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                    for p in h.data_points() {
                        let (count, sum) = (p.count(), p.sum());
                        out.push(format!(
                            "{name} {} {count} {sum}",
                            attrs(&mut p.attributes())
                        ));
                    }
                }
                AggregatedMetrics::I64(MetricData::Gauge(g)) => {
                    for p in g.data_points() {
                        out.push(format!(
                            "{name} {} {}",
                            attrs(&mut p.attributes()),
                            p.value()
                        ));
                    }
                }
                other => out.push(format!("{name} {other:?}")),
            }
        }
    }
    out.sort();
    out
}

/// Reads a body to its end: its trailers' status, or its error.
async fn read(
    body: &mut crate::timeout::TimeoutBody<tonic::body::Body>,
) -> Result<Option<String>, String> {
    let mut code = None;
    while let Some(frame) = body.frame().await {
        match frame {
            Err(err) => return Err(status(err)),
            Ok(frame) => {
                if let Some(trailers) = frame.trailers_ref() {
                    code = trailers
                        .get("grpc-status")
                        .map(|v| v.to_str().unwrap_or("?").to_owned());
                    break;
                }
            }
        }
    }
    Ok(code)
}

type Svc = crate::TimeoutProfileService<NotReadyAtFirst>;

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
    let budget = crate::RetryBudget::new(10).with_token_ratio(0.5);
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
            refusals,
        });
        calls.push(one_call(&mut svc, &inner, then).await);
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
        Then::Wait | Then::Trailers(_) | Then::ServerTimeout => plays
            .first()
            .is_some_and(|p| format!("{p:?}").contains("fed: true")),
        _ => true,
    }
}

/// Every way gives the same observables.
fn alike(plays: Vec<Play>, then: Then, settings: Settings) -> Result<(), TestCaseError> {
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
    Ok(())
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
    let cases: &[(&[Play], Then)] = &[
        (&[Play::answer()], Then::Read),
        (&[Play::answer().after(ms(40))], Then::Read),
        (&[unavailable, Play::answer()], Then::Read),
        (&[unavailable], Then::Read),
        (
            &[Play::answer().status(tonic::Code::InvalidArgument)],
            Then::Read,
        ),
        (&[Play::hang(), Play::answer()], Then::Read),
        (&[Play::hang()], Then::Read),
        (&[Play::answer().fed()], Then::Wait),
        (&[Play::answer().fed()], Then::Trailers(0)),
        (&[Play::answer().fed()], Then::Trailers(13)),
        (&[Play::answer().fed()], Then::ServerTimeout),
        (&[Play::answer().fed()], Then::DropBody),
        (&[Play::hang()], Then::DropCall),
        (&[Play::hang()], Then::Cancel),
    ];
    for (plays, then) in cases {
        alike(plays.to_vec(), *then, settings).unwrap();
    }
}
