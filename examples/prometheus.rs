//! Calls the embedded server (some calls time out), then serves the SW4-002 metrics
//! in the Prometheus text format on loopback until stopped:
//!
//! ```text
//! cargo run --example prometheus            # serves until Ctrl-C
//! cargo run --example prometheus -- --scrapes 1   # exits after one scrape
//! ```
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing", "prometheus"] }
//! tokio = { version = "1", features = ["io-util", "macros", "net", "rt-multi-thread"] }
//! ```

use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{CallTimeout, ProfileSet, Sw4rm, TimeoutProfileLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scrapes: Option<usize> = match std::env::args().skip_while(|a| a != "--scrapes").nth(1) {
        Some(n) => Some(n.parse()?),
        None => None,
    };

    // The exact SW4-002 names: no `_total` doubling, no unit suffix, no scope labels,
    // on a provider and registry of their own (the application's metrics keep theirs).
    let registry = sw4rm_timeouts::metrics::Registry::new();
    let provider = sw4rm_timeouts::metrics::prometheus_provider(registry.clone())?;

    let server = TestServer::start().await?;
    let layer = TimeoutProfileLayer::new(ProfileSet::standard()).with_meter_provider(&provider);
    let sw4rm = Sw4rm::connect_with(server.url(), layer).await?;
    for _ in 0..3 {
        sw4rm
            .registry()
            .heartbeat(HeartbeatRequest::default())
            .await?;
    }
    server.script("Call", Script::latency(Duration::from_secs(5)))?;
    for _ in 0..2 {
        let mut req = sw4rm_timeouts::tonic::Request::new(ToolCall::default());
        CallTimeout::After(Duration::from_secs(1)).apply(&mut req);
        let status = sw4rm
            .tool()
            .call(req)
            .await
            .err()
            .ok_or("expected a timeout")?;
        println!("tool call: {:?}", status.code());
    }

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("serving http://{}/metrics", listener.local_addr()?);
    let mut served = 0;
    while scrapes.is_none_or(|n| served < n) {
        let (mut socket, _) = listener.accept().await?;
        let mut request = [0u8; 1024];
        let _ = socket.read(&mut request).await?;
        let body = sw4rm_timeouts::metrics::render(&[&registry]);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(body.as_bytes()).await?;
        served += 1;
    }
    Ok(())
}
