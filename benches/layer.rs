//! The layer's own cost per unary call, without sockets: the same in-memory inner
//! service (answers at once with an empty body) called plainly, with the deadline set
//! by hand as tonic would, and through the layer (metrics off, and on through the
//! OpenTelemetry SDK, both with retries on as by default; with retries and metrics
//! off; and with the advisor's observations on), for an exact route, a whole-service
//! route and the fallback.
//! Each sample is a batch of calls, every route's variants interleaved in the same
//! rounds; the layer's work is the median, over rounds, of a layered batch minus the
//! same round's batch with the deadline set by hand.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::task::{Context, Poll};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use http_body_util::BodyExt;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tower::{Layer, Service};

#[path = "support/interleaved.rs"]
mod interleaved;

type Request = http::Request<tonic::body::Body>;

/// Answers at once with an empty body; `Answer(true)` ends it with `grpc-status: 0`
/// trailers (a successful call, as the advisor's observations count it).
#[derive(Clone, Copy)]
struct Answer(bool);

impl Service<Request> for Answer {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request) -> Self::Future {
        let body = match self.0 {
            true => tonic::body::Body::new(OkTrailers(false)),
            false => tonic::body::Body::empty(),
        };
        ready(Ok(http::Response::new(body)))
    }
}

/// An empty response body ending with `grpc-status: 0` trailers: a successful call.
struct OkTrailers(bool);

impl http_body::Body for OkTrailers {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        if std::mem::replace(&mut self.0, true) {
            return Poll::Ready(None);
        }
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.0
    }
}

/// A request as a generated tonic client hands it to the channel: a small message
/// encoded into tonic's 8 KiB buffer, the `GrpcMethod` extension and tonic's headers.
fn request(path: &'static str, deadline_by_hand: bool) -> Request {
    let mut buffer = bytes::BytesMut::with_capacity(8 * 1024);
    buffer.extend_from_slice(b"\0\0\0\0\x0a\x0a\x08agent-42");
    let body = http_body_util::Full::new(buffer.split().freeze());
    let mut req = http::Request::new(tonic::body::Body::new(body));
    *req.uri_mut() = http::Uri::from_static(path);
    req.extensions_mut().insert(tonic::GrpcMethod::new(
        "sw4rm.registry.RegistryService",
        "Heartbeat",
    ));
    let h = req.headers_mut();
    h.insert(
        "content-type",
        http::HeaderValue::from_static("application/grpc"),
    );
    h.insert("te", http::HeaderValue::from_static("trailers"));
    if deadline_by_hand {
        h.insert("grpc-timeout", http::HeaderValue::from_static("5000000u"));
    }
    req
}

async fn drive<S, B>(svc: &mut S, req: Request)
where
    S: Service<Request, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let response = svc.call(req).await.expect("answer");
    let mut body = std::pin::pin!(response.into_body());
    while let Some(frame) = body.as_mut().frame().await {
        frame.expect("frame");
    }
}

const NAMES: [&str; 7] = [
    "plain",
    "plain_deadline_by_hand",
    "layer_metrics_off",
    "layer_metrics_on",
    "layer_retries_off",
    "layer_answered_ok",
    "layer_answered_ok_observed",
];
const PATHS: [(&str, &str); 3] = [
    ("exact", "/sw4rm.registry.RegistryService/Heartbeat"),
    ("service", "/acme.Batch/Run"),
    ("fallback", "/unknown.Service/Method"),
];
const BATCH: usize = 1_000;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(InMemoryMetricExporter::default()).build())
        .build();
    let profiles = ProfileSet::builder()
        .without_global()
        .route("/acme.Batch/*", "heartbeat")
        .build()
        .expect("profiles");
    let off = TimeoutProfileLayer::new(profiles.clone()).without_metrics();
    let once = off.clone().without_retries();
    let on = TimeoutProfileLayer::new(profiles).with_meter_provider(&provider);
    let observed = off.clone().with_observations();

    let run = |route: usize, variant: usize| {
        let path = PATHS[route].1;
        let (mut plain, mut layered_off, mut layered_on, mut layered_once) = (
            Answer(false),
            off.layer(Answer(false)),
            on.layer(Answer(false)),
            once.layer(Answer(false)),
        );
        let (mut answered_ok, mut answered_ok_observed) =
            (off.layer(Answer(true)), observed.layer(Answer(true)));
        async move {
            for _ in 0..BATCH {
                match variant {
                    0 => drive(&mut plain, request(path, false)).await,
                    1 => drive(&mut plain, request(path, true)).await,
                    2 => drive(&mut layered_off, request(path, false)).await,
                    3 => drive(&mut layered_on, request(path, false)).await,
                    4 => drive(&mut layered_once, request(path, false)).await,
                    5 => drive(&mut answered_ok, request(path, false)).await,
                    _ => drive(&mut answered_ok_observed, request(path, false)).await,
                }
            }
        }
    };

    // Every route's variants in one set of interleaved rounds, so that the routes are
    // compared under the same conditions, not one after another.
    let n = NAMES.len();
    let samples = rt.block_on(interleaved::samples(1_500, PATHS.len() * n, |i| {
        run(i / n, i % n)
    }));
    for (route, (kind, _)) in PATHS.iter().enumerate() {
        let mine = &samples[route * n..(route + 1) * n];
        let medians: Vec<Duration> = mine
            .iter()
            .map(|s| interleaved::median(&mut s.clone()))
            .collect();
        interleaved::report(
            &format!("{kind} route, batches of {BATCH} calls"),
            &NAMES,
            &medians,
        );
        // Paired by round: each layered batch minus the same round's batch with the
        // deadline set by hand.
        let work = |variant: usize| {
            interleaved::paired_difference_ns(&mine[variant], &mine[1]) / BATCH as f64
        };
        println!(
            "  layer work per call ({kind}): metrics off {:.0} ns, metrics on {:.0} ns, retries and metrics off {:.0} ns (vs the deadline set by hand)",
            work(2),
            work(3),
            work(4),
        );
        // The advisor's estimate on: paired against the same layer without it.
        let observing = interleaved::paired_difference_ns(&mine[6], &mine[5]) / BATCH as f64;
        println!("  observations on add {observing:.1} ns per call ({kind})\n");
    }

    for (route, (kind, _)) in PATHS.iter().enumerate() {
        let mut group = c.benchmark_group(format!("layer_{kind}"));
        for (variant, name) in NAMES.iter().enumerate() {
            group.bench_function(*name, |b| b.to_async(&rt).iter(|| run(route, variant)));
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
