//! A chain of heartbeat agents over loopback for the trace tests (`trace_context.rs`,
//! `otlp_export.rs`): each a tonic server behind `InboundDeadlineLayer` calling the next
//! through `TimeoutProfileLayer`, both with W3C trace context.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_sdk::propagation::TraceContextPropagator;
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_server::{
    RegistryService, RegistryServiceServer,
};
use sw4rm_timeouts::proto::sw4rm::registry::{self, HeartbeatRequest, HeartbeatResponse};
use sw4rm_timeouts::scope::InboundDeadlineLayer;
use sw4rm_timeouts::{Propagation, Sw4rm, TimeoutProfileLayer};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

pub const HEARTBEAT: &str = "sw4rm.registry.RegistryService/Heartbeat";

/// One agent: answers Heartbeat after `delay`, asking `next` first when it has one.
pub struct Agent {
    next: Option<Sw4rm>,
    delay: Duration,
    /// The `traceparent` each call arrived with.
    seen: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl RegistryService for Agent {
    async fn register_agent(
        &self,
        _: Request<registry::RegisterAgentRequest>,
    ) -> Result<Response<registry::RegisterAgentResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn heartbeat(
        &self,
        request: Request<HeartbeatRequest>,
    ) -> Result<Response<HeartbeatResponse>, Status> {
        let parent = request
            .metadata()
            .get("traceparent")
            .and_then(|v| v.to_str().ok());
        self.seen
            .lock()
            .unwrap()
            .push(parent.unwrap_or_default().to_owned());
        tracing::info!("heartbeat served");
        tokio::time::sleep(self.delay).await;
        if let Some(next) = &self.next {
            next.registry()
                .heartbeat(HeartbeatRequest::default())
                .await?;
        }
        Ok(Response::new(HeartbeatResponse::default()))
    }

    async fn deregister_agent(
        &self,
        _: Request<registry::DeregisterAgentRequest>,
    ) -> Result<Response<registry::DeregisterAgentResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

/// An agent's client: W3C trace context, and a hop offset of 300 ms, so that a hop's
/// own call runs out well before its caller's deadline.
pub fn client_layer() -> TimeoutProfileLayer {
    TimeoutProfileLayer::standard()
        .with_trace_propagator(TraceContextPropagator::new())
        .with_propagation(Propagation::default().with_hop_offset(Duration::from_millis(300)))
}

/// An agent's inbound layer: W3C trace context.
pub fn inbound_layer() -> InboundDeadlineLayer {
    InboundDeadlineLayer::new().with_trace_propagator(TraceContextPropagator::new())
}

/// Starts an agent on loopback; its URL and what it saw.
pub async fn agent(next: Option<&str>, delay: Duration) -> (String, Arc<Mutex<Vec<String>>>) {
    agent_with(next, delay, client_layer(), inbound_layer()).await
}

/// [`agent`], calling the next agent through `layer` and served behind `inbound`.
pub async fn agent_with(
    next: Option<&str>,
    delay: Duration,
    layer: TimeoutProfileLayer,
    inbound: InboundDeadlineLayer,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let next = match next {
        Some(url) => Some(Sw4rm::connect_with(url.to_owned(), layer).await.unwrap()),
        None => None,
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let svc = RegistryServiceServer::new(Agent {
        next,
        delay,
        seen: seen.clone(),
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(inbound)
            .add_service(svc)
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    (url, seen)
}
