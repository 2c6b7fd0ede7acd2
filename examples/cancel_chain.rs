//! Cancellation that follows the work: a caller asks an agent's Heartbeat and gives
//! up after 300 ms. The agent (a tonic server with the inbound-deadline layer) had
//! moved the work to another task with `scope::carry`; that work's tool call to the
//! embedded SW4RM server (scripted to take a minute) ends at once with `CANCELLED`,
//! naming why, and the server sees its handler dropped. A detached audit call made at
//! the same time is not cancelled. Run with `cargo run --example cancel_chain`.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "net", "rt-multi-thread", "sync", "time"] }
//! ```

use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_server::{
    RegistryService, RegistryServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::registry::{self, HeartbeatRequest, HeartbeatResponse};
use sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest;
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::scope::{self, InboundDeadlineLayer};
use sw4rm_timeouts::testing::{Script, ServedEnd, TestServer};
use sw4rm_timeouts::tonic::transport::server::TcpIncoming;
use sw4rm_timeouts::tonic::{Request, Response, Status};
use sw4rm_timeouts::{CancelDetails, Sw4rm, TimeoutProfileLayer};
use tokio::sync::mpsc;

/// The agent: its Heartbeat hands the work to another task and waits.
struct Agent {
    downstream: Sw4rm,
    told: mpsc::UnboundedSender<String>,
}

#[sw4rm_timeouts::tonic::async_trait]
impl RegistryService for Agent {
    async fn register_agent(
        &self,
        _: Request<registry::RegisterAgentRequest>,
    ) -> Result<Response<registry::RegisterAgentResponse>, Status> {
        Err(Status::unimplemented("register elsewhere"))
    }

    async fn heartbeat(
        &self,
        _: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let (tool, told) = (self.downstream.clone(), self.told.clone());
        // The work, carried: it is cancelled with the caller.
        tokio::spawn(scope::carry(async move {
            let answer = tool.tool().call(ToolCall::default()).await;
            let line = match answer {
                Ok(_) => "the tool answered".to_owned(),
                Err(status) => match CancelDetails::from_status(&status) {
                    Some(d) => format!(
                        "CANCELLED after {} ms, cause {} ({})",
                        d.elapsed_ms(),
                        d.reason(),
                        d.reason().describe()
                    ),
                    None => format!("{:?}: {}", status.code(), status.message()),
                },
            };
            let _ = told.send(format!("agent's carried tool call: {line}"));
        }));
        // An audit record, detached: it outlives the caller on purpose.
        let (audit, told) = (self.downstream.clone(), self.told.clone());
        tokio::spawn(scope::detach(async move {
            let answer = audit
                .scheduler()
                .get_task_status(GetTaskStatusRequest::default())
                .await;
            let _ = told.send(format!(
                "agent's detached audit call: ok = {}",
                answer.is_ok()
            ));
        }));
        std::future::pending::<()>().await;
        Ok(Response::new(HeartbeatResponse::default()))
    }

    async fn deregister_agent(
        &self,
        _: Request<registry::DeregisterAgentRequest>,
    ) -> Result<Response<registry::DeregisterAgentResponse>, Status> {
        Err(Status::unimplemented("register elsewhere"))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = TestServer::start().await?;
    server.script(
        "/sw4rm.tool.ToolService/Call",
        Script::latency(Duration::from_secs(60)),
    )?;
    server.script(
        "/sw4rm.scheduler.SchedulerService/GetTaskStatus",
        Script::latency(Duration::from_millis(500)),
    )?;
    let downstream = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard()).await?;

    let (told, mut heard) = mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(
        sw4rm_timeouts::tonic::transport::Server::builder()
            .layer(InboundDeadlineLayer::new())
            .add_service(RegistryServiceServer::new(Agent { downstream, told }))
            .serve_with_incoming(TcpIncoming::from(listener)),
    );

    let mut caller = RegistryServiceClient::connect(url).await?;
    let call = tokio::spawn(async move { caller.heartbeat(HeartbeatRequest::default()).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    println!("caller: gives up after 300 ms (drops the call: HTTP/2 resets the stream)");
    call.abort();

    for _ in 0..2 {
        if let Some(line) = heard.recv().await {
            println!("{line}");
        }
    }
    for c in server.calls() {
        let end = server.wait_for_end(c.id, Duration::from_secs(5)).await;
        let outcome = end.map(|c| c.outcome).unwrap_or(ServedEnd::Running);
        println!("server saw {}: {outcome:?}", c.path);
    }
    Ok(())
}
