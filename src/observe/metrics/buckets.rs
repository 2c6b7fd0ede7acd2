//! Histogram bucket boundaries: SW4RM's durations (milliseconds, and the same in
//! seconds) and gRPC's (A66 latency, A96 counts).

/// Histogram bucket boundaries in ms, from 1 ms to 1 h (the range of the SW4-002
/// profiles: heartbeat floor 1 s, tool/HITL ceiling 1 h): every value the advisor
/// proposes (1, 1.5, 2, 3, 5 and 7 × 10ⁿ ms) and every value of SW4-002's standard
/// table (60 s, 120 s, 600 s, 1,800 s and 3,600 s besides).
///
/// A call that times out is recorded at its timeout, so where the timeout is a bucket
/// bound a percentile of calls that all ended by their timeout cannot read above it:
/// with the standard table and any table the advisor proposes, the p99 panel and
/// alert never say "above the timeout". A timeout set by hand between two bounds
/// (1,234 ms) can read up to the next bound (1,500 ms).
pub const DURATION_BOUNDARIES_MS: [f64; 45] = [
    1.0,
    1.5,
    2.0,
    3.0,
    5.0,
    7.0,
    10.0,
    15.0,
    20.0,
    30.0,
    50.0,
    70.0,
    100.0,
    150.0,
    200.0,
    300.0,
    500.0,
    700.0,
    1_000.0,
    1_500.0,
    2_000.0,
    3_000.0,
    5_000.0,
    7_000.0,
    10_000.0,
    15_000.0,
    20_000.0,
    30_000.0,
    50_000.0,
    60_000.0,
    70_000.0,
    100_000.0,
    120_000.0,
    150_000.0,
    200_000.0,
    300_000.0,
    500_000.0,
    600_000.0,
    700_000.0,
    1_000_000.0,
    1_500_000.0,
    1_800_000.0,
    2_000_000.0,
    3_000_000.0,
    3_600_000.0,
];

/// [`DURATION_BOUNDARIES_MS`] divided by 1,000, for the families that measure in
/// seconds.
pub(crate) fn seconds_boundaries() -> Vec<f64> {
    DURATION_BOUNDARIES_MS
        .iter()
        .map(|ms| ms / 1_000.0)
        .collect()
}

/// gRFC A66's latency buckets, in seconds (`grpc.client.attempt.duration`, and A96's
/// `grpc.client.call.retry_delay`).
pub const GRPC_LATENCY_BOUNDARIES_S: [f64; 41] = [
    0.0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003, 0.004, 0.005,
    0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.13, 0.16,
    0.2, 0.25, 0.3, 0.4, 0.5, 0.65, 0.8, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0,
];

/// gRFC A96's buckets for the retries and the hedges of a call.
pub const GRPC_RETRY_BOUNDARIES: [f64; 5] = [1.0, 2.0, 3.0, 4.0, 5.0];

/// gRFC A96's buckets for the transparent retries of a call.
pub const GRPC_TRANSPARENT_RETRY_BOUNDARIES: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 10.0];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_standard_value_and_every_advisor_step_is_a_bound() {
        let is_bound = |ms: u64| DURATION_BOUNDARIES_MS.contains(&(ms as f64));
        for p in crate::policy::profile::STANDARD_PROFILES {
            for ms in [p.default_timeout_ms, p.min_timeout_ms, p.max_timeout_ms] {
                assert!(is_bound(u64::from(ms)), "{}: {ms} ms", p.name);
            }
        }
        for power in [1, 10, 100, 1_000, 10_000, 100_000] {
            for step in [10, 15, 20, 30, 50, 70] {
                assert!(is_bound(step * power / 10), "{}", step * power / 10);
            }
        }
        assert!(DURATION_BOUNDARIES_MS.windows(2).all(|w| w[0] < w[1]));
    }
}
