//! Deadlines across swarms (SW4-004's `BudgetEnvelope`) over loopback: a first agent
//! hands work to a middle agent (a tonic server) under an operation budget; the middle
//! agent runs the delegated work under the budget it was handed and delegates further
//! to the last agent (the embedded `TestServer`, which records each request). What
//! the last agent sees never exceeds what the first one granted; a delegation beyond
//! the maximum depth is refused before it is sent; the off switches leave the
//! envelope as written.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{server, WAIT};
use sw4rm_swarm::{CallBudgetEnvelope, HandoffLayer};
use sw4rm_timeouts::proto::sw4rm::common::Empty;
use sw4rm_timeouts::proto::sw4rm::handoff::handoff_service_server::{
    HandoffService, HandoffServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::handoff::{
    self, BudgetEnvelope, GetPendingHandoffsRequest, GetPendingHandoffsResponse, HandoffRequest,
    HandoffResponse,
};
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::wire::grpc_timeout;
use sw4rm_timeouts::{OperationBudget, Sw4rm, TimeoutProfileLayer};
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request, Response, Status};

const GRANTED: Duration = Duration::from_secs(20);

fn now_epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// What the middle agent was handed, and how its own delegation went.
#[derive(Default)]
struct Seen {
    handed: Mutex<Option<BudgetEnvelope>>,
    delegated: Mutex<Option<Result<(), Status>>>,
}

/// The middle agent: accepts a handoff at once, and runs the delegated work (a
/// handoff to the last agent) in its own task under the budget it was handed.
struct Middle {
    downstream: Sw4rm,
    seen: Arc<Seen>,
    done: Arc<tokio::sync::Notify>,
}

#[tonic::async_trait]
impl HandoffService for Middle {
    async fn request_handoff(
        &self,
        request: Request<HandoffRequest>,
    ) -> Result<Response<Empty>, Status> {
        let handed = request.into_inner().budget.unwrap_or_default();
        *self.seen.handed.lock().unwrap() = Some(handed);
        let budget = OperationBudget::from_envelope(&handed)
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        let (downstream, seen, done) = (
            self.downstream.clone(),
            self.seen.clone(),
            self.done.clone(),
        );
        tokio::spawn(budget.run(async move {
            let onward = HandoffRequest {
                request_id: "r-2".into(),
                ..Default::default()
            };
            let result = HandoffLayer::new()
                .client(&downstream)
                .request_handoff(onward)
                .await;
            *seen.delegated.lock().unwrap() = Some(result.map(drop));
            done.notify_one();
        }));
        Ok(Response::new(Empty {}))
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
        _: Request<handoff::CompleteHandoffRequest>,
    ) -> Result<Response<handoff::CompleteHandoffResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn cancel_delegation(
        &self,
        _: Request<handoff::CancelDelegation>,
    ) -> Result<Response<handoff::CancelDelegationResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

/// The middle agent on loopback, delegating to `last`.
async fn middle(last: &TestServer) -> (Sw4rm, Arc<Seen>, Arc<tokio::sync::Notify>) {
    let downstream = common::connect(last, TimeoutProfileLayer::standard()).await;
    let seen = Arc::new(Seen::default());
    let done = Arc::new(tokio::sync::Notify::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let svc = HandoffServiceServer::new(Middle {
        downstream,
        seen: seen.clone(),
        done: done.clone(),
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    let first = Sw4rm::connect_with(url, TimeoutProfileLayer::standard())
        .await
        .unwrap();
    (first, seen, done)
}

/// The first agent hands work on under a 20 s budget, with a depth limit of its own.
async fn hand_off(first: &Sw4rm, max_depth: u32) -> Result<(), Status> {
    let request = HandoffRequest {
        request_id: "r-1".into(),
        budget: Some(BudgetEnvelope {
            token_budget_remaining: 1_000,
            max_delegation_depth: max_depth,
            ..Default::default()
        }),
        ..Default::default()
    };
    OperationBudget::new(GRANTED)
        .run(HandoffLayer::new().client(first).request_handoff(request))
        .await
        .map(drop)
}

#[tokio::test]
async fn a_budget_never_grows_across_two_delegations() {
    let last = server().await;
    let (first, seen, done) = middle(&last).await;
    let before = now_epoch_ms();
    let notified = done.notified();
    hand_off(&first, 3).await.unwrap();
    tokio::time::timeout(WAIT, notified).await.unwrap();
    seen.delegated.lock().unwrap().take().unwrap().unwrap();

    // The middle agent was handed what the first one granted, one hop deep.
    let handed = seen.handed.lock().unwrap().unwrap();
    assert_eq!(
        (
            handed.current_depth,
            handed.max_delegation_depth,
            handed.token_budget_remaining
        ),
        (1, 3, 1_000)
    );
    assert!(handed.wall_time_remaining_ms > 0);
    assert!(handed.wall_time_remaining_ms <= GRANTED.as_millis() as u64);
    assert!(handed.deadline_epoch_ms <= now_epoch_ms() + GRANTED.as_millis() as u64);
    assert!(handed.deadline_epoch_ms >= before);

    // The last agent: never more than the middle was handed, one hop deeper.
    let calls = last.calls_to("RequestHandoff");
    assert_eq!(calls.len(), 1);
    let onward = calls[0].request_as::<HandoffRequest>().unwrap();
    let envelope = onward.budget.unwrap();
    assert_eq!(onward.request_id, "r-2");
    assert_eq!(
        (
            envelope.current_depth,
            envelope.max_delegation_depth,
            envelope.token_budget_remaining
        ),
        (2, 3, 1_000)
    );
    assert!(envelope.wall_time_remaining_ms > 0);
    assert!(envelope.wall_time_remaining_ms <= handed.wall_time_remaining_ms);
    assert!(envelope.deadline_epoch_ms <= handed.deadline_epoch_ms);
    // The call itself was capped by the same budget (the handoff profile's default is
    // 60 s).
    let sent = grpc_timeout::parse(calls[0].grpc_timeout.as_deref().unwrap().as_bytes()).unwrap();
    assert!(sent <= Duration::from_millis(handed.wall_time_remaining_ms));
}

#[tokio::test]
async fn a_delegation_beyond_the_maximum_depth_is_refused_before_it_is_sent() {
    let last = server().await;
    let (first, seen, done) = middle(&last).await;
    let notified = done.notified();
    hand_off(&first, 1).await.unwrap();
    tokio::time::timeout(WAIT, notified).await.unwrap();
    let status = seen.delegated.lock().unwrap().take().unwrap().unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status}");
    assert!(
        status
            .message()
            .contains("depth 2, beyond the BudgetEnvelope's max_delegation_depth 1"),
        "{}",
        status.message()
    );
    assert_eq!(last.calls().len(), 0, "never sent");
}

/// A handoff to the embedded server inside a 20 s budget, through `layer`, with `configure` applied.
async fn one_handoff(
    layer: HandoffLayer,
    configure: impl FnOnce(&mut Request<HandoffRequest>),
) -> Option<BudgetEnvelope> {
    let last = server().await;
    let sw4rm = common::connect(&last, TimeoutProfileLayer::standard()).await;
    let mut request = Request::new(HandoffRequest::default());
    configure(&mut request);
    OperationBudget::new(GRANTED)
        .run(layer.client(&sw4rm).request_handoff(request))
        .await
        .unwrap();
    last.calls()[0]
        .request_as::<HandoffRequest>()
        .unwrap()
        .budget
}

#[tokio::test]
async fn the_envelope_is_written_unless_switched_off() {
    let stamped = one_handoff(HandoffLayer::new(), |_| {}).await;
    assert!(stamped.is_some_and(|e| e.current_depth == 1 && e.wall_time_remaining_ms > 0));
    let per_call = one_handoff(HandoffLayer::new(), |r| {
        CallBudgetEnvelope::AsWritten.apply(r)
    })
    .await;
    assert_eq!(per_call, None);
    let per_layer = one_handoff(HandoffLayer::new().without_budget_envelopes(), |_| {}).await;
    assert_eq!(per_layer, None);
}

/// Outside any scope a handoff goes as written: nothing caps it.
#[tokio::test]
async fn outside_a_scope_the_envelope_goes_as_written() {
    let last = server().await;
    let sw4rm = common::connect(&last, TimeoutProfileLayer::standard()).await;
    let written = BudgetEnvelope {
        wall_time_remaining_ms: 5_000,
        ..Default::default()
    };
    let request = HandoffRequest {
        budget: Some(written),
        ..Default::default()
    };
    HandoffLayer::new()
        .client(&sw4rm)
        .request_handoff(request)
        .await
        .unwrap();
    let sent = last.calls()[0].request_as::<HandoffRequest>().unwrap();
    assert_eq!(sent.budget, Some(written));
}

#[tokio::test]
async fn a_spent_envelope_starts_no_work() {
    let spent = BudgetEnvelope {
        deadline_epoch_ms: now_epoch_ms() - 1_000,
        ..Default::default()
    };
    let err = OperationBudget::from_envelope(&spent).unwrap_err();
    assert!(err.to_string().contains("is spent"), "{err}");
    let too_deep = BudgetEnvelope {
        wall_time_remaining_ms: 10_000,
        current_depth: 4,
        max_delegation_depth: 3,
        ..Default::default()
    };
    let err = OperationBudget::from_envelope(&too_deep).unwrap_err();
    assert!(err.to_string().contains("current_depth 4"), "{err}");
}

/// A timeout under a budget handed in an envelope names it: `budget (envelope)`.
#[tokio::test]
async fn a_timeout_under_a_handed_budget_names_the_envelope() {
    use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
    use sw4rm_timeouts::testing::Script;
    use sw4rm_timeouts::{Source, TimeoutDetails};

    let last = server().await;
    last.script("Heartbeat", Script::latency(Duration::from_secs(3)))
        .unwrap();
    let sw4rm = common::connect(&last, TimeoutProfileLayer::standard()).await;
    let handed = BudgetEnvelope {
        wall_time_remaining_ms: 1_500,
        ..Default::default()
    };
    let budget = OperationBudget::from_envelope(&handed).unwrap();
    let status = budget
        .run(sw4rm.registry().heartbeat(HeartbeatRequest::default()))
        .await
        .unwrap_err();
    let details = TimeoutDetails::from_status(&status).unwrap();
    assert_eq!(details.source(), &Source::BudgetEnvelope);
    assert_eq!(details.source().level(), "budget");
    assert!(details.configured_timeout_ms() <= 1_500);
    assert!(details.elapsed_ms() >= details.configured_timeout_ms());
}

/// The envelope written on the way out says one deadline in both fields: inside a
/// 2.5 s scope, a caller that wrote 1 s of wall time and no epoch deadline grants 1 s
/// to a receiver that reads only the wall time, and to one that reads only the epoch
/// deadline (as upstream's Python SDK does) — never the scope's 2.5 s.
#[tokio::test]
async fn both_fields_written_say_the_callers_smaller_deadline() {
    let written = BudgetEnvelope {
        wall_time_remaining_ms: 1_000,
        ..Default::default()
    };
    let last = server().await;
    let sw4rm = common::connect(&last, TimeoutProfileLayer::standard()).await;
    let request = HandoffRequest {
        budget: Some(written),
        ..Default::default()
    };
    let sent_at = now_epoch_ms();
    OperationBudget::new(Duration::from_millis(2_500))
        .run(HandoffLayer::new().client(&sw4rm).request_handoff(request))
        .await
        .unwrap();
    let received_at = now_epoch_ms();
    let got = last.calls()[0]
        .request_as::<HandoffRequest>()
        .unwrap()
        .budget
        .unwrap();

    // A receiver that reads only the wall time.
    assert!(
        got.wall_time_remaining_ms > 0 && got.wall_time_remaining_ms <= 1_000,
        "{got:?}"
    );
    let wall_only = BudgetEnvelope {
        deadline_epoch_ms: 0,
        ..got
    };
    let granted = OperationBudget::from_envelope(&wall_only)
        .unwrap()
        .remaining();
    assert!(granted <= Duration::from_millis(1_000), "{granted:?}");

    // A receiver that reads only the epoch deadline: no later than 1 s after sending.
    assert!(got.deadline_epoch_ms > 0, "{got:?}");
    assert!(
        got.deadline_epoch_ms <= sent_at.max(received_at) + 1_000,
        "{got:?}"
    );
    let epoch_only = BudgetEnvelope {
        wall_time_remaining_ms: 0,
        ..got
    };
    let granted = OperationBudget::from_envelope(&epoch_only)
        .unwrap()
        .remaining();
    assert!(granted <= Duration::from_millis(1_000), "{granted:?}");

    // One deadline: the two fields agree to the millisecond they were written in.
    let written_at = got.deadline_epoch_ms - got.wall_time_remaining_ms;
    assert!(
        (sent_at..=received_at).contains(&written_at),
        "{sent_at} ≤ {written_at} ≤ {received_at}"
    );
}

/// A handoff whose written envelope is already spent is refused by the handoff layer
/// and ends in the timeout layer as a timeout of the whole call: `DEADLINE_EXCEEDED`
/// with the handoff profile's details, counted, and never sent.
#[tokio::test]
async fn a_spent_handoff_ends_in_the_timeout_layer_and_is_never_sent() {
    use sw4rm_timeouts::metrics;
    use sw4rm_timeouts::{Phase, TimeoutDetails};

    let last = server().await;
    let registry = metrics::Registry::new();
    let provider = metrics::prometheus_provider(registry.clone()).unwrap();
    let layer = TimeoutProfileLayer::standard().with_meter_provider(&provider);
    let sw4rm = common::connect(&last, layer).await;
    let request = HandoffRequest {
        budget: Some(BudgetEnvelope {
            deadline_epoch_ms: now_epoch_ms() - 1_000,
            ..Default::default()
        }),
        ..Default::default()
    };
    let status = OperationBudget::new(GRANTED)
        .run(HandoffLayer::new().client(&sw4rm).request_handoff(request))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    let details = TimeoutDetails::from_status(&status).expect("timeout details");
    assert_eq!(details.profile_name(), "handoff");
    assert_eq!(details.phase(), Phase::Total);
    assert!(last.calls().is_empty(), "never sent");
    let text = metrics::render(&[&registry]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("sw4rm_rpc_timeout_total{")
                && l.contains("method=\"RequestHandoff\"")
                && l.ends_with(" 1")),
        "{text}"
    );
}

/// Without the handoff layer a handoff inside a scope goes as written (the timeout
/// layer alone caps the call, not its envelope), and the layer leaves the handoff
/// service's other calls as they are.
#[tokio::test]
async fn the_timeout_layer_alone_leaves_the_envelope_and_the_handoff_layer_only_handoffs() {
    let last = server().await;
    let sw4rm = common::connect(&last, TimeoutProfileLayer::standard()).await;
    OperationBudget::new(GRANTED)
        .run(sw4rm.handoff().request_handoff(HandoffRequest::default()))
        .await
        .unwrap();
    let sent = last.calls()[0].request_as::<HandoffRequest>().unwrap();
    assert_eq!(sent.budget, None, "no envelope without the handoff layer");
    let answer = HandoffResponse {
        request_id: "r-9".into(),
        accepted: true,
        ..Default::default()
    };
    OperationBudget::new(GRANTED)
        .run(
            HandoffLayer::new()
                .client(&sw4rm)
                .accept_handoff(answer.clone()),
        )
        .await
        .unwrap();
    let calls = last.calls_to("AcceptHandoff");
    assert_eq!(calls[0].request_as::<HandoffResponse>().unwrap(), answer);
}
