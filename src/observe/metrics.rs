//! SW4-002 §6 metrics through OpenTelemetry: `sw4rm_rpc_timeout_total` (counter) and
//! `sw4rm_rpc_duration_ms` (histogram), both with the attributes `profile`,
//! `service` (full gRPC name) and `method`; and, opt-in per layer, the families other
//! dashboards expect ([`MetricFamily`]).

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::{Counter, Histogram, Meter, MeterProvider};
use opentelemetry::KeyValue;
use tonic::Code;

use crate::wire::status::code_name;

/// Name of the timeout counter.
pub const TIMEOUT_TOTAL: &str = "sw4rm_rpc_timeout_total";
/// Name of the duration histogram (milliseconds).
pub const DURATION_MS: &str = "sw4rm_rpc_duration_ms";
/// Name of the retry counter: attempts sent after the first, beside the two SW4-002
/// metrics (the duration keeps one point per call, the timeout counter counts a call
/// once, however many attempts it made).
pub const RETRIES_TOTAL: &str = "sw4rm_rpc_retries_total";
/// Name of the hedge counter: hedged attempts sent after the first (gRPC A6 hedging).
pub const HEDGES_TOTAL: &str = "sw4rm_rpc_hedges_total";
/// Name of the counter of hedged calls whose answer came from a hedge, not the first
/// attempt.
pub const HEDGE_WINS_TOTAL: &str = "sw4rm_rpc_hedge_wins_total";
/// Name of the counter of calls cancelled by their scope (the caller of the inbound
/// call went away, a budget or a delegation was cancelled), with a `cause` attribute
/// beside the three of every SW4RM metric. Kept apart from the timeout counter, which
/// counts timeouts only.
pub const CANCELLED_TOTAL: &str = "sw4rm_rpc_cancelled_total";
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

/// Name of SW4-003's duration histogram (seconds).
pub const DURATION_SECONDS: &str = "sw4rm_rpc_duration_seconds";
/// Name of SW4-003's call counter, with a `status` attribute.
pub const REQUESTS_TOTAL: &str = "sw4rm_rpc_requests_total";
/// Name of OpenTelemetry's RPC client duration histogram (seconds).
pub const RPC_CLIENT_CALL_DURATION: &str = "rpc.client.call.duration";

/// A family of metrics a layer can emit in addition to SW4-002's
/// (`TimeoutProfileLayer::with_metric_family`). Each records one point per call, with
/// the call's final gRPC status by its canonical name (`OK`, `DEADLINE_EXCEEDED`, …;
/// a call the caller dropped counts as `CANCELLED`).
///
/// ```
/// use sw4rm_timeouts::{MetricFamily, TimeoutProfileLayer};
/// let layer = TimeoutProfileLayer::standard()
///     .with_metric_family(MetricFamily::Sw4003)
///     .with_metric_family(MetricFamily::OpenTelemetryRpc);
/// # drop(layer);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MetricFamily {
    /// SW4RM's observability extension (SW4-003): `sw4rm_rpc_duration_seconds`
    /// (histogram; `profile`, `service`, `method`) and `sw4rm_rpc_requests_total`
    /// (counter; `profile`, `service`, `method`, `status`).
    Sw4003,
    /// OpenTelemetry's RPC semantic conventions: `rpc.client.call.duration` (histogram,
    /// seconds; `rpc.system.name` = `grpc`, `rpc.method` = `package.Service/Method`,
    /// `rpc.response.status_code`, and `error.type` = the status for every status but
    /// `OK`). Through `prometheus_provider` (feature `prometheus`) it is exposed as
    /// `rpc_client_call_duration`.
    OpenTelemetryRpc,
}

/// The attributes of one path, built once per path.
#[derive(Debug)]
pub(crate) struct Attributes {
    /// `profile`, `service`, `method`.
    sw4: [KeyValue; 3],
    /// OpenTelemetry's `rpc.method`.
    rpc_method: KeyValue,
}

/// The attribute sets of one path (shared strings: copying one allocates nothing).
pub(crate) fn attributes(profile: &str, service: Arc<str>, method: Arc<str>) -> Attributes {
    let rpc_method = Arc::<str>::from(format!("{service}/{method}"));
    Attributes {
        sw4: [
            KeyValue::new("profile", Arc::<str>::from(profile)),
            KeyValue::new("service", service),
            KeyValue::new("method", method),
        ],
        rpc_method: KeyValue::new("rpc.method", rpc_method),
    }
}

/// SW4-003's instruments.
#[derive(Clone, Debug)]
struct Sw4003 {
    duration: Histogram<f64>,
    requests: Counter<u64>,
}

/// The instruments.
#[derive(Clone, Debug)]
pub(crate) struct Instruments {
    meter: Meter,
    timeouts: Counter<u64>,
    duration: Histogram<f64>,
    retries: Counter<u64>,
    hedges: Counter<u64>,
    hedge_wins: Counter<u64>,
    cancelled: Counter<u64>,
    sw4_003: Option<Sw4003>,
    rpc_duration: Option<Histogram<f64>>,
}

/// Histogram bucket boundaries in seconds, for the families that measure in seconds:
/// [`DURATION_BOUNDARIES_MS`] divided by 1,000.
fn seconds_boundaries() -> Vec<f64> {
    DURATION_BOUNDARIES_MS
        .iter()
        .map(|ms| ms / 1_000.0)
        .collect()
}

impl Instruments {
    pub(crate) fn from_provider(provider: &impl MeterProvider) -> Self {
        Instruments::from_meter(provider.meter(METER_NAME))
    }

    pub(crate) fn from_global() -> Self {
        Instruments::from_meter(opentelemetry::global::meter(METER_NAME))
    }

    /// The same instruments on another provider, with the same families.
    pub(crate) fn on_provider(&self, provider: &impl MeterProvider) -> Self {
        let mut moved = Instruments::from_provider(provider);
        if self.sw4_003.is_some() {
            moved = moved.with_family(MetricFamily::Sw4003);
        }
        if self.rpc_duration.is_some() {
            moved = moved.with_family(MetricFamily::OpenTelemetryRpc);
        }
        moved
    }

    /// These instruments and the ones of `family`.
    pub(crate) fn with_family(mut self, family: MetricFamily) -> Self {
        match family {
            MetricFamily::Sw4003 => {
                self.sw4_003 = Some(Sw4003 {
                    duration: self
                        .meter
                        .f64_histogram(DURATION_SECONDS)
                        .with_description("Duration of SW4RM RPCs in seconds (SW4-003)")
                        .with_unit("s")
                        .with_boundaries(seconds_boundaries())
                        .build(),
                    requests: self
                        .meter
                        .u64_counter(REQUESTS_TOTAL)
                        .with_description("SW4RM RPCs by final gRPC status (SW4-003)")
                        .build(),
                });
            }
            MetricFamily::OpenTelemetryRpc => {
                self.rpc_duration = Some(
                    self.meter
                        .f64_histogram(RPC_CLIENT_CALL_DURATION)
                        .with_description(
                            "Measures the duration of outbound remote procedure calls.",
                        )
                        .with_unit("s")
                        .with_boundaries(seconds_boundaries())
                        .build(),
                );
            }
        }
        self
    }

    /// Whether a finished call's status code is needed (a family that records it is on).
    pub(crate) fn wants_status(&self) -> bool {
        self.sw4_003.is_some() || self.rpc_duration.is_some()
    }

    fn from_meter(meter: Meter) -> Self {
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
            hedges: meter
                .u64_counter(HEDGES_TOTAL)
                .with_description("SW4RM RPC hedges sent (attempts after the first)")
                .build(),
            hedge_wins: meter
                .u64_counter(HEDGE_WINS_TOTAL)
                .with_description("SW4RM RPCs answered by a hedge rather than the first attempt")
                .build(),
            cancelled: meter
                .u64_counter(CANCELLED_TOTAL)
                .with_description(
                    "SW4RM RPCs cancelled because the work they were made for was (SW4-004)",
                )
                .build(),
            meter,
            sw4_003: None,
            rpc_duration: None,
        }
    }

    /// Counts one retry.
    pub(crate) fn retried(&self, attrs: &Attributes) {
        self.retries.add(1, &attrs.sw4);
    }

    /// Counts one hedge sent.
    pub(crate) fn hedged(&self, attrs: &Attributes) {
        self.hedges.add(1, &attrs.sw4);
    }

    /// Counts one call answered by a hedge.
    pub(crate) fn hedge_won(&self, attrs: &Attributes) {
        self.hedge_wins.add(1, &attrs.sw4);
    }

    /// Counts one call cancelled by its scope, by `reason`.
    pub(crate) fn cancelled(&self, reason: crate::CancelReason, attrs: &Attributes) {
        let [profile, service, method] = &attrs.sw4;
        self.cancelled.add(
            1,
            &[
                profile.clone(),
                service.clone(),
                method.clone(),
                KeyValue::new("cause", reason.as_str()),
            ],
        );
    }

    /// Records one finished call (and the timeout, if it timed out); `code` is asked
    /// for only when a family that records the status is on.
    pub(crate) fn record(
        &self,
        elapsed: Duration,
        timed_out: bool,
        code: impl FnOnce() -> Code,
        attrs: &Attributes,
    ) {
        self.duration
            .record(elapsed.as_secs_f64() * 1_000.0, &attrs.sw4);
        if timed_out {
            self.timeouts.add(1, &attrs.sw4);
        }
        if !self.wants_status() {
            return;
        }
        let code = code();
        let status = code_name(code);
        let seconds = elapsed.as_secs_f64();
        if let Some(sw4_003) = &self.sw4_003 {
            sw4_003.duration.record(seconds, &attrs.sw4);
            let [profile, service, method] = &attrs.sw4;
            sw4_003.requests.add(
                1,
                &[
                    profile.clone(),
                    service.clone(),
                    method.clone(),
                    KeyValue::new("status", status),
                ],
            );
        }
        if let Some(rpc_duration) = &self.rpc_duration {
            let otel = [
                KeyValue::new("rpc.system.name", "grpc"),
                attrs.rpc_method.clone(),
                KeyValue::new("rpc.response.status_code", status),
                KeyValue::new("error.type", status),
            ];
            let n = if code == Code::Ok { 3 } else { 4 };
            rpc_duration.record(seconds, &otel[..n]);
        }
    }
}

/// The Prometheus registry [`prometheus_provider`] exports to and [`render`] reads,
/// re-exported so that no `prometheus` dependency of your own (at a matching version)
/// is needed (feature `prometheus`).
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub use prometheus::{Registry, TEXT_FORMAT};

/// The meter provider [`prometheus_provider`] returns (OpenTelemetry SDK's), re-exported
/// for the same reason as [`Registry`] (feature `prometheus`).
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub use opentelemetry_sdk::metrics::SdkMeterProvider;

/// The exporter behind [`prometheus_provider`]. Every metric recorded through a
/// provider reading from it loses its unit and `_total` suffixes: give it the SW4RM
/// layer alone, as `prometheus_provider` does.
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
#[deprecated(
    since = "0.1.0",
    note = "use `metrics::prometheus_provider(registry)`: the provider with this exporter, \
            for the SW4RM metrics alone"
)]
pub fn prometheus_exporter(
    registry: prometheus::Registry,
) -> Result<opentelemetry_prometheus::PrometheusExporter, opentelemetry_sdk::error::OTelSdkError> {
    exporter(registry)
}

/// An OpenTelemetry Prometheus exporter writing to `registry` with the exact names.
#[cfg(feature = "prometheus")]
fn exporter(
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

/// The one way to Prometheus: a meter provider for the SW4RM metrics alone,
/// exporting to `registry` so that the exposition shows exactly
/// `sw4rm_rpc_timeout_total` and `sw4rm_rpc_duration_ms` (no `_total` doubling, no
/// unit suffix, no scope or target labels: the only labels are `profile`, `service`
/// and `method`). Give it to [`crate::TimeoutProfileLayer::with_meter_provider`] and
/// serve [`render`]`(&[&registry])` on `/metrics`. [`Registry`] and
/// [`SdkMeterProvider`] are re-exported here: no `prometheus` or `opentelemetry_sdk`
/// dependency of your own is needed (feature `prometheus`).
///
/// Keep your application's own metrics on a provider and registry of their own (their
/// names then keep Prometheus' usual suffixes; two exporters cannot share a
/// `Registry`), and render both: `render(&[&ours, &yours])`.
///
/// ```
/// use sw4rm_timeouts::{metrics, ProfileSet, TimeoutProfileLayer};
/// let registry = metrics::Registry::new();
/// let provider = metrics::prometheus_provider(registry.clone())?;
/// let layer = TimeoutProfileLayer::new(ProfileSet::standard()).with_meter_provider(&provider);
/// let body = metrics::render(&[&registry]); // a /metrics response, content type metrics::TEXT_FORMAT
/// # drop((layer, body));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub fn prometheus_provider(
    registry: prometheus::Registry,
) -> Result<opentelemetry_sdk::metrics::SdkMeterProvider, opentelemetry_sdk::error::OTelSdkError> {
    let exporter = exporter(registry)?;
    Ok(opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(exporter)
        .build())
}

/// The Prometheus text exposition of everything in these registries (the body of a
/// `/metrics` response, content type [`TEXT_FORMAT`]); a metric family
/// that cannot be encoded is left out rather than failing the scrape
/// (feature `prometheus`).
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
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
