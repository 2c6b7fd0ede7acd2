//! An operation budget that pauses while a human decides. A 2 s operation runs
//! 500 ms of work, waits 3 s for a (simulated) human approval, then makes a call that
//! takes 1 s. Without the pause the call would find the budget spent and fail; with
//! it, the human's time is not charged.
//! Run with `cargo run --example approval_budget`.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "time"] }
//! ```

use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest;
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{OperationBudget, ProfileSet, Sw4rm, TimeoutDetails, TimeoutProfileLayer};

async fn operation(sw4rm: &Sw4rm, budget: &OperationBudget, pause_for_human: bool) {
    budget
        .run(async {
            tokio::time::sleep(Duration::from_millis(500)).await; // the agent's own work
            {
                let _human = pause_for_human.then(|| budget.pause());
                tokio::time::sleep(Duration::from_secs(3)).await; // a person decides
            }
            println!(
                "    after the approval: {:?} left, {:?} paused",
                budget.remaining(),
                budget.paused()
            );
            match sw4rm
                .scheduler()
                .get_task_status(GetTaskStatusRequest::default())
                .await
            {
                Ok(_) => println!("    the call after the approval succeeded"),
                Err(status) => {
                    let cap = TimeoutDetails::from_status(&status)
                        .map(|d| {
                            format!(" (cap: {}, {} ms)", d.source(), d.configured_timeout_ms())
                        })
                        .unwrap_or_default();
                    println!(
                        "    the call after the approval failed: {:?}{cap}",
                        status.code()
                    );
                }
            }
        })
        .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = TestServer::start().await?;
    server.script("GetTaskStatus", Script::latency(Duration::from_secs(1)))?;
    let sw4rm = Sw4rm::connect_with(
        server.url(),
        TimeoutProfileLayer::new(ProfileSet::standard()),
    )
    .await?;

    println!("A 2 s budget whose clock keeps running while a human decides:");
    operation(&sw4rm, &OperationBudget::new(Duration::from_secs(2)), false).await;

    println!("\nThe same budget, paused while the human decides:");
    operation(&sw4rm, &OperationBudget::new(Duration::from_secs(2)), true).await;
    Ok(())
}
