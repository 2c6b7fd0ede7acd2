//! W3C trace context across stacks (feature `otel`): a grpcio peer
//! (`tests/grpcio/trace_peer.py`, Python, knowing nothing of this crate) reads the
//! `traceparent` our client sends as the trace and span of our call, and a grpcio
//! caller's `traceparent` makes our server span its child.
//!
//! Without Python's `grpcio` and `grpcio-tools` the test says so and passes, unless
//! `SW4RM_NEED_GRPCIO` is set (as `.ci/run` sets it): then it fails.

#[path = "common/heartbeat_chain.rs"]
mod heartbeat_chain;

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use heartbeat_chain::{agent, client_layer};
use opentelemetry::trace::{SpanId, SpanKind, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::Sw4rm;
use tracing::{Instrument, Level};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer as _;

/// The peer, its port, and its output lines; `None` when it cannot run here.
fn peer() -> Option<(Child, u16, Lines<BufReader<ChildStdout>>)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/grpcio/trace_peer.py");
    let need = std::env::var_os("SW4RM_NEED_GRPCIO").is_some();
    let spawned = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if !need => {
            eprintln!("grpcio_trace not run: python3 cannot start ({e})");
            return None;
        }
        Err(e) => panic!("python3 cannot start: {e}"),
    };
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    match first.strip_prefix("listening ") {
        Some(port) => Some((child, port.trim().parse().expect("a port"), lines)),
        None if !need => {
            eprintln!("grpcio_trace not run: the peer needs grpcio and grpcio-tools");
            let _ = child.kill();
            None
        }
        None => panic!("the grpcio peer did not start (pip install grpcio grpcio-tools)"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_context_crosses_to_grpcio_and_back() {
    let Some((mut child, port, mut lines)) = peer() else {
        return;
    };
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let ours = Targets::new()
        .with_target("sw4rm_timeouts", Level::TRACE)
        .with_target("grpcio_trace", Level::TRACE);
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("ours"));
    let subscriber = tracing_subscriber::registry().with(otel.with_filter(ours));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    // Our client → grpcio's server: it reads our call's trace and span.
    let url = format!("http://127.0.0.1:{port}");
    let client = Sw4rm::connect_with(url, client_layer()).await.unwrap();
    let root = tracing::info_span!("our_work");
    client
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .instrument(root)
        .await
        .unwrap();
    let seen = lines.next().unwrap().unwrap();
    let _ = provider.force_flush();
    let spans = exporter.get_finished_spans().unwrap();
    let call = spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Client)
        .expect("our call's span");
    let expected = format!(
        "seen 00-{}-{}-01",
        call.span_context.trace_id(),
        call.span_context.span_id()
    );
    assert_eq!(seen, expected);

    // grpcio's caller → our server: our server span is the child of what it sent.
    let (ours_url, _) = agent(None, Duration::ZERO).await;
    let target = ours_url.trim_start_matches("http://");
    let trace = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
    let parent = SpanId::from_hex("00f067aa0ba902b7").unwrap();
    let stdin = child.stdin.as_mut().unwrap();
    writeln!(stdin, "call {target} 00-{trace}-{parent}-01").unwrap();
    stdin.flush().unwrap();
    let called = tokio::task::spawn_blocking(move || lines.next().unwrap().unwrap())
        .await
        .unwrap();
    assert_eq!(called, "called OK");
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    let served = loop {
        let _ = provider.force_flush();
        let spans = exporter.get_finished_spans().unwrap();
        if let Some(s) = spans.iter().find(|s| s.span_kind == SpanKind::Server) {
            break s.clone();
        }
        assert!(tokio::time::Instant::now() < give_up, "{spans:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(served.span_context.trace_id(), trace, "{served:#?}");
    assert_eq!(served.parent_span_id, parent, "{served:#?}");
    assert!(served.parent_span_is_remote, "{served:#?}");

    drop(child.stdin.take());
    let _ = child.wait();
}
