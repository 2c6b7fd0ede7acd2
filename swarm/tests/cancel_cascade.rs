//! SW4-004's cancel cascade over loopback: a root operation hands work to agent B,
//! whose delegated work hands part of it to agent C. Cancelling the root sends
//! `CancelDelegation` to B (its direct child); B's delegated scope is cancelled, its
//! outgoing calls end, and B's own cascade sends `CancelDelegation` to C. Both
//! downstream calls are reset. And after 10,000 cancelled chains nothing remains: no
//! task, no remembered handoff, no registered delegation.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{server, WAIT};
use sw4rm_swarm::Delegations;
use sw4rm_swarm::{HandoffLayer, HandoffStamped};
use sw4rm_timeouts::proto::sw4rm::common::Empty;
use sw4rm_timeouts::proto::sw4rm::handoff::handoff_service_client::HandoffServiceClient;
use sw4rm_timeouts::proto::sw4rm::handoff::handoff_service_server::{
    HandoffService, HandoffServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::handoff::{
    CancelDelegation, CancelDelegationResponse, CompleteHandoffRequest, CompleteHandoffResponse,
    GetPendingHandoffsRequest, GetPendingHandoffsResponse, HandoffRequest, HandoffResponse,
};
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::scope::{self, InboundDeadlineLayer};
use sw4rm_timeouts::testing::{Script, ServedEnd, TestServer};
use sw4rm_timeouts::{CancelDetails, CancelReason, OperationBudget, Sw4rm, TimeoutProfileLayer};
use tokio::sync::mpsc;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

const TOOL_CALL: &str = "/sw4rm.tool.ToolService/Call";

/// The tests share the process-wide count of remembered handoffs.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What an agent's delegated work does.
#[derive(Clone)]
struct Work {
    /// Where it hands part of the work on (with its `request_id`), if anywhere.
    next: Option<(Sw4rm, String)>,
    /// The downstream server its tool call goes to (none: it waits for the cancel).
    tool: Option<Sw4rm>,
    /// How its tool call ended.
    results: mpsc::UnboundedSender<(String, Result<(), Status>)>,
}

/// An agent serving HandoffService: delegated work runs under its envelope, registered
/// for `CancelDelegation`.
struct Agent {
    name: &'static str,
    delegations: Delegations,
    work: Work,
}

#[tonic::async_trait]
impl HandoffService for Agent {
    async fn request_handoff(
        &self,
        request: Request<HandoffRequest>,
    ) -> Result<Response<Empty>, Status> {
        let work = run(self.name, self.work.clone());
        // Registered now; the work outlives this RPC: it runs in its own task, under
        // the delegation's own scope (not the RPC's).
        let delegated = self.delegations.run(request.get_ref(), work);
        let delegated = delegated.map_err(|e| Status::failed_precondition(e.to_string()))?;
        tokio::spawn(scope::detach(delegated));
        Ok(Response::new(Empty {}))
    }

    async fn cancel_delegation(
        &self,
        request: Request<CancelDelegation>,
    ) -> Result<Response<CancelDelegationResponse>, Status> {
        Ok(Response::new(self.delegations.cancel(request.get_ref())))
    }

    async fn accept_handoff(&self, _: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn reject_handoff(&self, _: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn get_pending_handoffs(
        &self,
        _: Request<GetPendingHandoffsRequest>,
    ) -> Result<Response<GetPendingHandoffsResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn complete_handoff(
        &self,
        _: Request<CompleteHandoffRequest>,
    ) -> Result<Response<CompleteHandoffResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

/// One agent's delegated work: hand part on, then call the tool (or wait).
async fn run(name: &'static str, work: Work) {
    if let Some((next, id)) = &work.next {
        let handoff = HandoffRequest {
            request_id: id.clone(),
            ..Default::default()
        };
        if let Err(status) = cascading(next).request_handoff(handoff).await {
            let _ = work.results.send((format!("{name} handoff"), Err(status)));
            return;
        }
    }
    let result = match &work.tool {
        Some(tool) => tool.tool().call(ToolCall::default()).await.map(drop),
        None => {
            let reason = scope::cancelled().await;
            Err(Status::cancelled(reason.as_str()))
        }
    };
    let _ = work.results.send((name.to_owned(), result));
}

/// A client for the cascading handoff client [`cascading`] makes.
async fn cascading_client(url: String) -> Sw4rm {
    let layer = TimeoutProfileLayer::standard();
    Sw4rm::connect_with(url, layer).await.expect("connect")
}

/// `client`'s handoffs with the cancel cascade on (1 s of grace asked for: the floor
/// applies).
fn cascading(client: &Sw4rm) -> HandoffServiceClient<HandoffStamped<Channel>> {
    HandoffLayer::new()
        .with_cancel_cascade(Duration::from_secs(1))
        .client(client)
}

/// Starts an agent on loopback; its URL.
async fn agent(name: &'static str, delegations: Delegations, work: Work) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let svc = HandoffServiceServer::new(Agent {
        name,
        delegations,
        work,
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(InboundDeadlineLayer::new())
            .add_service(svc)
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    url
}

fn cancelled_by_delegator(status: &Status) {
    let details = CancelDetails::from_status(status).expect("cancel details");
    assert_eq!(
        details.reason(),
        CancelReason::DelegationCancelled,
        "{status:?}"
    );
    assert!(details.sent());
}

#[tokio::test]
async fn cancelling_the_first_of_three_agents_stops_the_second_and_the_third() {
    let _serial = SERIAL.lock().await;
    let last: TestServer = server().await;
    last.script(TOOL_CALL, Script::latency(Duration::from_secs(60)))
        .unwrap();
    let (tx, mut results) = mpsc::unbounded_channel();
    let tool = common::connect(&last, TimeoutProfileLayer::standard()).await;
    let (b_delegations, c_delegations) = (Delegations::new(), Delegations::new());
    let c_work = Work {
        next: None,
        tool: Some(tool.clone()),
        results: tx.clone(),
    };
    let c_url = agent("c", c_delegations.clone(), c_work).await;
    let b_work = Work {
        next: Some((cascading_client(c_url).await, "b-to-c".into())),
        tool: Some(tool),
        results: tx.clone(),
    };
    let b_url = agent("b", b_delegations.clone(), b_work).await;
    let to_b = cascading_client(b_url).await;

    // The first agent: an operation that hands work to B.
    let budget = OperationBudget::new(Duration::from_secs(600));
    let handoff = HandoffRequest {
        request_id: "a-to-b".into(),
        ..Default::default()
    };
    budget
        .run(async { cascading(&to_b).request_handoff(handoff).await })
        .await
        .expect("B accepts");
    // Both tool calls are in flight downstream.
    let both = last
        .wait_until(WAIT, |calls| {
            calls.iter().filter(|c| c.path == TOOL_CALL).count() == 2
        })
        .await;
    assert!(both, "B's and C's work never reached the tool");
    assert_eq!((b_delegations.running(), c_delegations.running()), (1, 1));
    assert_eq!(
        sw4rm_swarm::remembered_handoffs(),
        2,
        "A's handoff to B, B's to C"
    );

    budget.cancel();

    let mut ended = Vec::new();
    for _ in 0..2 {
        let (who, result) = tokio::time::timeout(WAIT, results.recv())
            .await
            .expect("a delegate's work ended")
            .expect("channel open");
        cancelled_by_delegator(&result.expect_err("cancelled"));
        ended.push(who);
    }
    ended.sort();
    assert_eq!(ended, ["b", "c"], "C heard it through B's own cascade");
    for call in last.calls_to(TOOL_CALL) {
        let end = last.wait_for_end(call.id, WAIT).await.map(|c| c.outcome);
        assert_eq!(end, Some(ServedEnd::Cancelled), "the tool saw the reset");
    }
    // The delegations end (inside their grace) and nothing stays remembered.
    let gone = wait_for(|| b_delegations.running() + c_delegations.running() == 0).await;
    assert!(gone, "delegations still registered");
    assert!(wait_for(|| sw4rm_swarm::remembered_handoffs() == 0).await);
}

/// 10,000 chains (root → B, B's work waiting for its cancel), each cancelled: no task,
/// no remembered handoff and no delegation remains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_cancelled_chains_leave_nothing_behind() {
    let _serial = SERIAL.lock().await;
    let (tx, mut results) = mpsc::unbounded_channel();
    let delegations = Delegations::new();
    let work = Work {
        next: None,
        tool: None,
        results: tx,
    };
    let url = agent("b", delegations.clone(), work).await;
    let to_b = Arc::new(cascading_client(url).await);
    let rt = tokio::runtime::Handle::current().metrics();
    // Warm: one chain, so that connections and their tasks exist before the count.
    chain(&to_b, 0).await;
    results.recv().await;
    assert!(wait_for(|| delegations.running() == 0).await);
    let baseline = rt.num_alive_tasks();

    const CHAINS: usize = 10_000;
    let mut done = 0;
    for batch in (1..=CHAINS).collect::<Vec<_>>().chunks(200) {
        let chains: Vec<_> = batch
            .iter()
            .map(|&n| tokio::spawn(chain_owned(to_b.clone(), n)))
            .collect();
        for c in chains {
            c.await.unwrap();
        }
        for _ in batch {
            let (_, result) = tokio::time::timeout(WAIT, results.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(result.unwrap_err().message(), "delegation_cancelled");
            done += 1;
        }
    }
    assert_eq!(done, CHAINS);
    assert!(
        wait_for(|| delegations.running() == 0).await,
        "{} delegations",
        delegations.running()
    );
    assert!(
        wait_for(|| sw4rm_swarm::remembered_handoffs() == 0).await,
        "{} remembered",
        sw4rm_swarm::remembered_handoffs()
    );
    assert!(
        wait_for(|| rt.num_alive_tasks() <= baseline).await,
        "{} tasks alive, baseline {baseline}",
        rt.num_alive_tasks()
    );
}

async fn chain_owned(to_b: Arc<Sw4rm>, n: usize) {
    chain(&to_b, n).await
}

/// One chain: a root operation hands work to B and is cancelled once B has it.
async fn chain(to_b: &Sw4rm, n: usize) {
    let budget = OperationBudget::new(Duration::from_secs(600));
    let handoff = HandoffRequest {
        request_id: format!("chain-{n}"),
        ..Default::default()
    };
    budget
        .run(async { cascading(to_b).request_handoff(handoff).await })
        .await
        .expect("B accepts");
    budget.cancel();
}

/// Polls `done` until it holds or the wait runs out.
async fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !done() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}
