//! Unary round trip over loopback HTTP/2 against the embedded server, same process:
//! a plain tonic `Channel` vs the same channel under the profile layer (metrics off,
//! and metrics on through the OpenTelemetry SDK).

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tower_layer::Layer;

#[path = "support/interleaved.rs"]
mod interleaved;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(TestServer::start()).unwrap();
    let channel = rt.block_on(async {
        tonic::transport::Endpoint::from_shared(server.url())
            .unwrap()
            .connect()
            .await
            .unwrap()
    });
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
            .layer(channel),
    );

    let names = [
        "plain_tonic",
        "plain_tonic_with_deadline",
        "layer_metrics_off",
        "layer_metrics_on",
    ];
    let medians = rt.block_on(interleaved::medians(40_000, &names, |variant| {
        let (mut p, mut l, mut m) = (plain.clone(), layered.clone(), metered.clone());
        async move {
            let mut req = tonic::Request::new(HeartbeatRequest::default());
            match variant {
                0 => drop(p.heartbeat(req).await.unwrap()),
                1 => {
                    req.set_timeout(std::time::Duration::from_secs(5));
                    drop(p.heartbeat(req).await.unwrap())
                }
                2 => drop(l.heartbeat(req).await.unwrap()),
                _ => drop(m.heartbeat(req).await.unwrap()),
            }
        }
    }));
    interleaved::report("unary Heartbeat round trip over loopback", &names, &medians);

    let mut group = c.benchmark_group("unary_heartbeat_loopback");
    group.bench_function("plain_tonic", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = plain.clone();
            async move { client.heartbeat(HeartbeatRequest::default()).await.unwrap() }
        })
    });
    // The same wire deadline as the layer puts on a heartbeat, set by hand.
    group.bench_function("plain_tonic_with_deadline", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = plain.clone();
            async move {
                let mut req = tonic::Request::new(HeartbeatRequest::default());
                req.set_timeout(std::time::Duration::from_secs(5));
                client.heartbeat(req).await.unwrap()
            }
        })
    });
    group.bench_function("layer_metrics_off", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = layered.clone();
            async move { client.heartbeat(HeartbeatRequest::default()).await.unwrap() }
        })
    });
    group.bench_function("layer_metrics_on", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = metered.clone();
            async move { client.heartbeat(HeartbeatRequest::default()).await.unwrap() }
        })
    });
    group.finish();
    drop(server);
}

criterion_group!(benches, bench);
criterion_main!(benches);
