//! HTTP/2 stream resets from the server, reason by reason, over loopback against a raw
//! h2 server (tonic is too polite to reset): what gRPC A6 makes of each. Only
//! `REFUSED_STREAM` says the request never reached the application, so only it is sent
//! again whatever the status rules say; every other reason is the status gRPC's HTTP/2
//! mapping gives it, and that status's rule applies (`CANCEL` is `CANCELLED`, which
//! neither retries nor hedges by default). Whatever ended a call that sent more than
//! one attempt, its final error says how many (`sw4rm-attempts`).

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::WAIT;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest;
use sw4rm_timeouts::{
    HedgingPolicy, ProfileSet, RetryPolicy, Sw4rm, TimeoutProfileLayer, ATTEMPTS_HEADER,
};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tonic::Code;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Every reason, the status the caller sees, and whether the request is sent again.
const TABLE: [(h2::Reason, Code, bool); 14] = [
    (h2::Reason::NO_ERROR, Code::Internal, false),
    (h2::Reason::PROTOCOL_ERROR, Code::Internal, false),
    (h2::Reason::INTERNAL_ERROR, Code::Internal, false),
    (h2::Reason::FLOW_CONTROL_ERROR, Code::Internal, false),
    (h2::Reason::SETTINGS_TIMEOUT, Code::Internal, false),
    (h2::Reason::STREAM_CLOSED, Code::Unknown, false),
    (h2::Reason::FRAME_SIZE_ERROR, Code::Internal, false),
    (h2::Reason::REFUSED_STREAM, Code::Unavailable, true),
    (h2::Reason::CANCEL, Code::Cancelled, false),
    (h2::Reason::COMPRESSION_ERROR, Code::Internal, false),
    (h2::Reason::CONNECT_ERROR, Code::Internal, false),
    (
        h2::Reason::ENHANCE_YOUR_CALM,
        Code::ResourceExhausted,
        false,
    ),
    (
        h2::Reason::INADEQUATE_SECURITY,
        Code::PermissionDenied,
        false,
    ),
    (h2::Reason::HTTP_1_1_REQUIRED, Code::Unknown, false),
];

/// A raw HTTP/2 server that resets streams with `reason` before any response headers:
/// each at once, or (with `together` = n) only once n streams have arrived, all of
/// them then. Counts the streams it saw.
struct Resetter {
    addr: SocketAddr,
    streams: Arc<AtomicUsize>,
}

impl Resetter {
    async fn start(reason: h2::Reason, together: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let streams = Arc::new(AtomicUsize::new(0));
        let arrived = Arc::new(Notify::new());
        let counter = streams.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (counter, arrived) = (counter.clone(), arrived.clone());
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(socket).await else {
                        return;
                    };
                    while let Some(Ok((_request, mut respond))) = conn.accept().await {
                        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                        arrived.notify_waiters();
                        let (counter, arrived) = (counter.clone(), arrived.clone());
                        tokio::spawn(async move {
                            while n < together && counter.load(Ordering::SeqCst) < together {
                                let more = arrived.notified();
                                if counter.load(Ordering::SeqCst) >= together {
                                    break;
                                }
                                more.await;
                            }
                            respond.send_reset(reason);
                        });
                    }
                });
            }
        });
        Resetter { addr, streams }
    }

    fn streams(&self) -> usize {
        self.streams.load(Ordering::SeqCst)
    }

    fn endpoint(&self) -> tonic::transport::Endpoint {
        tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr)).unwrap()
    }
}

fn attempts(status: &tonic::Status) -> Option<String> {
    status
        .metadata()
        .get(ATTEMPTS_HEADER)
        .map(|v| v.to_str().unwrap().to_owned())
}

/// `GetTaskStatus` (workflow_status) hedges up to 3 attempts `delay` apart.
async fn hedging(server: &Resetter, delay: Duration) -> Sw4rm {
    let policy = HedgingPolicy::builder()
        .max_attempts(3)
        .delay(delay)
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .hedging("workflow_status", policy)
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles).without_metrics();
    Sw4rm::builder(server.endpoint())
        .layer(layer)
        .connect()
        .await
        .unwrap()
}

/// `Heartbeat` retries up to 3 attempts, 1 ms apart, on its default codes.
async fn retrying(server: &Resetter) -> Sw4rm {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .initial_backoff(ms(1))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .retry("heartbeat", policy)
        .build()
        .unwrap();
    let layer = TimeoutProfileLayer::new(profiles).without_metrics();
    Sw4rm::builder(server.endpoint())
        .layer(layer)
        .connect()
        .await
        .unwrap()
}

async fn task_status(sw4rm: &Sw4rm) -> tonic::Status {
    let mut client = sw4rm.scheduler();
    let call = client.get_task_status(GetTaskStatusRequest::default());
    tokio::time::timeout(WAIT, call).await.unwrap().unwrap_err()
}

async fn heartbeat(sw4rm: &Sw4rm) -> tonic::Status {
    let mut client = sw4rm.registry();
    let call = client.heartbeat(HeartbeatRequest::default());
    tokio::time::timeout(WAIT, call).await.unwrap().unwrap_err()
}

/// Each reason through a hedged call whose next hedge is far off (30 s): a reset that
/// never reached the application sends the next hedge at once; any other ends the
/// call with its status, no hedge sent.
#[tokio::test]
async fn a_hedged_call_sends_again_only_what_never_reached_the_application() {
    for (reason, code, again) in TABLE {
        let server = Resetter::start(reason, 1).await;
        let sw4rm = hedging(&server, Duration::from_secs(30)).await;
        let status = task_status(&sw4rm).await;
        assert_eq!(status.code(), code, "{reason:?}: {status:?}");
        let (sent, marked) = if again { (3, Some("3")) } else { (1, None) };
        assert_eq!(server.streams(), sent, "{reason:?}");
        assert_eq!(attempts(&status).as_deref(), marked, "{reason:?}");
    }
}

/// Each reason through a retried call: the same rule as hedging.
#[tokio::test]
async fn a_retried_call_sends_again_only_what_never_reached_the_application() {
    for (reason, code, again) in TABLE {
        let server = Resetter::start(reason, 1).await;
        let sw4rm = retrying(&server).await;
        let status = heartbeat(&sw4rm).await;
        assert_eq!(status.code(), code, "{reason:?}: {status:?}");
        let (sent, marked) = if again { (3, Some("3")) } else { (1, None) };
        assert_eq!(server.streams(), sent, "{reason:?}");
        assert_eq!(attempts(&status).as_deref(), marked, "{reason:?}");
    }
}

/// Every attempt of a hedged call is out before the server resets them all: the
/// final error says 3 attempts, whether the resets were refusals or cancels.
#[tokio::test]
async fn a_hedged_call_whose_attempts_all_end_in_resets_says_how_many() {
    for (reason, code) in [
        (h2::Reason::REFUSED_STREAM, Code::Unavailable),
        (h2::Reason::CANCEL, Code::Cancelled),
    ] {
        for _ in 0..5 {
            let server = Resetter::start(reason, 3).await;
            let sw4rm = hedging(&server, ms(5)).await;
            let status = task_status(&sw4rm).await;
            assert_eq!(status.code(), code, "{reason:?}: {status:?}");
            assert_eq!(server.streams(), 3, "{reason:?}");
            assert_eq!(attempts(&status).as_deref(), Some("3"), "{reason:?}");
        }
    }
}
