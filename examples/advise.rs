//! The timeout advisor on a realistic mix, against the embedded server: tools that
//! answer in about 30 ms under `tool_call`'s 30 s default, a negotiation room whose
//! votes take 200 ms (one in ten 450 ms) under a deployment's 300 ms profile, and a
//! registry whose heartbeats answer in 20 ms but hang for 1.5 s one time in twenty. A
//! layer observes the calls; the advisor says what it sees and proposes an overlay;
//! the room runs again with the overlay applied.
//! Run with `cargo run --example advise`; `cargo run --example advise -- --report
//! advice.html` also writes the first advice as a page of charts.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-advise = "0.1"
//! sw4rm-timeouts = { version = "0.1", features = ["testing", "prometheus"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```

use std::time::Duration;

use sw4rm_advise::Advice;
use sw4rm_timeouts::proto::sw4rm::negotiation_room::SubmitVoteRequest;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{GlobalConfig, ProfileSet, Sw4rm, TimeoutProfileLayer};

/// The deployment's own file: the room's votes under a profile of their own, and a
/// 1 s heartbeat.
const DEPLOYMENT: &str = r#"
[profiles.room]
default_timeout_ms = 300
min_timeout_ms = 10
max_timeout_ms = 10000

[profiles.heartbeat]
default_timeout_ms = 1000

[routes]
"/sw4rm.negotiation_room.NegotiationRoomService/SubmitVote" = "room"
"#;

const CALLS: usize = 200;

/// `CALLS` calls of each kind at once; how many of each failed.
async fn mix(sw4rm: &Sw4rm) -> [usize; 3] {
    let mut tasks = Vec::new();
    for i in 0..3 * CALLS {
        let sw4rm = sw4rm.clone();
        tasks.push(tokio::spawn(async move {
            let failed = match i % 3 {
                0 => sw4rm.tool().call(ToolCall::default()).await.is_err(),
                1 => sw4rm
                    .negotiation_room()
                    .submit_vote(SubmitVoteRequest::default())
                    .await
                    .is_err(),
                _ => sw4rm
                    .registry()
                    .heartbeat(HeartbeatRequest::default())
                    .await
                    .is_err(),
            };
            (i % 3, failed)
        }));
    }
    let mut failed = [0; 3];
    for task in tasks {
        let (kind, f) = task.await.expect("task");
        failed[kind] += usize::from(f);
    }
    failed
}

async fn run(server: &TestServer, config: GlobalConfig) -> Result<(), Box<dyn std::error::Error>> {
    let profiles = ProfileSet::builder().global(config).build()?;
    let layer = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .with_observations();
    let observations = layer.observations().expect("observed");
    let sw4rm = Sw4rm::connect_with(server.url(), layer).await?;
    let [tools, room, registry] = mix(&sw4rm).await;
    println!("  failed of {CALLS} each: tools {tools}, room votes {room}, heartbeats {registry}\n");
    let advice = Advice::observed(&observations);
    println!("{advice}");
    println!("{}", advice.overlay());
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ms = Duration::from_millis;
    let server = TestServer::start().await?;
    server.script("Call", Script::latency(ms(30)).with_tail(50, ms(120)))?;
    server.script(
        "SubmitVote",
        Script::latency(ms(200)).with_tail(10, ms(450)),
    )?;
    server.script(
        "Heartbeat",
        Script::latency(ms(20)).with_tail(20, ms(1_500)),
    )?;

    let deployment = GlobalConfig::from_toml_str(DEPLOYMENT, "sw4rm.toml")?;
    println!("== the deployment as configured\n");
    let profiles = ProfileSet::builder().global(deployment.clone()).build()?;
    let layer = TimeoutProfileLayer::new(profiles)
        .without_metrics()
        .with_observations();
    let observations = layer.observations().expect("observed");
    let sw4rm = Sw4rm::connect_with(server.url(), layer).await?;
    let [tools, room, registry] = mix(&sw4rm).await;
    println!("  failed of {CALLS} each: tools {tools}, room votes {room}, heartbeats {registry}\n");
    let advice = Advice::observed(&observations);
    println!("{advice}");
    let overlay = advice.overlay();
    println!("-- the proposed overlay --\n{overlay}");
    if let Some(path) = std::env::args().skip_while(|a| a != "--report").nth(1) {
        std::fs::write(&path, advice.html_report())?;
        println!("-- the advice as a page: {path}\n");
    }

    println!("== with the overlay laid over the deployment's file\n");
    for name in ["Call", "SubmitVote", "Heartbeat"] {
        // Scripts count calls from when they are set: the same tails again.
        let script = match name {
            "Call" => Script::latency(ms(30)).with_tail(50, ms(120)),
            "SubmitVote" => Script::latency(ms(200)).with_tail(10, ms(450)),
            _ => Script::latency(ms(20)).with_tail(20, ms(1_500)),
        };
        server.script(name, script)?;
    }
    let applied = deployment.merged_with(GlobalConfig::from_toml_str(&overlay, "overlay.toml")?);
    run(&server, applied).await
}
