//! SW4-002 §6: the two OpenTelemetry instruments after a mix of calls, their
//! Prometheus exposition, and the tracing span and events of each RPC.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{call, capture_events, connect, server, Metrics, Opts};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use sw4rm_timeouts::testing::Script;
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
const SUBMIT_TASK: &str = "/sw4rm.scheduler.SchedulerService/SubmitTask";
const DESCRIBE_TOOL: &str = "/sw4rm.tool.ToolService/DescribeTool";
const CALL_STREAM: &str = "/sw4rm.tool.ToolService/CallStream";

/// Short timeouts so a few calls time out quickly.
fn profiles() -> ProfileSet {
    ProfileSet::builder()
        .without_global()
        .min_timeout_ms("heartbeat", 50)
        .min_timeout_ms("task_submit", 50)
        .build()
        .unwrap()
}

fn set(ms: u64) -> Opts {
    Opts {
        set_timeout: Some(Duration::from_millis(ms)),
        ..Opts::default()
    }
}

/// 3 heartbeats (1 times out), 2 SubmitTask (1 clamped up and times out),
/// 2 DescribeTool (1 clamped), 1 stream: 8 calls, 2 timeouts.
async fn mixed_calls(layer: TimeoutProfileLayer) {
    let server = server().await;
    let sw4rm = connect(&server, layer).await;
    call(&sw4rm, HEARTBEAT, Opts::default()).await.unwrap();
    call(&sw4rm, HEARTBEAT, set(2_000)).await.unwrap();
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    call(&sw4rm, HEARTBEAT, set(100)).await.unwrap_err();
    call(&sw4rm, SUBMIT_TASK, Opts::default()).await.unwrap();
    server
        .script("SubmitTask", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    call(&sw4rm, SUBMIT_TASK, set(10)).await.unwrap_err(); // clamped to 50 ms, then times out
    call(&sw4rm, DESCRIBE_TOOL, Opts::default()).await.unwrap();
    call(&sw4rm, DESCRIBE_TOOL, set(600_000)).await.unwrap(); // clamped to 60 s
    call(&sw4rm, CALL_STREAM, Opts::default()).await.unwrap();
}

#[tokio::test]
async fn instruments_count_every_call_and_each_timeout_once() {
    let metrics = Metrics::new();
    mixed_calls(TimeoutProfileLayer::new(profiles()).with_meter_provider(&metrics.provider)).await;
    let points = metrics.points();

    let durations: Vec<_> = points
        .iter()
        .filter(|p| p.name == "sw4rm_rpc_duration_ms")
        .collect();
    assert_eq!(
        durations.iter().map(|p| p.value).sum::<u64>(),
        8,
        "one duration per call"
    );
    for (method, profile, service, calls) in [
        (
            "Heartbeat",
            "heartbeat",
            "sw4rm.registry.RegistryService",
            3,
        ),
        (
            "SubmitTask",
            "task_submit",
            "sw4rm.scheduler.SchedulerService",
            2,
        ),
        ("DescribeTool", "message_route", "sw4rm.tool.ToolService", 2),
        ("CallStream", "tool_call", "sw4rm.tool.ToolService", 1),
    ] {
        let p = durations
            .iter()
            .find(|p| p.attrs["method"] == method)
            .unwrap();
        let keys: Vec<_> = p.attrs.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["method", "profile", "service"],
            "attributes are exactly these"
        );
        assert_eq!(
            (
                p.attrs["profile"].as_str(),
                p.attrs["service"].as_str(),
                p.value
            ),
            (profile, service, calls)
        );
    }
    // Every route called has its timeout counter (at 0 until its first timeout).
    let timeouts: Vec<_> = points
        .iter()
        .filter(|p| p.name == "sw4rm_rpc_timeout_total" && p.value > 0)
        .collect();
    let mut by_method: Vec<_> = timeouts
        .iter()
        .map(|p| {
            (
                p.attrs["method"].as_str(),
                p.attrs["profile"].as_str(),
                p.value,
            )
        })
        .collect();
    by_method.sort();
    assert_eq!(
        by_method,
        [
            ("Heartbeat", "heartbeat", 1),
            ("SubmitTask", "task_submit", 1)
        ]
    );
}

/// The two SW4-002 families, under exactly their names.
fn assert_exact_names(text: &str) {
    for family in [
        "# TYPE sw4rm_rpc_timeout_total counter",
        "# TYPE sw4rm_rpc_duration_ms histogram",
    ] {
        assert!(text.contains(family), "{family} in {text}");
    }
}

#[tokio::test]
async fn prometheus_exposition_uses_the_exact_names() {
    // The one documented path, with the re-exported types only.
    let registry = sw4rm_timeouts::metrics::Registry::new();
    let provider = sw4rm_timeouts::metrics::prometheus_provider(registry.clone()).unwrap();
    mixed_calls(TimeoutProfileLayer::new(profiles()).with_meter_provider(&provider)).await;

    let text = sw4rm_timeouts::metrics::render(&[&registry]);
    assert_exact_names(&text);
    assert!(
        text.contains(
            "sw4rm_rpc_timeout_total{method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "sw4rm_rpc_duration_ms_count{method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\"} 3"
        ),
        "{text}"
    );
    assert!(text.contains("sw4rm_rpc_duration_ms_bucket{method=\"CallStream\",profile=\"tool_call\",service=\"sw4rm.tool.ToolService\",le=\"3600000\"} 1"), "{text}");
    assert!(
        !text.contains("_total_total") && !text.contains("_milliseconds"),
        "{text}"
    );
}

#[tokio::test]
async fn each_rpc_has_a_span_and_timeouts_and_clamps_warn() {
    let server = server().await;
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    let sw4rm = connect(
        &server,
        TimeoutProfileLayer::new(profiles()).without_metrics(),
    )
    .await;
    let (events, _guard) = capture_events();
    call(&sw4rm, HEARTBEAT, set(10)).await.unwrap_err();

    let clamp = events.with_message("clamped to the profile's bounds");
    assert_eq!(clamp.len(), 1);
    assert_eq!(
        (
            clamp[0]["requested_ms"].as_str(),
            clamp[0]["effective_ms"].as_str(),
            clamp[0]["bound"].as_str(),
            clamp[0]["source"].as_str()
        ),
        ("10", "50", "min", "per_call")
    );
    // The bound that clamped came from the client builder.
    assert_eq!(clamp[0]["bound_source"], "client");
    assert_eq!(
        (clamp[0]["span"].as_str(), clamp[0]["span.method"].as_str()),
        ("sw4rm_rpc", "Heartbeat")
    );
    let timeout = events.with_message("SW4RM RPC timed out");
    assert_eq!(timeout.len(), 1);
    let t = &timeout[0];
    assert_eq!(t["level"], "WARN");
    // Inside an enabled span the event leaves the call's names to the span, so a log
    // line says each once (under a disabled span it names them itself:
    // `a_warning_names_the_call_once_at_any_level`).
    for k in ["service", "method", "profile"] {
        assert_eq!(t.get(k), None, "{k} in {t:?}");
    }
    for (k, v) in [
        ("configured_timeout_ms", "50"),
        ("phase", "total"),
        ("source", "per_call"),
        // The span of the RPC, for correlation in users' subscribers.
        ("span", "sw4rm_rpc"),
        ("span.service", "sw4rm.registry.RegistryService"),
        ("span.method", "Heartbeat"),
        ("span.profile", "heartbeat"),
        ("span.timeout_ms", "50"),
        ("span.streaming", "false"),
    ] {
        assert_eq!(t.get(k).map(String::as_str), Some(v), "{k} in {t:?}");
    }
    assert!(t["elapsed_ms"].parse::<u64>().unwrap() >= 50);
}

/// A path outside the routing table uses the fallback profile, is logged once per
/// path at debug level, and still gets metrics with its own service and method.
#[tokio::test]
async fn unknown_paths_are_logged_once_and_measured() {
    let server = server().await;
    let metrics = Metrics::new();
    let channel = tonic::transport::Endpoint::from_shared(server.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles()).with_meter_provider(&metrics.provider);
    let mut grpc =
        tonic::client::Grpc::new(tower::ServiceBuilder::new().layer(layer).service(channel));
    let (events, _guard) = capture_events();
    for _ in 0..3 {
        grpc.ready().await.unwrap();
        let codec = tonic_prost::ProstCodec::<(), ()>::default();
        let path = http::uri::PathAndQuery::from_static("/acme.Unknown/Do");
        let status = grpc
            .unary(tonic::Request::new(()), path, codec)
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unimplemented);
    }
    let logged = events.with_message("outside the routing table");
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(
        (logged[0]["level"].as_str(), logged[0]["profile"].as_str()),
        ("DEBUG", "universal")
    );
    let p = metrics
        .points()
        .into_iter()
        .find(|p| p.name == "sw4rm_rpc_duration_ms")
        .unwrap();
    assert_eq!(
        (
            p.attrs["profile"].as_str(),
            p.attrs["service"].as_str(),
            p.attrs["method"].as_str(),
            p.value
        ),
        ("universal", "acme.Unknown", "Do", 3)
    );
    assert_eq!(server.calls().len(), 0);
}

#[tokio::test]
async fn the_apps_own_metrics_keep_their_names_beside_ours() {
    use opentelemetry::metrics::MeterProvider;
    let registry = prometheus::Registry::new();
    let ours = sw4rm_timeouts::metrics::prometheus_provider(registry.clone()).unwrap();
    // The application's own provider, with the exporter's default naming.
    let app_registry = prometheus::Registry::new();
    let app_exporter = opentelemetry_prometheus::exporter()
        .with_registry(app_registry.clone())
        .without_target_info()
        .build()
        .unwrap();
    let app = SdkMeterProvider::builder()
        .with_reader(app_exporter)
        .build();
    let jobs = app.meter("app").u64_counter("jobs").with_unit("ms").build();
    jobs.add(1, &[]);
    mixed_calls(TimeoutProfileLayer::new(profiles()).with_meter_provider(&ours)).await;

    let text = sw4rm_timeouts::metrics::render(&[&registry, &app_registry]);
    assert_exact_names(&text);
    assert!(
        text.contains("# TYPE jobs_milliseconds_total counter"),
        "{text}"
    );
    assert!(!text.contains("_total_total"), "{text}");
}

/// The `sw4rm_rpc` span is entered while the call is polled: what the service under
/// the layer logs during the call (the transport, an interceptor) is correlated to it.
#[tokio::test]
async fn events_below_the_layer_are_inside_the_rpc_span() {
    use tower::{Layer, Service, ServiceExt};

    let (events, _guard) = common::capture_events();
    let inner = tower::service_fn(|_req: http::Request<tonic::body::Body>| async {
        tokio::task::yield_now().await; // polled again by the layer's future
        tracing::info!("below the layer, while the call is polled");
        Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
    });
    let mut svc = TimeoutProfileLayer::standard()
        .with_span_level(tracing::Level::INFO)
        .layer(inner);
    let req = http::Request::builder()
        .uri("http://agent/sw4rm.registry.RegistryService/Heartbeat")
        .body(tonic::body::Body::empty())
        .unwrap();
    svc.ready().await.unwrap().call(req).await.unwrap();
    let seen = events.with_message("below the layer");
    assert_eq!(seen.len(), 1, "{:?}", events.all());
    assert_eq!(
        (seen[0]["span"].as_str(), seen[0]["span.method"].as_str()),
        ("sw4rm_rpc", "Heartbeat")
    );
}

/// What a person reads: a timeout warning names the service, method and profile once,
/// whether the `sw4rm_rpc` span is enabled (DEBUG, where the span's own fields are
/// printed too) or not (INFO).
#[tokio::test]
async fn a_warning_names_the_call_once_at_any_level() {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let server = server().await;
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(5)))
        .unwrap();
    let sw4rm = common::connect(
        &server,
        TimeoutProfileLayer::new(profiles()).without_metrics(),
    )
    .await;
    for level in [tracing::Level::DEBUG, tracing::Level::INFO] {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let guard = tracing::subscriber::set_default(subscriber);
        call(&sw4rm, HEARTBEAT, set(10)).await.unwrap_err();
        drop(guard);
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("SW4RM RPC timed out"))
            .unwrap_or_else(|| panic!("{level}: {text}"));
        // Once each, in the span's fields (DEBUG) or the event's own (INFO).
        for field in ["service=", " method=", "profile="] {
            assert_eq!(line.matches(field).count(), 1, "{level}: {field} in {line}");
        }
        // The call's name: once; with the feature `otel` the span also carries it in
        // OpenTelemetry's `otel.name` and `rpc.method`.
        let names = match cfg!(feature = "otel") && level == tracing::Level::DEBUG {
            true => 3,
            false => 1,
        };
        for name in ["RegistryService", "Heartbeat"] {
            assert_eq!(
                line.matches(name).count(),
                names,
                "{level}: {name} in {line}"
            );
        }
        let clamp = text
            .lines()
            .find(|l| l.contains("clamped to the profile's bounds"))
            .unwrap_or_else(|| panic!("{level}: {text}"));
        assert_eq!(clamp.matches(" method=").count(), 1, "{level}: {clamp}");
    }
}
