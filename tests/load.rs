//! 10,000 concurrent mixed calls on one connection to the embedded server, a third of
//! them expiring: exactly one answer each with the right code and complete details,
//! every expired call that reached the server cancelled there, metrics counted once
//! per call, and tokio's alive-task count back to its baseline.

mod common;

use std::time::Duration;

use common::{server, Metrics, WAIT};
use sw4rm_timeouts::proto::sw4rm::{registry, scheduler, tool};
use sw4rm_timeouts::testing::{Script, ServedEnd};
use sw4rm_timeouts::{
    DetectedBy, Phase, ProfileSet, Sw4rm, TimeoutDetails, TimeoutProfile, TimeoutProfileLayer,
};
use tonic::Code;

const CALLS: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Expiring,
    Heartbeat,
    Describe,
}

fn kind(i: usize) -> Kind {
    match i % 3 {
        0 => Kind::Expiring,
        1 => Kind::Heartbeat,
        _ => Kind::Describe,
    }
}

async fn call(sw4rm: &Sw4rm, kind: Kind) -> Result<(), tonic::Status> {
    match kind {
        Kind::Expiring => sw4rm
            .scheduler()
            .get_task_status(scheduler::GetTaskStatusRequest::default())
            .await
            .map(drop),
        // Generous per-call deadlines: these must succeed however loaded the machine.
        Kind::Heartbeat => {
            let mut req = tonic::Request::new(registry::HeartbeatRequest::default());
            req.set_timeout(Duration::from_secs(30));
            sw4rm.registry().heartbeat(req).await.map(drop)
        }
        Kind::Describe => {
            let mut req = tonic::Request::new(tool::DescribeToolRequest::default());
            req.set_timeout(Duration::from_secs(60));
            sw4rm.tool().describe_tool(req).await.map(drop)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_mixed_calls_on_one_connection() {
    let server = server().await;
    server
        .script("GetTaskStatus", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    server
        .script("Heartbeat", Script::latency(Duration::from_millis(20)))
        .expect("a known RPC");
    let expiring = TimeoutProfile::builder("expiring")
        .default_timeout(Duration::from_millis(200))
        .min_timeout(Duration::from_millis(1))
        .max_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .profile(&expiring)
        .route(
            "/sw4rm.scheduler.SchedulerService/GetTaskStatus",
            "expiring",
        )
        .build()
        .unwrap();
    let metrics = Metrics::new();
    let endpoint = tonic::transport::Endpoint::from_shared(server.url()).unwrap();
    let sw4rm = Sw4rm::builder(endpoint)
        .layer(TimeoutProfileLayer::new(profiles).with_meter_provider(&metrics.provider))
        .connect()
        .await
        .unwrap();
    // Warm the connection, then take the baseline.
    call(&sw4rm, Kind::Describe).await.unwrap();
    let rt = tokio::runtime::Handle::current().metrics();
    let baseline = rt.num_alive_tasks();

    let mut set = tokio::task::JoinSet::new();
    for i in 0..CALLS {
        let sw4rm = sw4rm.clone();
        set.spawn(async move { (kind(i), call(&sw4rm, kind(i)).await) });
    }
    let mut answers = Vec::with_capacity(CALLS);
    while let Some(joined) = set.join_next().await {
        answers.push(joined.expect("no call panics"));
    }
    assert_eq!(answers.len(), CALLS, "exactly one answer per call");
    let mut expired = 0;
    for (kind, result) in &answers {
        match (kind, result) {
            (Kind::Expiring, Err(status)) => {
                assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
                let d = TimeoutDetails::from_status(status).expect("complete details");
                assert_eq!(
                    (
                        d.profile_name(),
                        d.method(),
                        d.configured_timeout_ms(),
                        d.phase()
                    ),
                    ("expiring", "GetTaskStatus", 200, Phase::Total)
                );
                // Under load any of the three timers on the same deadline may fire
                // first: ours, tonic's, or the server's (answering at or after our
                // deadline, so the timeout is ours).
                assert!(
                    matches!(
                        d.detected_by(),
                        DetectedBy::Client | DetectedBy::Transport | DetectedBy::Server
                    ),
                    "{status:?}"
                );
                assert!(d.elapsed_ms() >= 200, "{}", d.elapsed_ms());
                expired += 1;
            }
            (Kind::Expiring, Ok(())) => panic!("a 30 s answer beat a 200 ms deadline"),
            (_, Ok(())) => {}
            (kind, Err(status)) => panic!("{kind:?} failed: {status:?}"),
        }
    }
    assert_eq!(expired, CALLS.div_ceil(3));

    // Every expired call that reached the server was cancelled there.
    let running = |calls: &[sw4rm_timeouts::testing::ServedCall]| {
        calls.iter().any(|c| c.outcome == ServedEnd::Running)
    };
    assert!(
        server.wait_until(WAIT, |calls| !running(calls)).await,
        "handlers left running"
    );
    let reached = server.calls_to("GetTaskStatus");
    assert!(reached.iter().all(|c| c.outcome == ServedEnd::Cancelled));

    // Metrics: one duration point per call, one timeout per expired call.
    assert_eq!(
        metrics.value("sw4rm_rpc_timeout_total", "GetTaskStatus"),
        expired as u64
    );
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "Heartbeat"), 0);
    assert_eq!(
        metrics.value("sw4rm_rpc_duration_ms", "GetTaskStatus"),
        expired as u64
    );
    assert_eq!(
        metrics.value("sw4rm_rpc_duration_ms", "Heartbeat"),
        (CALLS / 3) as u64
    );
    assert_eq!(
        metrics.value("sw4rm_rpc_duration_ms", "DescribeTool"),
        (CALLS / 3) as u64 + 1
    );

    // No task left behind.
    let deadline = tokio::time::Instant::now() + WAIT;
    while rt.num_alive_tasks() > baseline && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        rt.num_alive_tasks() <= baseline,
        "{} tasks alive, baseline {baseline}",
        rt.num_alive_tasks()
    );
}
