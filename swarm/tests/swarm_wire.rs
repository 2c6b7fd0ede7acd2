//! The caller's delegation loop over loopback HTTP/2: a scripted gateway (a tonic
//! server) takes each `RequestHandoff` and answers by calling the caller's own
//! `HandoffService` (`AcceptHandoff` / `RejectHandoff`), which hands the answer to the
//! loop's `SwarmGateway` through `HandoffAnswers`. What the gateway received (the
//! envelope, the metadata, the deadline header) and what the caller got are both
//! asserted.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sw4rm_swarm::{Delegation, DelegationEnd, HandoffAnswers, SwarmGateway};
use sw4rm_timeouts::proto::sw4rm::common::{Empty, ErrorCode};
use sw4rm_timeouts::proto::sw4rm::handoff::handoff_service_server::{
    HandoffService, HandoffServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::handoff::{
    self, BudgetEnvelope, HandoffRequest, HandoffResponse, SwarmDelegationPolicy,
};
use sw4rm_timeouts::{Sw4rm, TimeoutProfileLayer};
use tokio::time::Instant;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// One `RequestHandoff` as the gateway received it.
#[derive(Clone, Debug)]
struct Received {
    to_agent: String,
    at: Instant,
    budget: BudgetEnvelope,
    grpc_timeout: Option<String>,
    token: Option<String>,
}

/// A gateway answering from a script (accepting once it runs out), by calling back.
struct ScriptedGateway {
    script: Mutex<VecDeque<HandoffResponse>>,
    received: Arc<Mutex<Vec<Received>>>,
    caller: Sw4rm,
    /// Sent 20 ms after the first answer, again (a gateway answering twice).
    duplicate: Mutex<Option<HandoffResponse>>,
    /// How long answers after the first take.
    later_after: Duration,
}

/// A gateway's answer, as its `AcceptHandoff` or `RejectHandoff` call to the caller.
async fn answer_back(caller: &Sw4rm, answer: HandoffResponse) {
    let mut client = caller.handoff();
    let sent = match answer.accepted {
        true => client.accept_handoff(answer).await,
        false => client.reject_handoff(answer).await,
    };
    sent.expect("the caller takes the answer");
}

/// The caller agent's own service: the gateways' answers arrive here.
struct Caller {
    answers: HandoffAnswers,
}

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not in this test"))
}

#[tonic::async_trait]
impl HandoffService for ScriptedGateway {
    async fn request_handoff(
        &self,
        request: Request<HandoffRequest>,
    ) -> Result<Response<Empty>, Status> {
        let header = |k: &str| {
            request
                .metadata()
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let message = request.get_ref();
        self.received.lock().unwrap().push(Received {
            to_agent: message.to_agent.clone(),
            at: Instant::now(),
            budget: message.budget.unwrap_or_default(),
            grpc_timeout: header("grpc-timeout"),
            token: header("sw4rm-idempotency-token"),
        });
        let mut answer = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(HandoffResponse {
                accepted: true,
                accepting_agent: message.to_agent.clone(),
                ..HandoffResponse::default()
            });
        answer.request_id = message.request_id.clone();
        let first = self.received.lock().unwrap().len() == 1;
        let delay = if first {
            Duration::ZERO
        } else {
            self.later_after
        };
        let duplicate = first
            .then(|| self.duplicate.lock().unwrap().take())
            .flatten()
            .map(|mut d| {
                d.request_id = message.request_id.clone();
                d
            });
        let caller = self.caller.clone();
        // The answer goes back as a call of its own, after this one returns.
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            answer_back(&caller, answer).await;
            if let Some(duplicate) = duplicate {
                tokio::time::sleep(Duration::from_millis(20)).await;
                answer_back(&caller, duplicate).await;
            }
        });
        Ok(Response::new(Empty::default()))
    }
    async fn accept_handoff(&self, _: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        unimplemented()
    }
    async fn reject_handoff(&self, _: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        unimplemented()
    }
    async fn get_pending_handoffs(
        &self,
        _: Request<handoff::GetPendingHandoffsRequest>,
    ) -> Result<Response<handoff::GetPendingHandoffsResponse>, Status> {
        unimplemented()
    }
    async fn complete_handoff(
        &self,
        _: Request<handoff::CompleteHandoffRequest>,
    ) -> Result<Response<handoff::CompleteHandoffResponse>, Status> {
        unimplemented()
    }
    async fn cancel_delegation(
        &self,
        _: Request<handoff::CancelDelegation>,
    ) -> Result<Response<handoff::CancelDelegationResponse>, Status> {
        unimplemented()
    }
}

#[tonic::async_trait]
impl HandoffService for Caller {
    async fn request_handoff(&self, _: Request<HandoffRequest>) -> Result<Response<Empty>, Status> {
        unimplemented()
    }
    async fn accept_handoff(&self, r: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        self.answers.deliver(r.into_inner());
        Ok(Response::new(Empty::default()))
    }
    async fn reject_handoff(&self, r: Request<HandoffResponse>) -> Result<Response<Empty>, Status> {
        self.answers.deliver(r.into_inner());
        Ok(Response::new(Empty::default()))
    }
    async fn get_pending_handoffs(
        &self,
        _: Request<handoff::GetPendingHandoffsRequest>,
    ) -> Result<Response<handoff::GetPendingHandoffsResponse>, Status> {
        unimplemented()
    }
    async fn complete_handoff(
        &self,
        _: Request<handoff::CompleteHandoffRequest>,
    ) -> Result<Response<handoff::CompleteHandoffResponse>, Status> {
        unimplemented()
    }
    async fn cancel_delegation(
        &self,
        _: Request<handoff::CancelDelegation>,
    ) -> Result<Response<handoff::CancelDelegationResponse>, Status> {
        unimplemented()
    }
}

async fn serve(service: impl HandoffService) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(HandoffServiceServer::new(service))
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    url
}

/// A caller agent and a gateway scripted with `script`; the loop's gateway.
async fn swarm(
    script: Vec<HandoffResponse>,
) -> (SwarmGateway, Arc<Mutex<Vec<Received>>>, HandoffAnswers) {
    swarm_answering_twice(script, None, Duration::ZERO).await
}

/// As [`swarm`], the first answer sent again 20 ms later as `duplicate`, and every
/// answer after the first taking `later_after`.
async fn swarm_answering_twice(
    script: Vec<HandoffResponse>,
    duplicate: Option<HandoffResponse>,
    later_after: Duration,
) -> (SwarmGateway, Arc<Mutex<Vec<Received>>>, HandoffAnswers) {
    let answers = HandoffAnswers::new();
    let caller_url = serve(Caller {
        answers: answers.clone(),
    })
    .await;
    let caller = Sw4rm::connect(caller_url).await.unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    let gateway_url = serve(ScriptedGateway {
        script: Mutex::new(script.into()),
        received: received.clone(),
        caller,
        duplicate: Mutex::new(duplicate),
        later_after,
    })
    .await;
    let client = Sw4rm::connect_with(gateway_url, TimeoutProfileLayer::standard())
        .await
        .unwrap();
    (
        SwarmGateway::new(client, answers.clone()),
        received,
        answers,
    )
}

fn now_epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn request(wall_ms: u64, policy: SwarmDelegationPolicy) -> HandoffRequest {
    HandoffRequest {
        request_id: "deleg-1".into(),
        from_agent: "planner".into(),
        to_agent: "gateway-a".into(),
        budget: Some(BudgetEnvelope {
            wall_time_remaining_ms: wall_ms,
            deadline_epoch_ms: now_epoch_ms() + 60_000,
            ..BudgetEnvelope::default()
        }),
        delegation_policy: Some(policy),
        ..HandoffRequest::default()
    }
}

/// A policy that follows redirects.
fn spillover() -> SwarmDelegationPolicy {
    SwarmDelegationPolicy {
        allow_spillover_routing: true,
        ..Default::default()
    }
}

/// The delegation of [`request`] with 20 s of budget and `policy`, run to its end.
async fn delegate(
    gateway: &mut SwarmGateway,
    policy: SwarmDelegationPolicy,
) -> sw4rm_swarm::DelegationOutcome {
    Delegation::new(request(20_000, policy))
        .unwrap()
        .run(gateway)
        .await
        .unwrap()
}

fn overloaded(retry_after_ms: u64) -> HandoffResponse {
    HandoffResponse {
        rejection_code: ErrorCode::Overloaded.into(),
        retry_after_ms,
        ..HandoffResponse::default()
    }
}

#[tokio::test]
async fn a_busy_gateway_is_sent_again_after_its_hint_and_the_envelope_shrinks() {
    let (mut gateway, received, answers) = swarm(vec![overloaded(200), overloaded(200)]).await;
    let policy = SwarmDelegationPolicy {
        max_retries_on_overloaded: 2,
        ..Default::default()
    };
    let out = Delegation::new(request(20_000, policy))
        .unwrap()
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!((out.end, out.retries), (DelegationEnd::Accepted, 2));
    assert_eq!(out.response.accepting_agent, "gateway-a");
    let seen = received.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "three sends");
    for pair in seen.windows(2) {
        // At least the hint between two sends, and the envelope says so.
        assert!(pair[1].at - pair[0].at >= Duration::from_millis(200));
        assert!(
            pair[0].budget.wall_time_remaining_ms - pair[1].budget.wall_time_remaining_ms >= 200
        );
    }
    for s in &seen {
        // Each send went through the layer (the handoff profile's deadline on the
        // wire) with the same idempotency token.
        assert!(s.grpc_timeout.is_some());
        assert_eq!(s.token, seen[0].token);
        assert!(s.token.is_some());
    }
    assert_eq!(answers.waiting(), 0, "nothing left waiting");
}

#[tokio::test]
async fn a_redirect_chain_is_followed_within_the_budget() {
    let redirect = |to: &str| HandoffResponse {
        rejection_code: ErrorCode::Redirect.into(),
        redirect_to_agent_id: to.into(),
        ..HandoffResponse::default()
    };
    let (mut gateway, received, _) =
        swarm(vec![redirect(" gateway-b "), redirect("gateway-c")]).await;
    let out = delegate(&mut gateway, spillover()).await;
    assert_eq!(out.end, DelegationEnd::Accepted);
    assert_eq!(out.sent_to, ["gateway-a", "gateway-b", "gateway-c"]);
    assert_eq!(out.response.accepting_agent, "gateway-c");
    let seen = received.lock().unwrap().clone();
    let to: Vec<_> = seen.iter().map(|s| s.to_agent.as_str()).collect();
    assert_eq!(to, ["gateway-a", "gateway-b", "gateway-c"]);
    for pair in seen.windows(2) {
        assert!(pair[1].budget.wall_time_remaining_ms <= pair[0].budget.wall_time_remaining_ms);
        assert!(pair[1].budget.deadline_epoch_ms <= pair[0].budget.deadline_epoch_ms);
    }
}

#[tokio::test]
async fn a_wait_beyond_the_budget_answers_the_gateways_overloaded_without_the_wait() {
    // 60 s asked for, 20 s of budget: beyond it however slow the send.
    let (mut gateway, received, _) = swarm(vec![overloaded(60_000)]).await;
    let policy = SwarmDelegationPolicy {
        max_retries_on_overloaded: 1,
        ..Default::default()
    };
    let out = Delegation::new(request(20_000, policy))
        .unwrap()
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!(out.end, DelegationEnd::WaitBeyondBudget);
    assert!(out.end.is_budget());
    // The 60 s were not waited, and the answer is the gateway's own OVERLOADED with
    // its hint, as upstream's `delegate_to_swarm` returns it (not an ACK_TIMEOUT).
    assert_eq!(
        ErrorCode::try_from(out.response.rejection_code).unwrap(),
        ErrorCode::Overloaded
    );
    assert_eq!(out.response.retry_after_ms, 60_000);
    assert_eq!(out.last_gateway_answer, None);
    assert_eq!(received.lock().unwrap().len(), 1);
}

/// Gateway A answers `REDIRECT → B`, then 20 ms later a duplicate "accepted" naming
/// itself; B answers after 300 ms. The loop, waiting for B, takes B's answer, not A's
/// late one (it returned `Accepted` with A's answer).
#[tokio::test]
async fn a_late_answer_from_a_gateway_sent_to_earlier_is_not_taken_for_a_later_send() {
    let redirect = HandoffResponse {
        rejection_code: ErrorCode::Redirect.into(),
        redirect_to_agent_id: "gateway-b".into(),
        ..HandoffResponse::default()
    };
    let late = HandoffResponse {
        accepted: true,
        accepting_agent: "gateway-a".into(),
        ..HandoffResponse::default()
    };
    let (mut gateway, received, answers) =
        swarm_answering_twice(vec![redirect], Some(late), Duration::from_millis(300)).await;
    let out = delegate(&mut gateway, spillover()).await;
    assert_eq!(out.end, DelegationEnd::Accepted);
    assert_eq!(out.sent_to, ["gateway-a", "gateway-b"]);
    assert_eq!(out.response.accepting_agent, "gateway-b", "B's own answer");
    assert_eq!(received.lock().unwrap().len(), 2);
    assert_eq!(answers.waiting(), 0);
}

/// Upstream's vectors have non-ASCII producer ids (`λ-agent`): the token goes out as
/// printable ASCII (it went out as raw UTF-8 in a text header, which gRPC does not
/// allow), percent-encoded, and decodes to the token.
#[tokio::test]
async fn a_token_of_non_ascii_ids_goes_out_percent_encoded() {
    let (mut gateway, received, _) = swarm(vec![]).await;
    let mut request = request(20_000, SwarmDelegationPolicy::default());
    request.from_agent = "\u{3bb}-agent".into();
    let out = Delegation::new(request)
        .unwrap()
        .run(&mut gateway)
        .await
        .unwrap();
    assert!(out.accepted());
    let token = received.lock().unwrap()[0].token.clone();
    let want = sw4rm_swarm::idempotency_token("\u{3bb}-agent", "RequestHandoff", b"deleg-1")
        .unwrap()
        .replace('\u{3bb}', "%CE%BB");
    assert_eq!(token.as_deref(), Some(want.as_str()));
    assert!(want.is_ascii());
}
