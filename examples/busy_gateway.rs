//! Delegating to a busy swarm (SW4-004 §4.3, SW4-005): a planner hands work to
//! another swarm's gateway, which is at capacity twice (`OVERLOADED`, "try again in
//! 200 ms"), then sends it on to a peer gateway (`REDIRECT`), which accepts. The
//! gateway answers as SW4RM gateways do: `RequestHandoff` returns at once, and the
//! answer comes back as the gateway's `RejectHandoff` / `AcceptHandoff` call to the
//! planner's own `HandoffService`, handed to the loop through `HandoffAnswers`.
//! Then the planner cancels the delegation and waits to learn how the work ended.
//! Run with `cargo run --example busy_gateway`.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "net", "rt-multi-thread", "time"] }
//! ```

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sw4rm_swarm::Delegations;
use sw4rm_swarm::{CancelWait, Delegation, DelegationCancel, HandoffAnswers, SwarmGateway};
use sw4rm_timeouts::proto::sw4rm::common::{Empty, ErrorCode};
use sw4rm_timeouts::proto::sw4rm::handoff::handoff_service_server::{
    HandoffService, HandoffServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::handoff::{
    self, BudgetEnvelope, CancelDelegation, HandoffRequest, HandoffResponse, SwarmDelegationPolicy,
};
use sw4rm_timeouts::scope;
use sw4rm_timeouts::tonic::transport::server::TcpIncoming;
use sw4rm_timeouts::tonic::{Request, Response, Status};
use sw4rm_timeouts::{Sw4rm, TimeoutProfileLayer};

/// The other swarm's gateway: busy twice, then redirects to its peer, which takes the
/// work (and runs it until it is cancelled).
struct Gateway {
    answers: Mutex<VecDeque<HandoffResponse>>,
    planner: Sw4rm,
    delegations: Delegations,
}

/// The planner's own service: where the gateway's answers arrive.
struct Planner {
    answers: HandoffAnswers,
}

#[sw4rm_timeouts::tonic::async_trait]
impl HandoffService for Gateway {
    async fn request_handoff(&self, r: Request<HandoffRequest>) -> Result<Response<Empty>, Status> {
        let request = r.into_inner();
        let budget = request.budget.unwrap_or_default();
        println!(
            "gateway      {:<9} got {}: {} ms left",
            request.to_agent, request.request_id, budget.wall_time_remaining_ms
        );
        let scripted = self.answers.lock().unwrap().pop_front();
        let mut answer = scripted.unwrap_or_else(|| HandoffResponse {
            accepted: true,
            accepting_agent: request.to_agent.clone(),
            ..HandoffResponse::default()
        });
        answer.request_id = request.request_id.clone();
        if answer.accepted {
            let work = self
                .delegations
                .run(&request, async {
                    scope::cancelled().await; // works until cancelled...
                    tokio::time::sleep(Duration::from_millis(300)).await; // ...then winds down
                })
                .map_err(|e| Status::failed_precondition(e.to_string()))?;
            tokio::spawn(scope::detach(work));
        }
        let planner = self.planner.clone();
        tokio::spawn(async move {
            let mut client = planner.handoff();
            let _ = match answer.accepted {
                true => client.accept_handoff(answer).await,
                false => client.reject_handoff(answer).await,
            };
        });
        Ok(Response::new(Empty::default()))
    }
    async fn cancel_delegation(
        &self,
        r: Request<CancelDelegation>,
    ) -> Result<Response<handoff::CancelDelegationResponse>, Status> {
        Ok(self.delegations.answer_cancel(r).await)
    }
    async fn accept_handoff(&self, _: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("a gateway takes no answers"))
    }
    async fn reject_handoff(&self, _: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("a gateway takes no answers"))
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
}

#[sw4rm_timeouts::tonic::async_trait]
impl HandoffService for Planner {
    async fn accept_handoff(&self, r: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        self.answers.deliver(r.into_inner());
        Ok(Response::new(Empty::default()))
    }
    async fn reject_handoff(&self, r: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        self.answers.deliver(r.into_inner());
        Ok(Response::new(Empty::default()))
    }
    async fn request_handoff(&self, _: Request<HandoffRequest>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("the planner takes no work here"))
    }
    async fn cancel_delegation(
        &self,
        _: Request<CancelDelegation>,
    ) -> Result<Response<handoff::CancelDelegationResponse>, Status> {
        Err(Status::unimplemented("the planner takes no work here"))
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
}

async fn serve(service: impl HandoffService) -> Result<String, Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(
        sw4rm_timeouts::tonic::transport::Server::builder()
            .add_service(HandoffServiceServer::new(service))
            .serve_with_incoming(TcpIncoming::from(listener)),
    );
    Ok(url)
}

fn busy(retry_after_ms: u64) -> HandoffResponse {
    HandoffResponse {
        rejection_code: ErrorCode::Overloaded.into(),
        rejection_reason: "gateway at capacity".into(),
        retry_after_ms,
        ..HandoffResponse::default()
    }
}

fn redirect(to: &str) -> HandoffResponse {
    HandoffResponse {
        rejection_code: ErrorCode::Redirect.into(),
        redirect_to_agent_id: to.into(),
        ..HandoffResponse::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let answers = HandoffAnswers::new();
    let planner_url = serve(Planner {
        answers: answers.clone(),
    })
    .await?;
    let gateway_url = serve(Gateway {
        answers: Mutex::new([busy(200), busy(200), redirect("gateway-b")].into()),
        planner: Sw4rm::connect(planner_url).await?,
        delegations: Delegations::new(),
    })
    .await?;
    let to_gateway = Sw4rm::connect_with(gateway_url, TimeoutProfileLayer::standard()).await?;

    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    let request = HandoffRequest {
        request_id: "plan-42".into(),
        from_agent: "planner".into(),
        to_agent: "gateway-a".into(),
        budget: Some(BudgetEnvelope {
            wall_time_remaining_ms: 10_000,
            deadline_epoch_ms: now_ms + 10_000,
            ..BudgetEnvelope::default()
        }),
        delegation_policy: Some(SwarmDelegationPolicy {
            max_retries_on_overloaded: 3,
            allow_spillover_routing: true,
            ..SwarmDelegationPolicy::default()
        }),
        ..HandoffRequest::default()
    };
    let mut gateway = SwarmGateway::new(to_gateway.clone(), answers);
    let outcome = Delegation::new(request)?.run(&mut gateway).await?;
    println!(
        "planner      {}: sent to {:?} ({} retries, {} redirect), {} ms of budget left",
        outcome.end,
        outcome.sent_to,
        outcome.retries,
        outcome.redirects,
        outcome.budget_left.wall_time_remaining_ms
    );

    let report = DelegationCancel::new("plan-42")
        .with_reason("the user changed the plan")
        .with_wait(CancelWait::UntilEnded)
        .send(&to_gateway)
        .await;
    println!(
        "planner      cancel: {} (grace {} ms)",
        report.outcome,
        report.grace.as_millis()
    );
    Ok(())
}
