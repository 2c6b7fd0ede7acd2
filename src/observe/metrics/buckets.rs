//! Histogram bucket boundaries: SW4RM's durations (milliseconds, and the same in
//! seconds) and gRPC's (A66 latency, A96 counts).

/// Histogram bucket boundaries in ms: roughly 1-2.5-5 steps from 1 ms to 1 h, the
/// range of the SW4-002 profiles (heartbeat floor 1 s, tool/HITL ceiling 1 h), with
/// extra resolution around the common defaults (5 s, 10 s, 30 s, 60 s, 300 s).
pub const DURATION_BOUNDARIES_MS: [f64; 22] = [
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1_000.0,
    2_500.0,
    5_000.0,
    10_000.0,
    30_000.0,
    60_000.0,
    120_000.0,
    300_000.0,
    600_000.0,
    900_000.0,
    1_800_000.0,
    2_700_000.0,
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
