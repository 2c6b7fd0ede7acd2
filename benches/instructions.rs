//! Instructions per call, for `valgrind --tool=callgrind` (deterministic, unlike time):
//! 20,000 unary calls, each a request as a generated client hands it to the channel,
//! through one variant against an in-memory service that answers at once.
//!
//! ```sh
//! cargo bench --bench instructions --no-run   # prints the executable's path
//! for v in plain retries-off retries-on reloadable plain-extension extension; do
//!   valgrind --tool=callgrind --callgrind-out-file=cg.$v EXECUTABLE $v
//! done
//! ```
//!
//! The layer's instructions per call are a variant's total minus `plain`'s, divided by
//! 20,000 (setting up the layer is a few thousand instructions in all); `reloadable` is
//! `retries-on` with its table behind a `ReloadHandle`. `extension` is `retries-on`
//! with a value of the caller's own in each request's extensions (no override of the
//! layer's), measured against `plain-extension`, plain with the same value. Run without a
//! variant (as `cargo bench` does), it runs each once and prints nothing else.
//! `plain-deadline` is `plain` with a `grpc-timeout` written by hand (a static value,
//! no formatting): what a plain call pays to send a deadline at all, for a figure
//! beside the goals' (which are over `plain`).
//!
//! The shapes users write besides the default, each against its own plain variant
//! where the inner service or the request differs: `call-timeout` (a per-call
//! `CallTimeout`, against `plain-extension`: its request carries an extension too),
//! `message-timeout` (a `WaitForDecision` whose message carries its timeout, against
//! `plain-message`), `budget` (every call inside an `OperationBudget`), `hedged` (a
//! read under a hedging policy whose delay no call reaches, against `plain-hedged`),
//! `stream-100` (a server stream of 100 messages, against `plain-stream-100`),
//! `routes-1` / `routes-100` / `routes-10000` (a table of that many custom routes, the
//! calls on the middle one and the heartbeat in turn, so that none finds its path in
//! the slot of its handle's last call, against `plain-routes`) and `debug` (`retries-on` with a
//! DEBUG subscriber installed, writing to nowhere, against `plain-debug`; `registry`
//! with spans and events enabled at DEBUG but formatted by no one, against
//! `plain-registry`; `debug-trace-span`, `debug` with the layer's span at TRACE,
//! `with_span_level`, so that the DEBUG subscriber sees no span per call).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use sw4rm_timeouts::{
    CallTimeout, HedgingPolicy, OperationBudget, ProfileSet, TimeoutProfileLayer,
};
use tower::{Layer, Service};

#[path = "support/in_memory.rs"]
mod in_memory;

use in_memory::{drive, request, InMemory, Request};

const CALLS: usize = 20_000;

/// The calls each variant makes: `CALLS`, or the executable's second argument (run a
/// variant at 20,000 and at 40,000 calls, and the difference over 20,000 is its cost
/// per call without its setup: a table of 10,000 routes takes longer to build than
/// 20,000 calls take to route).
fn calls_wanted() -> usize {
    std::env::args()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or(CALLS)
}
const PATH: &str = "/sw4rm.registry.RegistryService/Heartbeat";

/// `CALLS` heartbeats; with `extension`, each request carries a value of the caller's
/// own.
async fn calls<S, B>(svc: &mut S, extension: bool)
where
    S: Service<Request, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    calls_of(svc, || {
        let mut req = request(PATH, false);
        if extension {
            req.extensions_mut().insert(7u8);
        }
        req
    })
    .await
}

/// `CALLS` calls of `make()`'s request.
async fn calls_of<S, B>(svc: &mut S, make: impl Fn() -> Request)
where
    S: Service<Request, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    for _ in 0..calls_wanted() {
        drive(svc, make()).await;
    }
}

/// A request on `path` with `message` (its gRPC frame included) as its body.
fn request_on(path: &'static str, message: &'static [u8]) -> Request {
    let mut req = request(path, false);
    *req.body_mut() = tonic::body::Body::new(http_body_util::Full::new(bytes::Bytes::from_static(
        message,
    )));
    req
}

const WAIT: &str = "/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision";
/// `WaitForDecisionRequest { timeout_seconds: 30 }` (field 3), framed.
const WAIT_30S: &[u8] = &[0, 0, 0, 0, 2, 0x18, 30];
const READ: &str = "/sw4rm.workflow.WorkflowService/GetWorkflowState";
const STREAM: &str = "/sw4rm.tool.ToolService/CallStream";

/// An inner service answering every call with a stream of `STREAMED` empty messages
/// and `grpc-status: 0`.
#[derive(Clone, Copy)]
struct Streams;

const STREAMED: usize = 100;

struct Messages {
    left: usize,
}

impl http_body::Body for Messages {
    type Data = bytes::Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, Infallible>>> {
        let frame = match self.left {
            0 => return Poll::Ready(None),
            1 => {
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                http_body::Frame::trailers(trailers)
            }
            _ => http_body::Frame::data(bytes::Bytes::from_static(&[0, 0, 0, 0, 0])),
        };
        self.left -= 1;
        Poll::Ready(Some(Ok(frame)))
    }
}

impl Service<Request> for Streams {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request) -> Self::Future {
        let body = tonic::body::Body::new(Messages { left: STREAMED + 1 });
        std::future::ready(Ok(http::Response::new(body)))
    }
}

/// A layer whose table has `n` custom routes, `/acme.Svc{i}/Run`.
fn routes(n: usize) -> TimeoutProfileLayer {
    let mut builder = ProfileSet::builder().without_global();
    for i in 0..n {
        builder = builder.route(&format!("/acme.Svc{i}/Run"), "task_submit");
    }
    TimeoutProfileLayer::new(builder.build().expect("profiles")).without_metrics()
}

/// The middle route's path of a table of `n` (leaked: the request wants a `'static`).
fn middle(n: usize) -> &'static str {
    Box::leak(format!("/acme.Svc{}/Run", n / 2).into_boxed_str())
}

/// Requests on `path` and the heartbeat's, in turn: each call's path differs from
/// the last one's, so that every call is found by its hash in the layer's table, not
/// by the slot its handle's last call was found in.
fn alternating(path: &'static str) -> impl Fn() -> Request {
    let turn = std::cell::Cell::new(false);
    move || {
        turn.set(!turn.get());
        request(if turn.get() { path } else { PATH }, false)
    }
}

/// A layer hedging `READ` with a delay no call reaches.
fn hedged() -> TimeoutProfileLayer {
    let policy = HedgingPolicy::builder()
        .max_attempts(2)
        .delay(Duration::from_secs(5))
        .build()
        .expect("hedging");
    let profiles = ProfileSet::builder()
        .without_global()
        .hedging("workflow_status", policy)
        .build()
        .expect("profiles");
    TimeoutProfileLayer::new(profiles).without_metrics()
}

fn with_timeout() -> Request {
    let mut req = request(PATH, false);
    req.extensions_mut()
        .insert(CallTimeout::After(Duration::from_secs(3)));
    req
}

/// The shapes besides the default, by variant name; `false` when `variant` is none.
async fn shapes(variant: &str, on: &TimeoutProfileLayer) -> bool {
    let heartbeat = || request(PATH, false);
    match variant {
        "call-timeout" => calls_of(&mut on.layer(InMemory::empty()), with_timeout).await,
        "plain-message" => calls_of(&mut InMemory::empty(), || request_on(WAIT, WAIT_30S)).await,
        "message-timeout" => {
            calls_of(&mut on.layer(InMemory::empty()), || {
                request_on(WAIT, WAIT_30S)
            })
            .await
        }
        "budget" => {
            let budget = OperationBudget::new(Duration::from_secs(60));
            budget
                .run(calls_of(&mut on.layer(InMemory::empty()), heartbeat))
                .await
        }
        "plain-hedged" => calls_of(&mut InMemory::empty(), || request(READ, false)).await,
        "hedged" => {
            calls_of(&mut hedged().layer(InMemory::empty()), || {
                request(READ, false)
            })
            .await
        }
        "plain-stream-100" => calls_of(&mut Streams, || request(STREAM, false)).await,
        "stream-100" => calls_of(&mut on.layer(Streams), || request(STREAM, false)).await,
        "plain-routes" => calls_of(&mut InMemory::empty(), alternating(middle(1))).await,
        "routes-1" | "routes-100" | "routes-10000" => {
            let n: usize = variant["routes-".len()..].parse().expect("a count");
            calls_of(
                &mut routes(n).layer(InMemory::empty()),
                alternating(middle(n)),
            )
            .await
        }
        "plain-registry" | "registry" => {
            // Spans and events enabled at DEBUG, kept by the registry, formatted by
            // no one: what the layer's own span costs, apart from a formatter's work.
            use tracing_subscriber::layer::SubscriberExt;
            let subscriber =
                tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::DEBUG);
            let _guard = tracing::subscriber::set_default(subscriber);
            match variant {
                "registry" => calls_of(&mut on.layer(InMemory::empty()), heartbeat).await,
                _ => calls_of(&mut InMemory::empty(), heartbeat).await,
            }
        }
        "plain-debug" | "debug" | "debug-trace-span" => {
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_writer(std::io::sink)
                .finish();
            let _guard = tracing::subscriber::set_default(subscriber);
            match variant {
                "debug" => calls_of(&mut on.layer(InMemory::empty()), heartbeat).await,
                "debug-trace-span" => {
                    let quiet = on.clone().with_span_level(tracing::Level::TRACE);
                    calls_of(&mut quiet.layer(InMemory::empty()), heartbeat).await
                }
                _ => calls_of(&mut InMemory::empty(), heartbeat).await,
            }
        }
        _ => return false,
    }
    true
}

const SHAPES: [&str; 17] = [
    "call-timeout",
    "plain-message",
    "message-timeout",
    "budget",
    "plain-hedged",
    "hedged",
    "plain-stream-100",
    "stream-100",
    "plain-routes",
    "routes-1",
    "routes-100",
    "routes-10000",
    "plain-registry",
    "registry",
    "plain-debug",
    "debug",
    "debug-trace-span",
];

fn main() {
    let variant = std::env::args().nth(1).unwrap_or_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let on = TimeoutProfileLayer::new(ProfileSet::standard()).without_metrics();
    let off = on.clone().without_retries();
    let (live, _handle) = on.clone().reloadable();
    rt.block_on(async {
        if shapes(&variant, &on).await {
            return;
        }
        match variant.as_str() {
            "plain" => calls(&mut InMemory::empty(), false).await,
            "retries-off" => calls(&mut off.layer(InMemory::empty()), false).await,
            "retries-on" => calls(&mut on.layer(InMemory::empty()), false).await,
            "reloadable" => calls(&mut live.layer(InMemory::empty()), false).await,
            "plain-extension" => calls(&mut InMemory::empty(), true).await,
            "plain-deadline" => {
                let by_hand = || request(PATH, true);
                calls_of(&mut InMemory::empty(), by_hand).await
            }
            "extension" => calls(&mut on.layer(InMemory::empty()), true).await,
            _ => {
                calls(&mut InMemory::empty(), false).await;
                calls(&mut off.layer(InMemory::empty()), false).await;
                calls(&mut on.layer(InMemory::empty()), false).await;
                calls(&mut live.layer(InMemory::empty()), false).await;
                calls(&mut InMemory::empty(), true).await;
                calls(&mut on.layer(InMemory::empty()), true).await;
                for shape in SHAPES {
                    shapes(shape, &on).await;
                }
            }
        }
    });
}
