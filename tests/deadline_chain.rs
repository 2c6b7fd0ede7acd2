//! Deadlines that follow the work: a three-hop chain over loopback (client → a tonic
//! server with the inbound-deadline layer, whose handler calls → the embedded
//! `TestServer`), fail-fast when nothing is left, operation budgets capping calls,
//! and the server layer on its own under paused time.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{server, Metrics, WAIT};
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_server::{
    RegistryService, RegistryServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::registry::{self, HeartbeatRequest, HeartbeatResponse};
use sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest;
use sw4rm_timeouts::scope::{self, InboundDeadline, InboundDeadlineLayer};
use sw4rm_timeouts::testing::{Script, ServedEnd, TestServer};
use sw4rm_timeouts::wire::grpc_timeout;
use sw4rm_timeouts::{
    OperationBudget, ProfileSet, Propagation, Source, Sw4rm, TimeoutDetails, TimeoutProfileLayer,
};
use tokio::time::Instant;
use tonic::transport::server::TcpIncoming;
use tonic::{Code, Request, Response, Status};

const HOP: Duration = Duration::from_millis(200);

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn wire(header: &str) -> Duration {
    grpc_timeout::parse(header.as_bytes()).unwrap()
}

/// What the middle hop saw.
#[derive(Default)]
struct Seen {
    received: Mutex<Option<Duration>>,
    sent_after: Mutex<Option<Duration>>,
    downstream: Mutex<Option<Status>>,
    dropped: AtomicBool,
}

struct DropFlag(Arc<Seen>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

/// The middle agent: its Heartbeat works 100 ms, asks the Scheduler, then hangs.
struct Middle {
    downstream: Sw4rm,
    seen: Arc<Seen>,
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
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let start = Instant::now();
        let _flag = DropFlag(self.seen.clone());
        let inbound = request.extensions().get::<InboundDeadline>().copied();
        *self.seen.received.lock().unwrap() = inbound.map(|d| d.received());
        tokio::time::sleep(ms(100)).await;
        *self.seen.sent_after.lock().unwrap() = Some(start.elapsed());
        let result = self
            .downstream
            .scheduler()
            .get_task_status(GetTaskStatusRequest::default())
            .await;
        *self.seen.downstream.lock().unwrap() = result.err();
        // Whatever the answer, this handler never ends by itself: only the inbound
        // deadline can end it.
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

/// Starts the middle hop on loopback, calling `last`.
async fn middle(last: &TestServer) -> (String, Arc<Seen>) {
    // A generous hop offset: the middle's own call ends well before its caller's
    // deadline, whatever the load.
    let layer = TimeoutProfileLayer::standard()
        .with_propagation(Propagation::default().with_hop_offset(HOP));
    let downstream = common::connect(last, layer).await;
    let seen = Arc::new(Seen::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let svc = RegistryServiceServer::new(Middle {
        downstream,
        seen: seen.clone(),
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(InboundDeadlineLayer::new())
            .add_service(svc)
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    (url, seen)
}

async fn heartbeat(client: &Sw4rm) -> Result<Response<HeartbeatResponse>, Status> {
    client
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await
}

/// The embedded server and a client with the standard profiles, metered.
async fn standard_client() -> (TestServer, Sw4rm, Metrics) {
    let server = server().await;
    let metrics = Metrics::new();
    let client = common::connect(
        &server,
        TimeoutProfileLayer::standard().with_meter_provider(&metrics.provider),
    )
    .await;
    (server, client, metrics)
}

/// Heartbeats get `ms` by default (and may go that low).
fn heartbeat_in(deadline: u32) -> TimeoutProfileLayer {
    let profiles = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", deadline)
        .min_timeout_ms("heartbeat", 1)
        .build()
        .unwrap();
    TimeoutProfileLayer::new(profiles)
}

#[tokio::test]
async fn a_three_hop_chain_passes_the_first_deadline_on_and_drops_the_middle() {
    let last = server().await;
    last.script("GetTaskStatus", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    let (url, seen) = middle(&last).await;
    let client = Sw4rm::connect_with(url, heartbeat_in(800)).await.unwrap();

    let start = Instant::now();
    let status = heartbeat(&client).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(start.elapsed() >= ms(800));

    // The middle hop received the first deadline ...
    assert_eq!(*seen.received.lock().unwrap(), Some(ms(800)));
    // ... and the last server got no more than what was left of it: the
    // Scheduler's own profile (workflow_status, 10 s) was capped by the inherited
    // deadline, less the time the middle had spent.
    let reached = last.calls_to("GetTaskStatus");
    assert_eq!(reached.len(), 1);
    let sent = wire(reached[0].grpc_timeout.as_deref().expect("a deadline"));
    let spent = seen
        .sent_after
        .lock()
        .unwrap()
        .expect("the middle called on");
    assert!(spent >= ms(100));
    assert!(
        sent <= ms(800) - spent - HOP,
        "last hop got {sent:?}, but {spent:?} of 800 ms were already spent"
    );

    // The middle's own call failed at the inherited cap, naming it.
    let downstream = seen
        .downstream
        .lock()
        .unwrap()
        .clone()
        .expect("the call ended");
    let d = TimeoutDetails::from_status(&downstream).expect("details");
    assert_eq!(d.source(), &Source::Inherited);

    // When the first deadline passed the middle handler was dropped, and so was its
    // call to the last server.
    let deadline = Instant::now() + WAIT;
    while !seen.dropped.load(Ordering::SeqCst) && Instant::now() < deadline {
        tokio::time::sleep(ms(5)).await;
    }
    assert!(
        seen.dropped.load(Ordering::SeqCst),
        "middle handler dropped"
    );
    let end = last.wait_for_end(reached[0].id, WAIT).await.unwrap();
    assert_eq!(end.outcome, ServedEnd::Cancelled);
}

#[tokio::test]
async fn nothing_left_fails_at_once_without_sending() {
    let (server, client, metrics) = standard_client().await;
    // 3 ms left: less than the 5 ms hop offset.
    let at = Instant::now() + ms(3);
    let status = scope::with_deadline(at, async { heartbeat(&client).await.unwrap_err() }).await;
    assert_eq!(status.code(), Code::DeadlineExceeded);
    let d = TimeoutDetails::from_status(&status).expect("details");
    assert_eq!(d.source(), &Source::Inherited);
    assert_eq!(d.configured_timeout_ms(), 0);
    assert!(server.calls().is_empty(), "nothing was sent");
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "Heartbeat"), 1);

    // Outside the scope the same call goes out with its profile deadline.
    heartbeat(&client).await.unwrap();
    assert_eq!(server.calls()[0].grpc_timeout.as_deref(), Some("5000000u"));
}

#[tokio::test]
async fn an_inherited_deadline_is_never_raised_to_a_profiles_minimum() {
    let (server, client, _metrics) = standard_client().await;
    // 300 ms left; the heartbeat profile's minimum is 1 s.
    let at = Instant::now() + ms(300);
    scope::with_deadline(at, async {
        heartbeat(&client).await.unwrap();
    })
    .await;
    let sent = wire(server.calls()[0].grpc_timeout.as_deref().unwrap());
    assert!(sent <= ms(295), "{sent:?}");
}

#[tokio::test]
async fn a_budget_caps_calls_and_names_itself_and_a_paused_budget_does_not() {
    let (server, client, metrics) = standard_client().await;
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    let budget = OperationBudget::new(ms(1_500));
    {
        // A human took a while; that time is not charged.
        let _human = budget.pause();
        tokio::time::sleep(ms(50)).await;
    }
    let status = budget
        .run(async { heartbeat(&client).await.unwrap_err() })
        .await;
    assert_eq!(status.code(), Code::DeadlineExceeded);
    let d = TimeoutDetails::from_status(&status).expect("details");
    assert_eq!(d.source(), &Source::Budget);
    assert!(d.configured_timeout_ms() <= 1_500);
    assert!(d.budget_paused_ms().expect("paused time") >= 50);
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "Heartbeat"), 1);
    let sent = wire(server.calls()[0].grpc_timeout.as_deref().unwrap());
    assert!(sent <= ms(1_500), "{sent:?}");

    // While paused, a call keeps its own profile deadline and is not capped.
    server
        .script("Heartbeat", Script::latency(Duration::ZERO))
        .expect("a known RPC");
    let guard = budget.pause();
    budget
        .run(async { heartbeat(&client).await.unwrap() })
        .await;
    drop(guard);
    assert_eq!(server.calls()[1].grpc_timeout.as_deref(), Some("5000000u"));
}

#[tokio::test]
async fn the_smallest_of_budget_and_inherited_deadline_wins() {
    let (server, client, _metrics) = standard_client().await;
    let budget = OperationBudget::new(ms(2_000));
    let at = Instant::now() + ms(4_000);
    scope::with_deadline(
        at,
        budget.run(async {
            heartbeat(&client).await.unwrap();
        }),
    )
    .await;
    let sent = wire(server.calls()[0].grpc_timeout.as_deref().unwrap());
    // The inherited deadline would allow 3,995 ms; the budget at most 2,000.
    assert!(sent <= ms(2_000), "budget wins: {sent:?}");
}

// ---------------------------------------------------------------------------------
// The server layer on its own, under paused time.

type Req = http::Request<tonic::body::Body>;

fn request(timeout: Option<&'static str>) -> Req {
    let mut req = http::Request::new(tonic::body::Body::empty());
    if let Some(t) = timeout {
        req.headers_mut()
            .insert("grpc-timeout", http::HeaderValue::from_static(t));
    }
    req
}

#[tokio::test(start_paused = true)]
async fn the_server_layer_answers_deadline_exceeded_and_drops_the_handler() {
    use tower::{Layer, Service, ServiceExt};
    let seen = Arc::new(Seen::default());
    let seen2 = seen.clone();
    let scoped = Arc::new(Mutex::new(None));
    let scoped2 = scoped.clone();
    let handler = tower::service_fn(move |req: Req| {
        let flag = DropFlag(seen2.clone());
        let inbound = req.extensions().get::<InboundDeadline>().copied();
        let scoped = scoped2.clone();
        async move {
            let _flag = flag;
            *scoped.lock().unwrap() = Some((inbound.map(|d| d.at()), scope::current_deadline()));
            std::future::pending::<()>().await;
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
        }
    });
    let mut svc = InboundDeadlineLayer::new().layer(handler);
    let start = Instant::now();
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(request(Some("250m")))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), ms(250), "exactly at the deadline");
    assert_eq!(response.headers()["grpc-status"], "4");
    assert!(seen.dropped.load(Ordering::SeqCst), "handler dropped");
    let (extension, in_scope) = scoped.lock().unwrap().expect("handler ran");
    assert_eq!(extension, Some(start + ms(250)));
    assert_eq!(in_scope, extension, "the handler's scope has the deadline");

    // A malformed header is answered at once, without the handler.
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(request(Some("5x")))
        .await
        .unwrap();
    assert_eq!(response.headers()["grpc-status"], "3");
    // No header: no deadline, no scope.
    let pending = svc.ready().await.unwrap().call(request(None));
    assert!(tokio::time::timeout(Duration::from_secs(3_600), pending)
        .await
        .is_err());
    assert_eq!(*scoped.lock().unwrap(), Some((None, None)));
}

/// The server layer sets the handler's cancel signal: with the inbound deadline when
/// it passes, with the caller going away when the call is dropped unanswered; work
/// carried from the handler sees it, detached work does not.
#[tokio::test(start_paused = true)]
async fn the_server_layer_cancels_the_handlers_scope_with_its_cause() {
    use sw4rm_timeouts::CancelReason;
    use tower::{Layer, Service, ServiceExt};
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let handler = tower::service_fn(move |_: Req| {
        let tx = tx.clone();
        async move {
            let carried = tx.clone();
            tokio::spawn(scope::carry(async move {
                let _ = carried.send(("carried", Some(scope::cancelled().await)));
            }));
            let detached = tx.clone();
            tokio::spawn(scope::detach(async move {
                let heard = tokio::time::timeout(Duration::from_secs(1), scope::cancelled());
                let _ = detached.send(("detached", heard.await.ok()));
            }));
            let _ = tx.send(("handler", Some(scope::cancelled().await)));
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::empty()))
        }
    });
    let mut svc = InboundDeadlineLayer::new().layer(handler);
    let response = svc.ready().await.unwrap().call(request(Some("250m"))).await;
    assert_eq!(response.unwrap().headers()["grpc-status"], "4");
    let carried = rx.recv().await;
    assert_eq!(
        carried,
        Some(("carried", Some(CancelReason::InboundDeadline)))
    );
    assert_eq!(rx.recv().await, Some(("detached", None)));

    // Dropped before it answered: hyper does this when the caller resets the stream.
    let pending = svc.ready().await.unwrap().call(request(None));
    let mut pending = Box::pin(pending);
    assert!(futures_poll_once(pending.as_mut()).await.is_pending());
    tokio::time::sleep(ms(10)).await;
    drop(pending);
    // The handler went with its future; what it carried hears why.
    assert_eq!(
        rx.recv().await,
        Some(("carried", Some(CancelReason::CallerGone)))
    );
    assert_eq!(rx.recv().await, Some(("detached", None)));
}

async fn futures_poll_once<F: std::future::Future + Unpin>(mut f: F) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut f).poll(cx))).await
}

/// A call refused because the budget was spent before it started says so, instead of
/// "exceeded its deadline of 0 ms after 0 ms".
#[tokio::test]
async fn a_call_after_the_budget_is_spent_says_it_was_not_sent() {
    let last = server().await;
    let sw4rm = common::connect(&last, TimeoutProfileLayer::standard()).await;
    let budget = OperationBudget::new(ms(50));
    {
        let _human = budget.pause();
        tokio::time::sleep(ms(30)).await;
    }
    tokio::time::sleep(ms(100)).await;
    let status = budget
        .run(sw4rm.registry().heartbeat(HeartbeatRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    let message = status.message();
    assert!(
        message.starts_with(
            "/sw4rm.registry.RegistryService/Heartbeat was not sent: its operation budget was \
             spent before the call started (heartbeat profile, from budget, 0 ms left; the \
             budget ran "
        ) && message.ends_with(" ms of them paused)"),
        "{message}"
    );
    let details = TimeoutDetails::from_status(&status).unwrap();
    assert!(details.budget_elapsed_ms().unwrap() >= 130);
    assert!(details.budget_paused_ms().unwrap() >= 30);
    assert_eq!(last.calls().len(), 0);
}
