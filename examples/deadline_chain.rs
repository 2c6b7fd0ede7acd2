//! A deadline that follows the work across three hops: an agent calls another
//! agent's Heartbeat with 2 s; that agent (a tonic server with the inbound-deadline
//! layer) works 300 ms, then asks the Scheduler (the embedded SW4RM server), whose
//! own profile would give 10 s. Each hop prints the deadline it received.
//! Run with `cargo run --example deadline_chain`.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "net", "rt-multi-thread", "time"] }
//! ```

use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::registry::registry_service_server::{
    RegistryService, RegistryServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::registry::{self, HeartbeatRequest, HeartbeatResponse};
use sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest;
use sw4rm_timeouts::scope::{InboundDeadline, InboundDeadlineLayer};
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::tonic::transport::server::TcpIncoming;
use sw4rm_timeouts::tonic::{Request, Response, Status};
use sw4rm_timeouts::{CallTimeout, ProfileSet, Sw4rm, TimeoutProfileLayer};

/// The middle agent.
struct Agent {
    scheduler: Sw4rm,
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
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        if let Some(d) = request.extensions().get::<InboundDeadline>() {
            println!(
                "hop 2 (agent):     received a deadline of {:?}",
                d.received()
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await; // its own work
                                                              // No timeout given here: the workflow_status profile (10 s) applies, capped by
                                                              // what is left of the caller's deadline.
        self.scheduler
            .scheduler()
            .get_task_status(GetTaskStatusRequest::default())
            .await?;
        Ok(Response::new(HeartbeatResponse::default()))
    }

    async fn deregister_agent(
        &self,
        _: Request<registry::DeregisterAgentRequest>,
    ) -> Result<Response<registry::DeregisterAgentResponse>, Status> {
        Err(Status::unimplemented("deregister elsewhere"))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scheduler_server = TestServer::start().await?;
    let scheduler = Sw4rm::connect_with(
        scheduler_server.url(),
        TimeoutProfileLayer::new(ProfileSet::standard()),
    )
    .await?;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let agent_url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(
        sw4rm_timeouts::tonic::transport::Server::builder()
            .layer(InboundDeadlineLayer::new())
            .add_service(RegistryServiceServer::new(Agent { scheduler }))
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );

    let caller =
        Sw4rm::connect_with(agent_url, TimeoutProfileLayer::new(ProfileSet::standard())).await?;
    let mut req = Request::new(HeartbeatRequest::default());
    CallTimeout::After(Duration::from_secs(2)).apply(&mut req);
    println!("hop 1 (caller):    sends a deadline of 2000 ms");
    caller.registry().heartbeat(req).await?;

    let last = scheduler_server.calls_to("GetTaskStatus");
    let received = last
        .first()
        .and_then(|c| c.grpc_timeout.as_deref())
        .and_then(|h| sw4rm_timeouts::wire::grpc_timeout::parse(h.as_bytes()).ok());
    match received {
        Some(d) => println!(
            "hop 3 (scheduler): received a deadline of {} ms (its profile says 10 s)",
            d.as_millis()
        ),
        None => println!("hop 3 (scheduler): received no deadline"),
    }
    Ok(())
}
