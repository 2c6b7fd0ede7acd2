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

/// The attribute set of one RPC.
pub(crate) fn attributes(profile: &str, service: &str, method: &str) -> [KeyValue; 3] {
    [
        KeyValue::new("profile", profile.to_owned()),
        KeyValue::new("service", service.to_owned()),
        KeyValue::new("method", method.to_owned()),
    ]
}
