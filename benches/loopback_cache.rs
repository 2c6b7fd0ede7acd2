//! Unary calls over loopback, one client kind per process, for
//! `valgrind --tool=cachegrind` (counts, not seconds: instructions, cache misses and
//! mispredicted branches of the whole process, client and embedded server).
//!
//! ```sh
//! cargo bench --bench loopback_cache --no-run   # prints the executable's path
//! for v in plain-deadline layer layer-retries-off pass-through floor; do
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
//! `layer-unique` gives each call a deadline of its own (`CallTimeout`, 4 s to 5 s, as
//! a propagated or remaining deadline is), which the layer sends never-indexed;
//! `plain-unique` sends the same values by hand, indexable, as tonic does.
//! `floor` is the least a timeout layer with retries does per unary call
//! (`support/floor.rs`): what the layer's own work costs above that.
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

#[path = "support/floor.rs"]
mod floor;
#[path = "support/loopback.rs"]
mod loopback;

/// The deadline the layer puts on a heartbeat, set by hand on the plain calls.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// How a call's deadline is set.
#[derive(Clone, Copy)]
enum Deadline {
    /// By the layer, from the profile (the same value on every call).
    Profile,
    /// By hand, the profile's value (tonic's `set_timeout`).
    ByHand,
    /// Per call, a value unique to the call (`CallTimeout`), as a propagated or
    /// remaining deadline is: the layer sends it never-indexed.
    Unique,
    /// By hand, the same unique values (tonic sends them indexable).
    UniqueByHand,
}

/// A value unique to call `i` among the last few hundred: 4 s to 5 s.
fn unique(i: usize) -> Duration {
    Duration::from_millis(4_000 + (i % 997) as u64)
}

/// `calls` heartbeats, one after another, their deadline set as `deadline` says. With
/// `times`, each call's round trip is pushed there.
async fn calls<T>(
    client: RegistryServiceClient<T>,
    calls: usize,
    deadline: Deadline,
    mut times: Option<&mut Vec<Duration>>,
) where
    T: GrpcService<tonic::body::Body> + Clone,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error:
        Into<Box<dyn std::error::Error + Send + Sync>> + Send,
{
    for i in 0..calls {
        let start = std::time::Instant::now();
        let mut request = tonic::Request::new(HeartbeatRequest::default());
        match deadline {
            Deadline::Profile => {}
            Deadline::ByHand => request.set_timeout(HEARTBEAT),
            Deadline::Unique => {
                request
                    .extensions_mut()
                    .insert(sw4rm_timeouts::CallTimeout::After(unique(i)));
            }
            Deadline::UniqueByHand => request.set_timeout(unique(i)),
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
            .service(channel.clone()),
    );
    let floor = RegistryServiceClient::new(floor::Floor::new(
        channel,
        "/sw4rm.registry.RegistryService/Heartbeat",
        HEARTBEAT,
    ));
    let timed = times.as_mut();
    let kind = variant.clone();
    rt.block_on(async move {
        match variant.as_str() {
            "plain-deadline" => calls(plain, n, Deadline::ByHand, timed).await,
            "layer" => calls(layered, n, Deadline::Profile, timed).await,
            "layer-retries-off" => calls(once, n, Deadline::Profile, timed).await,
            "pass-through" => calls(pass_through, n, Deadline::ByHand, timed).await,
            "floor" => calls(floor, n, Deadline::Profile, timed).await,
            "plain-unique" => calls(plain, n, Deadline::UniqueByHand, timed).await,
            "layer-unique" => calls(layered, n, Deadline::Unique, timed).await,
            _ => {
                calls(plain.clone(), 10, Deadline::ByHand, None).await;
                calls(layered.clone(), 10, Deadline::Profile, None).await;
                calls(once, 10, Deadline::Profile, None).await;
                calls(pass_through, 10, Deadline::ByHand, None).await;
                calls(floor, 10, Deadline::Profile, None).await;
                calls(plain, 10, Deadline::UniqueByHand, None).await;
                calls(layered, 10, Deadline::Unique, None).await;
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
