//! Unary round trip over loopback HTTP/2 against the embedded server, same process:
//! a plain tonic `Channel` (without, and with, the same wire deadline set by hand)
//! vs the same channel under the profile layer (metrics off, and metrics on through
//! the OpenTelemetry SDK; both with retries on, the default), and the layer with
//! retries off (a call that needs no retry should cost the same either way), and a
//! pass-through tower wrapper over the same channel sending the same deadline by hand:
//! a client type of its own, as the layer's is, doing nothing (what a distinct client
//! type costs here, apart from anything the layer does).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tower_layer::Layer;

#[path = "support/interleaved.rs"]
mod interleaved;
#[path = "support/loopback.rs"]
mod loopback;

const NAMES: [&str; 6] = [
    "plain_tonic",
    "plain_tonic_with_deadline",
    "layer_metrics_off",
    "layer_metrics_on",
    "layer_retries_off",
    "pass_through_with_deadline",
];

fn bench(c: &mut Criterion) {
    let (rt, server, channel) = loopback::setup();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(InMemoryMetricExporter::default()).build())
        .build();
    let plain = RegistryServiceClient::new(channel.clone());
    let layered = RegistryServiceClient::new(
        TimeoutProfileLayer::new(ProfileSet::standard())
            .without_metrics()
            .layer(channel.clone()),
    );
    let metered = RegistryServiceClient::new(
        TimeoutProfileLayer::new(ProfileSet::standard())
            .with_meter_provider(&provider)
            .layer(channel.clone()),
    );
    let once = RegistryServiceClient::new(
        TimeoutProfileLayer::new(ProfileSet::standard())
            .without_metrics()
            .without_retries()
            .layer(channel.clone()),
    );
    let pass_through = RegistryServiceClient::new(
        tower::ServiceBuilder::new()
            .map_request(|r: http::Request<tonic::body::Body>| r)
            .service(channel),
    );
    // One heartbeat through the variant's client; variant 1 sets the same deadline
    // the layer puts on a heartbeat, by hand.
    let call = |variant: usize| {
        let (mut p, mut l, mut m, mut o, mut t) = (
            plain.clone(),
            layered.clone(),
            metered.clone(),
            once.clone(),
            pass_through.clone(),
        );
        async move {
            let mut req = tonic::Request::new(HeartbeatRequest::default());
            let response = match variant {
                0 => p.heartbeat(req).await,
                1 => {
                    req.set_timeout(Duration::from_secs(5));
                    p.heartbeat(req).await
                }
                2 => l.heartbeat(req).await,
                3 => m.heartbeat(req).await,
                4 => o.heartbeat(req).await,
                _ => {
                    req.set_timeout(Duration::from_secs(5));
                    t.heartbeat(req).await
                }
            };
            response.expect("heartbeat");
        }
    };

    let medians = rt.block_on(interleaved::medians(30_000, &NAMES, call));
    interleaved::report("unary Heartbeat round trip over loopback", &NAMES, &medians);
    let ratio = |a: usize, b: usize| medians[a].as_secs_f64() / medians[b].as_secs_f64();
    println!(
        "  layer (metrics off) vs plain tonic with the same deadline {:.3}x, vs the pass-through with it {:.3}x; retries on vs off {:.3}x\n",
        ratio(2, 1),
        ratio(2, 5),
        ratio(2, 4),
    );

    let mut group = c.benchmark_group("unary_heartbeat_loopback");
    for (variant, name) in NAMES.iter().enumerate() {
        group.bench_function(*name, |b| b.to_async(&rt).iter(|| call(variant)));
    }
    group.finish();
    drop(server);
}

criterion_group!(benches, bench);
criterion_main!(benches);
