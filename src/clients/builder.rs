//! [`Sw4rmBuilder`]: a [`Sw4rm`] from the caller's own tonic `Endpoint`, whose settings
//! stand; the SDK only adds what the caller left unset (a connect timeout) and the
//! HTTP/2 settings of [`cancel_safe`].

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tonic::transport::Endpoint;

use super::error::ConnectError;
use super::scheme::{bad_port, transport, TlsBuild, TlsConfigBy};
use super::sniff::{FirstWords, Heard};
use super::stage::{is_timeout, MarkingConnector, StageMark};
use super::Sw4rm;
use crate::timeout::TimeoutProfileLayer;
use crate::wire::connect_clock::ConnectClock;

/// How long [`Sw4rm::connect`] and [`Sw4rmBuilder`] wait for the whole set-up of a
/// connection (TCP, TLS, HTTP/2) when nobody said otherwise (neither the `Endpoint`
/// nor [`Sw4rmBuilder::connect_timeout`]). Without it a peer that drops SYNs (a full
/// accept backlog) keeps a connect pending for about two minutes while the kernel
/// retries, and one that accepts TCP but never answers the TLS handshake, forever.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Locally reset streams HTTP/2 remembers on a connection built by [`cancel_safe`].
pub(crate) const RESET_STREAMS_REMEMBERED: usize = 10_000;

/// How long HTTP/2 remembers a locally reset stream on a connection built by
/// [`cancel_safe`].
pub(crate) const RESET_STREAM_MEMORY: Duration = Duration::from_secs(30);

/// The HTTP/2 stream window a connection built by [`cancel_safe`] gives each stream
/// (512 KiB; hyper's own is 2 MiB). Why: the comment below.
pub(crate) const STREAM_WINDOW: u32 = 512 * 1024;

/// The HTTP/2 connection window a connection built by [`cancel_safe`] offers: the
/// largest HTTP/2 allows (2³¹ − 1 bytes; hyper's own is 5 MiB). It costs no memory
/// of its own: what a server may send unread is bounded by each stream's
/// [`STREAM_WINDOW`].
pub(crate) const CONNECTION_WINDOW: u32 = (1 << 31) - 1;

// The windows' reason. How many streams may stall at once on a connection built by [`cancel_safe`],
// their readers gone quiet while their server sends small messages, before the
// connection itself is at risk (whatever the size of the messages: 40; for messages
// of 27 bytes, about 240).
//
// h2 counts the framing overhead of every DATA frame under 256 bytes that was
// received and not yet read (256 − its size) against a budget of half the
// connection window, and closes the *connection* (`GOAWAY(ENHANCE_YOUR_CALM,
// "too_many_data_frames")`, every call on it failing) when the budget runs out. A
// stalled stream holds at most its window's worth of such frames. With hyper's
// windows one stalled reader of 27-byte progress messages (a `ToolFrame`, a
// `StreamItem`) took the connection down after about 11,400 frames; with these, a
// stalled stream of messages of the smallest gRPC frame (5 bytes) holds at most
// 512 KiB / 5 × 251 ≈ 26 MB of budget out of 1 GiB. The cost: one stream moves at
// most 512 KiB per round trip (≈ 50 MB/s at 10 ms, 5 MB/s at 100 ms); set a larger
// `initial_stream_window_size` on your `Endpoint` after [`cancel_safe`] for bulk
// transfers over long links. Past this bound the connection may still be lost, and
// its calls fail `UNAVAILABLE` (retried where the route allows).

/// The HTTP/2 settings a client that cancels calls at their deadline, and reads
/// streams of small messages at its own pace, needs.
///
/// When a call is cancelled, its stream is reset; frames the server had already sent
/// for it keep arriving. h2 ignores them only while it still remembers the reset
/// stream (by default 50 streams, for 1 s); each frame for a forgotten one counts as
/// a protocol error, and after 1,024 of them the client closes the connection with
/// `GOAWAY(ENHANCE_YOUR_CALM)` and *every* call on it fails. Under a slow link or a
/// busy server, sustained cancel-at-deadline traffic reaches that within seconds.
/// This remembers up to 10,000 reset streams for 30 s (a few hundred bytes each, only while they exist), which
/// covers late answers at thousands of cancellations a second.
///
/// It also sets the windows (512 KiB per stream, hyper's own being 2 MiB; the largest
/// connection window HTTP/2 allows) so that one consumer that stops reading a stream
/// of small messages cannot take the connection down, up to 40 such streams at once
/// (h2 charges unread small DATA frames to half the connection window: 512 KiB / 5 ×
/// 251 ≈ 26 MB of 1 GiB per stalled stream).
///
/// [`Sw4rm`] applies it to the connections it builds; apply it yourself to an
/// `Endpoint` whose `Channel` you pass to [`Sw4rm::with_layer`] or put under the layer.
/// It replaces whatever the endpoint had for these four settings (tonic cannot read
/// them back): to choose other values, set them after it, or with
/// [`Sw4rmBuilder::reset_stream_memory`].
///
/// ```
/// use sw4rm_timeouts::{cancel_safe, ProfileSet, Sw4rm};
/// use tonic::transport::Endpoint;
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let endpoint = cancel_safe(Endpoint::from_static("http://sw4rm.example:50051"));
/// let channel = endpoint.connect().await?;      // your own channel
/// let sw4rm = Sw4rm::with_profiles(channel, ProfileSet::standard());
/// # drop(sw4rm); Ok(()) }
/// ```
pub fn cancel_safe(endpoint: Endpoint) -> Endpoint {
    remember_resets(endpoint, RESET_STREAMS_REMEMBERED, RESET_STREAM_MEMORY)
}

fn remember_resets(endpoint: Endpoint, streams: usize, memory: Duration) -> Endpoint {
    endpoint
        .http2_max_concurrent_reset_streams(streams)
        .http2_reset_stream_duration(memory)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
}

/// The longest keepalive interval or timeout handed to hyper: its timer adds them to
/// the clock, which a `Duration::MAX` overflows (a panic in the connection's task).
/// A year is no keepalive in practice.
const KEEPALIVE_CEILING: Duration = Duration::from_secs(365 * 24 * 3_600);

/// Who chose the connect timeout on the builder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnectTimeout {
    /// Nobody: the endpoint's own, else [`DEFAULT_CONNECT_TIMEOUT`].
    Unset,
    /// [`Sw4rmBuilder::connect_timeout`]: this one (`None`: the endpoint's own).
    Set(Option<Duration>),
}

/// The connect timeout a connection gets: what the builder was told, else what the
/// endpoint was told, else the SDK's default.
fn connect_timeout(builder: ConnectTimeout, endpoint: Option<Duration>) -> Option<Duration> {
    match builder {
        ConnectTimeout::Set(Some(t)) => Some(t),
        ConnectTimeout::Set(None) => endpoint,
        ConnectTimeout::Unset => endpoint.or(Some(DEFAULT_CONNECT_TIMEOUT)),
    }
}

/// Builds a [`Sw4rm`] from a tonic [`Endpoint`]: TLS (your own CA, domain name, client
/// identity for mutual TLS), keep-alive, origin, user agent and every other tonic
/// setting are yours to set on it, and stand. The builder adds the profile layer, a
/// connect timeout where the endpoint has none ([`DEFAULT_CONNECT_TIMEOUT`]) and the
/// HTTP/2 settings of [`cancel_safe`].
///
/// An `https://` endpoint connects with the TLS configuration you gave it (tonic
/// refuses one without); in a build without a TLS feature it is refused
/// ([`ConnectError::TlsUnavailable`]), never reached in plaintext.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use sw4rm_timeouts::testing::TestServer;
/// use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
///
/// let server = TestServer::start().await?;
/// let endpoint = tonic::transport::Endpoint::from_shared(server.url())?
///     .tcp_nodelay(true)
///     .connect_timeout(Duration::from_secs(2)); // stands: the SDK's 5 s default does not replace it
/// let sw4rm = Sw4rm::builder(endpoint)
///     .layer(TimeoutProfileLayer::new(ProfileSet::standard()))
///     .connect()
///     .await?;
/// sw4rm.registry().heartbeat(sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest::default()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Sw4rmBuilder {
    endpoint: Endpoint,
    layer: TimeoutProfileLayer,
    connect_timeout: ConnectTimeout,
    reset_streams: (usize, Duration),
    tls_by: TlsConfigBy,
    local_address: Option<IpAddr>,
    keepalive: Option<(Duration, Duration)>,
}

/// The default HTTP/2 keepalive interval while calls are open: gRPC servers refuse
/// pings more often than every 5 minutes by default (grpc-go's `MinTime`, grpc-java's
/// `permitKeepAliveTime`, gRPC core's minimum ping interval) and close the connection
/// with `ENHANCE_YOUR_CALM` "too_many_pings"; this stays clear of that.
pub(crate) const DEFAULT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(330);

/// How long a keepalive ping may go unanswered before the connection is given up and
/// its calls fail `UNAVAILABLE` (retryable).
pub(crate) const DEFAULT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

impl Sw4rmBuilder {
    pub(crate) fn new(endpoint: Endpoint) -> Self {
        Sw4rmBuilder {
            endpoint,
            layer: TimeoutProfileLayer::standard(),
            connect_timeout: ConnectTimeout::Unset,
            reset_streams: (RESET_STREAMS_REMEMBERED, RESET_STREAM_MEMORY),
            tls_by: TlsConfigBy::Caller,
            local_address: None,
            keepalive: Some((DEFAULT_KEEPALIVE_INTERVAL, DEFAULT_KEEPALIVE_TIMEOUT)),
        }
    }

    /// A builder for an endpoint whose TLS the SDK configured.
    pub(crate) fn with_sdk_tls(mut self) -> Self {
        self.tls_by = TlsConfigBy::Sdk;
        self
    }

    /// The profile layer (profiles, meter provider, span level). Default: the standard
    /// profiles only, without global configuration.
    pub fn layer(mut self, layer: TimeoutProfileLayer) -> Self {
        self.layer = layer;
        self
    }

    /// How long [`connect`](Self::connect) waits for the whole set-up of the
    /// connection: TCP, the TLS handshake and HTTP/2 (tonic's own connect timeout
    /// covers TCP only, and a peer that accepts TCP and never answers TLS would keep
    /// the connect pending forever). Without this call: the endpoint's own
    /// `connect_timeout`, else [`DEFAULT_CONNECT_TIMEOUT`]. `None` leaves it to the
    /// endpoint's own setting (none at all if it has none). When it runs out, the
    /// error ([`ConnectError::TimedOut`]) names the endpoint and the stage that did not
    /// finish.
    pub fn connect_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.connect_timeout = ConnectTimeout::Set(timeout.into());
        self
    }

    /// How many locally reset HTTP/2 streams the connection remembers, and for how
    /// long (default 10,000 for 30 s; see
    /// [`cancel_safe`] for why). tonic cannot read these two settings back from an
    /// `Endpoint`, so this is the one place to set them: values set on the endpoint
    /// are replaced.
    pub fn reset_stream_memory(mut self, streams: usize, memory: Duration) -> Self {
        self.reset_streams = (streams, memory);
        self
    }

    /// HTTP/2 keepalive while calls are open on the connection (none while it is idle):
    /// after `interval` without a frame from the server, a ping; no answer within
    /// `timeout`, and the connection is given up, each of its calls failing
    /// `UNAVAILABLE` (which a caller may retry). It is what finds a peer that vanished
    /// without FIN or RST (a pulled cable, a dead NAT entry) under a long-lived stream
    /// with no timer, such as `RouterService/StreamIncoming`. Default
    /// 330 s (servers refuse pings more often than every 5 minutes unless configured
    /// to allow them) and 20 s. A shorter interval needs a server that
    /// permits it. tonic cannot read keepalive settings back from an `Endpoint`, so the
    /// builder's replace the endpoint's. Either value is capped at a year
    /// (`Duration::MAX` is a year).
    ///
    /// ```
    /// use std::time::Duration;
    /// let builder = sw4rm_timeouts::Sw4rm::builder(tonic::transport::Endpoint::from_static("http://agent:50051"))
    ///     .keepalive(Duration::from_secs(60), Duration::from_secs(10)); // a server that permits 60 s
    /// # drop(builder);
    /// ```
    pub fn keepalive(mut self, interval: Duration, timeout: Duration) -> Self {
        self.keepalive = Some((
            interval.min(KEEPALIVE_CEILING),
            timeout.min(KEEPALIVE_CEILING),
        ));
        self
    }

    /// No HTTP/2 keepalive from the SDK (the endpoint's own settings stand).
    pub fn without_keepalive(mut self) -> Self {
        self.keepalive = None;
        self
    }

    /// The local address to connect from (by default the system chooses). Set it here
    /// rather than with `Endpoint::local_address`: tonic cannot read that setting back,
    /// so an eager [`connect`](Self::connect) would not see it.
    pub fn local_address(mut self, address: impl Into<Option<IpAddr>>) -> Self {
        self.local_address = address.into();
        self
    }

    /// The endpoint as it will connect, or why it must not.
    fn endpoint(&self) -> Result<Endpoint, ConnectError> {
        let uri = self.endpoint.uri();
        if let Some(port) = uri.authority().and_then(|a| bad_port(a.as_str())) {
            return Err(ConnectError::InvalidPort {
                endpoint: uri.to_string(),
                port: port.to_owned(),
            });
        }
        transport(uri.scheme_str(), TlsBuild::COMPILED, self.tls_by)
            .map_err(|e| ConnectError::scheme(uri.to_string(), e))?;
        let (streams, memory) = self.reset_streams;
        let mut endpoint = remember_resets(self.endpoint.clone(), streams, memory);
        if let Some((interval, timeout)) = self.keepalive {
            endpoint = endpoint
                .http2_keep_alive_interval(interval)
                .keep_alive_timeout(timeout)
                .keep_alive_while_idle(false);
        }
        Ok(
            match connect_timeout(self.connect_timeout, endpoint.get_connect_timeout()) {
                Some(t) => endpoint.connect_timeout(t),
                None => endpoint,
            },
        )
    }

    /// The layer, naming the endpoint in the errors of calls that cannot reach it.
    fn layer_for(&self, endpoint: &Endpoint) -> TimeoutProfileLayer {
        self.layer
            .clone()
            .naming_endpoint(endpoint.uri().to_string())
    }

    /// The connector for `endpoint`: tonic's TCP connector, marking how far a connect
    /// got and what a plaintext server said first (`heard`).
    fn connector(
        &self,
        endpoint: &Endpoint,
        mark: StageMark,
    ) -> (MarkingConnector, Arc<Heard>, ConnectClock) {
        let heard = Arc::new(Heard::default());
        let clock = ConnectClock::default();
        let mut connector = MarkingConnector::new(endpoint, mark, heard.clone());
        connector.local_address(self.local_address);
        connector.clock(clock.clone());
        (connector, heard, clock)
    }

    /// Connects now; fails if the connection is not set up (TCP, TLS, HTTP/2: the
    /// server has spoken) within the connect timeout, naming the endpoint and the stage
    /// that did not finish; or if a plaintext endpoint's server speaks TLS.
    pub async fn connect(self) -> Result<Sw4rm, ConnectError> {
        let endpoint = self.endpoint()?;
        let name = || endpoint.uri().to_string();
        let mark = StageMark::default();
        let (connector, heard, clock) = self.connector(&endpoint, mark.clone());
        let timeout = endpoint.get_connect_timeout();
        let timed_out = |stage| ConnectError::TimedOut {
            endpoint: name(),
            stage,
            timeout: timeout.unwrap_or_default(),
        };
        let set_up = async {
            let channel = endpoint.connect_with_connector(connector).await?;
            // The server's first words: its SETTINGS, or a TLS alert on a plaintext
            // connection, or nothing at all (a peer that is no HTTP/2 server).
            Ok((channel, heard.first_words().await))
        };
        let done: Result<_, tonic::transport::Error> = match timeout {
            Some(t) => match tokio::time::timeout(t, set_up).await {
                Ok(done) => done,
                Err(_) => return Err(timed_out(mark.get())),
            },
            None => set_up.await,
        };
        match done {
            Ok((channel, FirstWords::Http2)) => {
                let layer = self.layer_for(&endpoint).clocking(clock);
                Ok(Sw4rm::with_layer(channel, layer))
            }
            Ok((_, FirstWords::Tls)) => Err(ConnectError::ServerSpeaksTls { endpoint: name() }),
            Ok((_, _)) => Err(ConnectError::ClosedBeforeHttp2 { endpoint: name() }),
            // A connect timer below this one (TCP's, or tonic's over TCP and TLS) fired
            // first at the same instant.
            Err(error) if timeout.is_some() && is_timeout(&error) => Err(timed_out(mark.get())),
            Err(error) => Err(ConnectError::Unreachable {
                endpoint: name(),
                error,
            }),
        }
    }

    /// Connects on first use (and reconnects as needed); every call still ends by its
    /// deadline, time spent connecting included, and a call that cannot connect fails
    /// with `UNAVAILABLE` naming the endpoint and the cause. Fails at once only for an
    /// endpoint that must not be connected to ([`ConnectError::UnsupportedScheme`],
    /// [`ConnectError::TlsUnavailable`]).
    pub fn connect_lazy(self) -> Result<Sw4rm, ConnectError> {
        let endpoint = self.endpoint()?;
        let (connector, heard, clock) = self.connector(&endpoint, StageMark::default());
        let channel = endpoint.connect_with_connector_lazy(connector);
        let layer = self.layer_for(&endpoint).hearing(heard).clocking(clock);
        Ok(Sw4rm::with_layer(channel, layer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_timeout_table() {
        let (s, none) = (Duration::from_secs, None);
        let table = [
            // Nobody said: the SDK's default.
            (ConnectTimeout::Unset, none, Some(DEFAULT_CONNECT_TIMEOUT)),
            // The endpoint said: it stands, shorter or longer than the default.
            (ConnectTimeout::Unset, Some(s(1)), Some(s(1))),
            (ConnectTimeout::Unset, Some(s(60)), Some(s(60))),
            // The builder said: it wins.
            (ConnectTimeout::Set(Some(s(2))), Some(s(1)), Some(s(2))),
            (ConnectTimeout::Set(Some(s(2))), none, Some(s(2))),
            // The builder said "the endpoint's own".
            (ConnectTimeout::Set(None), Some(s(1)), Some(s(1))),
            (ConnectTimeout::Set(None), none, none),
        ];
        for (builder, endpoint, want) in table {
            assert_eq!(
                connect_timeout(builder, endpoint),
                want,
                "{builder:?} {endpoint:?}"
            );
        }
    }

    #[test]
    fn the_endpoints_connect_timeout_reaches_the_connection() {
        let endpoint =
            Endpoint::from_static("http://127.0.0.1:1").connect_timeout(Duration::from_millis(500));
        let built = Sw4rmBuilder::new(endpoint).endpoint().unwrap();
        assert_eq!(
            built.get_connect_timeout(),
            Some(Duration::from_millis(500))
        );
        let plain = Sw4rmBuilder::new(Endpoint::from_static("http://127.0.0.1:1"));
        assert_eq!(
            plain.endpoint().unwrap().get_connect_timeout(),
            Some(DEFAULT_CONNECT_TIMEOUT)
        );
    }
}
