//! Exporters that remember how their last export went. OpenTelemetry's SDK logs a
//! failed export and answers a flush or shutdown with success all the same; an
//! operator asking `Otlp::shutdown` whether the Collector got the last batch needs
//! the export's own answer, which these keep (on the export threads, never on a call).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

/// The last export's failure, if the last export failed.
#[derive(Debug, Clone, Default)]
pub(super) struct LastFailure(Arc<Mutex<Option<String>>>);

impl LastFailure {
    fn note(&self, ended: &OTelSdkResult) {
        if let Ok(mut last) = self.0.lock() {
            *last = ended.as_ref().err().map(ToString::to_string);
        }
    }

    /// The failure of the last export, if it failed.
    pub(super) fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|last| last.clone())
    }
}

/// An exporter and the record of its last export.
#[derive(Debug)]
pub(super) struct Watched<E> {
    inner: E,
    last: LastFailure,
}

impl<E> Watched<E> {
    pub(super) fn new(inner: E, last: LastFailure) -> Self {
        Watched { inner, last }
    }
}

impl<E: SpanExporter> SpanExporter for Watched<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let ended = self.inner.export(batch).await;
        self.last.note(&ended);
        ended
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl<E: PushMetricExporter> PushMetricExporter for Watched<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let ended = self.inner.export(metrics).await;
        self.last.note(&ended);
        ended
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}
