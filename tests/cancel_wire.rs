//! Cancellation that follows the work, over loopback: a caller → a middle agent (a
//! tonic server with the inbound-deadline layer) → the embedded `TestServer`. When the
//! caller goes away, the middle's outgoing calls — made in the handler, or in work
//! carried to another task — end `CANCELLED` with details naming the cause, and the
//! downstream server sees its handler dropped (the stream reset). Work detached on
//! purpose is not cancelled. Calls made after the cancel are not sent.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{server, Metrics, WAIT};
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_server::{
    RegistryService, RegistryServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::registry::{self, HeartbeatRequest, HeartbeatResponse};
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::scope::{self, InboundDeadlineLayer};
use sw4rm_timeouts::testing::{Script, ServedEnd, TestServer};
use sw4rm_timeouts::{
    CancelDetails, CancelReason, OperationBudget, Propagation, Sw4rm, TimeoutDetails,
    TimeoutProfileLayer,
};
use tokio::sync::{mpsc, Notify};
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request, Response, Status};

const TOOL_CALL: &str = "/sw4rm.tool.ToolService/Call";

/// Where the middle makes its outgoing call.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// In the handler's own task.
    Handler,
    /// In a task spawned with `scope::carry`.
    Carried,
    /// In a task spawned with `scope::detach`.
    Detached,
    /// In carried work that waits for the cancel, then calls.
    AfterCancel,
}

/// The middle agent: its Heartbeat makes one tool call downstream (as `mode` says),
/// reports the result, and never answers by itself.
struct Middle {
    downstream: Sw4rm,
    mode: Mode,
    results: mpsc::UnboundedSender<Result<(), Status>>,
    /// Told when a handler starts.
    started: Arc<Notify>,
}

#[tonic::async_trait]
impl RegistryService for Middle {
    async fn register_agent(
        &self,
        _: Request<registry::RegisterAgentRequest>,
    ) -> Result<Response<registry::RegisterAgentResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn heartbeat(
        &self,
        _: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        self.started.notify_one();
        let downstream = self.downstream.clone();
        let results = self.results.clone();
        let call = async move {
            let result = downstream.tool().call(ToolCall::default()).await;
            let _ = results.send(result.map(drop));
        };
        match self.mode {
            Mode::Handler => call.await,
            Mode::Carried => drop(tokio::spawn(scope::carry(call))),
            Mode::Detached => drop(tokio::spawn(scope::detach(call))),
            Mode::AfterCancel => drop(tokio::spawn(scope::carry(async move {
                let reason = scope::cancelled().await;
                assert_eq!(reason, CancelReason::CallerGone);
                call.await;
            }))),
        }
        std::future::pending::<()>().await;
        Ok(Response::new(HeartbeatResponse::default()))
    }

    async fn deregister_agent(
        &self,
        _: Request<registry::DeregisterAgentRequest>,
    ) -> Result<Response<registry::DeregisterAgentResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

struct Chain {
    last: TestServer,
    middle_url: String,
    metrics: Metrics,
    results: mpsc::UnboundedReceiver<Result<(), Status>>,
    started: Arc<Notify>,
}

/// The downstream server (its tool call takes `latency`) and the middle agent.
async fn chain(mode: Mode, latency: Duration, propagation: Propagation) -> Chain {
    let last = server().await;
    last.script(TOOL_CALL, Script::latency(latency)).unwrap();
    let metrics = Metrics::new();
    let layer = TimeoutProfileLayer::standard()
        .with_propagation(propagation)
        .with_meter_provider(&metrics.provider);
    let downstream = common::connect(&last, layer).await;
    let (tx, results) = mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let middle_url = format!("http://{}", listener.local_addr().unwrap());
    let started = Arc::new(Notify::new());
    let svc = RegistryServiceServer::new(Middle {
        downstream,
        mode,
        results: tx,
        started: started.clone(),
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(InboundDeadlineLayer::new())
            .add_service(svc)
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    Chain {
        last,
        middle_url,
        metrics,
        results,
        started,
    }
}

/// A plain tonic caller of the middle (no deadline unless `timeout`).
async fn caller(url: &str) -> RegistryServiceClient<tonic::transport::Channel> {
    RegistryServiceClient::connect(url.to_owned())
        .await
        .unwrap()
}

/// Calls the middle, waits until the downstream server has the tool call, then
/// drops the call (the caller goes away: HTTP/2 resets the stream).
async fn call_then_go_away(chain: &Chain) {
    let mut client = caller(&chain.middle_url).await;
    let pending = tokio::spawn(async move { client.heartbeat(HeartbeatRequest::default()).await });
    let seen = chain
        .last
        .wait_until(WAIT, |calls| calls.iter().any(|c| c.path == TOOL_CALL))
        .await;
    assert!(seen, "the downstream server never saw the tool call");
    pending.abort();
}

async fn downstream_outcome(chain: &Chain) -> ServedEnd {
    let id = chain.last.calls_to(TOOL_CALL)[0].id;
    chain
        .last
        .wait_for_end(id, WAIT)
        .await
        .map(|c| c.outcome)
        .unwrap_or(ServedEnd::Running)
}

fn cancelled_by(status: &Status, reason: CancelReason, sent: bool) {
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    let details = CancelDetails::from_status(status).expect("cancel details");
    assert_eq!(details.reason(), reason);
    assert_eq!(details.sent(), sent);
    assert_eq!(details.service(), "sw4rm.tool.ToolService");
    assert_eq!(details.method(), "Call");
    assert_eq!(details.profile_name(), "tool_call");
    assert!(TimeoutDetails::from_status(status).is_none());
}

fn count(metrics: &Metrics, name: &str, cause: Option<&str>) -> u64 {
    metrics
        .points()
        .iter()
        .filter(|p| p.name == name)
        .filter(|p| cause.is_none_or(|c| p.attrs.get("cause").map(String::as_str) == Some(c)))
        .map(|p| p.value)
        .sum()
}

#[tokio::test]
async fn a_caller_going_away_cancels_the_handlers_call_and_the_server_sees_the_reset() {
    let chain = chain(
        Mode::Handler,
        Duration::from_secs(60),
        Propagation::default(),
    )
    .await;
    call_then_go_away(&chain).await;
    // hyper drops the handler, and the call with it: the downstream stream is reset.
    assert_eq!(downstream_outcome(&chain).await, ServedEnd::Cancelled);
    // Told apart in the metrics: a cancel by its cause, not a timeout.
    let cancelled = count(
        &chain.metrics,
        "sw4rm_rpc_cancelled_total",
        Some("caller_gone"),
    );
    assert_eq!(cancelled, 1);
    assert_eq!(count(&chain.metrics, "sw4rm_rpc_timeout_total", None), 0);
    assert_eq!(count(&chain.metrics, "sw4rm_rpc_duration_ms", None), 1);
}

#[tokio::test]
async fn work_carried_to_another_task_is_cancelled_with_the_caller() {
    let mut chain = chain(
        Mode::Carried,
        Duration::from_secs(60),
        Propagation::default(),
    )
    .await;
    call_then_go_away(&chain).await;
    let result = tokio::time::timeout(WAIT, chain.results.recv()).await;
    let status = result.unwrap().unwrap().unwrap_err();
    cancelled_by(&status, CancelReason::CallerGone, true);
    assert_eq!(downstream_outcome(&chain).await, ServedEnd::Cancelled);
}

#[tokio::test]
async fn detached_work_outlives_the_caller() {
    // The detached call takes 400 ms and is answered, though its caller left first.
    let mut chain = chain(
        Mode::Detached,
        Duration::from_millis(400),
        Propagation::default(),
    )
    .await;
    call_then_go_away(&chain).await;
    let result = tokio::time::timeout(WAIT, chain.results.recv()).await;
    assert!(result.unwrap().unwrap().is_ok());
    assert_eq!(downstream_outcome(&chain).await, ServedEnd::Completed);
    assert_eq!(count(&chain.metrics, "sw4rm_rpc_cancelled_total", None), 0);
}

#[tokio::test]
async fn a_call_made_after_the_cancel_is_not_sent() {
    let mut chain = chain(
        Mode::AfterCancel,
        Duration::from_secs(60),
        Propagation::default(),
    )
    .await;
    let mut client = caller(&chain.middle_url).await;
    let pending = tokio::spawn(async move { client.heartbeat(HeartbeatRequest::default()).await });
    // The caller gives up once the middle's handler runs.
    let started = tokio::time::timeout(WAIT, chain.started.notified()).await;
    assert!(started.is_ok(), "the middle's handler never ran");
    pending.abort();
    let result = tokio::time::timeout(WAIT, chain.results.recv()).await;
    let status = result.unwrap().unwrap().unwrap_err();
    cancelled_by(&status, CancelReason::CallerGone, false);
    assert!(
        chain.last.calls_to(TOOL_CALL).is_empty(),
        "nothing was sent"
    );
}

#[tokio::test]
async fn an_inbound_deadline_that_passes_is_a_timeout_not_a_cancel() {
    // The middle's carried call inherits the caller's deadline less a hop offset and
    // ends at it, before the caller's own timer resets the call: a timeout
    // (DEADLINE_EXCEEDED, counted as one), never a cancel.
    let propagation = Propagation::default().with_hop_offset(Duration::from_millis(300));
    let mut chain = chain(Mode::Carried, Duration::from_secs(60), propagation).await;
    let mut client = caller(&chain.middle_url).await;
    let mut request = Request::new(HeartbeatRequest::default());
    request.set_timeout(Duration::from_millis(1_000));
    // (Plain tonic answers its own timer with CANCELLED: not what is tested here.)
    assert!(client.heartbeat(request).await.is_err());
    let result = tokio::time::timeout(WAIT, chain.results.recv()).await;
    let status = result.unwrap().unwrap().unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(CancelDetails::from_status(&status).is_none());
    assert!(TimeoutDetails::from_status(&status).is_some());
    assert_eq!(count(&chain.metrics, "sw4rm_rpc_cancelled_total", None), 0);
    assert_eq!(count(&chain.metrics, "sw4rm_rpc_timeout_total", None), 1);
}

#[tokio::test]
async fn cancelling_a_budget_cancels_its_calls_in_flight() {
    let last = server().await;
    last.script(TOOL_CALL, Script::latency(Duration::from_secs(60)))
        .unwrap();
    let metrics = Metrics::new();
    let layer = TimeoutProfileLayer::standard().with_meter_provider(&metrics.provider);
    let client = common::connect(&last, layer).await;
    let budget = OperationBudget::new(Duration::from_secs(600));
    let work = budget.run(async move { client.tool().call(ToolCall::default()).await });
    let running = tokio::spawn(work);
    assert!(
        last.wait_until(WAIT, |calls| !calls.is_empty()).await,
        "the call never arrived"
    );
    assert!(budget.cancel());
    let status = running.await.unwrap().unwrap_err();
    cancelled_by(&status, CancelReason::BudgetCancelled, true);
    let id = last.calls_to(TOOL_CALL)[0].id;
    let end = last.wait_for_end(id, WAIT).await.map(|c| c.outcome);
    assert_eq!(end, Some(ServedEnd::Cancelled));
    let cancelled = count(
        &metrics,
        "sw4rm_rpc_cancelled_total",
        Some("budget_cancelled"),
    );
    assert_eq!(cancelled, 1);
}
