//! Helpers shared by the integration tests: the embedded server, a dispatcher that
//! calls any of the 26 RPCs by path, metric snapshots and captured tracing events.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use sw4rm_timeouts::proto::sw4rm::{handoff, negotiation_room as nr, registry, scheduler, tool};
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::{CallTimeout, ProfileSet, Sw4rm, TimeoutProfileLayer};
use tonic::Status;

/// Generous bound for waits on real sockets (never reached when the code works).
pub const WAIT: Duration = Duration::from_secs(10);

pub async fn server() -> TestServer {
    install_subscriber();
    TestServer::start().await.expect("bind loopback")
}

pub fn standard() -> ProfileSet {
    ProfileSet::builder()
        .without_global()
        .build()
        .expect("standard profiles")
}

pub async fn connect(server: &TestServer, layer: TimeoutProfileLayer) -> Sw4rm {
    Sw4rm::connect_with(server.url(), layer)
        .await
        .expect("connect to embedded server")
}

/// Per-call options applied to whatever request type the RPC takes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Opts {
    pub set_timeout: Option<Duration>,
    pub call_timeout: Option<CallTimeout>,
}

fn req<T>(msg: T, opts: Opts) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    if let Some(d) = opts.set_timeout {
        r.set_timeout(d);
    }
    if let Some(t) = opts.call_timeout {
        t.apply(&mut r);
    }
    r
}

/// Calls the RPC at `path` with a default message; streams are drained.
pub async fn call(sw4rm: &Sw4rm, path: &str, opts: Opts) -> Result<(), Status> {
    let (service, method) = sw4rm_timeouts::route::split_path(path).unwrap_or(("", ""));
    match (service, method) {
        ("sw4rm.registry.RegistryService", m) => {
            let mut c = sw4rm.registry();
            match m {
                "RegisterAgent" => c
                    .register_agent(req(registry::RegisterAgentRequest::default(), opts))
                    .await
                    .map(drop),
                "Heartbeat" => c
                    .heartbeat(req(registry::HeartbeatRequest::default(), opts))
                    .await
                    .map(drop),
                "DeregisterAgent" => c
                    .deregister_agent(req(registry::DeregisterAgentRequest::default(), opts))
                    .await
                    .map(drop),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.scheduler.SchedulerService", m) => {
            let mut c = sw4rm.scheduler();
            match m {
                "SubmitTask" => c
                    .submit_task(req(scheduler::SubmitTaskRequest::default(), opts))
                    .await
                    .map(drop),
                "CancelTask" => c
                    .cancel_task(req(scheduler::CancelTaskRequest::default(), opts))
                    .await
                    .map(drop),
                "GetTaskStatus" => c
                    .get_task_status(req(scheduler::GetTaskStatusRequest::default(), opts))
                    .await
                    .map(drop),
                "RequestPreemption" => c
                    .request_preemption(req(scheduler::PreemptRequest::default(), opts))
                    .await
                    .map(drop),
                "ShutdownAgent" => c
                    .shutdown_agent(req(scheduler::ShutdownAgentRequest::default(), opts))
                    .await
                    .map(drop),
                "PollActivityBuffer" => c
                    .poll_activity_buffer(req(
                        scheduler::PollActivityBufferRequest::default(),
                        opts,
                    ))
                    .await
                    .map(drop),
                "PurgeActivity" => c
                    .purge_activity(req(scheduler::PurgeActivityRequest::default(), opts))
                    .await
                    .map(drop),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.negotiation_room.NegotiationRoomService", m) => {
            let mut c = sw4rm.negotiation_room();
            match m {
                "SubmitProposal" => c
                    .submit_proposal(req(nr::SubmitProposalRequest::default(), opts))
                    .await
                    .map(drop),
                "SubmitVote" => c
                    .submit_vote(req(nr::SubmitVoteRequest::default(), opts))
                    .await
                    .map(drop),
                "GetVotes" => c
                    .get_votes(req(nr::GetVotesRequest::default(), opts))
                    .await
                    .map(drop),
                "GetDecision" => c
                    .get_decision(req(nr::GetDecisionRequest::default(), opts))
                    .await
                    .map(drop),
                "WaitForDecision" => c
                    .wait_for_decision(req(nr::WaitForDecisionRequest::default(), opts))
                    .await
                    .map(drop),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.handoff.HandoffService", m) => {
            let mut c = sw4rm.handoff();
            match m {
                "RequestHandoff" => c
                    .request_handoff(req(handoff::HandoffRequest::default(), opts))
                    .await
                    .map(drop),
                "AcceptHandoff" => c
                    .accept_handoff(req(handoff::HandoffResponse::default(), opts))
                    .await
                    .map(drop),
                "RejectHandoff" => c
                    .reject_handoff(req(handoff::HandoffResponse::default(), opts))
                    .await
                    .map(drop),
                "GetPendingHandoffs" => c
                    .get_pending_handoffs(req(handoff::GetPendingHandoffsRequest::default(), opts))
                    .await
                    .map(drop),
                "CompleteHandoff" => c
                    .complete_handoff(req(handoff::CompleteHandoffRequest::default(), opts))
                    .await
                    .map(drop),
                "CancelDelegation" => c
                    .cancel_delegation(req(handoff::CancelDelegation::default(), opts))
                    .await
                    .map(drop),
                _ => panic!("unknown {path}"),
            }
        }
        ("sw4rm.tool.ToolService", m) => {
            let mut c = sw4rm.tool();
            match m {
                "Call" => c.call(req(tool::ToolCall::default(), opts)).await.map(drop),
                "Cancel" => c
                    .cancel(req(tool::ToolCall::default(), opts))
                    .await
                    .map(drop),
                "InvokeTool" => c
                    .invoke_tool(req(tool::InvokeToolRequest::default(), opts))
                    .await
                    .map(drop),
                "DescribeTool" => c
                    .describe_tool(req(tool::DescribeToolRequest::default(), opts))
                    .await
                    .map(drop),
                "CallStream" => {
                    let mut stream = c
                        .call_stream(req(tool::ToolCall::default(), opts))
                        .await?
                        .into_inner();
                    while stream.message().await?.is_some() {}
                    Ok(())
                }
                _ => panic!("unknown {path}"),
            }
        }
        _ => panic!("unknown {path}"),
    }
}

/// An SDK meter provider whose readings the test can take.
pub struct Metrics {
    pub exporter: InMemoryMetricExporter,
    pub provider: SdkMeterProvider,
}

/// One data point: name, attributes, and (count for histograms, value for sums).
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub name: String,
    pub attrs: BTreeMap<String, String>,
    pub value: u64,
}

impl Metrics {
    pub fn new() -> Self {
        let exporter = InMemoryMetricExporter::default();
        let reader = PeriodicReader::builder(exporter.clone()).build();
        let provider = SdkMeterProvider::builder().with_reader(reader).build();
        Metrics { exporter, provider }
    }

    /// All data points of the latest export (cumulative).
    pub fn points(&self) -> Vec<Point> {
        self.provider.force_flush().expect("flush metrics");
        let exported = self.exporter.get_finished_metrics().expect("read metrics");
        let Some(last) = exported.last() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for scope in last.scope_metrics() {
            for metric in scope.metrics() {
                let name = metric.name().to_owned();
                let attrs = |it: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                    it.map(|kv| (kv.key.to_string(), kv.value.to_string()))
                        .collect::<BTreeMap<_, _>>()
                };
                match metric.data() {
                    AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            out.push(Point {
                                name: name.clone(),
                                attrs: attrs(&mut p.attributes()),
                                value: p.value(),
                            });
                        }
                    }
                    // An up-down counter (a gauge of calls in flight): never below 0.
                    AggregatedMetrics::I64(MetricData::Sum(sum)) => {
                        for p in sum.data_points() {
                            let value = u64::try_from(p.value())
                                .unwrap_or_else(|_| panic!("{name} is negative: {}", p.value()));
                            out.push(Point {
                                name: name.clone(),
                                attrs: attrs(&mut p.attributes()),
                                value,
                            });
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            out.push(Point {
                                name: name.clone(),
                                attrs: attrs(&mut p.attributes()),
                                value: p.count(),
                            });
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Histogram(h)) => {
                        for p in h.data_points() {
                            out.push(Point {
                                name: name.clone(),
                                attrs: attrs(&mut p.attributes()),
                                value: p.count(),
                            });
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            out.push(Point {
                                name: name.clone(),
                                attrs: attrs(&mut p.attributes()),
                                value: p.value() as u64,
                            });
                        }
                    }
                    other => panic!("unexpected metric {name}: {other:?}"),
                }
            }
        }
        out
    }

    /// The value (count) of `name` for a method, 0 when absent.
    pub fn value(&self, name: &str, method: &str) -> u64 {
        self.points()
            .iter()
            .filter(|p| p.name == name && p.attrs.get("method").map(String::as_str) == Some(method))
            .map(|p| p.value)
            .sum()
    }
}

/// Captured tracing events: each a map of field name → value (`message` included).
#[derive(Clone, Default)]
pub struct Events(pub Arc<Mutex<Vec<BTreeMap<String, String>>>>);

impl Events {
    pub fn all(&self) -> Vec<BTreeMap<String, String>> {
        self.0.lock().unwrap().clone()
    }

    /// Events whose message contains `text`.
    pub fn with_message(&self, text: &str) -> Vec<BTreeMap<String, String>> {
        self.all()
            .into_iter()
            .filter(|e| e.get("message").is_some_and(|m| m.contains(text)))
            .collect()
    }
}

struct Visitor<'a>(&'a mut BTreeMap<String, String>);

impl tracing::field::Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

thread_local! {
    /// Where events of this thread go; set by `capture_events`.
    static SINK: std::cell::RefCell<Option<Events>> = const { std::cell::RefCell::new(None) };
}

/// One process-wide subscriber, installed before any RPC of the test binary, so
/// callsite interest never depends on which test thread ran first. Events go to
/// the capturing test's sink (tests run their runtime on their own thread).
struct Capture(Option<Events>);

impl<S> tracing_subscriber::Layer<S> for Capture
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let Some(sink) = self.0.clone().or_else(|| SINK.with(|s| s.borrow().clone())) else {
            return;
        };
        let mut fields = BTreeMap::new();
        event.record(&mut Visitor(&mut fields));
        fields.insert("level".into(), event.metadata().level().to_string());
        if let Some(span) = ctx.event_span(event) {
            fields.insert("span".into(), span.name().to_owned());
            if let Some(f) = span.extensions().get::<BTreeMap<String, String>>() {
                for (k, v) in f {
                    fields.insert(format!("span.{k}"), v.clone());
                }
            }
        }
        sink.0.lock().unwrap().push(fields);
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Visitor(&mut fields));
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id) {
            let mut ext = span.extensions_mut();
            if let Some(fields) = ext.get_mut::<BTreeMap<String, String>>() {
                values.record(&mut Visitor(fields));
            }
        }
    }
}

/// Installs the process-wide capturing subscriber (once).
pub fn install_subscriber() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use tracing_subscriber::layer::SubscriberExt;
        let _ = tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(Capture(None)),
        );
    });
}

/// Captures the events of this thread, and of threads that take this thread's
/// dispatcher along (the configuration file watch), until the guard drops.
pub fn capture_events_scoped() -> (Events, tracing::subscriber::DefaultGuard) {
    use tracing_subscriber::layer::SubscriberExt;
    let events = Events::default();
    let subscriber = tracing_subscriber::registry().with(Capture(Some(events.clone())));
    (events, tracing::subscriber::set_default(subscriber))
}

/// Captures the events of this thread at `level` and above (spans below it are off,
/// as under an operator's usual filter) until the guard drops.
pub fn capture_events_at(
    level: tracing::level_filters::LevelFilter,
) -> (Events, tracing::subscriber::DefaultGuard) {
    use tracing_subscriber::layer::SubscriberExt;
    let events = Events::default();
    // A filter for the whole subscriber (a per-layer one leaves spans enabled).
    let subscriber = tracing_subscriber::registry()
        .with(level)
        .with(Capture(Some(events.clone())));
    (events, tracing::subscriber::set_default(subscriber))
}

/// Stops capturing on this thread when dropped.
pub struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        SINK.with(|s| *s.borrow_mut() = None);
    }
}

/// Captures the events emitted on this thread until the guard drops.
pub fn capture_events() -> (Events, CaptureGuard) {
    install_subscriber();
    let events = Events::default();
    SINK.with(|s| *s.borrow_mut() = Some(events.clone()));
    (events, CaptureGuard)
}

/// A TCP peer on loopback that accepts, reads what it is sent and never writes a byte
/// (abort the handle to stop it).
pub async fn silent_tcp_peer() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf).await;
            held.push(socket);
        }
    });
    (addr, held)
}
