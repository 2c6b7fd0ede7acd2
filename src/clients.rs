//! [`Sw4rm`]: one connection, the profile layer on top, and a generated tonic client
//! for each of the sixteen services.

use std::fmt;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint};

use crate::config::{ConfigError, ProfileSet};
use crate::proto::sw4rm::activity::activity_service_client::ActivityServiceClient;
use crate::proto::sw4rm::connector::connector_service_client::ConnectorServiceClient;
use crate::proto::sw4rm::handoff::handoff_service_client::HandoffServiceClient;
use crate::proto::sw4rm::hitl::hitl_service_client::HitlServiceClient;
use crate::proto::sw4rm::logging::logging_service_client::LoggingServiceClient;
use crate::proto::sw4rm::negotiation::negotiation_service_client::NegotiationServiceClient;
use crate::proto::sw4rm::negotiation_room::negotiation_room_service_client::NegotiationRoomServiceClient;
use crate::proto::sw4rm::reasoning::reasoning_proxy_client::ReasoningProxyClient;
use crate::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use crate::proto::sw4rm::router::router_service_client::RouterServiceClient;
use crate::proto::sw4rm::scheduler::scheduler_policy_service_client::SchedulerPolicyServiceClient;
use crate::proto::sw4rm::scheduler::scheduler_service_client::SchedulerServiceClient;
use crate::proto::sw4rm::tool::tool_service_client::ToolServiceClient;
use crate::proto::sw4rm::workflow::workflow_service_client::WorkflowServiceClient;
use crate::proto::sw4rm::worktree::worktree_service_client::WorktreeServiceClient;
use crate::timeout::{BoxError, TimeoutProfileLayer, TimeoutProfileService};
use tower_layer::Layer;
use tower_service::Service;

/// The channel type under every client: a tonic `Channel` wrapped by the layer.
pub type Sw4rmChannel = TimeoutProfileService<Channel>;

/// How long [`Sw4rm::connect`] and [`Sw4rmBuilder`] wait for a TCP (and TLS)
/// connection by default. Without it a peer that drops SYNs (a full accept backlog)
/// keeps a connect pending for about two minutes while the kernel retries.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Locally reset streams HTTP/2 remembers on a connection built by [`cancel_safe`].
pub const RESET_STREAMS_REMEMBERED: usize = 10_000;

/// How long HTTP/2 remembers a locally reset stream on a connection built by
/// [`cancel_safe`].
pub const RESET_STREAM_MEMORY: Duration = Duration::from_secs(30);

/// The HTTP/2 settings a client that cancels calls at their deadline needs.
///
/// When a call is cancelled, its stream is reset; frames the server had already sent
/// for it keep arriving. h2 ignores them only while it still remembers the reset
/// stream (by default 50 streams, for 1 s); each frame for a forgotten one counts as
/// a protocol error, and after 1,024 of them the client closes the connection with
/// `GOAWAY(ENHANCE_YOUR_CALM)` and *every* call on it fails. Under a slow link or a
/// busy server, sustained cancel-at-deadline traffic reaches that within seconds.
/// This remembers up to [`RESET_STREAMS_REMEMBERED`] reset streams for
/// [`RESET_STREAM_MEMORY`] (a few hundred bytes each, only while they exist), which
/// covers late answers at thousands of cancellations a second.
///
/// [`Sw4rm`] applies it to the connections it builds; apply it yourself to an
/// `Endpoint` whose `Channel` you pass to [`Sw4rm::with_layer`] or put under the layer.
///
/// ```
/// use sw4rm_timeouts::{cancel_safe, ProfileSet, Sw4rm};
/// use tonic::transport::Endpoint;
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let endpoint = cancel_safe(Endpoint::from_static("https://sw4rm.example:443"));
/// let channel = endpoint.connect().await?;      // your own channel, TLS and all
/// let sw4rm = Sw4rm::with_profiles(channel, ProfileSet::standard());
/// # drop(sw4rm); Ok(()) }
/// ```
pub fn cancel_safe(endpoint: Endpoint) -> Endpoint {
    endpoint
        .http2_max_concurrent_reset_streams(RESET_STREAMS_REMEMBERED)
        .http2_reset_stream_duration(RESET_STREAM_MEMORY)
}

/// Why connecting failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The global configuration is invalid (the details are its `source()`).
    Config(ConfigError),
    /// The endpoint is not a valid URI.
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// Why tonic rejected it.
        error: tonic::transport::Error,
    },
    /// The endpoint could not be reached.
    Unreachable {
        /// The endpoint's URI.
        endpoint: String,
        /// The error from tonic; its innermost cause is in `Display`.
        error: tonic::transport::Error,
    },
}

impl ConnectError {
    /// The transport error, if connecting (not configuration) failed.
    pub fn transport_error(&self) -> Option<&tonic::transport::Error> {
        match self {
            ConnectError::Config(_) => None,
            ConnectError::InvalidEndpoint { error, .. }
            | ConnectError::Unreachable { error, .. } => Some(error),
        }
    }
}

/// The innermost cause of an error: what actually went wrong ("Connection refused").
fn root_cause<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> &'a (dyn std::error::Error + 'static) {
    crate::wire::status::causes(error).last().unwrap_or(error)
}

impl fmt::Display for ConnectError {
    /// Transport errors name the endpoint and the root cause in one line, and have no
    /// `source()`, so reporters that print the chain (anyhow, eyre) do not repeat it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Config(_) => f.write_str("the SW4RM timeout configuration is invalid"),
            ConnectError::InvalidEndpoint { endpoint, error } => write!(
                f,
                "invalid SW4RM endpoint {endpoint:?}: {}",
                root_cause(error)
            ),
            ConnectError::Unreachable { endpoint, error } => write!(
                f,
                "cannot connect to the SW4RM endpoint {endpoint}: {}",
                root_cause(error)
            ),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectError::Config(e) => Some(e),
            _ => None,
        }
    }
}

/// Builds a [`Sw4rm`] from a tonic [`Endpoint`] (TLS, keep-alive, origin, user agent
/// and every other tonic setting are yours to set on it), with an explicit profile
/// layer and the HTTP/2 settings of [`cancel_safe`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use sw4rm_timeouts::testing::TestServer;
/// use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
///
/// let server = TestServer::start().await?;
/// let endpoint = tonic::transport::Endpoint::from_shared(server.url())?
///     .tcp_nodelay(true);
/// let sw4rm = Sw4rm::builder(endpoint)
///     .layer(TimeoutProfileLayer::new(ProfileSet::standard()))
///     .connect_timeout(Duration::from_secs(2))
///     .connect()
///     .await?;
/// sw4rm.registry().heartbeat(sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest::default()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Sw4rmBuilder {
    endpoint: Endpoint,
    layer: TimeoutProfileLayer,
    connect_timeout: Option<Duration>,
}

impl Sw4rmBuilder {
    /// The profile layer (profiles, meter provider, span level). Default: the standard
    /// profiles only, without global configuration.
    pub fn layer(mut self, layer: TimeoutProfileLayer) -> Self {
        self.layer = layer;
        self
    }

    /// How long to wait for the connection (default [`DEFAULT_CONNECT_TIMEOUT`]);
    /// `None` leaves it to the endpoint's own setting.
    pub fn connect_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.connect_timeout = timeout.into();
        self
    }

    fn endpoint(&self) -> Endpoint {
        let endpoint = cancel_safe(self.endpoint.clone());
        match self.connect_timeout {
            Some(t) => endpoint.connect_timeout(t),
            None => endpoint,
        }
    }

    /// Connects now; fails if the endpoint cannot be reached within the connect timeout.
    pub async fn connect(self) -> Result<Sw4rm, ConnectError> {
        let endpoint = self.endpoint();
        match endpoint.connect().await {
            Ok(channel) => Ok(Sw4rm::with_layer(channel, self.layer)),
            Err(error) => Err(ConnectError::Unreachable {
                endpoint: endpoint.uri().to_string(),
                error,
            }),
        }
    }

    /// Connects on first use (and reconnects as needed); every call still ends by its
    /// deadline, time spent connecting included.
    pub fn connect_lazy(self) -> Sw4rm {
        let channel = self.endpoint().connect_lazy();
        Sw4rm::with_layer(channel, self.layer)
    }
}

/// Clients for the SW4RM services, all sharing one connection and one profile table.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use sw4rm_timeouts::{CallTimeout, Sw4rm};
/// use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
///
/// let sw4rm = Sw4rm::connect("http://127.0.0.1:50051").await?; // standard + global config
/// let mut registry = sw4rm.registry();
/// registry.heartbeat(HeartbeatRequest::default()).await?;        // 5 s on the wire
///
/// let mut req = tonic::Request::new(HeartbeatRequest::default());
/// req.set_timeout(Duration::from_millis(200));                   // clamped to 1 s, warned
/// registry.heartbeat(req).await?;
///
/// let mut wait = tonic::Request::new(Default::default());
/// CallTimeout::Infinite.apply(&mut wait);                       // negotiation_vote allows it
/// sw4rm.negotiation_room().wait_for_decision(wait).await?;
/// # Ok(()) }
/// ```
///
/// `Sw4rm` is generic over the service under the layer (a tonic `Channel` unless
/// said otherwise), so it can carry an interceptor or any tower stack of yours:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
/// use sw4rm_timeouts::tonic::service::interceptor::InterceptedService;
/// use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
/// # let server = sw4rm_timeouts::testing::TestServer::start().await?;
/// let channel = sw4rm_timeouts::tonic::transport::Endpoint::from_shared(server.url())?.connect().await?;
/// let auth = |mut req: tonic::Request<()>| {
///     req.metadata_mut().insert("authorization", tonic::metadata::MetadataValue::from_static("Bearer agent-7"));
///     Ok(req)
/// };
/// let sw4rm = Sw4rm::with_service(
///     InterceptedService::new(channel, auth),
///     TimeoutProfileLayer::new(ProfileSet::standard()),
/// );
/// sw4rm.registry().heartbeat(HeartbeatRequest::default()).await?;
/// assert!(server.calls()[0].metadata.iter().any(|(k, _)| k == "authorization"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Sw4rm<S = Channel> {
    channel: TimeoutProfileService<S>,
}

impl<S> Sw4rm<S> {
    /// Wraps any service (an intercepted channel, your own tower stack over a
    /// channel) with this layer.
    pub fn with_service(inner: S, layer: TimeoutProfileLayer) -> Self {
        Sw4rm {
            channel: layer.layer(inner),
        }
    }

    /// The profile table in use.
    pub fn profiles(&self) -> &ProfileSet {
        self.channel.profiles()
    }
}

impl<S: Clone> Sw4rm<S> {
    /// The layered service, for other generated clients (e.g. upstream services).
    pub fn channel(&self) -> TimeoutProfileService<S> {
        self.channel.clone()
    }
}

/// One accessor per generated client: a client of that service over the layered
/// channel.
macro_rules! clients {
    ($($(#[$doc:meta])* $name:ident => $client:ident,)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> $client<TimeoutProfileService<S>> {
                $client::new(self.channel())
            }
        )*
    };
}

impl<S, B> Sw4rm<S>
where
    S: Service<http::Request<tonic::body::Body>, Response = http::Response<B>> + Clone,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError> + Send,
{
    clients! {
        /// `sw4rm.registry.RegistryService`.
        registry => RegistryServiceClient,
        /// `sw4rm.scheduler.SchedulerService`.
        scheduler => SchedulerServiceClient,
        /// `sw4rm.negotiation_room.NegotiationRoomService`.
        negotiation_room => NegotiationRoomServiceClient,
        /// `sw4rm.handoff.HandoffService`.
        handoff => HandoffServiceClient,
        /// `sw4rm.tool.ToolService`.
        tool => ToolServiceClient,
        /// `sw4rm.scheduler.SchedulerPolicyService` (negotiation policy administration).
        scheduler_policy => SchedulerPolicyServiceClient,
        /// `sw4rm.negotiation.NegotiationService` (open, propose, counter, evaluate,
        /// decide, abort).
        negotiation => NegotiationServiceClient,
        /// `sw4rm.router.RouterService`. `StreamIncoming` is a long-lived stream: it is
        /// not ended for being idle (see the README's routes section); `AckDelivery`
        /// acknowledges each of its items by `seq`.
        router => RouterServiceClient,
        /// `sw4rm.hitl.HitlService` (`Decide` waits for a human: profile `hitl_escalate`).
        hitl => HitlServiceClient,
        /// `sw4rm.worktree.WorktreeService`.
        worktree => WorktreeServiceClient,
        /// `sw4rm.activity.ActivityService` (negotiation artifacts).
        activity => ActivityServiceClient,
        /// `sw4rm.connector.ConnectorService` (tool providers).
        connector => ConnectorServiceClient,
        /// `sw4rm.logging.LoggingService`.
        logging => LoggingServiceClient,
        /// `sw4rm.reasoning.ReasoningProxy`.
        reasoning => ReasoningProxyClient,
        /// `sw4rm.workflow.WorkflowService`: `CreateWorkflow`, `StartWorkflow` and
        /// `ResumeWorkflow` get the `workflow_submit` profile, `GetWorkflowState`
        /// `workflow_status`.
        workflow => WorkflowServiceClient,
    }
}

impl Sw4rm {
    /// Connects to `endpoint` (e.g. `http://host:port`) with the standard profiles
    /// and the **global configuration** (`SW4RM_CONFIG` or `./sw4rm.toml`, and the
    /// `SW4RM_*` environment), within [`DEFAULT_CONNECT_TIMEOUT`].
    pub async fn connect(endpoint: impl Into<String>) -> Result<Self, ConnectError> {
        let layer = TimeoutProfileLayer::from_global().map_err(ConnectError::Config)?;
        Sw4rm::connect_with(endpoint, layer).await
    }

    /// Connects with this layer (its profiles and meter provider), within
    /// [`DEFAULT_CONNECT_TIMEOUT`].
    pub async fn connect_with(
        endpoint: impl Into<String>,
        layer: TimeoutProfileLayer,
    ) -> Result<Self, ConnectError> {
        let endpoint = endpoint.into();
        let endpoint = match Endpoint::from_shared(endpoint.clone()) {
            Ok(e) => e,
            Err(error) => return Err(ConnectError::InvalidEndpoint { endpoint, error }),
        };
        Sw4rm::builder(endpoint).layer(layer).connect().await
    }

    /// A builder from a tonic [`Endpoint`]: TLS and the other tonic settings, the
    /// layer, the connect timeout, eager or lazy connection.
    pub fn builder(endpoint: Endpoint) -> Sw4rmBuilder {
        Sw4rmBuilder {
            endpoint,
            layer: TimeoutProfileLayer::standard(),
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
        }
    }

    /// Wraps an existing channel, using the standard profiles and global configuration.
    pub fn from_channel(channel: Channel) -> Result<Self, ConfigError> {
        Ok(Sw4rm::with_layer(
            channel,
            TimeoutProfileLayer::from_global()?,
        ))
    }

    /// Wraps an existing channel with this layer.
    pub fn with_layer(channel: Channel, layer: TimeoutProfileLayer) -> Self {
        Sw4rm::with_service(channel, layer)
    }

    /// Wraps an existing channel with these profiles.
    pub fn with_profiles(channel: Channel, profiles: ProfileSet) -> Self {
        Sw4rm::with_layer(channel, TimeoutProfileLayer::new(profiles))
    }
}
