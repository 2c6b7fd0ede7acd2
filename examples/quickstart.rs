//! Quickstart: an embedded SW4RM server on loopback and the four things the SDK does
//! for every call. Run with `cargo run --example quickstart`.
//!
//! With `OTEL_EXPORTER_OTLP_ENDPOINT` set (say `http://localhost:4317`, an
//! OpenTelemetry Collector's OTLP/gRPC port), the calls' spans and the layer's metrics
//! are exported there too (feature `otlp`).
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing", "otlp"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! tracing-subscriber = "0.3"
//! ```

use std::time::Duration;

use sw4rm_timeouts::otlp::Otlp;
use sw4rm_timeouts::proto::sw4rm::negotiation_room::WaitForDecisionRequest;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{CallTimeout, ProfileSet, Sw4rm, TimeoutDetails, TimeoutProfileLayer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let otlp = logging_and_export()?;

    println!(
        "SW4RM is an open protocol for swarms of cooperating agents (registry, scheduler,\n\
         negotiation, handoff, tools) over gRPC. Its extension SW4-002 gives every RPC a\n\
         timeout profile; this SDK applies it to each call and puts it on the wire.\n"
    );

    let server = TestServer::start().await?;
    println!("Embedded SW4RM server on {}\n", server.url());
    // Standard SW4-002 profiles; `ProfileSet::from_global()` would add sw4rm.toml / SW4RM_* settings.
    let mut layer = TimeoutProfileLayer::new(ProfileSet::standard());
    if let Some(otlp) = &otlp {
        layer = layer.with_meter_provider(otlp.meter_provider());
    }
    let sw4rm = Sw4rm::connect_with(server.url(), layer).await?;

    println!("1. Heartbeat with no timeout given: the heartbeat profile applies.");
    sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await?;
    println!("   server received deadline: {}\n", last_deadline(&server));

    println!("2. Heartbeat with a 200 ms override: below heartbeat's 1 s minimum, so clamped.");
    let mut req = sw4rm_timeouts::tonic::Request::new(HeartbeatRequest::default());
    req.set_timeout(Duration::from_millis(200));
    sw4rm.registry().heartbeat(req).await?;
    println!("   server received deadline: {}\n", last_deadline(&server));

    println!("3. WaitForDecision with an infinite timeout: negotiation_vote allows it.");
    server.script(
        "WaitForDecision",
        Script::latency(Duration::from_millis(1_500)),
    )?;
    let mut req = sw4rm_timeouts::tonic::Request::new(WaitForDecisionRequest::default());
    CallTimeout::Infinite.apply(&mut req);
    sw4rm.negotiation_room().wait_for_decision(req).await?;
    println!(
        "   server received deadline: {}, and answered after 1.5 s\n",
        last_deadline(&server)
    );

    println!("4. A tool call to a slow tool (5 s) with a 1 s timeout: DEADLINE_EXCEEDED.");
    server.script("Call", Script::latency(Duration::from_secs(5)))?;
    let mut req = sw4rm_timeouts::tonic::Request::new(ToolCall {
        tool_name: "slow-tool".into(),
        ..Default::default()
    });
    CallTimeout::After(Duration::from_secs(1)).apply(&mut req);
    let status = match sw4rm.tool().call(req).await {
        Ok(_) => return Err("the slow tool call should have timed out".into()),
        Err(status) => status,
    };
    println!("   status:  {:?}: {}", status.code(), status.message());
    let d = TimeoutDetails::from_status(&status).ok_or("no timeout details")?;
    println!(
        "   details: profile {}, configured {} ms (from {}), elapsed {} ms, phase {}, detected by {}",
        d.profile_name(),
        d.configured_timeout_ms(),
        d.source(),
        d.elapsed_ms(),
        d.phase().as_str(),
        d.detected_by().as_str()
    );
    let cancelled = server
        .wait_for_end(server.calls().len() - 1, Duration::from_secs(5))
        .await;
    match cancelled {
        Some(call) => println!("   server saw the call end as: {:?}", call.outcome),
        None => println!("   server did not see the call end"),
    }
    if let Some(otlp) = otlp {
        otlp.shutdown().await?;
        println!("\nSpans and metrics sent to the OTLP endpoint.");
    }
    Ok(())
}

/// Clamp and timeout warnings are tracing events: printed, one short line each (the
/// span's fields are not repeated), coloured only on a terminal. With
/// `OTEL_EXPORTER_OTLP_ENDPOINT` set, the SDK's spans and metrics go there as well.
fn logging_and_export() -> Result<Option<Otlp>, Box<dyn std::error::Error>> {
    use std::io::IsTerminal;
    use tracing_subscriber::prelude::*;
    let lines = tracing_subscriber::fmt::layer()
        .without_time()
        .with_target(false)
        .with_ansi(std::io::stdout().is_terminal())
        .compact()
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NONE)
        .fmt_fields(tracing_subscriber::fmt::format::DefaultFields::new())
        .with_filter(tracing::level_filters::LevelFilter::INFO);
    // The export to a Collector, when one is named: the SDK's spans (DEBUG and up).
    let otlp = match std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Some(_) => Some(Otlp::builder("sw4rm-quickstart").start()?),
        None => None,
    };
    let sdk_spans = tracing_subscriber::filter::Targets::new()
        .with_target("sw4rm_timeouts", tracing::Level::DEBUG);
    let exported = otlp
        .as_ref()
        .map(|o| o.tracing_layer().with_filter(sdk_spans));
    tracing_subscriber::registry()
        .with(lines)
        .with(exported)
        .init();
    Ok(otlp)
}

/// The deadline the server received, readable: `5 s (grpc-timeout 5000000u)`.
fn last_deadline(server: &TestServer) -> String {
    let Some(call) = server.calls().pop() else {
        return "no call".into();
    };
    match (call.deadline, call.grpc_timeout) {
        (Some(d), Some(raw)) => format!("{} (grpc-timeout {raw})", readable(d)),
        _ => "none".into(),
    }
}

fn readable(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}
