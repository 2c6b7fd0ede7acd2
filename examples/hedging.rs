//! Hedged reads against a latency tail, with the embedded server: `GetTaskStatus`
//! answers in 2 ms, but one call in twenty takes 40 ms. An agent polling task status
//! runs 600 reads without hedging, then 600 with hedging on for the `workflow_status`
//! profile (one hedge, after the route's own p95), and prints both latency
//! distributions and how many extra requests hedging sent.
//! Run with `cargo run --example hedging`.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```

use std::time::{Duration, Instant};

use sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest;
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{HedgingPolicy, ProfileSet, Sw4rm, TimeoutProfileLayer, ATTEMPTS_HEADER};

const READS: usize = 600;

/// `READS` status reads, one after another: their latencies (sorted) and the
/// attempts they sent.
async fn reads(sw4rm: &Sw4rm) -> Result<(Vec<Duration>, u64), sw4rm_timeouts::tonic::Status> {
    let mut latencies = Vec::with_capacity(READS);
    let mut attempts = 0;
    for _ in 0..READS {
        let start = Instant::now();
        let response = sw4rm
            .scheduler()
            .get_task_status(GetTaskStatusRequest::default())
            .await?;
        latencies.push(start.elapsed());
        attempts += response
            .metadata()
            .get(ATTEMPTS_HEADER)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .unwrap_or(1);
    }
    latencies.sort_unstable();
    Ok((latencies, attempts))
}

fn print(name: &str, (latencies, attempts): &(Vec<Duration>, u64)) {
    let at = |q: f64| {
        let rank = ((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len());
        latencies[rank - 1].as_secs_f64() * 1_000.0
    };
    let extra = *attempts as f64 / latencies.len() as f64 * 100.0 - 100.0;
    println!(
        "{name:<24} p50 {:>5.1} ms   p95 {:>5.1} ms   p99 {:>5.1} ms   max {:>5.1} ms   extra requests {extra:>4.1} %",
        at(0.5),
        at(0.95),
        at(0.99),
        at(1.0),
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = TestServer::start().await?;
    server.script(
        "GetTaskStatus",
        Script::latency(Duration::from_millis(2)).with_tail(20, Duration::from_millis(40)),
    )?;

    // Standard profiles: nothing is hedged.
    let plain = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard()).await?;
    let without = reads(&plain).await?;

    // Hedge workflow_status reads once, after the route's own p95 (never sooner than
    // 1 ms, never later than 1 s). Only its idempotent routes are hedged.
    let policy = HedgingPolicy::builder()
        .max_attempts(2)
        .learned_delay(95)
        .min_delay(Duration::from_millis(1))
        .build()?;
    let profiles = ProfileSet::builder()
        .hedging("workflow_status", policy)
        .build()?;
    let hedged = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::new(profiles)).await?;
    let with = reads(&hedged).await?;

    println!("{READS} GetTaskStatus reads, 2 ms answers, one in twenty 40 ms:");
    print("without hedging", &without);
    print("hedged after learned p95", &with);
    Ok(())
}
