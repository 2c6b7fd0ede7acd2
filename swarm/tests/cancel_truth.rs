//! Cancels that report the truth, over loopback HTTP/2: a parent cancels a delegate's
//! work with `DelegationCancel` and learns how it ended (within the grace, forced,
//! acknowledged, not known here, `UNIMPLEMENTED`); a cancel that overtakes its
//! handoff is applied when the handoff arrives; the layer's cascade passes on no more
//! grace than the cancelled work has left (T-016) and counts what each cancel came to.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sw4rm_swarm::{CancelOutcome, CancelWait, DelegationCancel, HandoffLayer};
use sw4rm_swarm::{Delegated, Delegations};
use sw4rm_timeouts::metrics;
use sw4rm_timeouts::proto::sw4rm::common::Empty;
use sw4rm_timeouts::proto::sw4rm::handoff::handoff_service_server::{
    HandoffService, HandoffServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::handoff::{
    CancelDelegation, CancelDelegationResponse, CompleteHandoffRequest, CompleteHandoffResponse,
    GetPendingHandoffsRequest, GetPendingHandoffsResponse, HandoffRequest, HandoffResponse,
};
use sw4rm_timeouts::scope;
use sw4rm_timeouts::{CancelReason, OperationBudget, Sw4rm, TimeoutProfileLayer};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

const WAIT: Duration = Duration::from_secs(20);

/// The grace a working agent's own handoffs are cancelled with, by its cascade.
const CHILD_GRACE: Duration = Duration::from_secs(30);

/// How a delegate's work meets a cancel.

#[derive(Clone, Copy)]
enum Work {
    /// Winds down for 200 ms, then returns.
    Cooperative,
    /// Ignores it.
    Stubborn,
    /// Hands part of the work on to `Child::next` and waits.
    HandsOn,
}

/// What a delegate did with each handoff: its id and how the work ended.
type Ended = mpsc::UnboundedSender<(String, Delegated<()>)>;

/// A delegate agent built on `Delegations`; or, with `legacy`, one that does not
/// implement `CancelDelegation`; `fail_first` cancels answered `UNAVAILABLE` first.
struct Child {
    delegations: Delegations,
    work: Work,
    ended: Ended,
    legacy: bool,
    fail_first: AtomicUsize,
    cancels: Arc<Mutex<Vec<CancelDelegation>>>,
    next: Option<Sw4rm>,
}

#[tonic::async_trait]
impl HandoffService for Child {
    async fn request_handoff(
        &self,
        request: Request<HandoffRequest>,
    ) -> Result<Response<Empty>, Status> {
        let (work, next) = (self.work, self.next.clone());
        let id = request.get_ref().request_id.clone();
        let run = self
            .delegations
            .run(request.get_ref(), async move {
                match work {
                    Work::Cooperative => {
                        scope::cancelled().await;
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Work::Stubborn => std::future::pending::<()>().await,
                    Work::HandsOn => {
                        let onward = HandoffRequest {
                            request_id: format!("{id}-child"),
                            ..HandoffRequest::default()
                        };
                        let cascade = HandoffLayer::new().with_cancel_cascade(CHILD_GRACE);
                        let _ = cascade.client(&next.unwrap()).request_handoff(onward).await;
                        scope::cancelled().await;
                    }
                }
            })
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        let (ended, id) = (self.ended.clone(), request.get_ref().request_id.clone());
        tokio::spawn(scope::detach(async move {
            let _ = ended.send((id, run.await));
        }));
        Ok(Response::new(Empty::default()))
    }

    async fn cancel_delegation(
        &self,
        request: Request<CancelDelegation>,
    ) -> Result<Response<CancelDelegationResponse>, Status> {
        self.cancels.lock().unwrap().push(request.get_ref().clone());
        if self.legacy {
            return Err(Status::unimplemented("CancelDelegation"));
        }
        let failing = self.fail_first.load(Ordering::SeqCst);
        if failing > 0 {
            self.fail_first.store(failing - 1, Ordering::SeqCst);
            return Err(Status::unavailable("restarting"));
        }
        Ok(self.delegations.answer_cancel(request).await)
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

/// A delegate on loopback.
struct Agent {
    url: String,
    client: Sw4rm,
    ended: mpsc::UnboundedReceiver<(String, Delegated<()>)>,
    cancels: Arc<Mutex<Vec<CancelDelegation>>>,
    delegations: Delegations,
}

async fn agent(work: Work, legacy: bool, fail_first: usize, next: Option<Sw4rm>) -> Agent {
    let (tx, ended) = mpsc::unbounded_channel();
    let cancels = Arc::new(Mutex::new(Vec::new()));
    let delegations = Delegations::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let child = Child {
        delegations: delegations.clone(),
        work,
        ended: tx,
        legacy,
        fail_first: AtomicUsize::new(fail_first),
        cancels: cancels.clone(),
        next,
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(HandoffServiceServer::new(child))
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    let client = Sw4rm::connect_with(url.clone(), TimeoutProfileLayer::standard())
        .await
        .unwrap();
    Agent {
        url,
        client,
        ended,
        cancels,
        delegations,
    }
}

async fn hand(agent: &Agent, id: &str) {
    let request = HandoffRequest {
        request_id: id.into(),
        ..HandoffRequest::default()
    };
    agent
        .client
        .handoff()
        .request_handoff(request)
        .await
        .unwrap();
}

async fn ended(agent: &mut Agent) -> (String, Delegated<()>) {
    tokio::time::timeout(WAIT, agent.ended.recv())
        .await
        .expect("the work ends")
        .unwrap()
}

#[tokio::test]
async fn until_ended_reports_work_that_stopped_within_its_grace() {
    let mut child = agent(Work::Cooperative, false, 0, None).await;
    hand(&child, "h-1").await;
    let start = Instant::now();
    let report = DelegationCancel::new("h-1")
        .with_wait(CancelWait::UntilEnded)
        .send(&child.client)
        .await;
    assert_eq!(report.outcome, CancelOutcome::EndedInGrace);
    assert!(report.outcome.acknowledged());
    assert_eq!((report.grace, report.sends), (Duration::from_secs(5), 1));
    // The answer waited for the work's 200 ms of winding down.
    assert!(start.elapsed() >= Duration::from_millis(200));
    let (id, how) = ended(&mut child).await;
    assert_eq!(id, "h-1");
    assert!(matches!(
        how,
        Delegated::Finished {
            cancelled: Some(CancelReason::DelegationCancelled),
            ..
        }
    ));
}

#[tokio::test]
async fn until_ended_reports_work_forced_at_the_end_of_its_grace() {
    let mut child = agent(Work::Stubborn, false, 0, None).await;
    hand(&child, "h-2").await;
    let start = Instant::now();
    let report = DelegationCancel::new("h-2")
        .with_wait(CancelWait::UntilEnded)
        .send(&child.client)
        .await;
    assert_eq!(report.outcome, CancelOutcome::Forced);
    assert!(
        start.elapsed() >= Duration::from_secs(5),
        "the 5000 ms floor"
    );
    assert!(matches!(
        ended(&mut child).await.1,
        Delegated::Forced { .. }
    ));
}

#[tokio::test]
async fn try_reports_the_answer_and_abandon_does_not_wait() {
    let mut child = agent(Work::Cooperative, false, 0, None).await;
    hand(&child, "h-3").await;
    let report = DelegationCancel::new("h-3").send(&child.client).await;
    // Acknowledged; how the work ended is not known to a parent that did not wait.
    assert_eq!(report.outcome, CancelOutcome::Acknowledged);
    assert!(matches!(
        ended(&mut child).await.1,
        Delegated::Finished { .. }
    ));

    hand(&child, "h-4").await;
    let report = DelegationCancel::new("h-4")
        .with_wait(CancelWait::Abandon)
        .send(&child.client)
        .await;
    assert_eq!(
        (report.outcome, report.sends),
        (CancelOutcome::Abandoned, 0)
    );
    // Sent all the same.
    let (id, how) = ended(&mut child).await;
    assert_eq!(id, "h-4");
    assert!(matches!(
        how,
        Delegated::Finished {
            cancelled: Some(_),
            ..
        }
    ));
}

#[tokio::test]
async fn a_cancel_before_its_handoff_is_kept_and_applied_when_the_handoff_arrives() {
    let mut child = agent(Work::Cooperative, false, 0, None).await;
    let report = DelegationCancel::new("h-early").send(&child.client).await;
    match &report.outcome {
        CancelOutcome::NotAcknowledged { message } => {
            assert!(message.contains("kept"), "{message}")
        }
        other => panic!("{other}"),
    }
    assert_eq!(child.delegations.kept_cancels(), 1);
    hand(&child, "h-early").await;
    let (id, how) = ended(&mut child).await;
    assert_eq!(id, "h-early");
    assert!(matches!(
        how,
        Delegated::Finished {
            cancelled: Some(CancelReason::DelegationCancelled),
            ..
        }
    ));
    assert_eq!(child.delegations.kept_cancels(), 0);
    // Without the kept cancel the work would wait for one forever: a handoff with
    // another id is not touched.
    hand(&child, "h-other").await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), child.ended.recv())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn until_acknowledged_sends_again_after_a_failure_that_passes() {
    let mut child = agent(Work::Cooperative, false, 2, None).await;
    child.client = Sw4rm::connect_with(
        child.url.clone(),
        TimeoutProfileLayer::standard().without_retries(),
    )
    .await
    .unwrap();
    hand(&child, "h-5").await;
    let report = DelegationCancel::new("h-5")
        .with_wait(CancelWait::UntilAcknowledged)
        .send(&child.client)
        .await;
    assert_eq!(report.outcome, CancelOutcome::Acknowledged);
    // Two UNAVAILABLE answers first. The layer's own retries are off on this client,
    // so the three sends are the helper's.
    assert_eq!(report.sends, 3);
    assert_eq!(child.cancels.lock().unwrap().len(), 3);
    // Nobody listening: the cancel cannot be delivered, and the report says so.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let endpoint = tonic::transport::Endpoint::from_shared(url).unwrap();
    let gone = Sw4rm::builder(endpoint).connect_lazy().unwrap();
    let tried = DelegationCancel::new("h-6").send(&gone).await;
    assert!(
        matches!(
            tried.outcome,
            CancelOutcome::Unknown {
                code: tonic::Code::Unavailable,
                ..
            }
        ),
        "{:?}",
        tried.outcome
    );
    assert_eq!(tried.sends, 1);
}

/// The line of `sw4rm_swarm_cancellations_total` for an explicit cancel with `outcome`.
fn explicit(outcome: &str, count: u64) -> String {
    format!(r#"sw4rm_swarm_cancellations_total{{outcome="{outcome}",trigger="explicit"}} {count}"#)
}

/// Waits until the registry's text has `line`.
async fn until_counted(registry: &metrics::Registry, line: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let text = metrics::render(&[registry]);
        if text.lines().any(|l| l == line) {
            return;
        }
        assert!(Instant::now() < deadline, "missing {line:?} in\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn each_delegation_cancel_is_counted_once_with_what_it_came_to() {
    let mut child = agent(Work::Cooperative, false, 2, None).await;
    let registry = metrics::Registry::new();
    let provider = metrics::prometheus_provider(registry.clone()).unwrap();
    let layer = TimeoutProfileLayer::standard()
        .without_retries()
        .with_meter_provider(&provider);
    child.client = Sw4rm::connect_with(child.url.clone(), layer).await.unwrap();
    let text = || metrics::render(&[&registry]);

    // Sent three times (two UNAVAILABLE answers first), counted once; then a cancel
    // that waits for the work's end.
    let rows = [
        (
            "c-1",
            CancelWait::UntilAcknowledged,
            CancelOutcome::Acknowledged,
            3,
        ),
        (
            "c-2",
            CancelWait::UntilEnded,
            CancelOutcome::EndedInGrace,
            1,
        ),
    ];
    for (id, wait, outcome, sends) in rows {
        hand(&child, id).await;
        let report = DelegationCancel::new(id)
            .with_wait(wait)
            .send(&child.client)
            .await;
        let line = explicit(outcome.as_str(), 1);
        assert_eq!((report.outcome, report.sends), (outcome, sends), "{id}");
        let counted = text();
        assert!(counted.lines().any(|l| l == line), "{id}: {counted}");
        ended(&mut child).await;
    }

    // Abandoned: counted when its send ends, with the delegate's answer.
    hand(&child, "c-3").await;
    let report = DelegationCancel::new("c-3")
        .with_wait(CancelWait::Abandon)
        .send(&child.client)
        .await;
    assert_eq!(report.outcome, CancelOutcome::Abandoned);
    until_counted(&registry, &explicit("acknowledged", 2)).await;
    ended(&mut child).await;
    let counted = text();
    assert!(!counted.contains(r#"outcome="abandoned""#), "{counted}");
    // The cascade's counter and the explicit cancels' are one family.
    assert_eq!(
        counted
            .lines()
            .filter(|l| l.starts_with("sw4rm_swarm_cancellations_total{"))
            .count(),
        2,
        "{counted}"
    );
}

#[tokio::test]
async fn unimplemented_falls_back_to_the_deadline_and_the_cascade_counts_it() {
    let legacy = agent(Work::Cooperative, true, 0, None).await;
    let report = DelegationCancel::new("h-7").send(&legacy.client).await;
    assert_eq!(report.outcome, CancelOutcome::DeadlineFallback);
    assert!(!report.outcome.acknowledged());

    // The cascade: a handoff made in a budget, then the budget cancelled.
    let registry = metrics::Registry::new();
    let provider = metrics::prometheus_provider(registry.clone()).unwrap();
    let layer = TimeoutProfileLayer::standard().with_meter_provider(&provider);
    let client = Sw4rm::connect_with(legacy.url.clone(), layer)
        .await
        .unwrap();
    let budget = OperationBudget::new(Duration::from_secs(60));
    let cascading = HandoffLayer::new().with_cancel_cascade(Duration::from_secs(10));
    let request = HandoffRequest {
        request_id: "h-8".into(),
        ..HandoffRequest::default()
    };
    budget
        .run(cascading.client(&client).request_handoff(request))
        .await
        .unwrap();
    budget.cancel();
    until_counted(&registry, &explicit("deadline_fallback", 1)).await;
}

#[tokio::test]
async fn t016_the_cascade_passes_on_no_more_grace_than_the_cancelled_work_has_left() {
    // The last agent records the cancel it gets.
    let last = agent(Work::Cooperative, false, 0, None).await;
    // The middle agent's work calls it with the cascade on (`CHILD_GRACE`).
    let cascading = Sw4rm::connect_with(last.url.clone(), TimeoutProfileLayer::standard())
        .await
        .unwrap();
    let mut middle = agent(Work::HandsOn, false, 0, Some(cascading)).await;
    hand(&middle, "m-1").await;
    // Wait until the middle's work has handed on.
    let deadline = Instant::now() + WAIT;
    while last.delegations.running() == 0 {
        assert!(Instant::now() < deadline, "the middle agent hands on");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Cancel the middle with 8 s of grace; its work's own handoff is cancelled with no
    // more than what is left of those 8 s (and at least the 5 s floor).
    let report = DelegationCancel::new("m-1")
        .with_grace(Duration::from_secs(8))
        .send(&middle.client)
        .await;
    assert_eq!(report.outcome, CancelOutcome::Acknowledged);
    let deadline = Instant::now() + WAIT;
    let got = loop {
        if let Some(c) = last.cancels.lock().unwrap().first().cloned() {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "the cascade reaches the last agent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(got.correlation_id, "m-1-child");
    assert!(
        (5_000..=8_000).contains(&got.grace_period_ms),
        "{}",
        got.grace_period_ms
    );
    let _ = ended(&mut middle).await;
}
