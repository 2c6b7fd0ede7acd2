//! Retries inside one deadline (SW4-002 §5.2): the embedded server fails the first
//! two heartbeats with `UNAVAILABLE`, then answers. Each attempt is printed as the
//! server saw it (the deadline it received), with the backoff before it.
//! Run with `cargo run --example retry`.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! tracing-subscriber = "0.3"
//! ```

use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::scheduler::SubmitTaskRequest;
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{ProfileSet, RetryPolicy, Sw4rm, TimeoutProfileLayer, ATTEMPTS_HEADER};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Each retry is an INFO event (attempt, backoff, reason) inside the RPC's span.
    tracing_subscriber::fmt()
        .without_time()
        .with_target(false)
        .compact()
        .init();

    let server = TestServer::start().await?;
    server.script(
        "Heartbeat",
        Script::fail_first(2, sw4rm_timeouts::tonic::Code::Unavailable),
    )?;
    server.script(
        "SubmitTask",
        Script::fail_first(1, sw4rm_timeouts::tonic::Code::Unavailable),
    )?;

    // Heartbeats: 3 attempts, backoff from 100 ms, each attempt at most 2 s.
    let profiles = ProfileSet::builder()
        .retry(
            "heartbeat",
            RetryPolicy::builder()
                .max_attempts(3)
                .initial_backoff(Duration::from_millis(100))
                .attempt_timeout(Duration::from_secs(2))
                .build()?,
        )
        .build()?;
    let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::new(profiles)).await?;

    println!("Heartbeat (idempotent), failing twice before it answers:");
    let response = sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await?;
    let attempts = response
        .metadata()
        .get(ATTEMPTS_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("1");
    println!("  answered after {attempts} attempts");
    let calls = server.calls_to("Heartbeat");
    for (n, call) in calls.iter().enumerate() {
        println!(
            "  attempt {}: server received grpc-timeout = {}",
            n + 1,
            call.grpc_timeout.as_deref().unwrap_or("none")
        );
    }

    println!(
        "\nSubmitTask (a mutation) failing once: it reached the server, so it is not sent again."
    );
    let status = sw4rm
        .scheduler()
        .submit_task(SubmitTaskRequest::default())
        .await
        .expect_err("the scripted failure");
    println!(
        "  caller got {:?} after {} attempt(s)",
        status.code(),
        server.calls_to("SubmitTask").len()
    );
    Ok(())
}
