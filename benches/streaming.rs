//! A 10,000-message server stream over loopback (ToolService/CallStream), drained by
//! a plain tonic client and by the same client under the layer's streaming timers.

use criterion::{criterion_group, criterion_main, Criterion};
use sw4rm_timeouts::proto::sw4rm::tool::tool_service_client::ToolServiceClient;
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::testing::{Script, StreamScript, TestServer};
use sw4rm_timeouts::{ProfileSet, StreamingTimeoutPolicy, TimeoutProfileLayer};
use tower_layer::Layer;

#[path = "support/interleaved.rs"]
mod interleaved;

const MESSAGES: u32 = 10_000;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(TestServer::start()).unwrap();
    server.script(
        "CallStream",
        Script::stream(StreamScript {
            messages: MESSAGES,
            ..StreamScript::default()
        }),
    );
    let channel = rt.block_on(async {
        tonic::transport::Endpoint::from_shared(server.url())
            .unwrap()
            .connect()
            .await
            .unwrap()
    });
    let profiles = ProfileSet::builder()
        .without_global()
        .streaming(
            "tool_call",
            StreamingTimeoutPolicy {
                initial_timeout_ms: 5_000,
                message_gap_timeout_ms: 1_000,
                total_timeout_ms: 600_000,
            },
        )
        .build()
        .unwrap();
    let plain = ToolServiceClient::new(channel.clone());
    let layered = ToolServiceClient::new(
        TimeoutProfileLayer::new(profiles)
            .without_metrics()
            .layer(channel),
    );

    let names = ["plain_tonic", "layer"];
    let medians = rt.block_on(interleaved::medians(60, &names, |variant| {
        let (mut p, mut l) = (plain.clone(), layered.clone());
        async move {
            let mut s = match variant {
                0 => p
                    .call_stream(ToolCall::default())
                    .await
                    .unwrap()
                    .into_inner(),
                _ => l
                    .call_stream(ToolCall::default())
                    .await
                    .unwrap()
                    .into_inner(),
            };
            let mut n = 0u32;
            while s.message().await.unwrap().is_some() {
                n += 1;
            }
            assert_eq!(n, MESSAGES);
        }
    }));
    interleaved::report("10,000-message CallStream over loopback", &names, &medians);
    for (name, m) in names.iter().zip(&medians) {
        println!(
            "  {name:<28} {:>8.2} µs per message",
            m.as_secs_f64() * 1e6 / f64::from(MESSAGES)
        );
    }

    let mut group = c.benchmark_group("stream_10k_messages_loopback");
    group.sample_size(20);
    group.bench_function("plain_tonic", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = plain.clone();
            async move {
                let mut s = client
                    .call_stream(ToolCall::default())
                    .await
                    .unwrap()
                    .into_inner();
                let mut n = 0u32;
                while s.message().await.unwrap().is_some() {
                    n += 1;
                }
                assert_eq!(n, MESSAGES);
            }
        })
    });
    group.bench_function("layer", |b| {
        b.to_async(&rt).iter(|| {
            let mut client = layered.clone();
            async move {
                let mut s = client
                    .call_stream(ToolCall::default())
                    .await
                    .unwrap()
                    .into_inner();
                let mut n = 0u32;
                while s.message().await.unwrap().is_some() {
                    n += 1;
                }
                assert_eq!(n, MESSAGES);
            }
        })
    });
    group.finish();
    drop(server);
}

criterion_group!(benches, bench);
criterion_main!(benches);
