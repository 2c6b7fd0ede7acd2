//! SW4-003's `sw4rm_rpc_in_flight{service}` over real calls on loopback: a storm of
//! 1,000 calls that answer, time out, are hedged, are retried or are dropped by their
//! caller, beside calls held by the server. The gauge counts calls, not attempts; it
//! is never negative (the test's reader refuses a negative reading) and it is back to
//! 0 for every service once the calls have ended, whichever way they ended.

mod common;

use std::time::Duration;

use common::{call, connect, server, Metrics, Opts, Point, WAIT};
use sw4rm_timeouts::testing::Script;
use sw4rm_timeouts::{HedgingPolicy, MetricFamily, ProfileSet, TimeoutProfileLayer};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
const DEREGISTER: &str = "/sw4rm.registry.RegistryService/DeregisterAgent";
const STATUS: &str = "/sw4rm.scheduler.SchedulerService/GetTaskStatus";
const VOTES: &str = "/sw4rm.negotiation_room.NegotiationRoomService/GetVotes";

fn in_flight(points: &[Point]) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = points
        .iter()
        .filter(|p| p.name == "sw4rm_rpc_in_flight")
        .map(|p| {
            let keys: Vec<&str> = p.attrs.keys().map(String::as_str).collect();
            assert_eq!(keys, ["service"], "the gauge's one label");
            (p.attrs["service"].clone(), p.value)
        })
        .collect();
    v.sort();
    v
}

fn layer(metrics: &Metrics) -> TimeoutProfileLayer {
    let hedge = HedgingPolicy::builder()
        .max_attempts(2)
        .delay(Duration::from_millis(20))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .min_timeout_ms("heartbeat", 50)
        .hedging("workflow_status", hedge)
        .build()
        .unwrap();
    TimeoutProfileLayer::new(profiles)
        .with_meter_provider(&metrics.provider)
        .with_metric_family(MetricFamily::Sw4003)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_flight_gauge_counts_calls_and_ends_at_zero_after_a_storm() {
    let metrics = Metrics::new();
    let server = server().await;
    let sw4rm = connect(&server, layer(&metrics)).await;
    // Every third heartbeat waits 30 s (it times out at its 150 ms); every second
    // status read waits 30 s (its hedge answers); the first 300 deregistrations fail
    // UNAVAILABLE (retried); votes are held until the test lets them go.
    let slow = Duration::from_secs(30);
    server
        .script("Heartbeat", Script::default().with_tail(3, slow))
        .unwrap();
    server
        .script(
            "GetTaskStatus",
            Script::latency(Duration::from_millis(5)).with_tail(2, slow),
        )
        .unwrap();
    server
        .script(
            "DeregisterAgent",
            Script::fail_first(300, tonic::Code::Unavailable),
        )
        .unwrap();
    server.script("GetVotes", Script::latency(slow)).unwrap();

    // Ten calls the server holds: counted while they run.
    let held: Vec<_> = (0..10)
        .map(|_| {
            let sw4rm = sw4rm.clone();
            tokio::spawn(async move { call(&sw4rm, VOTES, Opts::default()).await })
        })
        .collect();
    assert!(
        server
            .wait_until(WAIT, |c| c.iter().filter(|c| c.path == VOTES).count() == 10)
            .await
    );
    let during = in_flight(&metrics.points());
    let votes = during
        .iter()
        .find(|(s, _)| s.ends_with("NegotiationRoomService"));
    assert_eq!(votes.map(|(_, n)| *n), Some(10), "{during:?}");

    let mut storm = Vec::new();
    for i in 0..1_000 {
        let sw4rm = sw4rm.clone();
        storm.push(tokio::spawn(async move {
            match i % 5 {
                0 | 1 => {
                    let opts = Opts {
                        set_timeout: Some(Duration::from_millis(150)),
                        ..Opts::default()
                    };
                    let _ = call(&sw4rm, HEARTBEAT, opts).await;
                }
                2 => {
                    let _ = call(&sw4rm, STATUS, Opts::default()).await;
                }
                3 => {
                    let _ = call(&sw4rm, DEREGISTER, Opts::default()).await;
                }
                _ => {
                    // The caller gives up at 20 ms and drops the call.
                    let _ = tokio::time::timeout(
                        Duration::from_millis(20),
                        call(&sw4rm, HEARTBEAT, Opts::default()),
                    )
                    .await;
                }
            }
        }));
        if i % 100 == 0 {
            // Read while the storm runs: the reader refuses a negative value.
            let _ = metrics.points();
        }
    }
    for call in storm {
        call.await.unwrap();
    }
    let after_storm = in_flight(&metrics.points());
    let votes = after_storm
        .iter()
        .find(|(s, _)| s.ends_with("NegotiationRoomService"));
    assert_eq!(
        votes.map(|(_, n)| *n),
        Some(10),
        "the held calls still run: {after_storm:?}"
    );
    for (service, n) in &after_storm {
        if !service.ends_with("NegotiationRoomService") {
            assert_eq!(*n, 0, "{service}: {after_storm:?}");
        }
    }

    // The held calls dropped by their tasks: 0 for every service.
    for task in held {
        task.abort();
        let _ = task.await;
    }
    let points = metrics.points();
    let end = in_flight(&points);
    assert_eq!(end.len(), 3, "three services saw calls: {end:?}");
    assert!(end.iter().all(|(_, n)| *n == 0), "{end:?}");
    // One call each, not one per attempt: 1,010 calls in the request counter.
    let requests: u64 = points
        .iter()
        .filter(|p| p.name == "sw4rm_rpc_requests_total")
        .map(|p| p.value)
        .sum();
    assert_eq!(requests, 1_010);
}
