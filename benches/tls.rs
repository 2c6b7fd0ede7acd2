//! Unary round trip over loopback, TLS against plain HTTP/2, same process: plain tonic
//! sending the same deadline by hand, and the same channel under the profile layer
//! (defaults, metrics off), over each transport. TLS costs what it costs; the layer
//! must not add to it (its cost over TLS is its cost over plain HTTP/2).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tonic::transport::{Channel, Endpoint};
use tower_layer::Layer;

#[path = "support/interleaved.rs"]
mod interleaved;

const NAMES: [&str; 4] = [
    "plain_tonic_h2_with_deadline",
    "layer_h2",
    "plain_tonic_tls_with_deadline",
    "layer_tls",
];

async fn channel(server: &TestServer) -> Channel {
    let endpoint = Endpoint::from_shared(server.url()).expect("url");
    let endpoint = match server.tls() {
        Some(tls) => endpoint.tls_config(tls.client_tls_config()).expect("tls"),
        None => endpoint,
    };
    endpoint.connect().await.expect("connect")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (h2_server, tls_server) = rt.block_on(async {
        (
            TestServer::start().await.expect("server"),
            TestServer::start_tls().await.expect("tls server"),
        )
    });
    let (h2, tls) = rt.block_on(async { (channel(&h2_server).await, channel(&tls_server).await) });
    let layer = TimeoutProfileLayer::new(ProfileSet::standard()).without_metrics();
    let plain_h2 = RegistryServiceClient::new(h2.clone());
    let layer_h2 = RegistryServiceClient::new(layer.layer(h2));
    let plain_tls = RegistryServiceClient::new(tls.clone());
    let layer_tls = RegistryServiceClient::new(layer.layer(tls));

    let call = |variant: usize| {
        let (mut ph, mut lh, mut pt, mut lt) = (
            plain_h2.clone(),
            layer_h2.clone(),
            plain_tls.clone(),
            layer_tls.clone(),
        );
        async move {
            let mut req = tonic::Request::new(HeartbeatRequest::default());
            let response = match variant {
                0 => {
                    req.set_timeout(Duration::from_secs(5));
                    ph.heartbeat(req).await
                }
                1 => lh.heartbeat(req).await,
                2 => {
                    req.set_timeout(Duration::from_secs(5));
                    pt.heartbeat(req).await
                }
                _ => lt.heartbeat(req).await,
            };
            response.expect("heartbeat");
        }
    };

    let samples = rt.block_on(interleaved::samples(20_000, NAMES.len(), call));
    let medians: Vec<Duration> = samples
        .iter()
        .map(|s| interleaved::median(&mut s.clone()))
        .collect();
    interleaved::report(
        "unary Heartbeat, TLS vs plain HTTP/2, loopback",
        &NAMES,
        &medians,
    );
    println!(
        "  layer over plain tonic, paired per round: h2 {:+.0} ns, TLS {:+.0} ns\n",
        interleaved::paired_difference_ns(&samples[1], &samples[0]),
        interleaved::paired_difference_ns(&samples[3], &samples[2]),
    );

    let mut group = c.benchmark_group("unary_heartbeat_tls");
    for (variant, name) in NAMES.iter().enumerate() {
        group.bench_function(*name, |b| b.to_async(&rt).iter(|| call(variant)));
    }
    group.finish();
    drop((h2_server, tls_server));
}

criterion_group!(benches, bench);
criterion_main!(benches);
