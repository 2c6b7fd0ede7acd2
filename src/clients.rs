//! [`Sw4rm`]: one connection, the profile layer on top, and a generated tonic client
//! for each of the five services.

use std::fmt;

use tonic::transport::{Channel, Endpoint};

use crate::config::{ConfigError, ProfileSet};
use crate::proto::sw4rm::handoff::handoff_service_client::HandoffServiceClient;
use crate::proto::sw4rm::negotiation_room::negotiation_room_service_client::NegotiationRoomServiceClient;
use crate::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use crate::proto::sw4rm::scheduler::scheduler_service_client::SchedulerServiceClient;
use crate::proto::sw4rm::tool::tool_service_client::ToolServiceClient;
use crate::timeout::{TimeoutProfileLayer, TimeoutProfileService};
use tower_layer::Layer;

/// The channel type under every client: a tonic `Channel` wrapped by the layer.
pub type Sw4rmChannel = TimeoutProfileService<Channel>;

/// Why [`Sw4rm::connect`] failed.
#[derive(Debug)]
pub enum ConnectError {
    /// The global configuration is invalid.
    Config(ConfigError),
    /// The endpoint is invalid or unreachable.
    Transport(tonic::transport::Error),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Config(e) => e.fmt(f),
            ConnectError::Transport(e) => write!(f, "cannot connect to the SW4RM endpoint: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConnectError::Config(e) => Some(e),
            ConnectError::Transport(e) => Some(e),
        }
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
#[derive(Clone, Debug)]
pub struct Sw4rm {
    channel: Sw4rmChannel,
}

impl Sw4rm {
    /// Connects to `endpoint` (e.g. `http://host:port`) with the standard profiles
    /// and the global configuration.
    pub async fn connect(endpoint: impl Into<String>) -> Result<Self, ConnectError> {
        let layer = TimeoutProfileLayer::from_global().map_err(ConnectError::Config)?;
        Sw4rm::connect_with(endpoint, layer).await
    }

    /// Connects with this layer (its profiles and meter provider).
    pub async fn connect_with(
        endpoint: impl Into<String>,
        layer: TimeoutProfileLayer,
    ) -> Result<Self, ConnectError> {
        let endpoint = Endpoint::from_shared(endpoint.into()).map_err(ConnectError::Transport)?;
        let channel = endpoint.connect().await.map_err(ConnectError::Transport)?;
        Ok(Sw4rm::with_layer(channel, layer))
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
        Sw4rm {
            channel: layer.layer(channel),
        }
    }

    /// Wraps an existing channel with these profiles.
    pub fn with_profiles(channel: Channel, profiles: ProfileSet) -> Self {
        Sw4rm::with_layer(channel, TimeoutProfileLayer::new(profiles))
    }

    /// The layered channel, for other generated clients (e.g. upstream services).
    pub fn channel(&self) -> Sw4rmChannel {
        self.channel.clone()
    }

    /// The profile table in use.
    pub fn profiles(&self) -> &ProfileSet {
        self.channel.profiles()
    }

    /// `sw4rm.registry.RegistryService`.
    pub fn registry(&self) -> RegistryServiceClient<Sw4rmChannel> {
        RegistryServiceClient::new(self.channel())
    }

    /// `sw4rm.scheduler.SchedulerService`.
    pub fn scheduler(&self) -> SchedulerServiceClient<Sw4rmChannel> {
        SchedulerServiceClient::new(self.channel())
    }

    /// `sw4rm.negotiation_room.NegotiationRoomService`.
    pub fn negotiation_room(&self) -> NegotiationRoomServiceClient<Sw4rmChannel> {
        NegotiationRoomServiceClient::new(self.channel())
    }

    /// `sw4rm.handoff.HandoffService`.
    pub fn handoff(&self) -> HandoffServiceClient<Sw4rmChannel> {
        HandoffServiceClient::new(self.channel())
    }

    /// `sw4rm.tool.ToolService`.
    pub fn tool(&self) -> ToolServiceClient<Sw4rmChannel> {
        ToolServiceClient::new(self.channel())
    }
}
