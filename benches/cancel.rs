//! Cancellation that follows the work: how soon the server two hops down sees a
//! caller's cancel, and what the signal costs a call that is never cancelled.
//!
//! 1. Latency: 1,000 concurrent chains over loopback, caller → agent (a tonic server
//!    with the inbound-deadline layer, whose handler carries the work to another task
//!    with `scope::carry`) → a tool server whose handler notes the instant it is
//!    dropped. Once the tool server has every chain's call, the callers drop theirs —
//!    one per millisecond (chains cancelled independently while the others run on),
//!    then all 1,000 at the same instant (a burst of resets on each connection); the
//!    figure is the time from a drop to the tool server's handler being dropped (p50,
//!    p99, max). Goal: p99 ≤ 5 ms.
//! 2. Cost: `scope::is_cancelled()` in a scope and outside; a unary call through the
//!    layer (in memory, no socket) outside any scope and inside a budget's scope that
//!    is never cancelled (which also pays the budget's own cap), interleaved.
//!
//! Figures in `benches/README.md`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_server::{
    RegistryService, RegistryServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::registry::{self, HeartbeatRequest, HeartbeatResponse};
use sw4rm_timeouts::proto::sw4rm::tool::tool_service_server::{ToolService, ToolServiceServer};
use sw4rm_timeouts::proto::sw4rm::tool::{self as tool, ToolCall};
use sw4rm_timeouts::scope::{self, InboundDeadlineLayer};
use sw4rm_timeouts::{OperationBudget, Sw4rm, TimeoutProfileLayer};
use tokio::sync::Notify;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};
use tower::Layer;

#[path = "support/interleaved.rs"]
mod interleaved;

#[path = "support/in_memory.rs"]
mod in_memory;

const CHAINS: usize = 1_000;

/// When each chain's tool call arrived and when its handler was dropped.
#[derive(Default)]
struct Seen {
    arrived: Mutex<HashMap<String, ()>>,
    dropped: Mutex<HashMap<String, Instant>>,
    changed: Notify,
}

struct DropAt(Arc<Seen>, String);
impl Drop for DropAt {
    fn drop(&mut self) {
        let mut dropped = self.0.dropped.lock().unwrap();
        dropped.insert(std::mem::take(&mut self.1), Instant::now());
        drop(dropped);
        self.0.changed.notify_waiters();
    }
}

struct Tool(Arc<Seen>);

#[tonic::async_trait]
impl ToolService for Tool {
    async fn call(&self, request: Request<ToolCall>) -> Result<Response<tool::ToolFrame>, Status> {
        let id = request.into_inner().call_id;
        let _guard = DropAt(self.0.clone(), id.clone());
        self.0.arrived.lock().unwrap().insert(id, ());
        self.0.changed.notify_waiters();
        std::future::pending::<()>().await;
        Err(Status::internal("unreachable"))
    }

    type CallStreamStream = tonic::codegen::tokio_stream::Empty<Result<tool::ToolFrame, Status>>;

    async fn call_stream(
        &self,
        _: Request<ToolCall>,
    ) -> Result<Response<Self::CallStreamStream>, Status> {
        Err(Status::unimplemented("not in this bench"))
    }

    async fn invoke_tool(
        &self,
        _: Request<tool::InvokeToolRequest>,
    ) -> Result<Response<tool::InvokeToolResponse>, Status> {
        Err(Status::unimplemented("not in this bench"))
    }

    async fn describe_tool(
        &self,
        _: Request<tool::DescribeToolRequest>,
    ) -> Result<Response<tool::DescribeToolResponse>, Status> {
        Err(Status::unimplemented("not in this bench"))
    }

    async fn cancel(&self, _: Request<ToolCall>) -> Result<Response<tool::ToolError>, Status> {
        Err(Status::unimplemented("not in this bench"))
    }
}

struct Agent(Sw4rm);

#[tonic::async_trait]
impl RegistryService for Agent {
    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let call_id = request.into_inner().agent_id;
        let tool = self.0.clone();
        tokio::spawn(scope::carry(async move {
            let _ = tool
                .tool()
                .call(ToolCall {
                    call_id,
                    ..Default::default()
                })
                .await;
        }));
        std::future::pending::<()>().await;
        Err(Status::internal("unreachable"))
    }

    async fn register_agent(
        &self,
        _: Request<registry::RegisterAgentRequest>,
    ) -> Result<Response<registry::RegisterAgentResponse>, Status> {
        Err(Status::unimplemented("not in this bench"))
    }

    async fn deregister_agent(
        &self,
        _: Request<registry::DeregisterAgentRequest>,
    ) -> Result<Response<registry::DeregisterAgentResponse>, Status> {
        Err(Status::unimplemented("not in this bench"))
    }
}

async fn serve<S>(svc: S) -> String
where
    S: tonic::codegen::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(InboundDeadlineLayer::new())
            .add_service(svc)
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    url
}

async fn latency(spaced: bool) {
    let seen = Arc::new(Seen::default());
    let tool_url = serve(ToolServiceServer::new(Tool(seen.clone()))).await;
    let to_tool = Sw4rm::connect_with(tool_url, TimeoutProfileLayer::standard().without_metrics())
        .await
        .unwrap();
    let agent_url = serve(RegistryServiceServer::new(Agent(to_tool))).await;
    let caller = RegistryServiceClient::connect(agent_url).await.unwrap();
    let mut calls = Vec::with_capacity(CHAINS);
    for n in 0..CHAINS {
        let mut c = caller.clone();
        let request = HeartbeatRequest {
            agent_id: format!("chain-{n}"),
            ..Default::default()
        };
        calls.push(tokio::spawn(async move { c.heartbeat(request).await }));
    }
    // Every chain's tool call is in before any caller gives up.
    loop {
        let changed = seen.changed.notified();
        if seen.arrived.lock().unwrap().len() == CHAINS {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), changed).await;
    }
    let mut dropped_at = Vec::with_capacity(CHAINS);
    for call in &calls {
        if spaced {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        call.abort();
        dropped_at.push(Instant::now());
    }
    loop {
        let changed = seen.changed.notified();
        if seen.dropped.lock().unwrap().len() == CHAINS {
            break;
        }
        if tokio::time::timeout(Duration::from_secs(10), changed)
            .await
            .is_err()
        {
            panic!(
                "{} of {CHAINS} tool calls saw the cancel",
                seen.dropped.lock().unwrap().len()
            );
        }
    }
    let dropped = seen.dropped.lock().unwrap();
    let mut took: Vec<Duration> = (0..CHAINS)
        .map(|n| dropped[&format!("chain-{n}")].saturating_duration_since(dropped_at[n]))
        .collect();
    took.sort();
    let at = |q: f64| took[((CHAINS as f64 * q) as usize).min(CHAINS - 1)];
    println!(
        "cancel seen two hops down, {CHAINS} concurrent chains, cancelled {}: p50 {:?}, p99 {:?}, max {:?}",
        if spaced { "one per ms" } else { "all at once" },
        at(0.50),
        at(0.99),
        took[CHAINS - 1]
    );
}

async fn cost() {
    use in_memory::{drive, request, InMemory};
    const BATCH: usize = 1_000;
    const PATH: &str = "/sw4rm.registry.RegistryService/Heartbeat";
    let layer = TimeoutProfileLayer::standard()
        .without_metrics()
        .without_retries();
    let budget = OperationBudget::new(Duration::from_secs(3_600));
    let run = |variant: usize| {
        let mut svc = layer.layer(InMemory::empty());
        let budget = budget.clone();
        async move {
            let calls = async {
                for _ in 0..BATCH {
                    drive(&mut svc, request(PATH, false)).await;
                }
            };
            match variant {
                0 => calls.await,
                _ => budget.run(calls).await,
            }
        }
    };
    let samples = interleaved::samples(1_000, 2, run).await;
    let medians: Vec<Duration> = samples
        .iter()
        .map(|s| interleaved::median(&mut s.clone()))
        .collect();
    interleaved::report(
        &format!("unary call through the layer, batches of {BATCH}"),
        &["outside_any_scope", "in_a_budget_scope_never_cancelled"],
        &medians,
    );
    let added = interleaved::paired_difference_ns(&samples[1], &samples[0]) / BATCH as f64;
    println!("  in a budget's scope (cap and cancel signal) adds {added:.0} ns per call");
    let checks = 1_000_000;
    let start = Instant::now();
    for _ in 0..checks {
        std::hint::black_box(scope::is_cancelled());
    }
    let outside = start.elapsed().as_nanos() as f64 / checks as f64;
    let inside = budget
        .run(async {
            let start = Instant::now();
            for _ in 0..checks {
                std::hint::black_box(scope::is_cancelled());
            }
            start.elapsed().as_nanos() as f64 / checks as f64
        })
        .await;
    println!("scope::is_cancelled(): outside any scope {outside:.1} ns, in a scope {inside:.1} ns");
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(latency(true));
    rt.block_on(latency(false));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(cost());
}
