//! Instructions per call with many calls in flight, for `valgrind --tool=callgrind`
//! (deterministic, where `scale`'s CPU time moves by tens of percent between runs on
//! this VM): `N` unary heartbeats made and polled once each, so that all `N` wait at
//! once (each layered call arms its deadline's timer), then answered and drained.
//!
//! ```sh
//! cargo bench --bench in_flight --no-run   # prints the executable's path
//! for v in plain layer layer-retries-off; do for n in 0 1000 100000; do
//!   valgrind --tool=callgrind --callgrind-out-file=cg.$v.$n EXECUTABLE $v $n
//! done; done
//! ```
//!
//! A variant's cost per call at `N` in flight is its total at `N` minus its total at
//! 0 (the runtime and the layer made, no call), over `N`; the layer's own is that
//! minus `plain`'s. If the layer's own work grew with the calls in flight (a list
//! scanned, a table grown), its figure at 100,000 would stand above its figure at
//! 1,000: what `scale` times at 100,000 beyond that is the memory the calls occupy
//! (cache and TLB misses, page faults), which plain tonic's calls meet too. With a
//! variant it prints the live heap bytes per call while all `N` wait (counted by the
//! benches' allocator, `support/counting.rs`): the layer's own, with no connection's
//! buffers beside them. Run without a variant (as `cargo bench` does), it runs each at
//! 100 calls and prints nothing.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tower::{Layer, Service};

use sw4rm_timeouts::testing::generated_request;

#[path = "support/counting.rs"]
mod counting;

type Request = http::Request<tonic::body::Body>;

const PATH: &str = "/sw4rm.registry.RegistryService/Heartbeat";

/// Whether the held calls may be answered.
static ANSWER: AtomicBool = AtomicBool::new(false);

/// An inner service whose calls wait until [`ANSWER`] is set (each is polled again
/// by the driver, so no waker is kept), then answer with an empty body.
#[derive(Clone, Copy)]
struct Held;

/// A held call's answer.
struct Waiting;

impl Future for Waiting {
    type Output = Result<http::Response<tonic::body::Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        match ANSWER.load(Ordering::Relaxed) {
            true => Poll::Ready(Ok(http::Response::new(tonic::body::Body::empty()))),
            false => Poll::Pending,
        }
    }
}

impl Service<Request> for Held {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Waiting;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request) -> Waiting {
        Waiting
    }
}

/// A call in flight, boxed as a spawned task's future is.
type InFlight = Pin<Box<dyn Future<Output = ()>>>;

/// Makes `n` calls through `svc`, polls each once (all wait), answers them and polls
/// each to its end: the live heap bytes a call while all waited.
async fn hold<S, B>(svc: &mut S, n: usize) -> f64
where
    S: Service<Request, Response = http::Response<B>>,
    S::Future: 'static,
    S::Error: std::fmt::Debug,
    B: http_body::Body + 'static,
    B::Error: std::fmt::Debug,
{
    ANSWER.store(false, Ordering::Relaxed);
    // The list of calls itself is not a call's: made before counting starts.
    let mut calls: Vec<InFlight> = Vec::with_capacity(n);
    let before = counting::live();
    // Each call: its answer, then its body drained.
    calls.extend((0..n).map(|_| {
        let answer = svc.call(generated_request(PATH));
        Box::pin(async move {
            use http_body_util::BodyExt;
            let response = answer.await.expect("answer");
            let mut body = std::pin::pin!(response.into_body());
            while let Some(frame) = body.as_mut().frame().await {
                frame.expect("frame");
            }
        }) as InFlight
    }));
    std::future::poll_fn(|cx| {
        for call in &mut calls {
            assert!(call.as_mut().poll(cx).is_pending(), "a held call waits");
        }
        Poll::Ready(())
    })
    .await;
    let waiting = (counting::live() - before) as f64 / n.max(1) as f64;
    ANSWER.store(true, Ordering::Relaxed);
    std::future::poll_fn(|cx| {
        for call in &mut calls {
            assert!(call.as_mut().poll(cx).is_ready(), "an answered call ends");
        }
        Poll::Ready(())
    })
    .await;
    waiting
}

fn main() {
    let variant = std::env::args().nth(1).unwrap_or_default();
    let n: usize = std::env::args()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap_or(100);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The heartbeat's deadline (seconds) is far beyond the run: every timer is armed
    // and none fires.
    let layer = TimeoutProfileLayer::new(ProfileSet::standard()).without_metrics();
    let off = layer.clone().without_retries();
    counting::count_this_thread();
    rt.block_on(async {
        let bytes = match variant.as_str() {
            "plain" => hold(&mut Held, n).await,
            "layer" => hold(&mut layer.layer(Held), n).await,
            "layer-retries-off" => hold(&mut off.layer(Held), n).await,
            _ => {
                hold(&mut Held, n).await;
                hold(&mut layer.layer(Held), n).await;
                hold(&mut off.layer(Held), n).await;
                return;
            }
        };
        println!("{variant} at {n} in flight: {bytes:.0} live heap bytes a call");
    });
}
