//! OTLP export (feature `otlp`): the layer's metrics and spans, pushed over gRPC to an
//! OpenTelemetry Collector (or any OTLP/gRPC receiver). See [`Otlp`]. Here the export
//! and its builder; `watched.rs` the exporters that remember their last failure;
//! `error.rs` what a failure says.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use opentelemetry_sdk::Resource;
use tokio::sync::oneshot;

mod error;
mod watched;

pub use error::OtlpError;
use watched::{LastFailure, Watched};

/// The endpoint used when none is given and `OTEL_EXPORTER_OTLP_ENDPOINT` is not
/// set: a Collector's OTLP/gRPC port on this host.
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4317";

/// How often metrics are pushed unless [`OtlpBuilder::metrics_interval`] says
/// otherwise (OpenTelemetry's own default).
pub const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(60);

/// How long one export may take unless [`OtlpBuilder::export_timeout`] says otherwise.
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Metrics and spans exported over OTLP/gRPC to a Collector: a meter provider to give
/// [`crate::TimeoutProfileLayer::with_meter_provider`], a `tracing` layer that turns
/// the layer's spans (and the application's) into OpenTelemetry spans, and the W3C
/// propagator for [`crate::TimeoutProfileLayer::with_trace_propagator`] and
/// [`crate::scope::InboundDeadlineLayer::with_trace_propagator`] (feature `otlp`).
///
/// The transport is tonic's, the stack every caller of this crate already builds:
/// no second HTTP client. Exports run on a thread and runtime of their own
/// (`sw4rm-otlp`), so they work under any runtime flavour and never block one of the
/// application's workers. `https://` endpoints need one of the crate's `tls-*`
/// features. Nothing is global: the application installs the tracing layer where it
/// builds its subscriber.
///
/// Await [`Otlp::shutdown`] before the process exits: it sends what is still
/// batched. Dropping an `Otlp` stops export without waiting for that.
///
/// ```no_run
/// use sw4rm_timeouts::otlp::Otlp;
/// use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
/// use tracing_subscriber::layer::SubscriberExt;
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let otlp = Otlp::builder("billing-agent")
///     .endpoint("http://otel-collector:4317")
///     .attribute("deployment.environment.name", "prod")
///     .start()?;
/// tracing::subscriber::set_global_default(
///     tracing_subscriber::registry().with(otlp.tracing_layer()),
/// )?;
/// let layer = TimeoutProfileLayer::new(ProfileSet::standard())
///     .with_meter_provider(otlp.meter_provider())
///     .with_trace_propagator(Otlp::propagator());
/// let sw4rm = Sw4rm::connect_with("http://registry:50051", layer).await?;
/// // … calls …
/// # drop(sw4rm);
/// otlp.shutdown().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping an Otlp stops the export; await `shutdown` to send what is left"]
pub struct Otlp {
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
    failed: Failed,
    stop: Option<oneshot::Sender<Stop>>,
}

/// How each signal's last export went.
#[derive(Debug, Clone, Default)]
struct Failed {
    /// The endpoint exported to, for the error's words.
    endpoint: std::sync::Arc<str>,
    spans: LastFailure,
    metrics: LastFailure,
}

impl Failed {
    /// The SDK's own verdict on a flush or shutdown, then the exports' (the SDK
    /// answers success for an export that failed).
    fn verdict(
        &self,
        traced: opentelemetry_sdk::error::OTelSdkResult,
        measured: opentelemetry_sdk::error::OTelSdkResult,
    ) -> Result<(), OtlpError> {
        let traced = traced
            .map_err(|e| e.to_string())
            .and_then(|()| self.spans.get().map_or(Ok(()), Err));
        let measured = measured
            .map_err(|e| e.to_string())
            .and_then(|()| self.metrics.get().map_or(Ok(()), Err));
        let to = &self.endpoint;
        traced
            .map_err(|e| OtlpError::export("spans", to, e))
            .and(measured.map_err(|e| OtlpError::export("metrics", to, e)))
    }
}

/// What the export thread is asked to do when it stops.
struct Stop {
    flush: bool,
    done: Option<oneshot::Sender<Result<(), OtlpError>>>,
}

/// How an [`Otlp`] export is set up: [`Otlp::builder`], then [`OtlpBuilder::start`].
#[derive(Debug, Clone)]
#[must_use = "an OtlpBuilder does nothing until `start`"]
pub struct OtlpBuilder {
    service_name: String,
    endpoint: Option<String>,
    attributes: Vec<KeyValue>,
    headers: Vec<(String, String)>,
    metrics_interval: Duration,
    export_timeout: Duration,
}

impl Otlp {
    /// An export for the service `service_name` (the resource's `service.name`, the
    /// name a trace backend shows for this agent).
    pub fn builder(service_name: impl Into<String>) -> OtlpBuilder {
        OtlpBuilder {
            service_name: service_name.into(),
            endpoint: None,
            attributes: Vec::new(),
            headers: Vec::new(),
            metrics_interval: DEFAULT_METRICS_INTERVAL,
            export_timeout: DEFAULT_EXPORT_TIMEOUT,
        }
    }

    /// The meter provider that exports: give it to
    /// [`crate::TimeoutProfileLayer::with_meter_provider`] (and to the application's
    /// own instruments, if it likes).
    pub fn meter_provider(&self) -> &SdkMeterProvider {
        &self.metrics
    }

    /// The tracer provider that exports, for spans made outside `tracing`.
    pub fn tracer_provider(&self) -> &SdkTracerProvider {
        &self.traces
    }

    /// A tracer of this export, named `sw4rm-timeouts`.
    pub fn tracer(&self) -> Tracer {
        self.traces.tracer("sw4rm-timeouts")
    }

    /// The `tracing` layer that turns spans into exported OpenTelemetry spans (the
    /// layer's `sw4rm_rpc` and `sw4rm_rpc_server` spans carry the names, kinds and
    /// attributes OpenTelemetry's RPC conventions give them).
    pub fn tracing_layer<S>(&self) -> tracing_opentelemetry::OpenTelemetryLayer<S, Tracer>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.tracer())
    }

    /// The W3C trace-context propagator (`traceparent`, `tracestate`), for both
    /// layers' `with_trace_propagator`.
    pub fn propagator() -> TraceContextPropagator {
        TraceContextPropagator::new()
    }

    /// Sends everything batched so far and waits until the receiver took it (or the
    /// export timeout passed), without blocking the caller's runtime.
    pub async fn flush(&self) -> Result<(), OtlpError> {
        let (traces, metrics) = (self.traces.clone(), self.metrics.clone());
        let failed = self.failed.clone();
        off_runtime(move || failed.verdict(traces.force_flush(), metrics.force_flush())).await
    }

    /// Sends what is left and stops the export (spans first, then a last push of the
    /// metrics), without blocking the caller's runtime.
    pub async fn shutdown(mut self) -> Result<(), OtlpError> {
        let (done, answer) = oneshot::channel();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Stop {
                flush: true,
                done: Some(done),
            });
        }
        answer.await.unwrap_or_else(|_| Err(OtlpError::stopped()))
    }
}

impl Drop for Otlp {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Stop {
                flush: false,
                done: None,
            });
        }
    }
}

impl fmt::Debug for Otlp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Otlp")
            .field("running", &self.stop.is_some())
            .finish_non_exhaustive()
    }
}

/// Runs blocking SDK work on a thread of its own and waits for it asynchronously.
/// The export thread's runtime until the thread runs it. Let go of anywhere else (the
/// providers refused, the thread not spawned: `start` returns on the caller's thread,
/// perhaps a runtime's worker), it shuts down without blocking, where a plain drop
/// would panic inside a runtime.
struct ExportRuntime(Option<tokio::runtime::Runtime>);

impl ExportRuntime {
    /// Runs `work` to its end on this thread (the export thread).
    fn run(mut self, work: impl std::future::Future<Output = ()>) {
        if let Some(runtime) = self.0.take() {
            runtime.block_on(work);
        }
    }
}

impl Drop for ExportRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

async fn off_runtime(
    work: impl FnOnce() -> Result<(), OtlpError> + Send + 'static,
) -> Result<(), OtlpError> {
    let (done, answer) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("sw4rm-otlp-flush".into())
        .spawn(move || {
            let _ = done.send(work());
        });
    if let Err(e) = spawned {
        return Err(OtlpError::thread(e));
    }
    answer.await.unwrap_or_else(|_| Err(OtlpError::stopped()))
}

impl OtlpBuilder {
    /// The receiver's OTLP/gRPC endpoint, such as `http://otel-collector:4317`.
    /// Without it: `OTEL_EXPORTER_OTLP_ENDPOINT` (and the per-signal variables
    /// OpenTelemetry defines), else [`DEFAULT_ENDPOINT`].
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// A resource attribute beside `service.name` (say `service.instance.id` or
    /// `deployment.environment.name`).
    pub fn attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attributes
            .push(KeyValue::new(key.into(), value.into()));
        self
    }

    /// A header sent with every export (a Collector's or a vendor's credentials, a
    /// tenant); checked at [`OtlpBuilder::start`].
    ///
    /// ```
    /// use sw4rm_timeouts::otlp::Otlp;
    /// let refused = Otlp::builder("agent").header("x tenant", "a").start().unwrap_err();
    /// assert!(refused.to_string().contains("\"x tenant\" is not a valid gRPC metadata key"));
    /// ```
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// How often metrics are pushed ([`DEFAULT_METRICS_INTERVAL`] otherwise).
    pub fn metrics_interval(mut self, every: Duration) -> Self {
        self.metrics_interval = every;
        self
    }

    /// How long one export may take ([`DEFAULT_EXPORT_TIMEOUT`] otherwise).
    pub fn export_timeout(mut self, limit: Duration) -> Self {
        self.export_timeout = limit;
        self
    }

    /// Starts the export thread and builds the providers. Nothing is sent until there
    /// is something to send; a receiver that is down shows as failed exports, not as
    /// an error here.
    pub fn start(self) -> Result<Otlp, OtlpError> {
        let metadata = self.metadata()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(OtlpError::thread)?;
        // The exporters' channels are made on the export runtime, which drives them.
        let built = {
            let _on_export_runtime = runtime.enter();
            self.providers(metadata)
        };
        let runtime = ExportRuntime(Some(runtime));
        let (traces, metrics, failed) = built?;
        let (stop, stopped) = oneshot::channel::<Stop>();
        let ours = Otlp {
            traces: traces.clone(),
            metrics: metrics.clone(),
            failed: failed.clone(),
            stop: Some(stop),
        };
        std::thread::Builder::new()
            .name("sw4rm-otlp".into())
            .spawn(move || runtime.run(export_until(stopped, traces, metrics, failed)))
            .map_err(OtlpError::thread)?;
        Ok(ours)
    }

    fn metadata(&self) -> Result<tonic::metadata::MetadataMap, OtlpError> {
        let mut metadata = tonic::metadata::MetadataMap::new();
        for (name, value) in &self.headers {
            let key = tonic::metadata::MetadataKey::from_str(name)
                .map_err(|_| OtlpError::header(name, "is not a valid gRPC metadata key"))?;
            let value = tonic::metadata::MetadataValue::from_str(value)
                .map_err(|_| OtlpError::header(name, "has a value that is not visible ASCII"))?;
            metadata.insert(key, value);
        }
        Ok(metadata)
    }

    fn providers(
        &self,
        metadata: tonic::metadata::MetadataMap,
    ) -> Result<(SdkTracerProvider, SdkMeterProvider, Failed), OtlpError> {
        let resource = Resource::builder()
            .with_service_name(self.service_name.clone())
            .with_attributes(self.attributes.iter().cloned())
            .build();
        let mut spans = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_timeout(self.export_timeout)
            .with_metadata(metadata.clone());
        let mut measures = opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .with_timeout(self.export_timeout)
            .with_metadata(metadata);
        if let Some(url) = &self.endpoint {
            spans = spans.with_endpoint(url.clone());
            measures = measures.with_endpoint(url.clone());
        }
        let spans = spans.build().map_err(|e| self.build_error(e))?;
        let measures = measures.build().map_err(|e| self.build_error(e))?;
        let failed = Failed {
            endpoint: self.shown_endpoint().into(),
            ..Failed::default()
        };
        let spans = Watched::new(spans, failed.spans.clone());
        let measures = Watched::new(measures, failed.metrics.clone());
        let traces = SdkTracerProvider::builder()
            .with_batch_exporter(spans)
            .with_resource(resource.clone())
            .build();
        let reader = PeriodicReader::builder(measures)
            .with_interval(self.metrics_interval)
            .build();
        let metrics = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(resource)
            .build();
        Ok((traces, metrics, failed))
    }

    fn build_error(&self, e: opentelemetry_otlp::ExporterBuildError) -> OtlpError {
        OtlpError::build(&self.shown_endpoint(), e)
    }

    /// The endpoint as the error messages name it: the one given, else the
    /// environment's, else the default.
    fn shown_endpoint(&self) -> String {
        let from_env = || std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok();
        let url = self.endpoint.clone().or_else(from_env);
        let url = url.unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        crate::policy::quote::cut(&url, 200).to_string()
    }
}

/// The export thread's life: it drives the exporters' channels until asked to stop,
/// then shuts the providers down on a blocking thread (their shutdown waits for
/// exports this runtime carries) and says how it went.
async fn export_until(
    stopped: oneshot::Receiver<Stop>,
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
    failed: Failed,
) {
    let Ok(stop) = stopped.await else { return };
    if !stop.flush {
        return;
    }
    let ended =
        tokio::task::spawn_blocking(move || failed.verdict(traces.shutdown(), metrics.shutdown()))
            .await
            .unwrap_or_else(|_| Err(OtlpError::stopped()));
    if let Some(done) = stop.done {
        let _ = done.send(ended);
    }
}
