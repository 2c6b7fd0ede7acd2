//! SW4-002 §6 metrics through OpenTelemetry: `sw4rm_rpc_timeout_total` (counter) and
//! `sw4rm_rpc_duration_ms` (histogram), both with the attributes `profile`,
//! `service` (full gRPC name) and `method`.

use std::time::Duration;

use opentelemetry::metrics::{Counter, Histogram, Meter, MeterProvider};
use opentelemetry::KeyValue;

/// Name of the timeout counter.
pub const TIMEOUT_TOTAL: &str = "sw4rm_rpc_timeout_total";
/// Name of the duration histogram (milliseconds).
pub const DURATION_MS: &str = "sw4rm_rpc_duration_ms";
/// Name of the retry counter: attempts sent after the first, beside the two SW4-002
/// metrics (the duration keeps one point per call, the timeout counter counts a call
/// once, however many attempts it made).
pub const RETRIES_TOTAL: &str = "sw4rm_rpc_retries_total";
/// The instrumentation scope name.
pub const METER_NAME: &str = "sw4rm-timeouts";

/// Histogram bucket boundaries in ms: roughly 1-2.5-5 steps from 1 ms to 1 h, the
/// range of the SW4-002 profiles (heartbeat floor 1 s, tool/HITL ceiling 1 h), with
/// extra resolution around the common defaults (5 s, 10 s, 30 s, 60 s, 300 s).
pub const DURATION_BOUNDARIES_MS: [f64; 22] = [
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1_000.0,
    2_500.0,
    5_000.0,
    10_000.0,
    30_000.0,
    60_000.0,
    120_000.0,
    300_000.0,
    600_000.0,
    900_000.0,
    1_800_000.0,
    2_700_000.0,
    3_600_000.0,
];

/// The instruments.
#[derive(Clone, Debug)]
pub(crate) struct Instruments {
    timeouts: Counter<u64>,
    duration: Histogram<f64>,
    retries: Counter<u64>,
}

impl Instruments {
    pub(crate) fn from_provider(provider: &impl MeterProvider) -> Self {
        Instruments::from_meter(&provider.meter(METER_NAME))
    }

    pub(crate) fn from_global() -> Self {
        Instruments::from_meter(&opentelemetry::global::meter(METER_NAME))
    }

    fn from_meter(meter: &Meter) -> Self {
        Instruments {
            timeouts: meter
                .u64_counter(TIMEOUT_TOTAL)
                .with_description("SW4RM RPCs that exceeded their timeout profile (SW4-002)")
                .build(),
            duration: meter
                .f64_histogram(DURATION_MS)
                .with_description(
                    "Duration of SW4RM RPCs in milliseconds, by timeout profile (SW4-002)",
                )
                .with_unit("ms")
                .with_boundaries(DURATION_BOUNDARIES_MS.to_vec())
                .build(),
            retries: meter
                .u64_counter(RETRIES_TOTAL)
                .with_description("SW4RM RPC attempts sent after the first (SW4-002 §5.2)")
                .build(),
        }
    }

    /// Counts one retry.
    pub(crate) fn retried(&self, attrs: &[KeyValue]) {
        self.retries.add(1, attrs);
    }

    /// Records one finished call (and the timeout, if it timed out).
    pub(crate) fn record(&self, elapsed: Duration, timed_out: bool, attrs: &[KeyValue]) {
        self.duration.record(elapsed.as_secs_f64() * 1_000.0, attrs);
        if timed_out {
            self.timeouts.add(1, attrs);
        }
    }
}

/// An OpenTelemetry Prometheus exporter writing to `registry`, set up so that the
/// exposition shows exactly `sw4rm_rpc_timeout_total` and `sw4rm_rpc_duration_ms`:
/// no `_total` doubling, no unit suffix, no scope or target labels, so the only
/// labels are `profile`, `service` and `method` (feature `prometheus`).
///
/// These settings apply to every metric recorded through a provider reading from
/// this exporter: use it (or [`prometheus_provider`]) for the SW4RM layer only, and
/// keep your application's metrics on a provider of their own.
///
/// ```
/// use opentelemetry_sdk::metrics::SdkMeterProvider;
/// use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
/// let registry = prometheus::Registry::new();
/// let exporter = sw4rm_timeouts::metrics::prometheus_exporter(registry.clone()).unwrap();
/// let provider = SdkMeterProvider::builder().with_reader(exporter).build();
/// let layer = TimeoutProfileLayer::new(ProfileSet::standard()).with_meter_provider(&provider);
/// # drop(layer);
/// ```
#[cfg(feature = "prometheus")]
pub fn prometheus_exporter(
    registry: prometheus::Registry,
) -> Result<opentelemetry_prometheus::PrometheusExporter, opentelemetry_sdk::error::OTelSdkError> {
    opentelemetry_prometheus::exporter()
        .with_registry(registry)
        .without_counter_suffixes()
        .without_units()
        .without_target_info()
        .scope_info_enabled(false)
        .build()
}

/// A meter provider for the SW4RM metrics only, exporting to `registry` with the
/// exact names (see [`prometheus_exporter`]). Give it to
/// [`crate::TimeoutProfileLayer::with_meter_provider`] and keep your application's
/// own metrics on your own provider, exporter and registry, so that their names keep
/// Prometheus' usual unit and `_total` suffixes: the suffix-free settings apply to
/// our metrics only. (Two OpenTelemetry exporters cannot share one `Registry`.)
/// Then serve [`render`]`(&[&ours, &yours])` on `/metrics` (feature `prometheus`).
///
/// ```
/// use sw4rm_timeouts::{metrics, ProfileSet, TimeoutProfileLayer};
/// let sw4rm_registry = prometheus::Registry::new();
/// let provider = metrics::prometheus_provider(sw4rm_registry.clone()).unwrap();
/// let layer = TimeoutProfileLayer::new(ProfileSet::standard()).with_meter_provider(&provider);
/// let app_registry = prometheus::Registry::new(); // your own metrics
/// let text = metrics::render(&[&sw4rm_registry, &app_registry]); // a /metrics body
/// # drop((layer, text));
/// ```
#[cfg(feature = "prometheus")]
pub fn prometheus_provider(
    registry: prometheus::Registry,
) -> Result<opentelemetry_sdk::metrics::SdkMeterProvider, opentelemetry_sdk::error::OTelSdkError> {
    let exporter = prometheus_exporter(registry)?;
    Ok(opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(exporter)
        .build())
}

/// The Prometheus text exposition of everything in these registries (the body of a
/// `/metrics` response, content type [`prometheus::TEXT_FORMAT`]); a metric family
/// that cannot be encoded is left out rather than failing the scrape
/// (feature `prometheus`).
#[cfg(feature = "prometheus")]
pub fn render(registries: &[&prometheus::Registry]) -> String {
    use prometheus::Encoder;
    let encoder = prometheus::TextEncoder::new();
    let mut out = Vec::new();
    for family in registries.iter().flat_map(|r| r.gather()) {
        let mut one = Vec::new();
        if encoder
            .encode(std::slice::from_ref(&family), &mut one)
            .is_ok()
        {
            out.extend_from_slice(&one);
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

/// The attribute set of one RPC.
pub(crate) fn attributes(profile: &str, service: &str, method: &str) -> [KeyValue; 3] {
    [
        KeyValue::new("profile", profile.to_owned()),
        KeyValue::new("service", service.to_owned()),
        KeyValue::new("method", method.to_owned()),
    ]
}
