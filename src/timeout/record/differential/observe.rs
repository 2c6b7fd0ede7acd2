//! What the differential test observes of a call, and the inner service it plays
//! against: an inner service not ready at a call's first ask, the crate's `INFO` and
//! `WARN` events with the call's names, a status with its details, the metrics
//! exported, a body read to its end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, SdkMeterProvider};
use tower::Service;

use super::Request;
use crate::testing::Scripted;

/// An inner service that is not ready at the first ask of each call (it wakes the
/// caller at once), as a tonic channel whose buffer is full for a moment.
#[derive(Clone)]
pub(super) struct NotReadyAtFirst {
    pub(super) inner: Scripted,
    pub(super) refusals: Arc<AtomicUsize>,
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
pub(super) struct Events(pub(super) Arc<Mutex<Vec<String>>>);

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

pub(super) fn status(err: crate::wire::error::BoxError) -> String {
    let status = tonic::Status::from_error(err);
    described(&status)
}

pub(super) fn described(status: &tonic::Status) -> String {
    let attempts = status.metadata().get("sw4rm-attempts").cloned();
    let timeout = crate::wire::details::TimeoutDetails::from_status(status);
    let cancel = crate::wire::cancel::CancelDetails::from_status(status);
    format!(
        "{:?} {} {timeout:?} {cancel:?} {attempts:?}",
        status.code(),
        status.message(),
    )
}

pub(super) fn metrics(
    provider: &SdkMeterProvider,
    exporter: &InMemoryMetricExporter,
) -> Vec<String> {
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
pub(super) async fn read(
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
