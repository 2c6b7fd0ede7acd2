//! A budget that survives an asynchronous handoff across three agents (SW4-004's
//! `BudgetEnvelope`): a planner hands work to a coordinator under a 20 s operation
//! budget; the coordinator accepts at once, and later — in its own task, under the
//! budget it was handed — hands part of it to a worker (the embedded SW4RM server).
//! Each hop prints the envelope it received and the budget it runs under.
//! Run with `cargo run --example delegation`.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "net", "rt-multi-thread", "sync", "time"] }
//! ```

use std::sync::Arc;
use std::time::Duration;

use sw4rm_swarm::HandoffLayer;
use sw4rm_timeouts::proto::sw4rm::common::Empty;
use sw4rm_timeouts::proto::sw4rm::handoff::handoff_service_server::{
    HandoffService, HandoffServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::handoff::{
    self, BudgetEnvelope, HandoffRequest, HandoffResponse,
};
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::tonic::transport::server::TcpIncoming;
use sw4rm_timeouts::tonic::{Request, Response, Status};
use sw4rm_timeouts::{OperationBudget, Sw4rm, TimeoutProfileLayer};

fn show(hop: &str, what: &str, envelope: &BudgetEnvelope) {
    println!(
        "{hop:<12} {what}: depth {}/{}, wall time {} ms, epoch deadline {} ms, tokens {}",
        envelope.current_depth,
        envelope.max_delegation_depth,
        envelope.wall_time_remaining_ms,
        envelope.deadline_epoch_ms,
        envelope.token_budget_remaining
    );
}

/// The coordinator: accepts a handoff at once, works on it later under its budget.
struct Coordinator {
    worker: Sw4rm,
    done: Arc<tokio::sync::Notify>,
}

#[sw4rm_timeouts::tonic::async_trait]
impl HandoffService for Coordinator {
    async fn request_handoff(
        &self,
        request: Request<HandoffRequest>,
    ) -> Result<Response<Empty>, Status> {
        let handed = request.into_inner().budget.unwrap_or_default();
        show("coordinator", "received", &handed);
        // One line: the delegated work runs under what it was handed, or not at all.
        let budget = OperationBudget::from_envelope(&handed)
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        println!(
            "coordinator  runs under a budget of {} ms",
            budget.remaining().as_millis()
        );
        let (worker, done) = (self.worker.clone(), self.done.clone());
        tokio::spawn(budget.clone().run(async move {
            tokio::time::sleep(Duration::from_millis(1_500)).await; // its own part of the work
            println!(
                "coordinator  after 1.5 s of work: {} ms left",
                budget.remaining().as_millis()
            );
            let part = HandoffRequest {
                request_id: "part-1".into(),
                to_agent: "worker".into(),
                ..Default::default()
            };
            match HandoffLayer::new()
                .client(&worker)
                .request_handoff(part)
                .await
            {
                Ok(_) => println!("coordinator  handed part of it to the worker"),
                Err(status) => println!("coordinator  could not hand it on: {status}"),
            }
            done.notify_one();
        }));
        Ok(Response::new(Empty {}))
    }

    async fn accept_handoff(&self, _: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("not in this example"))
    }

    async fn reject_handoff(&self, _: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("not in this example"))
    }

    async fn get_pending_handoffs(
        &self,
        _: Request<handoff::GetPendingHandoffsRequest>,
    ) -> Result<Response<handoff::GetPendingHandoffsResponse>, Status> {
        Err(Status::unimplemented("not in this example"))
    }

    async fn complete_handoff(
        &self,
        _: Request<handoff::CompleteHandoffRequest>,
    ) -> Result<Response<handoff::CompleteHandoffResponse>, Status> {
        Err(Status::unimplemented("not in this example"))
    }

    async fn cancel_delegation(
        &self,
        _: Request<handoff::CancelDelegation>,
    ) -> Result<Response<handoff::CancelDelegationResponse>, Status> {
        Err(Status::unimplemented("not in this example"))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The worker: the embedded SW4RM server, which records what it received.
    let worker_server = TestServer::start().await?;
    let worker = Sw4rm::connect_with(worker_server.url(), TimeoutProfileLayer::standard()).await?;

    // The coordinator: a tonic server of its own.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let coordinator_url = format!("http://{}", listener.local_addr()?);
    let done = Arc::new(tokio::sync::Notify::new());
    let service = HandoffServiceServer::new(Coordinator {
        worker,
        done: done.clone(),
    });
    tokio::spawn(
        sw4rm_timeouts::tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );

    // The planner: 20 s for the whole operation, at most three hops, 5,000 tokens.
    let planner = Sw4rm::connect_with(coordinator_url, TimeoutProfileLayer::standard()).await?;
    let written = BudgetEnvelope {
        max_delegation_depth: 3,
        token_budget_remaining: 5_000,
        ..Default::default()
    };
    show("planner", "writes", &written);
    let budget = OperationBudget::new(Duration::from_secs(20));
    println!(
        "planner      runs under a budget of {} ms",
        budget.remaining().as_millis()
    );
    let finished = done.notified();
    let request = HandoffRequest {
        request_id: "plan-7".into(),
        to_agent: "coordinator".into(),
        budget: Some(written),
        ..Default::default()
    };
    budget
        .run(
            HandoffLayer::new()
                .client(&planner)
                .request_handoff(request),
        )
        .await?;
    finished.await;

    let received = worker_server.calls_to("RequestHandoff");
    if let Some(envelope) = received
        .first()
        .and_then(|c| c.request_as::<HandoffRequest>())
        .and_then(|r| r.budget)
    {
        show("worker", "received", &envelope);
    }
    println!(
        "worker       its RequestHandoff carried grpc-timeout {:?} (the handoff profile's 60 s, capped by the budget)",
        received.first().and_then(|c| c.grpc_timeout.clone())
    );
    Ok(())
}
