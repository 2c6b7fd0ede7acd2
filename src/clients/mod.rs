//! [`Sw4rm`]: one connection, the profile layer on top, and a generated tonic client
//! for each of the fifteen services. Reading order: this file, `builder.rs` (connecting
//! from the caller's own `Endpoint`), `scheme.rs` (the rule: `https` is TLS or
//! nothing), `stage.rs` (how far a connect got), `error.rs`.

mod builder;
mod error;
mod scheme;
mod sniff;
mod stage;

use tonic::transport::{Channel, Endpoint};

pub use builder::{cancel_safe, Sw4rmBuilder, DEFAULT_CONNECT_TIMEOUT};
pub use error::ConnectError;
pub use stage::ConnectStage;

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
use crate::timeout::{TimeoutProfileLayer, TimeoutProfileService};
use crate::wire::error::BoxError;
use tower_layer::Layer;
use tower_service::Service;

/// The channel type under every client: a tonic `Channel` wrapped by the layer.
pub type Sw4rmChannel = TimeoutProfileService<Channel>;

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

    /// The profile table in use now (after a reload, the new one).
    pub fn profiles(&self) -> crate::timeout::CurrentProfiles {
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
        /// not ended for being idle (see the guide's `rules` chapter); `AckDelivery`
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
    /// Connects to `endpoint` with the standard profiles and the **global
    /// configuration** (`SW4RM_CONFIG` or `./sw4rm.toml`, and the `SW4RM_*`
    /// environment), within [`DEFAULT_CONNECT_TIMEOUT`].
    ///
    /// `http://host:port` connects in plaintext. `https://host:port` connects with TLS,
    /// trusting the roots compiled in (features `tls-native-roots`,
    /// `tls-webpki-roots`) — enough for a server with a public certificate; for your
    /// own CA, a domain name or a client identity, use [`Sw4rm::builder`] with an
    /// `Endpoint` of yours. An `https://` URL is never reached in plaintext: without
    /// the TLS features it is refused ([`ConnectError::TlsUnavailable`]); other schemes
    /// are refused too ([`ConnectError::UnsupportedScheme`]).
    pub async fn connect(endpoint: impl Into<String>) -> Result<Self, ConnectError> {
        let layer = TimeoutProfileLayer::from_global().map_err(ConnectError::Config)?;
        Sw4rm::connect_with(endpoint, layer).await
    }

    /// [`Sw4rm::connect`] with this layer (its profiles and meter provider) instead of
    /// the global configuration.
    pub async fn connect_with(
        endpoint: impl Into<String>,
        layer: TimeoutProfileLayer,
    ) -> Result<Self, ConnectError> {
        let endpoint = endpoint.into();
        let endpoint = match Endpoint::from_shared(endpoint.clone()) {
            Ok(e) => with_compiled_roots(e)
                .map_err(|error| ConnectError::InvalidEndpoint { endpoint, error })?,
            Err(error) => return Err(ConnectError::InvalidEndpoint { endpoint, error }),
        };
        Sw4rm::builder(endpoint)
            .with_sdk_tls()
            .layer(layer)
            .connect()
            .await
    }

    /// A builder from a tonic [`Endpoint`]: TLS and the other tonic settings (they
    /// stand), the layer, the connect timeout, eager or lazy connection.
    pub fn builder(endpoint: Endpoint) -> Sw4rmBuilder {
        Sw4rmBuilder::new(endpoint)
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

/// An `https` endpoint made by the SDK trusts the roots compiled in (in a build with a
/// crypto provider: without one, it is refused when it is connected).
#[cfg(any(
    feature = "tls-ring",
    feature = "tls-aws-lc",
    feature = "tls-native-roots",
    feature = "tls-webpki-roots"
))]
fn with_compiled_roots(endpoint: Endpoint) -> Result<Endpoint, tonic::transport::Error> {
    let https = endpoint.uri().scheme() == Some(&http::uri::Scheme::HTTPS);
    if !https || !scheme::TlsBuild::COMPILED.provider {
        return Ok(endpoint);
    }
    endpoint.tls_config(tonic::transport::ClientTlsConfig::new().with_enabled_roots())
}

/// Without TLS, an `https` endpoint is refused when it is connected.
#[cfg(not(any(
    feature = "tls-ring",
    feature = "tls-aws-lc",
    feature = "tls-native-roots",
    feature = "tls-webpki-roots"
)))]
fn with_compiled_roots(endpoint: Endpoint) -> Result<Endpoint, tonic::transport::Error> {
    Ok(endpoint)
}
