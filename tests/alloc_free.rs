//! A successful unary call through the layer allocates nothing more than the same
//! call without it: counted with a global allocator over whole calls (request in,
//! response body drained) against an in-memory inner service. Deterministic, unlike
//! timing; the layer's cost in time is in `benches/layer.rs`.
//!
//! Retries (on by default) keep the request for replay: the body that sends the frame
//! the layer read, and the retry state (holding the head and a small message) in a box
//! reused from call to call on the thread. That cost is counted separately and
//! exactly; with retries off the layer adds nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::convert::Infallible;

use http_body_util::BodyExt;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use sw4rm_timeouts::testing::{generated_request, InMemory};
use sw4rm_timeouts::{CallTimeout, HedgingPolicy, ProfileSet, TimeoutProfileLayer};
use tower::{Layer, Service};

struct Counting;

thread_local! {
    // Only the test's own thread is counted, into its own counter: the calls run on
    // it (a current-thread runtime), while other threads (the metrics SDK's reader,
    // the other test) are not.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: forwards every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTED.try_with(Cell::get).unwrap_or(false) {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

type Request = http::Request<tonic::body::Body>;

/// Answers at once with an empty body, allocating nothing itself.
const ANSWER: InMemory = InMemory::empty();

const PATHS: [&str; 3] = [
    "/sw4rm.registry.RegistryService/Heartbeat", // exact route
    "/acme.Batch/Run",                           // service route
    "/unknown.Service/Method",                   // fallback
];
const CALLS: usize = 200;

fn requests(path: &'static str, per_call: bool) -> Vec<Request> {
    (0..CALLS)
        .map(|_| {
            let mut req = http::Request::new(tonic::body::Body::empty());
            *req.uri_mut() = http::Uri::from_static(path);
            // As a generated tonic client sends it.
            let headers = req.headers_mut();
            headers.insert(
                "content-type",
                http::HeaderValue::from_static("application/grpc"),
            );
            headers.insert("te", http::HeaderValue::from_static("trailers"));
            if per_call {
                req.extensions_mut()
                    .insert(CallTimeout::After(std::time::Duration::from_secs(2)));
            }
            req
        })
        .collect()
}

/// Allocations made by `CALLS` whole calls (the requests are built beforehand), each
/// made as tonic's generated clients make it: wait for the service to be ready, call.
async fn count<S, B>(service: &mut S, requests: Vec<Request>) -> usize
where
    S: Service<Request, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let before = allocations();
    COUNTED.with(|c| c.set(true));
    for req in requests {
        std::future::poll_fn(|cx| service.poll_ready(cx))
            .await
            .expect("ready");
        let response = service.call(req).await.expect("answer");
        let mut body = std::pin::pin!(response.into_body());
        while let Some(frame) = body.as_mut().frame().await {
            frame.expect("frame");
        }
    }
    COUNTED.with(|c| c.set(false));
    allocations() - before
}

fn profiles() -> ProfileSet {
    ProfileSet::builder()
        .without_global()
        .route("/acme.Batch/*", "task_submit")
        .build()
        .unwrap()
}

/// As [`added_by_layer`], over another inner service.
async fn added_by_layer_answering<S>(
    layer: TimeoutProfileLayer,
    inner: S,
) -> Vec<(&'static str, usize)>
where
    S: Service<Request, Response = http::Response<tonic::body::Body>, Error = Infallible> + Clone,
{
    let mut plain = inner.clone();
    let mut layered = layer.layer(inner);
    let mut out = Vec::new();
    for path in PATHS {
        count(&mut layered, requests(path, false)).await;
        let base = count(&mut plain, requests(path, false)).await;
        let with_layer = count(&mut layered, requests(path, false)).await;
        out.push((path, with_layer.saturating_sub(base)));
    }
    out
}

async fn added_by_layer(layer: TimeoutProfileLayer, per_call: bool) -> Vec<(&'static str, usize)> {
    let mut plain = ANSWER;
    let mut layered = layer.layer(ANSWER);
    let mut out = Vec::new();
    for path in PATHS {
        // Warm up: the first call of a path outside the exact routes builds its labels.
        count(&mut layered, requests(path, per_call)).await;
        let base = count(&mut plain, requests(path, per_call)).await;
        let with_layer = count(&mut layered, requests(path, per_call)).await;
        out.push((path, with_layer.saturating_sub(base)));
    }
    out
}

#[tokio::test(flavor = "current_thread")]
async fn a_layered_call_allocates_nothing_the_plain_call_does_not() {
    // A subscriber at INFO, as in production: the per-RPC span (DEBUG) costs nothing.
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(std::io::sink)
            .finish(),
    );
    let zero: Vec<_> = PATHS.iter().map(|p| (*p, 0)).collect();

    let layer = || TimeoutProfileLayer::new(profiles()).without_retries();
    // Metrics to the global (no-op) provider, and to no provider at all.
    let got = added_by_layer(layer(), false).await;
    assert_eq!(got, zero, "global meter provider");
    let got = added_by_layer(layer().without_metrics(), false).await;
    assert_eq!(got, zero, "without metrics");
    // The advisor's observations (of successful calls): a route's estimate is
    // allocated on its first call (the warm-up), recording allocates nothing.
    let observed = layer().without_metrics().with_observations();
    let got = added_by_layer_answering(observed.clone(), InMemory::ok()).await;
    assert_eq!(got, zero, "with observations");
    let routes = observed.observations().unwrap().routes();
    assert_eq!(routes.len(), PATHS.len(), "every path observed");
    assert!(
        routes.iter().all(|r| r.latency.successes() > 0),
        "{routes:?}"
    );

    // Retries on: the request kept for replay. These requests are GETs over HTTP/1.1
    // with no body, so their method, URI and version are kept whole, boxed: 1 per
    // call, nothing per path, and no timer for a call answered by its first attempt
    // (the retry state's box is one an earlier call gave back).
    let got = added_by_layer(TimeoutProfileLayer::new(profiles()), false).await;
    for (path, n) in &got {
        assert_eq!(*n, CALLS, "{path}: {} per call", *n as f64 / CALLS as f64);
    }

    // An SDK provider that really aggregates: the attribute sets are built once per
    // path, so recording a known series allocates nothing either.
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(InMemoryMetricExporter::default()).build())
        .build();
    let got = added_by_layer(layer().with_meter_provider(&provider), false).await;
    assert_eq!(got, zero, "SDK meter provider");
    // A reloadable table: one atomic load per call, nothing allocated, before and
    // after a swap.
    let (reloadable, handle) = layer().with_meter_provider(&provider).reloadable();
    let got = added_by_layer(reloadable.clone(), false).await;
    assert_eq!(got, zero, "reloadable");
    handle.reload(
        ProfileSet::builder()
            .without_global()
            .default_timeout_ms("heartbeat", 2_000)
            .build()
            .unwrap(),
    );
    let got = added_by_layer(reloadable, false).await;
    assert_eq!(got, zero, "reloadable, after a reload");

    // A per-call value other than the default is encoded into a new header value:
    // one allocation (the bytes of `grpc-timeout`), nothing else.
    let got = added_by_layer(layer(), true).await;
    let one: Vec<_> = PATHS.iter().map(|p| (*p, CALLS)).collect();
    assert_eq!(got, one);
}

/// Requests as a generated client hands them to the channel.
fn generated_requests(uri: &'static str) -> Vec<Request> {
    (0..CALLS).map(|_| generated_request(uri)).collect()
}

/// Allocations per call, for requests to `uri` as a generated client sends them,
/// that the layer (metrics off) adds to a plain call through a handle made by
/// `inner`: with retries off, and on.
async fn added_per_call<S, B>(inner: impl Fn() -> S, uri: &'static str) -> (f64, f64)
where
    S: Service<Request, Response = http::Response<B>> + Clone,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>> + std::fmt::Debug,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + std::fmt::Debug,
{
    let layer = TimeoutProfileLayer::new(profiles()).without_metrics();
    let mut plain = inner();
    let mut on = layer.clone().layer(inner());
    let mut off = layer.without_retries().layer(inner());
    // Warm up: first calls may allocate once (labels, a handle's first readiness).
    count(&mut plain, generated_requests(uri)).await;
    count(&mut on, generated_requests(uri)).await;
    count(&mut off, generated_requests(uri)).await;
    let base = count(&mut plain, generated_requests(uri)).await;
    let with_retries = count(&mut on, generated_requests(uri)).await;
    let without = count(&mut off, generated_requests(uri)).await;
    let per_call = |n: usize| n.saturating_sub(base) as f64 / CALLS as f64;
    (per_call(without), per_call(with_retries))
}

#[tokio::test(flavor = "current_thread")]
async fn retries_on_keep_the_request_for_a_bounded_number_of_allocations() {
    let (without, with_retries) = added_per_call(|| ANSWER, PATHS[0]).await;
    assert_eq!(without, 0.0, "retries off add nothing");
    // Retries on keep the request for replay: the body that sends the frame the layer
    // read (1; tonic boxes every body that is not its own). The call's record and its
    // retry state, which holds the head and a small message inline, are each kept in a
    // box an earlier call on the thread gave back. The head's maps are not copied: the generated client's
    // headers and its `GrpcMethod` extension are kept as values, its method, URI and
    // version as the path.
    assert_eq!(with_retries, 1.0, "retries on");
    // A client given an origin sends an absolute URI: kept whole, boxed (1 more).
    let absolute = "http://sw4rm.test/sw4rm.registry.RegistryService/Heartbeat";
    let (_, with_origin) = added_per_call(|| ANSWER, absolute).await;
    assert_eq!(with_origin, 2.0, "absolute URI");
}

/// tonic's channel is a tower `Buffer`, whose clones allocate, and allocate again when
/// first asked to be ready. A plain tonic call uses its client's handle; a call through
/// the layer is sent through the layer's own handle. A call that may make other
/// attempts keeps a share of the layer's spare handle, and clones a handle from it
/// only when another attempt comes: a call answered at its first attempt clones
/// nothing.
#[tokio::test(flavor = "current_thread")]
async fn over_tonics_channel_buffer_a_call_sent_once_clones_nothing() {
    use tower::buffer::Buffer;
    let buffer = || {
        let (buffer, worker) = Buffer::pair(ANSWER, 1024);
        tokio::spawn(worker);
        buffer
    };
    let (without, with_retries) = added_per_call(buffer, PATHS[0]).await;
    // Retries off: nothing. Retries on: the request kept for replay (one, as above);
    // a clone of the channel would add one, and asked to be ready one more.
    assert_eq!(without, 0.0, "retries off");
    assert_eq!(with_retries, 1.0, "retries on");
}

/// A hedged call's hedges take their handles from the layer's spare when they are
/// sent: a hedged call answered before its hedging delay allocates over tonic's
/// channel (a tower `Buffer`, whose clones allocate) exactly what it allocates over an
/// in-memory service, whose clones cost nothing.
#[tokio::test(flavor = "current_thread")]
async fn over_tonics_channel_buffer_a_hedged_call_that_sends_no_hedge_clones_nothing() {
    use tower::buffer::Buffer;
    let path = PATHS[0];
    let policy = HedgingPolicy::builder()
        .max_attempts(2)
        .delay(std::time::Duration::from_secs(5))
        .build()
        .unwrap();
    let hedging = ProfileSet::builder()
        .without_global()
        .hedging("heartbeat", policy)
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(hedging).without_metrics();
    let (buffer, worker) = Buffer::pair(ANSWER, 1024);
    tokio::spawn(worker);
    let mut plain_buffer = buffer.clone();
    let mut over_buffer = layer.layer(buffer);
    let mut in_memory = layer.layer(ANSWER);
    count(&mut over_buffer, generated_requests(path)).await;
    count(&mut in_memory, generated_requests(path)).await;
    let base_buffer = count(&mut plain_buffer, generated_requests(path)).await;
    let base_memory = count(&mut ANSWER.clone(), generated_requests(path)).await;
    let added_buffer = count(&mut over_buffer, generated_requests(path)).await - base_buffer;
    let added_memory = count(&mut in_memory, generated_requests(path)).await - base_memory;
    // Per call, rounded: the buffer's worker allocates now and then on its own.
    let per_call = |n: usize| (n as f64 / CALLS as f64).round();
    assert!(
        per_call(added_memory) > 0.0,
        "a hedged call keeps its request"
    );
    assert_eq!(
        per_call(added_buffer),
        per_call(added_memory),
        "a clone of the channel per call"
    );
}
