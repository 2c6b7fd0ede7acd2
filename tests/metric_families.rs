//! The opt-in metric families (SW4-003's and OpenTelemetry's RPC conventions) over real
//! calls on loopback: one point per call with its final gRPC status — an answer, a
//! trailers-only error, a timeout, a stream, a call the caller dropped — beside the
//! unchanged SW4-002 metrics; and nothing of them when they are off.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{call, connect, server, Metrics, Opts, Point, WAIT};
use sw4rm_timeouts::testing::Script;
use sw4rm_timeouts::{MetricFamily, ProfileSet, TimeoutProfileLayer};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
const SUBMIT_TASK: &str = "/sw4rm.scheduler.SchedulerService/SubmitTask";
const CALL_STREAM: &str = "/sw4rm.tool.ToolService/CallStream";
const GET_VOTES: &str = "/sw4rm.negotiation_room.NegotiationRoomService/GetVotes";

fn profiles() -> ProfileSet {
    ProfileSet::builder()
        .without_global()
        .min_timeout_ms("heartbeat", 50)
        .build()
        .unwrap()
}

/// Five calls, each ending differently: Heartbeat OK, SubmitTask PERMISSION_DENIED
/// (trailers-only), Heartbeat DEADLINE_EXCEEDED, CallStream OK, GetVotes dropped by
/// the caller once the server has it.
async fn five_endings(layer: TimeoutProfileLayer) {
    let server = server().await;
    let sw4rm = connect(&server, layer).await;
    call(&sw4rm, HEARTBEAT, Opts::default()).await.unwrap();
    server
        .script(
            "SubmitTask",
            Script {
                fail_with: Some(tonic::Code::PermissionDenied),
                ..Script::default()
            },
        )
        .unwrap();
    let denied = call(&sw4rm, SUBMIT_TASK, Opts::default())
        .await
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .unwrap();
    let late = Opts {
        set_timeout: Some(Duration::from_millis(100)),
        ..Opts::default()
    };
    let timed_out = call(&sw4rm, HEARTBEAT, late).await.unwrap_err();
    assert_eq!(timed_out.code(), tonic::Code::DeadlineExceeded);
    call(&sw4rm, CALL_STREAM, Opts::default()).await.unwrap();
    server
        .script("GetVotes", Script::latency(Duration::from_secs(30)))
        .unwrap();
    tokio::select! {
        r = call(&sw4rm, GET_VOTES, Opts::default()) => panic!("GetVotes answered: {r:?}"),
        seen = server.wait_until(WAIT, |c| c.iter().any(|c| c.path == GET_VOTES)) => assert!(seen),
    }
}

fn named<'a>(points: &'a [Point], name: &str) -> Vec<&'a Point> {
    points.iter().filter(|p| p.name == name).collect()
}

fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test]
async fn sw4_003_counts_calls_by_final_status() {
    let metrics = Metrics::new();
    let layer = TimeoutProfileLayer::new(profiles())
        .with_meter_provider(&metrics.provider)
        .with_metric_family(MetricFamily::Sw4003);
    five_endings(layer).await;
    let points = metrics.points();

    let mut requests: Vec<(String, String, u64)> = named(&points, "sw4rm_rpc_requests_total")
        .iter()
        .map(|p| {
            let keys: Vec<&str> = p.attrs.keys().map(String::as_str).collect();
            assert_eq!(keys, ["method", "profile", "service", "status"]);
            (
                p.attrs["method"].clone(),
                p.attrs["status"].clone(),
                p.value,
            )
        })
        .collect();
    requests.sort();
    let expected = [
        ("CallStream", "OK"),
        ("GetVotes", "CANCELLED"),
        ("Heartbeat", "DEADLINE_EXCEEDED"),
        ("Heartbeat", "OK"),
        ("SubmitTask", "PERMISSION_DENIED"),
    ]
    .map(|(m, s)| (m.to_owned(), s.to_owned(), 1));
    assert_eq!(requests, expected);

    let seconds = named(&points, "sw4rm_rpc_duration_seconds");
    assert_eq!(seconds.iter().map(|p| p.value).sum::<u64>(), 5);
    for p in &seconds {
        let keys: Vec<&str> = p.attrs.keys().map(String::as_str).collect();
        assert_eq!(keys, ["method", "profile", "service"]);
    }
    // The SW4-002 metrics are unchanged beside them.
    assert_eq!(
        named(&points, "sw4rm_rpc_duration_ms")
            .iter()
            .map(|p| p.value)
            .sum::<u64>(),
        5
    );
    assert_eq!(metrics.value("sw4rm_rpc_timeout_total", "Heartbeat"), 1);
    assert!(named(&points, "rpc.client.call.duration").is_empty());
}

#[tokio::test]
async fn opentelemetry_rpc_duration_follows_the_conventions() {
    let metrics = Metrics::new();
    // The family survives a later change of provider.
    let layer = TimeoutProfileLayer::new(profiles())
        .with_metric_family(MetricFamily::OpenTelemetryRpc)
        .with_meter_provider(&metrics.provider);
    five_endings(layer).await;
    let points = metrics.points();

    let mut got: Vec<(BTreeMap<String, String>, u64)> = named(&points, "rpc.client.call.duration")
        .iter()
        .map(|p| (p.attrs.clone(), p.value))
        .collect();
    got.sort();
    let point = |method: &str, status: &str| {
        let mut a = attrs(&[
            ("rpc.system.name", "grpc"),
            ("rpc.method", method),
            ("rpc.response.status_code", status),
        ]);
        if status != "OK" {
            a.insert("error.type".into(), status.into());
        }
        (a, 1)
    };
    let mut expected = vec![
        point("sw4rm.registry.RegistryService/Heartbeat", "OK"),
        point(
            "sw4rm.registry.RegistryService/Heartbeat",
            "DEADLINE_EXCEEDED",
        ),
        point(
            "sw4rm.scheduler.SchedulerService/SubmitTask",
            "PERMISSION_DENIED",
        ),
        point("sw4rm.tool.ToolService/CallStream", "OK"),
        point(
            "sw4rm.negotiation_room.NegotiationRoomService/GetVotes",
            "CANCELLED",
        ),
    ];
    expected.sort();
    assert_eq!(got, expected);
    assert!(named(&points, "sw4rm_rpc_requests_total").is_empty());
}

#[tokio::test]
async fn families_are_off_by_default() {
    let metrics = Metrics::new();
    five_endings(TimeoutProfileLayer::new(profiles()).with_meter_provider(&metrics.provider)).await;
    let mut names: Vec<String> = metrics.points().into_iter().map(|p| p.name).collect();
    names.sort();
    names.dedup();
    // The always-on families only: SW4-002's two, and the counters beside them (at 0
    // from a route's first call; the reload counter at 0 from the start); none of the
    // opt-in families.
    assert_eq!(
        names,
        [
            "sw4rm_config_reloads_total",
            "sw4rm_rpc_cancelled_total",
            "sw4rm_rpc_duration_ms",
            "sw4rm_rpc_hedge_wins_total",
            "sw4rm_rpc_hedges_total",
            "sw4rm_rpc_retries_total",
            "sw4rm_rpc_timeout_total"
        ]
    );
}

#[tokio::test]
async fn prometheus_exposition_names_both_families() {
    let registry = sw4rm_timeouts::metrics::Registry::new();
    let provider = sw4rm_timeouts::metrics::prometheus_provider(registry.clone()).unwrap();
    let layer = TimeoutProfileLayer::new(profiles())
        .with_meter_provider(&provider)
        .with_metric_family(MetricFamily::Sw4003)
        .with_metric_family(MetricFamily::OpenTelemetryRpc);
    five_endings(layer).await;
    let text = sw4rm_timeouts::metrics::render(&[&registry]);
    for line in [
        "# TYPE sw4rm_rpc_requests_total counter",
        "# TYPE sw4rm_rpc_duration_seconds histogram",
        "# TYPE rpc_client_call_duration histogram",
        "sw4rm_rpc_requests_total{method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\",status=\"DEADLINE_EXCEEDED\"} 1",
        "sw4rm_rpc_duration_seconds_bucket{method=\"CallStream\",profile=\"tool_call\",service=\"sw4rm.tool.ToolService\",le=\"3600\"} 1",
        // And the SW4-002 names stay exact.
        "# TYPE sw4rm_rpc_timeout_total counter",
        "# TYPE sw4rm_rpc_duration_ms histogram",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
}

/// A call that ends at its timeout is counted at the timeout: with SW4-002's
/// defaults as exact bucket bounds, it lands in the timeout's own bucket, not the
/// next one (where a percentile of calls that all ended by 1 s would read 2.5 s).
#[tokio::test]
async fn a_call_that_times_out_is_counted_in_its_timeouts_bucket() {
    let registry = sw4rm_timeouts::metrics::Registry::new();
    let provider = sw4rm_timeouts::metrics::prometheus_provider(registry.clone()).unwrap();
    let layer = TimeoutProfileLayer::new(profiles()).with_meter_provider(&provider);
    let server = server().await;
    let sw4rm = connect(&server, layer).await;
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .unwrap();
    let at_one_second = Opts {
        set_timeout: Some(Duration::from_millis(1_000)),
        ..Opts::default()
    };
    let started = std::time::Instant::now();
    let timed_out = call(&sw4rm, HEARTBEAT, at_one_second).await.unwrap_err();
    assert_eq!(timed_out.code(), tonic::Code::DeadlineExceeded);
    assert!(started.elapsed() >= Duration::from_millis(1_000));
    let text = sw4rm_timeouts::metrics::render(&[&registry]);
    let bucket = |le: &str| {
        let head = "sw4rm_rpc_duration_ms_bucket{";
        text.lines()
            .find(|l| {
                l.starts_with(head)
                    && l.contains("profile=\"heartbeat\"")
                    && l.contains(&format!("le=\"{le}\"}}"))
            })
            .unwrap_or_else(|| panic!("no bucket le={le} in {text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        (bucket("500"), bucket("1000")),
        ("0".to_owned(), "1".to_owned()),
        "{text}"
    );
    let sum = text
        .lines()
        .find(|l| {
            l.starts_with("sw4rm_rpc_duration_ms_sum{") && l.contains("profile=\"heartbeat\"")
        })
        .unwrap();
    assert!(sum.ends_with(" 1000"), "counted at the timeout: {sum}");
}

/// A route's counters exist at 0 from its first call: the dashboard's retry, hedge,
/// timeout and cancellation panels read 0, not "no data", until the first event.
#[tokio::test]
async fn a_routes_counters_exist_at_zero_from_its_first_call() {
    let registry = sw4rm_timeouts::metrics::Registry::new();
    let provider = sw4rm_timeouts::metrics::prometheus_provider(registry.clone()).unwrap();
    let layer = TimeoutProfileLayer::new(profiles()).with_meter_provider(&provider);
    let server = server().await;
    let sw4rm = connect(&server, layer).await;
    let before = sw4rm_timeouts::metrics::render(&[&registry]);
    assert!(!before.contains("sw4rm_rpc_retries_total{"), "{before}");
    call(&sw4rm, HEARTBEAT, Opts::default()).await.unwrap();
    let text = sw4rm_timeouts::metrics::render(&[&registry]);
    let route =
        "method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\"";
    let mut lines = vec![
        format!("sw4rm_rpc_timeout_total{{{route}}} 0"),
        format!("sw4rm_rpc_retries_total{{{route}}} 0"),
        format!("sw4rm_rpc_hedges_total{{{route}}} 0"),
        format!("sw4rm_rpc_hedge_wins_total{{{route}}} 0"),
    ];
    for cause in sw4rm_timeouts::CancelReason::ALL {
        lines.push(format!(
            "sw4rm_rpc_cancelled_total{{cause=\"{cause}\",{route}}} 0"
        ));
    }
    for line in lines {
        assert!(text.contains(&line), "{line} in {text}");
    }
    // Routes never called stay out of the exposition.
    assert!(!text.contains("method=\"Deregister"), "{text}");
}
