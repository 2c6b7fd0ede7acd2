//! Prometheus expositions of the SDK's duration histogram and timeout counter, written
//! for the advisor's tests (`#[path]`-included by the test binaries that need them).

/// The exposition lines of `method`'s histogram (`profile`, service
/// `sw4rm.registry.RegistryService`): `(le, cumulative count)` per bucket, and its
/// timeouts when there were any.
pub fn route(method: &str, profile: &str, buckets: &[(&str, u64)], timeouts: u64) -> String {
    let labels = format!(
        "method=\"{method}\",profile=\"{profile}\",service=\"sw4rm.registry.RegistryService\""
    );
    let mut out = String::new();
    for (le, count) in buckets {
        out.push_str(&format!(
            "sw4rm_rpc_duration_ms_bucket{{{labels},le=\"{le}\"}} {count}\n"
        ));
    }
    if timeouts > 0 {
        out.push_str(&format!("sw4rm_rpc_timeout_total{{{labels}}} {timeouts}\n"));
    }
    out
}

/// Heartbeats mostly under 25 ms, 3.3 % of them timing out (as an agent that tuned
/// heartbeat to 1 s and ran 7,293 calls recorded them).
pub fn heartbeats() -> String {
    let buckets = [
        ("5", 5_000),
        ("10", 6_800),
        ("25", 7_000),
        ("1000", 7_051),
        ("2500", 7_293),
        ("+Inf", 7_293),
    ];
    route("Heartbeat", "heartbeat", &buckets, 242)
}
