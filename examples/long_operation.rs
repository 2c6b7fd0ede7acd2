//! Long operations from the caller's side, against the embedded SW4RM server:
//! a task submitted once and followed by status to its end; work of many calls that
//! stops starting new ones when its budget's wrap-up notice comes; and a timeout that
//! says what it left behind.
//! Run with `cargo run --example long_operation`.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```

use std::time::Duration;

use sw4rm_timeouts::follow::{Follow, SchedulerTask};
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::scheduler::{
    GetTaskStatusResponse, SubmitTaskRequest, SubmitTaskResponse, TaskState,
};
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{scope, OperationBudget, Sw4rm, TimeoutDetails, TimeoutProfileLayer, WrapUp};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = TestServer::start().await?;
    let accepted = SubmitTaskResponse {
        accepted: true,
        ..Default::default()
    };
    let done = GetTaskStatusResponse {
        state: TaskState::TaskSucceeded.into(),
        ..Default::default()
    };
    server.script(
        "SubmitTask",
        Script::latency(Duration::ZERO).respond_with(&accepted),
    )?;
    server.script(
        "GetTaskStatus",
        Script::latency(Duration::from_millis(20)).respond_with(&done),
    )?;
    server.script("Heartbeat", Script::latency(Duration::from_millis(100)))?;
    let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard()).await?;

    // 1. Submit once, then follow.
    let request = SubmitTaskRequest {
        task_id: "report-7".into(),
        ..Default::default()
    };
    let mut task = SchedulerTask::new(sw4rm.clone(), request);
    let followed = OperationBudget::new(Duration::from_secs(30))
        .run(
            Follow::new()
                .poll_every(Duration::from_millis(200))
                .run(&mut task),
        )
        .await?;
    println!(
        "task {} ended {:?} after {} poll(s)",
        task.task_id(),
        followed.status.state(),
        followed.polls
    );

    // 2. Many calls under a 2 s budget, told to wrap up when 40 % is left.
    let budget = OperationBudget::new(Duration::from_secs(2)).with_wrap_up(WrapUp::share(40));
    let calls = budget
        .run(async {
            let mut calls = 0;
            while !scope::should_wrap_up() {
                sw4rm
                    .registry()
                    .heartbeat(HeartbeatRequest::default())
                    .await?;
                calls += 1;
            }
            let left = scope::remaining().unwrap_or_default();
            println!(
                "wrap-up notice after {calls} calls: {} ms left to summarize",
                left.as_millis()
            );
            Ok::<_, sw4rm_timeouts::tonic::Status>(calls)
        })
        .await?;
    assert!(calls > 0);

    // 3. A timeout that says what it left behind.
    server.script("SubmitTask", Script::latency(Duration::from_secs(5)))?;
    let status = OperationBudget::new(Duration::from_millis(300))
        .run(sw4rm.scheduler().submit_task(SubmitTaskRequest::default()))
        .await
        .unwrap_err();
    if let Some(effect) = TimeoutDetails::from_status(&status).and_then(|d| d.effect()) {
        println!("SubmitTask timed out: {effect}");
    }
    Ok(())
}
