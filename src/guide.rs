//! # Using it with tonic
//!
//! Everything here is ordinary tonic: the layer is a tower layer over a `Channel`,
//! the clients are tonic-generated, and `sw4rm_timeouts::tonic` is the tonic they
//! were generated with (name it instead of your own `tonic` dependency, and the
//! versions cannot drift apart; the same for `prost` and `prost_types`).
//!
//! ## Connecting: your own `Endpoint`
//!
//! [`crate::Sw4rm::builder`] takes a tonic `Endpoint`, so TLS, keep-alive, origin,
//! user agent, connect timeout and lazy connecting are set as tonic users set them,
//! and stand; the builder adds a connect timeout where the endpoint has none
//! ([`crate::DEFAULT_CONNECT_TIMEOUT`]) and the HTTP/2 settings a client that cancels
//! calls at their deadline needs ([`crate::cancel_safe`]):
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
//! use sw4rm_timeouts::tonic::transport::Endpoint;
//! let endpoint = Endpoint::from_static("http://scheduler.swarm.internal:50051")
//!     .http2_keep_alive_interval(Duration::from_secs(30))
//!     .user_agent("planner-agent/1.4")?;
//! // TLS: `endpoint.tls_config(ClientTlsConfig::new()...)` with a `tls-*` feature
//! // (see the README's "TLS" section).
//! let sw4rm = Sw4rm::builder(endpoint)
//!     .layer(TimeoutProfileLayer::new(ProfileSet::from_global()?))
//!     .connect_lazy()?; // calls made before the connection is up still end at their deadlines
//! # drop(sw4rm); Ok(()) }
//! ```
//!
//! `Sw4rm::connect(url)` is the one-line version; it reads the global configuration
//! (`SW4RM_CONFIG` or `./sw4rm.toml`, and `SW4RM_*`).
//!
//! ## Interceptors and auth
//!
//! Put an interceptor above the layer with the generated client's own
//! `with_interceptor`; the layer still plans every call:
//!
//! ```no_run
//! # async fn demo(sw4rm: sw4rm_timeouts::Sw4rm) -> Result<(), sw4rm_timeouts::tonic::Status> {
//! use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
//! use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
//! use sw4rm_timeouts::tonic::{Request, Status};
//! let auth = |mut req: Request<()>| -> Result<Request<()>, Status> {
//!     req.metadata_mut().insert("authorization", "Bearer agent-token".parse().map_err(|_| Status::internal("token"))?);
//!     Ok(req)
//! };
//! let mut registry = RegistryServiceClient::with_interceptor(sw4rm.channel(), auth);
//! registry.heartbeat(HeartbeatRequest::default()).await?;
//! # Ok(()) }
//! ```
//!
//! Any other tower layer goes under the timeout layer with
//! `ServiceBuilder::new().layer(TimeoutProfileLayer::...).layer(yours).service(channel)`.
//!
//! ## `Endpoint::timeout`
//!
//! tonic enforces `Endpoint::timeout` below the layer on every call, so it caps
//! every profile — a `WaitForDecision` allowed to wait for minutes included. Leave it
//! unset. If it fires first, the caller gets `DEADLINE_EXCEEDED` saying so
//! (`source` = `transport`, with the time it fired), and the layer warns once.
//!
//! ## Three timers, and `detected_by`
//!
//! Every call with a deadline has three timers on the same instant: the layer's, the
//! one tonic's channel arms for the `grpc-timeout` header it sends, and the server's.
//! Whichever notices first, the caller gets the same `DEADLINE_EXCEEDED` with the same
//! details, counted once; `detected_by` (`client`, `transport` or `server`) says
//! which it was. A server's own `DEADLINE_EXCEEDED` *before* our deadline (its
//! downstream call timed out) is the server's answer and reaches the caller unchanged.
//!
//! ## What is cheap
//!
//! Cloning a [`crate::Sw4rm`] or making a generated client per call is a handle
//! clone (an `Arc` and tonic's channel handle): do it freely. Each call clones the
//! inner channel handle once. Build one [`crate::TimeoutProfileLayer`] (it holds the
//! resolved profile table, the metrics instruments and the retry budget) and share it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
//! let server = sw4rm_timeouts::testing::TestServer::start().await?;
//! let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::new(ProfileSet::standard())).await?;
//! let per_task = sw4rm.clone(); // same connection, same layer
//! per_task.registry().heartbeat(sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest::default()).await?;
//! # Ok(()) }
//! ```
//!
//! ## Wire messages and Rust types
//!
//! SW4-002 defines `TimeoutProfile` and `StreamingTimeoutPolicy` as protobuf messages,
//! and the generated types keep those names in [`crate::proto::sw4rm::timeouts`] so
//! that they stay wire- and name-identical with other SW4RM implementations. The crate
//! root's [`crate::TimeoutProfile`] and [`crate::StreamingTimeoutPolicy`] are the
//! validated forms the layer works with. Import the wire module under a short name
//! and convert at the edge (`TryFrom` validates like the builder):
//!
//! ```
//! use sw4rm_timeouts::proto::sw4rm::timeouts as pb;
//! use sw4rm_timeouts::TimeoutProfile;
//! let heartbeat = TimeoutProfile::standard_named("heartbeat").unwrap();
//! let wire = pb::TimeoutProfile::from(&heartbeat);
//! assert_eq!(wire.default_timeout_ms, 5_000);
//! assert_eq!(TimeoutProfile::try_from(wire).unwrap(), heartbeat);
//! ```
//!
//! ## Serving a stream: the associated stream type
//!
//! An agent that serves a server-streaming RPC (`RouterService/StreamIncoming`,
//! `ToolService/CallStream`) names the stream type its handler returns. With the
//! `server` feature, a channel-backed stream is the usual choice: the handler returns
//! at once and a task feeds the stream; when the client goes away (or its deadline
//! passes) the channel closes and the task stops.
//!
//! ```
//! # #[cfg(feature = "server")]
//! # mod example {
//! use std::pin::Pin;
//! use sw4rm_timeouts::proto::sw4rm::common::Envelope;
//! use sw4rm_timeouts::proto::sw4rm::router::router_service_server::RouterService;
//! use sw4rm_timeouts::proto::sw4rm::router::{
//!     DeliveryAckRequest, DeliveryAckResponse, SendMessageRequest, SendMessageResponse,
//!     StreamItem, StreamRequest,
//! };
//! use sw4rm_timeouts::tonic::{self, Request, Response, Status};
//!
//! /// Any stream of items: here, the receiving end of a channel.
//! type Inbox = Pin<Box<dyn tokio_stream::Stream<Item = Result<StreamItem, Status>> + Send>>;
//!
//! struct Router;
//!
//! #[tonic::async_trait]
//! impl RouterService for Router {
//!     async fn send_message(&self, _: Request<SendMessageRequest>) -> Result<Response<SendMessageResponse>, Status> {
//!         Ok(Response::new(SendMessageResponse { accepted: true, ..Default::default() }))
//!     }
//!
//!     type StreamIncomingStream = Inbox;
//!
//!     async fn stream_incoming(&self, request: Request<StreamRequest>) -> Result<Response<Inbox>, Status> {
//!         let agent = request.into_inner().agent_id;
//!         let (tx, rx) = tokio::sync::mpsc::channel(16);
//!         tokio::spawn(async move {
//!             for seq in 1.. {
//!                 let msg = Envelope { message_id: format!("{agent}-{seq}"), ..Default::default() };
//!                 if tx.send(Ok(StreamItem { msg: Some(msg), seq })).await.is_err() {
//!                     break; // the client went away
//!                 }
//!                 tokio::time::sleep(std::time::Duration::from_secs(30)).await;
//!             }
//!         });
//!         Ok(Response::new(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))))
//!     }
//!
//!     async fn ack_delivery(&self, _: Request<DeliveryAckRequest>) -> Result<Response<DeliveryAckResponse>, Status> {
//!         Ok(Response::new(DeliveryAckResponse { recorded: true }))
//!     }
//! }
//! # }
//! ```
