//! A 10,000-message server stream over loopback (ToolService/CallStream), drained by
//! a plain tonic client and by the same client under the layer's streaming timers.

use criterion::{criterion_group, criterion_main, Criterion};
use sw4rm_timeouts::proto::sw4rm::tool::tool_service_client::ToolServiceClient;
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::testing::{Script, StreamScript};
use sw4rm_timeouts::{ProfileSet, StreamingTimeoutPolicy, TimeoutProfileLayer};
use tower_layer::Layer;

#[path = "support/interleaved.rs"]
mod interleaved;
#[path = "support/loopback.rs"]
mod loopback;

const MESSAGES: u32 = 10_000;
const NAMES: [&str; 2] = ["plain_tonic", "layer"];

/// Opens a CallStream and reads it to the end.
async fn drain<T>(mut client: ToolServiceClient<T>)
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let mut stream = client
        .call_stream(ToolCall::default())
        .await
        .expect("open stream")
        .into_inner();
    let mut n = 0u32;
    while stream.message().await.expect("message").is_some() {
        n += 1;
    }
    assert_eq!(n, MESSAGES);
}

fn bench(c: &mut Criterion) {
    let (rt, server, channel) = loopback::setup();
    server
        .script(
            "CallStream",
            Script::stream(StreamScript {
                messages: MESSAGES,
                ..StreamScript::default()
            }),
        )
        .expect("a known RPC");
    let policy = StreamingTimeoutPolicy {
        initial_timeout_ms: 5_000,
        message_gap_timeout_ms: 1_000,
        total_timeout_ms: 600_000,
        idle_timeout_ms: 0,
    };
    let profiles = ProfileSet::builder()
        .without_global()
        .streaming("tool_call", policy)
        .build()
        .expect("profiles");
    let plain = ToolServiceClient::new(channel.clone());
    let layered = ToolServiceClient::new(
        TimeoutProfileLayer::new(profiles)
            .without_metrics()
            .layer(channel),
    );
    let run = |variant: usize| {
        let (p, l) = (plain.clone(), layered.clone());
        async move {
            match variant {
                0 => drain(p).await,
                _ => drain(l).await,
            }
        }
    };

    let medians = rt.block_on(interleaved::medians(60, &NAMES, run));
    interleaved::report("10,000-message CallStream over loopback", &NAMES, &medians);
    for (name, m) in NAMES.iter().zip(&medians) {
        println!(
            "  {name:<28} {:>8.2} µs per message",
            m.as_secs_f64() * 1e6 / f64::from(MESSAGES)
        );
    }

    let mut group = c.benchmark_group("stream_10k_messages_loopback");
    group.sample_size(20);
    for (variant, name) in NAMES.iter().enumerate() {
        group.bench_function(*name, |b| b.to_async(&rt).iter(|| run(variant)));
    }
    group.finish();
    drop(server);
}

criterion_group!(benches, bench);
criterion_main!(benches);
