//! The way to Prometheus: a meter provider whose exposition keeps the SW4RM names
//! exactly, and the text exposition of registries (feature `prometheus`).

/// The Prometheus registry [`prometheus_provider`] exports to and [`render`] reads,
/// re-exported so that no `prometheus` dependency of your own (at a matching version)
/// is needed (feature `prometheus`).
pub use prometheus::{Registry, TEXT_FORMAT};

/// The meter provider [`prometheus_provider`] returns (OpenTelemetry SDK's), re-exported
/// for the same reason as [`Registry`] (feature `prometheus`).
pub use opentelemetry_sdk::metrics::SdkMeterProvider;

/// The exporter behind [`prometheus_provider`]. Every metric recorded through a
/// provider reading from it loses its unit and `_total` suffixes: give it the SW4RM
/// layer alone, as `prometheus_provider` does.
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
