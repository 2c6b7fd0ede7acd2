//! Unary calls over loopback, one client kind per process, for
//! `valgrind --tool=cachegrind` (counts, not seconds: instructions, cache misses and
//! mispredicted branches of the whole process, client and embedded server).
//!
//! ```sh
//! cargo bench --bench loopback_cache --no-run   # prints the executable's path
//! for v in plain-deadline layer layer-retries-off pass-through; do
//!   valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes \
//!     --cachegrind-out-file=cg.$v EXECUTABLE $v 5000
//! done
//! cg_annotate --show=Ir,I1mr,D1mr,D1mw,Bcm,Bim --sort=I1mr cg.layer
//! ```
//!
//! With `p50` after the count (`EXECUTABLE layer 5000 p50`), it also times each call
//! and prints the median round trip: one client kind per process, for comparing
//! processes run alternately (the in-process rotation of `unary` inflates the ratio).
//!
//! A variant's counts minus `plain-deadline`'s, divided by the number of calls, are
//! what the layer adds to a call that plain tonic sends with the same deadline by hand.
//! `unary` times the same calls; this says where the time goes when the instruction
//! counts alone do not (benches/README.md, "Where a loopback call's time goes").
//! Run without a variant (as `cargo bench` does), it makes a few calls of each and
//! prints nothing.

use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tonic::client::GrpcService;
use tower_layer::Layer;

#[path = "support/loopback.rs"]
mod loopback;

/// The deadline the layer puts on a heartbeat, set by hand on the plain calls.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// `calls` heartbeats, one after another; `by_hand` sets the deadline on each. With
/// `times`, each call's round trip is pushed there.
async fn calls<T>(
    client: RegistryServiceClient<T>,
    calls: usize,
    by_hand: bool,
    mut times: Option<&mut Vec<Duration>>,
) where
    T: GrpcService<tonic::body::Body> + Clone,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error:
        Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    for _ in 0..calls {
        let start = std::time::Instant::now();
        let mut request = tonic::Request::new(HeartbeatRequest::default());
        if by_hand {
            request.set_timeout(HEARTBEAT);
        }
        client
            .clone()
            .heartbeat(request)
            .await
            .expect("heartbeat over loopback");
        if let Some(times) = times.as_deref_mut() {
            times.push(start.elapsed());
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let variant = args.next().unwrap_or_default();
    let n = args.next().and_then(|n| n.parse().ok()).unwrap_or(5_000);
    // `p50` after the count: time each call and print the median round trip (ns).
    let mut times = (args.next().as_deref() == Some("p50")).then(|| Vec::with_capacity(n));
    let (rt, server, channel) = loopback::setup();
    let layer = TimeoutProfileLayer::new(ProfileSet::standard()).without_metrics();
    let plain = RegistryServiceClient::new(channel.clone());
    let layered = RegistryServiceClient::new(layer.clone().layer(channel.clone()));
    let once = RegistryServiceClient::new(layer.without_retries().layer(channel.clone()));
    let pass_through = RegistryServiceClient::new(
        tower::ServiceBuilder::new()
            .map_request(|r: http::Request<tonic::body::Body>| r)
            .service(channel),
    );
    let timed = times.as_mut();
    let kind = variant.clone();
    rt.block_on(async move {
        match variant.as_str() {
            "plain-deadline" => calls(plain, n, true, timed).await,
            "layer" => calls(layered, n, false, timed).await,
            "layer-retries-off" => calls(once, n, false, timed).await,
            "pass-through" => calls(pass_through, n, true, timed).await,
            _ => {
                calls(plain, 10, true, None).await;
                calls(layered, 10, false, None).await;
                calls(once, 10, false, None).await;
                calls(pass_through, 10, true, None).await;
            }
        }
    });
    drop(server);
    if let Some(mut times) = times {
        times.sort_unstable();
        if let Some(p50) = times.get(times.len() / 2) {
            println!("{kind} p50_ns {}", p50.as_nanos());
        }
    }
}
