//! Traces that follow the work (feature `otel`): a chain of three agents over
//! loopback, A → B → C, each a tonic server behind `InboundDeadlineLayer` calling the
//! next through `TimeoutProfileLayer`, both with W3C trace context. Spans reach an
//! OpenTelemetry SDK through `tracing-opentelemetry` and an in-memory exporter. The
//! chain is one trace with the right parents; each hop's span carries the timeout it
//! was given; the hop where the deadline ran out is the one marked
//! `DEADLINE_EXCEEDED`; and the `traceparent` on the wire is what W3C says.

use std::time::Duration;

use opentelemetry::trace::{SpanKind, TraceId, TracerProvider as _};
use opentelemetry::Value;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::Sw4rm;
use tonic::{Request, Status};
use tracing::Instrument;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer as _;

#[path = "common/heartbeat_chain.rs"]
mod heartbeat_chain;

use heartbeat_chain::{agent, agent_with, client_layer, inbound_layer, HEARTBEAT};

fn attribute(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.clone())
}

fn int(span: &SpanData, key: &str) -> i64 {
    // A u64 field reaches OpenTelemetry as an integer, or as text past i64.
    match attribute(span, key) {
        Some(Value::I64(v)) => v,
        Some(Value::String(v)) if v.as_str().parse::<i64>().is_ok() => v.as_str().parse().unwrap(),
        other => panic!("{}: {key} = {other:?}", span.name),
    }
}

/// Runs A → B → C (C answering after `c_delay`, A's call under `timeout`) inside a
/// root span, and gives the spans exported, with what B and C saw on the wire.
async fn chain(
    c_delay: Duration,
    timeout: Option<Duration>,
) -> (Vec<SpanData>, Result<(), Status>, Vec<String>, String) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    // The agents' spans and the test's (not h2's and hyper's own).
    let ours = Targets::new()
        .with_target("sw4rm_timeouts", Level::TRACE)
        .with_target("trace_context", Level::TRACE);
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("agents"));
    let subscriber = tracing_subscriber::registry().with(otel.with_filter(ours));
    let _default = tracing::subscriber::set_default(subscriber);

    let (c, _) = agent(None, c_delay).await;
    let (b, b_saw) = agent(Some(&c), Duration::ZERO).await;
    let a = Sw4rm::connect_with(b.clone(), client_layer())
        .await
        .unwrap();
    let root = tracing::info_span!("agent_a_work");
    let answer = async {
        let mut request = Request::new(HeartbeatRequest::default());
        if let Some(t) = timeout {
            request.set_timeout(t);
        }
        a.registry().heartbeat(request).await.map(drop)
    }
    .instrument(root)
    .await;
    drop(a);
    // The hops' spans end as their handlers do, maybe after A has its answer: wait
    // for the root, two client and two server spans (giving up after 10 s).
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    let spans = loop {
        let _ = provider.force_flush();
        let spans = exporter.get_finished_spans().unwrap();
        let kind = |k: SpanKind| spans.iter().filter(|s| s.span_kind == k).count();
        let whole = kind(SpanKind::Client) == 2 && kind(SpanKind::Server) == 2;
        if whole && spans.iter().any(|s| s.name == "agent_a_work") {
            break spans;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "spans never complete: {spans:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let seen = b_saw.lock().unwrap().clone();
    (spans, answer, seen, b)
}

/// The one span named `name` of `kind` whose parent is `parent` (exactly one).
fn child<'a>(spans: &'a [SpanData], parent: &SpanData, kind: SpanKind) -> &'a SpanData {
    let found: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.parent_span_id == parent.span_context.span_id() && s.span_kind == kind)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "children of {} ({kind:?}): {found:#?}",
        parent.name
    );
    found[0]
}

#[tokio::test]
async fn three_agents_make_one_trace_with_each_hops_timeout_on_its_span() {
    let (spans, answer, b_saw, b_url) = chain(Duration::ZERO, None).await;
    answer.unwrap();
    let root = spans
        .iter()
        .find(|s| s.name == "agent_a_work")
        .expect("the root span");
    let trace: TraceId = root.span_context.trace_id();
    assert!(
        spans.iter().all(|s| s.span_context.trace_id() == trace),
        "one trace: {spans:#?}"
    );

    let a_call = child(&spans, root, SpanKind::Client);
    let b_serves = child(&spans, a_call, SpanKind::Server);
    let b_call = child(&spans, b_serves, SpanKind::Client);
    let c_serves = child(&spans, b_call, SpanKind::Server);
    for s in [a_call, b_serves, b_call, c_serves] {
        assert_eq!(s.name, HEARTBEAT, "OpenTelemetry's span name: {s:#?}");
        assert_eq!(attribute(s, "rpc.system.name"), Some(Value::from("grpc")));
        assert_eq!(attribute(s, "rpc.method"), Some(Value::from(HEARTBEAT)));
    }
    for s in [a_call, b_call] {
        assert_eq!(
            attribute(s, "rpc.response.status_code"),
            Some(Value::from("OK"))
        );
        assert_eq!(attribute(s, "error.type"), None);
    }
    // The timeout each hop was given: A's heartbeat 5 s; B received about that and
    // gave C less (what was left, less the hop offset).
    assert_eq!(int(a_call, "timeout_ms"), 5_000);
    // Where each hop's timeout came from, and one attempt each.
    assert_eq!(
        attribute(a_call, "sw4rm.timeout_source"),
        Some(Value::from("standard"))
    );
    assert_eq!(
        attribute(b_call, "sw4rm.timeout_source"),
        Some(Value::from("inherited"))
    );
    assert_eq!(int(a_call, "sw4rm.attempts"), 1);
    let b_given = int(b_serves, "sw4rm.deadline_ms");
    assert!((1..=5_000).contains(&b_given), "{b_given}");
    let b_sends = int(b_call, "timeout_ms");
    assert!(
        b_sends < b_given,
        "B passes on less than it got: {b_sends} of {b_given}"
    );
    assert!(int(c_serves, "sw4rm.deadline_ms") <= b_sends);

    // The server each client span called: B's address for A's call, C's for B's.
    let b_port: i64 = b_url.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(
        attribute(a_call, "server.address"),
        Some(Value::from("127.0.0.1"))
    );
    assert_eq!(int(a_call, "server.port"), b_port);
    let c_port = int(b_call, "server.port");
    assert!(c_port > 0 && c_port != b_port, "{c_port}");

    // On the wire: W3C's traceparent, version 00, A's trace and A's call span, sampled.
    let sent = &b_saw[0];
    let expected = format!("00-{}-{}-01", trace, a_call.span_context.span_id());
    assert_eq!(sent, &expected);
}

#[tokio::test]
async fn the_hop_where_the_deadline_ran_out_is_marked() {
    // C takes 3 s; A gives its call 1.5 s: B's call to C (what is left, less 300 ms)
    // runs out first.
    let (spans, answer, _, _) =
        chain(Duration::from_secs(3), Some(Duration::from_millis(1_500))).await;
    assert_eq!(answer.unwrap_err().code(), tonic::Code::DeadlineExceeded);
    let root = spans
        .iter()
        .find(|s| s.name == "agent_a_work")
        .expect("the root span");
    let a_call = child(&spans, root, SpanKind::Client);
    let b_serves = child(&spans, a_call, SpanKind::Server);
    let b_call = child(&spans, b_serves, SpanKind::Client);
    assert_eq!(
        attribute(b_call, "error.type"),
        Some(Value::from("DEADLINE_EXCEEDED")),
        "{b_call:#?}"
    );
    assert!(
        matches!(b_call.status, opentelemetry::trace::Status::Error { .. }),
        "{:?}",
        b_call.status
    );
    assert_eq!(int(a_call, "timeout_ms"), 1_500);
    // The phase that ran out and what the call left behind, on the hop that ran out.
    assert_eq!(
        attribute(b_call, "sw4rm.timeout_phase"),
        Some(Value::from("total"))
    );
    let effect = attribute(b_call, "sw4rm.effect").map(|v| v.to_string());
    assert!(
        matches!(
            effect.as_deref(),
            Some("read_aborted" | "mutation_indeterminate")
        ),
        "a call that was sent: {effect:?}"
    );
    assert_eq!(
        attribute(a_call, "sw4rm.timeout_phase"),
        None,
        "A's call got B's answer"
    );
}

/// Spans of this thread's calls, into an in-memory exporter.
fn captured() -> (
    InMemorySpanExporter,
    SdkTracerProvider,
    tracing::subscriber::DefaultGuard,
) {
    captured_with(Targets::new())
}

/// [`captured`], with the spans and events of `more` targets too.
fn captured_with(
    more: Targets,
) -> (
    InMemorySpanExporter,
    SdkTracerProvider,
    tracing::subscriber::DefaultGuard,
) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let ours = more.with_target("sw4rm_timeouts", Level::TRACE);
    let otel = tracing_opentelemetry::layer().with_tracer(provider.tracer("agents"));
    let subscriber = tracing_subscriber::registry().with(otel.with_filter(ours));
    (
        exporter,
        provider,
        tracing::subscriber::set_default(subscriber),
    )
}

/// Every span finished so far, flushed first.
fn finished(exporter: &InMemorySpanExporter, provider: &SdkTracerProvider) -> Vec<SpanData> {
    let _ = provider.force_flush();
    exporter.get_finished_spans().unwrap()
}

/// A heartbeat naming `agent_id`.
fn beat_of(agent_id: &str) -> HeartbeatRequest {
    HeartbeatRequest {
        agent_id: agent_id.into(),
        ..Default::default()
    }
}

/// The first server span to finish (giving up after 10 s).
async fn a_server_span(exporter: &InMemorySpanExporter, provider: &SdkTracerProvider) -> SpanData {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let spans = finished(exporter, provider);
        if let Some(s) = spans.into_iter().find(|s| s.span_kind == SpanKind::Server) {
            return s;
        }
        assert!(tokio::time::Instant::now() < give_up, "no server span");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The one call's client span.
fn the_client_span(spans: &[SpanData]) -> &SpanData {
    spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Client)
        .expect("the call's span")
}

#[tokio::test]
async fn sw4_003_span_names_on_both_sides_keep_the_method_as_an_attribute() {
    let (exporter, provider, _default) = captured();
    let sw4003 = sw4rm_timeouts::SpanName::Sw4003;
    let inbound = inbound_layer().with_span_name(sw4003);
    let (b, _) = agent_with(None, Duration::ZERO, client_layer(), inbound).await;
    let a = Sw4rm::connect_with(b, client_layer().with_span_name(sw4003))
        .await
        .unwrap();
    a.registry()
        .heartbeat(HeartbeatRequest::default())
        .await
        .unwrap();
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    let spans = loop {
        let _ = provider.force_flush();
        let spans = exporter.get_finished_spans().unwrap();
        if spans.len() >= 2 {
            break spans;
        }
        assert!(tokio::time::Instant::now() < give_up, "{spans:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for kind in [SpanKind::Client, SpanKind::Server] {
        let span = spans
            .iter()
            .find(|s| s.span_kind == kind)
            .expect("both sides");
        assert_eq!(span.name, "sw4rm.registry.heartbeat", "{span:#?}");
        assert_eq!(attribute(span, "rpc.method"), Some(Value::from(HEARTBEAT)));
    }
}

#[tokio::test]
async fn each_retry_is_an_event_on_the_calls_span_with_why_and_the_traces_ids() {
    use sw4rm_timeouts::testing::{Script, TestServer};
    let (exporter, provider, _default) = captured();
    let server = TestServer::start().await.unwrap();
    server
        .script("Heartbeat", Script::fail_first(2, tonic::Code::Unavailable))
        .unwrap();
    let layer = sw4rm_timeouts::TimeoutProfileLayer::standard();
    let sw4rm = Sw4rm::connect_with(server.url(), layer).await.unwrap();
    sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await
        .unwrap();
    let spans = finished(&exporter, &provider);
    let call = the_client_span(&spans);
    let retries: Vec<_> = call
        .events
        .iter()
        .filter(|e| e.name == "SW4RM retrying the call")
        .collect();
    assert_eq!(retries.len(), 2, "{:#?}", call.events);
    for (event, attempt) in retries.iter().zip([2_i64, 3]) {
        let field = |key: &str| {
            event
                .attributes
                .iter()
                .find(|kv| kv.key.as_str() == key)
                .map(|kv| kv.value.clone())
        };
        // An unsigned field reaches an OpenTelemetry event as text or an integer.
        let number = match field("attempt") {
            Some(Value::I64(n)) => Some(n),
            Some(Value::String(n)) => n.as_str().parse().ok(),
            _ => None,
        };
        assert_eq!(number, Some(attempt), "{event:#?}");
        // A log line of the call finds its trace: the ids of the call's span.
        let trace = call.span_context.trace_id().to_string();
        let span = call.span_context.span_id().to_string();
        assert_eq!(field("trace_id"), Some(Value::from(trace)), "{event:#?}");
        assert_eq!(field("span_id"), Some(Value::from(span)), "{event:#?}");
        assert!(
            matches!(field("reason"), Some(Value::String(r)) if !r.as_str().is_empty()),
            "{event:#?}"
        );
    }
    assert_eq!(server.calls_to("Heartbeat").len(), 3);
    assert_eq!(int(call, "sw4rm.attempts"), 3);
}

#[tokio::test]
async fn a_hedged_call_says_its_hedges_and_attempts_on_its_span() {
    use sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest;
    use sw4rm_timeouts::testing::{Script, TestServer};
    use sw4rm_timeouts::{HedgingPolicy, ProfileSet, TimeoutProfileLayer};
    let (exporter, provider, _default) = captured();
    let server = TestServer::start().await.unwrap();
    // The first attempt waits 2 s; the hedge, sent after 50 ms, answers at once.
    server
        .script(
            "GetTaskStatus",
            Script::slow_first(1, Duration::from_secs(2)),
        )
        .unwrap();
    let hedge = HedgingPolicy::builder()
        .max_attempts(2)
        .delay(Duration::from_millis(50))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .hedging("workflow_status", hedge)
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles);
    let sw4rm = Sw4rm::connect_with(server.url(), layer).await.unwrap();
    sw4rm
        .scheduler()
        .get_task_status(GetTaskStatusRequest::default())
        .await
        .unwrap();
    let spans = finished(&exporter, &provider);
    let call = the_client_span(&spans);
    assert_eq!(
        attribute(call, "profile"),
        Some(Value::from("workflow_status"))
    );
    assert_eq!(int(call, "sw4rm.hedges"), 1, "{call:#?}");
    assert_eq!(int(call, "sw4rm.attempts"), 2, "{call:#?}");
    assert_eq!(
        attribute(call, "rpc.response.status_code"),
        Some(Value::from("OK"))
    );
    let hedged = call
        .events
        .iter()
        .filter(|e| e.name == "SW4RM hedging the call");
    assert_eq!(hedged.count(), 1, "{:#?}", call.events);
}

#[tokio::test]
async fn work_carried_to_another_task_stays_in_the_trace() {
    use sw4rm_timeouts::scope;
    use sw4rm_timeouts::testing::TestServer;
    let (exporter, provider, _default) = captured();
    let server = TestServer::start().await.unwrap();
    let sw4rm = Sw4rm::connect_with(server.url(), client_layer())
        .await
        .unwrap();
    let root = tracing::info_span!(target: "sw4rm_timeouts", "handler_work");
    let (carried, spawned) = {
        let _in_root = root.enter();
        let (a, b) = (sw4rm.clone(), sw4rm.clone());
        let beat = |s: Sw4rm| async move {
            s.registry()
                .heartbeat(HeartbeatRequest::default())
                .await
                .map(drop)
        };
        (tokio::spawn(scope::carry(beat(a))), tokio::spawn(beat(b)))
    };
    carried.await.unwrap().unwrap();
    spawned.await.unwrap().unwrap();
    drop(root);
    let spans = finished(&exporter, &provider);
    let root = spans
        .iter()
        .find(|s| s.name == "handler_work")
        .expect("the root span");
    let calls: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Client)
        .collect();
    assert_eq!(calls.len(), 2, "{spans:#?}");
    let under_root = |s: &&&SpanData| s.parent_span_id == root.span_context.span_id();
    // `carry` took the span along; a bare `tokio::spawn` starts a trace of its own.
    assert_eq!(calls.iter().filter(under_root).count(), 1, "{calls:#?}");
    let alone = calls.iter().find(|s| !under_root(s)).unwrap();
    assert_ne!(alone.span_context.trace_id(), root.span_context.trace_id());
}

/// The server span names the caller's SW4-003 ids, read from the request's message as
/// the handler reads it: a heartbeat's `agent_id` lands as `sw4rm.agent_id`; an id
/// with a control character (a forged log line) is not written.
#[tokio::test]
async fn the_server_span_names_the_ids_its_request_carries() {
    let (exporter, provider, _default) = captured();
    let (b, _) = agent(None, Duration::ZERO).await;
    let a = Sw4rm::connect_with(b, client_layer()).await.unwrap();
    for agent_id in ["agent-7", "x\nlevel=ERROR forged"] {
        a.registry().heartbeat(beat_of(agent_id)).await.unwrap();
    }
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    let servers = loop {
        let spans = finished(&exporter, &provider);
        let servers: Vec<SpanData> = spans
            .into_iter()
            .filter(|s| s.span_kind == SpanKind::Server)
            .collect();
        if servers.len() == 2 {
            break servers;
        }
        assert!(tokio::time::Instant::now() < give_up, "{servers:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut named: Vec<Option<Value>> = servers
        .iter()
        .map(|s| attribute(s, "sw4rm.agent_id"))
        .collect();
    named.sort_by_key(|v| v.is_none());
    assert_eq!(named, [Some(Value::from("agent-7")), None], "{servers:#?}");
    for span in &servers {
        assert_eq!(
            attribute(span, "sw4rm.correlation_id"),
            None,
            "a heartbeat has none"
        );
    }
}

/// Told where a route's requests carry the ids (`with_message_ids`), the server span
/// reads them there instead of where SW4RM's heartbeat has them: field 1 as the
/// `correlation_id`, and no `agent_id`.
#[tokio::test]
async fn the_server_span_reads_ids_where_it_is_told_they_are() {
    use sw4rm_timeouts::route::RoutePattern;
    use sw4rm_timeouts::MessageIds;
    let (exporter, provider, _default) = captured();
    let inbound = inbound_layer().with_message_ids(
        RoutePattern::parse(&format!("/{HEARTBEAT}")).unwrap(),
        MessageIds::new().correlation_id(&[1]),
    );
    let (b, _) = agent_with(None, Duration::ZERO, client_layer(), inbound).await;
    let a = Sw4rm::connect_with(b, client_layer()).await.unwrap();
    a.registry().heartbeat(beat_of("agent-7")).await.unwrap();
    let server = a_server_span(&exporter, &provider).await;
    assert_eq!(
        attribute(&server, "sw4rm.correlation_id"),
        Some(Value::from("agent-7")),
        "{server:#?}"
    );
    assert_eq!(attribute(&server, "sw4rm.agent_id"), None, "{server:#?}");
}

/// A server span at a level of its own (`with_span_level`) needs no trace context:
/// with no propagator on either side, each handler still runs in a `sw4rm_rpc_server`
/// span (a root) that names the request's `agent_id`, and the handler's own event is
/// inside it.
#[tokio::test]
async fn a_server_span_of_its_own_level_needs_no_trace_context() {
    use sw4rm_timeouts::scope::InboundDeadlineLayer;
    use sw4rm_timeouts::TimeoutProfileLayer;
    let handlers = Targets::new().with_target("trace_context", Level::INFO);
    let (exporter, provider, _default) = captured_with(handlers);
    let inbound = InboundDeadlineLayer::new().with_span_level(Level::DEBUG);
    let plain = || TimeoutProfileLayer::standard();
    let (b, seen) = agent_with(None, Duration::ZERO, plain(), inbound).await;
    let a = Sw4rm::connect_with(b, plain()).await.unwrap();
    a.registry().heartbeat(beat_of("agent-7")).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), [""], "no trace context was sent");
    let server = a_server_span(&exporter, &provider).await;
    assert_eq!(
        attribute(&server, "sw4rm.agent_id"),
        Some(Value::from("agent-7")),
        "{server:#?}"
    );
    assert_eq!(
        attribute(&server, "rpc.method"),
        Some(Value::from(HEARTBEAT))
    );
    let root = opentelemetry::trace::SpanId::INVALID;
    assert_eq!(server.parent_span_id, root, "a root: {server:#?}");
    assert!(
        server.events.iter().any(|e| e.name == "heartbeat served"),
        "{server:#?}"
    );
}
