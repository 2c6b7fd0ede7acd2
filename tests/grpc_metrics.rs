//! gRPC's own client metrics (gRFC A66 per attempt, A96 per call) and the
//! configured-timeout gauge, opt-in families, read from a real Prometheus exposition
//! of real calls on loopback: names, labels, buckets and values; units from the
//! OpenTelemetry data; nothing of them when they are off.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{call, connect, server, Metrics, Opts};
use sw4rm_timeouts::metrics;

/// gRFC A66's latency buckets, in seconds, as the gRFC lists them.
const A66_LATENCY_BOUNDARIES_S: [f64; 41] = [
    0.0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003, 0.004, 0.005,
    0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.13, 0.16,
    0.2, 0.25, 0.3, 0.4, 0.5, 0.65, 0.8, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0,
];
use sw4rm_timeouts::testing::Script;
use sw4rm_timeouts::{HedgingPolicy, MetricFamily, ProfileSet, RetryPolicy, TimeoutProfileLayer};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";

/// Heartbeats retried up to 4 attempts, 20 ms apart at first.
fn profiles() -> ProfileSet {
    let policy = RetryPolicy::builder()
        .max_attempts(4)
        .initial_backoff(Duration::from_millis(20))
        .build()
        .unwrap();
    ProfileSet::builder()
        .without_global()
        .retry("heartbeat", policy)
        .build()
        .unwrap()
}

fn with_families(layer: TimeoutProfileLayer) -> TimeoutProfileLayer {
    layer
        .with_metric_family(MetricFamily::GrpcAttempts)
        .with_metric_family(MetricFamily::GrpcRetries)
        .with_metric_family(MetricFamily::ConfiguredTimeouts)
}

/// The samples of `name` (exactly; `_bucket`, `_sum`, `_count` are names too) whose
/// labels include every one of `labels`: (labels as written, value).
fn samples(text: &str, name: &str, labels: &[&str]) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, "}"));
            if metric != name || !labels.iter().all(|want| rest.contains(want)) {
                return None;
            }
            Some((rest.trim_end_matches('}').to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn one(text: &str, name: &str, labels: &[&str]) -> f64 {
    let found = samples(text, name, labels);
    assert_eq!(found.len(), 1, "{name} {labels:?} in:\n{text}");
    found[0].1
}

/// The `le` labels of a histogram's buckets.
fn buckets(text: &str, name: &str, labels: &[&str]) -> BTreeSet<String> {
    samples(text, &format!("{name}_bucket"), labels)
        .into_iter()
        .filter_map(|(l, _)| {
            let at = l.find("le=\"")? + 4;
            Some(l[at..].split('"').next()?.to_owned())
        })
        .collect()
}

fn le_set(bounds: &[f64]) -> BTreeSet<String> {
    let mut set: BTreeSet<String> = bounds.iter().map(|b| b.to_string()).collect();
    set.insert("+Inf".into());
    set
}

#[tokio::test]
async fn a_retried_call_in_the_exposition() {
    let server = server().await;
    server
        .script("Heartbeat", Script::fail_first(2, tonic::Code::Unavailable))
        .unwrap();
    let registry = metrics::Registry::new();
    let provider = metrics::prometheus_provider(registry.clone()).unwrap();
    let layer = with_families(TimeoutProfileLayer::new(profiles()).with_meter_provider(&provider));
    let sw4rm = connect(&server, layer).await;
    call(&sw4rm, HEARTBEAT, Opts::default())
        .await
        .expect("third attempt answers");
    let text = metrics::render(&[&registry]);
    let method = "grpc_method=\"sw4rm.registry.RegistryService/Heartbeat\"";
    // The endpoint as the channel was given it (its URI form).
    let target = format!("grpc_target=\"{}/\"", server.url().trim_end_matches('/'));

    // A66: three attempts, two UNAVAILABLE and one OK, on A66's latency buckets.
    assert_eq!(
        one(&text, "grpc_client_attempt_started", &[method, &target]),
        3.0
    );
    let status = |s: &str| format!("grpc_status=\"{s}\"");
    let unavailable = status("UNAVAILABLE");
    assert_eq!(
        one(
            &text,
            "grpc_client_attempt_duration_count",
            &[method, &unavailable]
        ),
        2.0
    );
    assert_eq!(
        one(
            &text,
            "grpc_client_attempt_duration_count",
            &[method, &status("OK")]
        ),
        1.0
    );
    assert_eq!(
        buckets(&text, "grpc_client_attempt_duration", &[&status("OK")]),
        le_set(&A66_LATENCY_BOUNDARIES_S)
    );

    // A96: one call with 2 retries, on buckets 1-5; its backoffs as the delay.
    assert_eq!(
        one(&text, "grpc_client_call_retries_count", &[method, &target]),
        1.0
    );
    assert_eq!(one(&text, "grpc_client_call_retries_sum", &[method]), 2.0);
    assert_eq!(
        one(
            &text,
            "grpc_client_call_retries_bucket",
            &[method, "le=\"1\""]
        ),
        0.0
    );
    assert_eq!(
        one(
            &text,
            "grpc_client_call_retries_bucket",
            &[method, "le=\"2\""]
        ),
        1.0
    );
    assert_eq!(
        buckets(&text, "grpc_client_call_retries", &[method]),
        le_set(&[1.0, 2.0, 3.0, 4.0, 5.0])
    );
    assert_eq!(
        one(&text, "grpc_client_call_retry_delay_count", &[method]),
        1.0
    );
    let delay = one(&text, "grpc_client_call_retry_delay_sum", &[method]);
    assert!(
        delay > 0.0 && delay < 1.0,
        "two backoffs of about 20 ms: {delay}"
    );
    // Nothing hedged, nothing retried transparently: nothing recorded.
    assert!(samples(&text, "grpc_client_call_hedges_count", &[]).is_empty());
    assert!(samples(&text, "grpc_client_call_transparent_retries_count", &[]).is_empty());

    // The configured timeouts, every profile's three bounds.
    let gauge = "sw4rm_rpc_configured_timeout_ms";
    let heartbeat = "profile=\"heartbeat\"";
    assert_eq!(
        one(&text, gauge, &[heartbeat, "bound=\"default\""]),
        5_000.0
    );
    assert_eq!(one(&text, gauge, &[heartbeat, "bound=\"min\""]), 1_000.0);
    assert_eq!(one(&text, gauge, &[heartbeat, "bound=\"max\""]), 30_000.0);
    let profiles = ProfileSet::standard().profiles().count();
    assert_eq!(
        samples(&text, gauge, &["bound=\"default\""]).len(),
        profiles
    );
}

#[tokio::test]
async fn the_gauge_follows_a_reload_and_the_units_are_grpcs() {
    let metrics = Metrics::new();
    let layer =
        with_families(TimeoutProfileLayer::new(profiles()).with_meter_provider(&metrics.provider));
    let (layer, handle) = layer.reloadable();
    let server = server().await;
    let sw4rm = connect(&server, layer).await;
    call(&sw4rm, HEARTBEAT, Opts::default()).await.unwrap();
    handle.reload(
        ProfileSet::builder()
            .without_global()
            .default_timeout_ms("heartbeat", 2_000)
            .build()
            .unwrap(),
    );
    let default = metrics
        .points()
        .into_iter()
        .find(|p| {
            p.name == metrics::CONFIGURED_TIMEOUT_MS
                && p.attrs.get("profile").map(String::as_str) == Some("heartbeat")
                && p.attrs.get("bound").map(String::as_str) == Some("default")
        })
        .expect("gauge point");
    assert_eq!(default.value, 2_000);
    metrics.provider.force_flush().unwrap();
    let exported = metrics.exporter.get_finished_metrics().unwrap();
    let units: Vec<(String, String)> = exported
        .last()
        .unwrap()
        .scope_metrics()
        .flat_map(|s| s.metrics())
        .map(|m| (m.name().to_owned(), m.unit().to_owned()))
        .collect();
    for (name, unit) in [
        ("grpc.client.attempt.started", "{attempt}"),
        ("grpc.client.attempt.duration", "s"),
        (metrics::CONFIGURED_TIMEOUT_MS, "ms"),
    ] {
        assert!(
            units.contains(&(name.to_owned(), unit.to_owned())),
            "{name} in {unit}: {units:?}"
        );
    }
}

#[tokio::test]
async fn off_they_record_nothing() {
    let server = server().await;
    server
        .script("Heartbeat", Script::fail_first(1, tonic::Code::Unavailable))
        .unwrap();
    let registry = metrics::Registry::new();
    let provider = metrics::prometheus_provider(registry.clone()).unwrap();
    let layer = TimeoutProfileLayer::new(profiles()).with_meter_provider(&provider);
    let sw4rm = connect(&server, layer).await;
    call(&sw4rm, HEARTBEAT, Opts::default()).await.unwrap();
    let text = metrics::render(&[&registry]);
    assert!(text.contains("sw4rm_rpc_retries_total"), "{text}");
    for absent in ["grpc_client", "sw4rm_rpc_configured_timeout_ms"] {
        assert!(!text.contains(absent), "{absent} in:\n{text}");
    }
}

#[tokio::test]
async fn a_hedge_that_failed_non_fatally_ends_with_its_own_status() {
    let server = server().await;
    // The first attempt answers UNAVAILABLE (non-fatal): the hedge goes out at once
    // and answers OK.
    server
        .script("Heartbeat", Script::fail_first(1, tonic::Code::Unavailable))
        .unwrap();
    let policy = HedgingPolicy::builder()
        .max_attempts(2)
        .delay(Duration::from_secs(10))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .hedging("heartbeat", policy)
        .build()
        .unwrap();
    let registry = metrics::Registry::new();
    let provider = metrics::prometheus_provider(registry.clone()).unwrap();
    let layer = with_families(TimeoutProfileLayer::new(profiles).with_meter_provider(&provider));
    let sw4rm = connect(&server, layer).await;
    call(&sw4rm, HEARTBEAT, Opts::default())
        .await
        .expect("the hedge answers");
    assert_eq!(server.calls_to("Heartbeat").len(), 2);
    let text = metrics::render(&[&registry]);
    let method = "grpc_method=\"sw4rm.registry.RegistryService/Heartbeat\"";
    let count = |status: &str| {
        samples(
            &text,
            "grpc_client_attempt_duration_count",
            &[method, &format!("grpc_status=\"{status}\"")],
        )
        .iter()
        .map(|(_, v)| *v)
        .sum::<f64>()
    };
    assert_eq!(count("UNAVAILABLE"), 1.0, "{text}");
    assert_eq!(count("OK"), 1.0, "{text}");
    assert_eq!(count("CANCELLED"), 0.0, "{text}");
    assert_eq!(one(&text, "grpc_client_call_hedges_sum", &[method]), 1.0);
}
