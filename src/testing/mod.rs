//! An embedded, in-process SW4RM server for tests and examples (feature `testing`).
//!
//! It serves all fifteen SW4RM services (and the SW4-002 additions) over real HTTP/2
//! on loopback, answers every RPC with a default (or scripted) message after a scripted
//! latency (streams with scripted pacing), and records, per call, the `grpc-timeout` it
//! received, its metadata, and whether the call completed or was cancelled.
//!
//! Without a socket: [`Scripted`] plays each attempt as a test scripted it (when it
//! answers, with what, or never; a body the test feeds) and records what it saw, for
//! tests on paused time of what the layer does with attempts, deadlines and drops;
//! [`InMemory`] answers every call at once, for measuring what the layer adds.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
//! use sw4rm_timeouts::testing::{Script, TestServer};
//! use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutDetails, TimeoutProfileLayer};
//!
//! let server = TestServer::start().await?;
//! server.script("Heartbeat", Script::latency(Duration::from_millis(1_500)))?;
//!
//! let profiles = ProfileSet::builder().without_global().default_timeout_ms("heartbeat", 1_000).build()?;
//! let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::new(profiles)).await?;
//! let status = sw4rm.registry().heartbeat(HeartbeatRequest::default()).await.unwrap_err();
//! let details = TimeoutDetails::from_status(&status).unwrap();
//! assert_eq!(details.profile_name(), "heartbeat");
//! assert_eq!(server.calls()[0].grpc_timeout.as_deref(), Some("1000000u"));
//! # Ok(()) }
//! ```

mod in_memory;
mod rpc_names;
mod script;
mod scripted;
mod services;
mod state;
#[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::transport::server::TcpIncoming;

pub use in_memory::{generated_request, InMemory};
pub use rpc_names::UnknownRpc;
pub use script::{Script, ServedCall, ServedEnd, StreamScript};
pub use scripted::{Feed, Play, Scripted, Seen, ATTEMPT_HEADER};
pub use state::DEFAULT_KEPT_CALLS;
#[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))))]
pub use tls::TestTls;

use crate::proto::sw4rm::activity::activity_service_server::ActivityServiceServer;
use crate::proto::sw4rm::connector::connector_service_server::ConnectorServiceServer;
use crate::proto::sw4rm::handoff::handoff_service_server::HandoffServiceServer;
use crate::proto::sw4rm::hitl::hitl_service_server::HitlServiceServer;
use crate::proto::sw4rm::logging::logging_service_server::LoggingServiceServer;
use crate::proto::sw4rm::negotiation::negotiation_service_server::NegotiationServiceServer;
use crate::proto::sw4rm::negotiation_room::negotiation_room_service_server::NegotiationRoomServiceServer;
use crate::proto::sw4rm::reasoning::reasoning_proxy_server::ReasoningProxyServer;
use crate::proto::sw4rm::registry::registry_service_server::RegistryServiceServer;
use crate::proto::sw4rm::router::router_service_server::RouterServiceServer;
use crate::proto::sw4rm::scheduler::scheduler_policy_service_server::SchedulerPolicyServiceServer;
use crate::proto::sw4rm::scheduler::scheduler_service_server::SchedulerServiceServer;
use crate::proto::sw4rm::tool::tool_service_server::ToolServiceServer;
use crate::proto::sw4rm::workflow::workflow_service_server::WorkflowServiceServer;
use crate::proto::sw4rm::worktree::worktree_service_server::WorktreeServiceServer;
use rpc_names::resolve_rpc;
use services::Embedded;
use state::State;

/// Streams reset by clients that the embedded server tolerates on one connection.
const MAX_RESET_STREAMS: usize = 1 << 20;
/// Concurrent calls the embedded server takes on one connection.
const MAX_CONCURRENT_STREAMS: u32 = 100_000;
/// The embedded server's HTTP/2 connection window (16 MiB).
const CONNECTION_WINDOW: u32 = 16 << 20;

/// A running embedded SW4RM server; stops when dropped.
#[derive(Debug)]
#[must_use = "the server stops as soon as it is dropped"]
pub struct TestServer {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: Option<oneshot::Sender<()>>,
    #[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
    tls: Option<TestTls>,
    /// Serves TLS (with certificates it made, in `tls`, or the caller's own).
    https: bool,
}

/// The server's connections: accepted with `TCP_NODELAY`, as tonic's own listener and
/// every tonic client set it. With Nagle's algorithm on, an answer written in pieces
/// (headers, then data and trailers) can wait for the client's delayed ACK: up to
/// 40 ms on Linux, which put a second, slower tail under every scripted latency.
fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

impl TestServer {
    /// Starts the server on `127.0.0.1` with an OS-chosen port, in plaintext.
    pub async fn start() -> std::io::Result<TestServer> {
        let server = tonic::transport::Server::builder();
        let (addr, state, shutdown) = TestServer::serve(server).await?;
        Ok(TestServer {
            addr,
            state,
            shutdown: Some(shutdown),
            #[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
            tls: None,
            https: false,
        })
    }

    /// Starts the server with TLS: a certificate authority made now signs its
    /// certificate (for `localhost` and `127.0.0.1`); [`TestServer::tls`] hands the CA
    /// to trust to the test. The URL is `https://127.0.0.1:PORT`.
    #[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
    #[cfg_attr(docsrs, doc(cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))))]
    pub async fn start_tls() -> std::io::Result<TestServer> {
        TestServer::start_with_tls(false).await
    }

    /// [`TestServer::start_tls`], and the server requires a client identity signed by
    /// its CA (mutual TLS): [`TestTls::client_tls_config`] carries one.
    #[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
    #[cfg_attr(docsrs, doc(cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))))]
    pub async fn start_mutual_tls() -> std::io::Result<TestServer> {
        TestServer::start_with_tls(true).await
    }

    #[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
    async fn start_with_tls(mutual: bool) -> std::io::Result<TestServer> {
        let tls = TestTls::generate(mutual).map_err(std::io::Error::other)?;
        TestServer::start_on_tls(tls.server_tls_config(), Some(tls)).await
    }

    /// Serves TLS with `config`; `made` holds the certificates when the server made
    /// them.
    #[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
    async fn start_on_tls(
        config: tonic::transport::ServerTlsConfig,
        made: Option<TestTls>,
    ) -> std::io::Result<TestServer> {
        tls::choose_provider();
        let server = tonic::transport::Server::builder()
            .tls_config(config)
            .map_err(std::io::Error::other)?;
        let (addr, state, shutdown) = TestServer::serve(server).await?;
        Ok(TestServer {
            addr,
            state,
            shutdown: Some(shutdown),
            tls: made,
            https: true,
        })
    }

    /// Starts the server with TLS on your own certificate (chain) and private key,
    /// both PEM: the one your deployment's private CA signs, say, to test that your
    /// agent trusts it. Your test holds the CA, so [`TestServer::tls`] is `None`. The
    /// URL is `https://127.0.0.1:PORT`; a certificate for another name needs the
    /// client's `ClientTlsConfig::domain_name`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sw4rm_timeouts::testing::TestServer;
    /// // Here the embedded server's own CA stands in for yours.
    /// let made = TestServer::start_tls().await?;
    /// let (cert, key) = made.tls().unwrap().server_identity_pem();
    /// let server = TestServer::start_tls_with(cert, key).await?;
    /// assert!(server.url().starts_with("https://") && server.tls().is_none());
    /// # Ok(()) }
    /// ```
    #[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
    #[cfg_attr(docsrs, doc(cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))))]
    pub async fn start_tls_with(
        cert_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> std::io::Result<TestServer> {
        let identity = tonic::transport::Identity::from_pem(cert_pem, key_pem);
        let config = tonic::transport::ServerTlsConfig::new().identity(identity);
        TestServer::start_on_tls(config, None).await
    }

    /// The certificates of a TLS server it made itself (`None` for a plaintext one,
    /// or one started with your own certificate).
    #[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
    #[cfg_attr(docsrs, doc(cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))))]
    pub fn tls(&self) -> Option<&TestTls> {
        self.tls.as_ref()
    }

    /// Serves every service on a new loopback listener.
    async fn serve(
        server: tonic::transport::Server,
    ) -> std::io::Result<(SocketAddr, Arc<State>, oneshot::Sender<()>)> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let svc = Embedded {
            state: state.clone(),
        };
        let (tx, rx) = oneshot::channel::<()>();
        let router = server
            // This server exists to be cancelled at deadlines: a burst of calls reset
            // by their client before the server accepted them is its normal load, not
            // the rapid-reset attack h2's default guard (20 pending resets, then
            // GOAWAY `too_many_resets`) is there for.
            .http2_max_pending_accept_reset_streams(Some(MAX_RESET_STREAMS))
            // Bursts of thousands of calls on one connection (hyper's default is 200
            // concurrent streams; further calls would wait in the client).
            .max_concurrent_streams(Some(MAX_CONCURRENT_STREAMS))
            // h2 budgets the small DATA frames a connection buffers before handlers
            // read them at half the connection window: a burst of 10,000 tiny
            // requests on one connection needs far more than the default allows, or
            // the server closes the connection.
            .initial_connection_window_size(Some(CONNECTION_WINDOW))
            .http2_max_local_error_reset_streams(Some(MAX_RESET_STREAMS))
            .add_service(RegistryServiceServer::new(svc.clone()))
            .add_service(SchedulerServiceServer::new(svc.clone()))
            .add_service(NegotiationRoomServiceServer::new(svc.clone()))
            .add_service(HandoffServiceServer::new(svc.clone()))
            .add_service(ToolServiceServer::new(svc.clone()))
            .add_service(SchedulerPolicyServiceServer::new(svc.clone()))
            .add_service(NegotiationServiceServer::new(svc.clone()))
            .add_service(RouterServiceServer::new(svc.clone()))
            .add_service(HitlServiceServer::new(svc.clone()))
            .add_service(WorktreeServiceServer::new(svc.clone()))
            .add_service(ActivityServiceServer::new(svc.clone()))
            .add_service(ConnectorServiceServer::new(svc.clone()))
            .add_service(LoggingServiceServer::new(svc.clone()))
            .add_service(ReasoningProxyServer::new(svc.clone()))
            .add_service(WorkflowServiceServer::new(svc));
        tokio::spawn(async move {
            if let Err(e) = router
                .serve_with_incoming_shutdown(incoming(listener), async {
                    let _ = rx.await;
                })
                .await
            {
                tracing::error!(error = %e, "embedded SW4RM server stopped");
            }
        });
        Ok((addr, state, tx))
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, or `https://127.0.0.1:PORT` for a TLS server.
    pub fn url(&self) -> String {
        match self.https {
            true => format!("https://{}", self.addr),
            false => format!("http://{}", self.addr),
        }
    }

    /// Scripts an RPC, named by its path (`/sw4rm.registry.RegistryService/Heartbeat`)
    /// or its method name (`Heartbeat`) where only one service has a method of that name
    /// (`Decide` is both `HitlService/Decide` and `NegotiationService/Decide`: give the
    /// path). The script replaces the RPC's previous one, and its `fail_first` /
    /// `slow_first` count the calls made from now on.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sw4rm_timeouts::testing::{Script, TestServer};
    /// let server = TestServer::start().await?;
    /// server.script("Heartbeat", Script::default())?;
    /// let err = server.script("HeartBeet", Script::default()).unwrap_err();
    /// assert_eq!(err.to_string(), "the embedded SW4RM server has no RPC `HeartBeet` (did you mean `Heartbeat`?)");
    /// let err = server.script("Decide", Script::default()).unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     "the embedded SW4RM server has several RPCs named `Decide`: give the path \
    ///      (`/sw4rm.negotiation.NegotiationService/Decide`, `/sw4rm.hitl.HitlService/Decide`)"
    /// );
    /// # Ok(()) }
    /// ```
    pub fn script(&self, rpc: &str, script: Script) -> Result<(), UnknownRpc> {
        self.state.set_script(resolve_rpc(rpc)?, script);
        Ok(())
    }

    /// The kept calls (the last [`DEFAULT_KEPT_CALLS`], or as many as
    /// [`TestServer::keep_calls`] says), in arrival order: a copy. A call's `id` counts
    /// every call, so `calls()[i].id == i` only while nothing was dropped or taken.
    pub fn calls(&self) -> Vec<ServedCall> {
        self.state.calls()
    }

    /// The kept calls, taken: the log is empty afterwards (ids go on counting). For a
    /// long test that looks at its calls in batches without keeping them.
    pub fn take_calls(&self) -> Vec<ServedCall> {
        self.state.take_calls()
    }

    /// Forgets the kept calls (ids go on counting).
    pub fn clear_calls(&self) {
        self.state.clear_calls()
    }

    /// Keeps the last `n` call records from now on (default [`DEFAULT_KEPT_CALLS`]);
    /// older ones are dropped, at once if there are more. A server under a long load
    /// then holds a bounded log whatever the number of calls.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
    /// use sw4rm_timeouts::testing::TestServer;
    /// use sw4rm_timeouts::{Sw4rm, TimeoutProfileLayer};
    /// let server = TestServer::start().await?;
    /// server.keep_calls(2);
    /// let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard()).await?;
    /// for _ in 0..3 {
    ///     sw4rm.registry().heartbeat(HeartbeatRequest::default()).await?;
    /// }
    /// let ids: Vec<usize> = server.calls().iter().map(|c| c.id).collect();
    /// assert_eq!(ids, [1, 2]);
    /// # Ok(()) }
    /// ```
    pub fn keep_calls(&self, n: usize) {
        self.state.keep_calls(n)
    }

    /// The kept calls to one RPC (path or method name, as for
    /// [`TestServer::script`]; none for a name that is no RPC of the server, or
    /// several).
    pub fn calls_to(&self, rpc: &str) -> Vec<ServedCall> {
        let path = resolve_rpc(rpc).ok();
        self.state.with_calls(|_, calls| {
            calls
                .iter()
                .filter(|c| Some(c.path) == path)
                .cloned()
                .collect()
        })
    }

    /// Waits (up to `limit`) until `done` holds for the kept call records; returns
    /// whether it did. `done` runs under the log's lock and sees the records in place:
    /// nothing is copied, however long the log.
    pub async fn wait_until(
        &self,
        limit: Duration,
        mut done: impl FnMut(&[ServedCall]) -> bool,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.state.changed.notified();
            if self.state.with_calls(|_, calls| done(calls)) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.state.with_calls(|_, calls| done(calls));
            }
        }
    }

    /// Waits (up to `limit`) until call `id` has ended; returns its record (`None`
    /// when it no longer is kept, or never came).
    pub async fn wait_for_end(&self, id: usize, limit: Duration) -> Option<ServedCall> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.state.changed.notified();
            let ended = self.state.with_calls(|log, _| {
                log.get(id)
                    .filter(|c| c.outcome != ServedEnd::Running)
                    .cloned()
            });
            if ended.is_some() {
                return ended;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.state.with_calls(|log, _| log.get(id).cloned());
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_stream::StreamExt;

    #[tokio::test]
    async fn accepted_connections_send_without_waiting_for_acks() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut accepted = incoming(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let stream = accepted
            .next()
            .await
            .expect("a connection")
            .expect("accept");
        assert!(stream.nodelay().expect("TCP_NODELAY"), "Nagle is off");
    }
}
