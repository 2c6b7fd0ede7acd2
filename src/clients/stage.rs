//! How far a connection's set-up got: the connector under a channel [`Sw4rm`] connects
//! marks when TCP is up, so a connect that runs out of time can say which stage did
//! not finish (TCP, TLS, HTTP/2) instead of only that time ran out.
//!
//! tonic's TLS wraps whatever connector it is given, so once TCP is up a set-up that
//! stalls on an `https://` endpoint stalls in the TLS handshake. tonic's HTTP/2
//! handshake does not wait for the peer (the client sends its preface and is ready);
//! an eager connect then waits for the server's first words (`sniff.rs`), so a stall
//! there is in the HTTP/2 set-up.
//!
//! [`Sw4rm`]: super::Sw4rm

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;

use super::sniff::{Heard, Sniffed};
use tonic::transport::Endpoint;
use tower_service::Service;

use crate::wire::connect_clock::ConnectClock;
use crate::wire::error::BoxError;
use crate::wire::status::causes;

/// The stage of a connection's set-up that did not finish in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectStage {
    /// The TCP connection: the peer did not accept it.
    Tcp,
    /// The TLS handshake, after TCP was up.
    Tls,
    /// The HTTP/2 set-up, after TCP (and TLS, where used) was up.
    Http2,
}

impl ConnectStage {
    /// The stage as the error message names it: `TCP connect`, `TLS handshake`,
    /// `HTTP/2 set-up`.
    ///
    /// ```
    /// use sw4rm_timeouts::ConnectStage;
    /// assert_eq!(ConnectStage::Tls.as_str(), "TLS handshake");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectStage::Tcp => "TCP connect",
            ConnectStage::Tls => "TLS handshake",
            ConnectStage::Http2 => "HTTP/2 set-up",
        }
    }

    /// What the stage's stall most likely means, for the error message.
    pub(crate) fn hint(self) -> &'static str {
        match self {
            ConnectStage::Tcp => {
                "the peer did not accept the TCP connection: a wrong host or port, a \
                 firewall that drops packets, or a server whose accept queue is full"
            }
            ConnectStage::Tls => {
                "TCP connected, but the peer did not complete a TLS handshake: is it \
                 serving TLS on this port?"
            }
            ConnectStage::Http2 => {
                "TCP connected, but the peer did not take the HTTP/2 connection: is it \
                 a gRPC server?"
            }
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            0 => ConnectStage::Tcp,
            1 => ConnectStage::Tls,
            _ => ConnectStage::Http2,
        }
    }
}

impl fmt::Display for ConnectStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one connect stands, shared by the connector (which moves it on) and the
/// connect that reads it when time runs out.
#[derive(Clone, Debug, Default)]
pub(crate) struct StageMark(Arc<AtomicU8>);

impl StageMark {
    pub(crate) fn get(&self) -> ConnectStage {
        ConnectStage::from_u8(self.0.load(Ordering::Acquire))
    }

    fn set(&self, stage: ConnectStage) {
        self.0.store(stage as u8, Ordering::Release);
    }
}

/// tonic's own TCP connector, configured from the endpoint as tonic configures it,
/// which marks `after_tcp` once TCP is up.
#[derive(Clone, Debug)]
pub(crate) struct MarkingConnector {
    inner: HttpConnector,
    mark: StageMark,
    after_tcp: ConnectStage,
    /// What each connection's server said first (`sniff.rs`).
    heard: Arc<Heard>,
    /// When the channel went without a connection and got one (the calls' wait).
    clock: Option<ConnectClock>,
}

impl MarkingConnector {
    /// The connector for `endpoint`, marking `mark`. Its TCP settings are the
    /// endpoint's (no-delay, keep-alive, the connect timeout); tonic cannot read back
    /// a local address, which [`local_address`](Self::local_address) sets.
    pub(crate) fn new(endpoint: &Endpoint, mark: StageMark, heard: Arc<Heard>) -> Self {
        let mut inner = HttpConnector::new();
        inner.enforce_http(false);
        inner.set_nodelay(endpoint.get_tcp_nodelay());
        inner.set_keepalive(endpoint.get_tcp_keepalive());
        inner.set_keepalive_interval(endpoint.get_tcp_keepalive_interval());
        inner.set_keepalive_retries(endpoint.get_tcp_keepalive_retries());
        inner.set_connect_timeout(endpoint.get_connect_timeout());
        let tls = endpoint
            .uri()
            .scheme_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("https"));
        MarkingConnector {
            inner,
            mark,
            after_tcp: if tls {
                ConnectStage::Tls
            } else {
                ConnectStage::Http2
            },
            heard,
            clock: None,
        }
    }

    /// Marks `clock` when a connect begins and when TCP is up.
    pub(crate) fn clock(&mut self, clock: ConnectClock) {
        self.clock = Some(clock);
    }

    /// Connects from this local address (`None`: the system chooses).
    pub(crate) fn local_address(&mut self, address: Option<std::net::IpAddr>) {
        self.inner.set_local_address(address);
    }
}

type Connecting<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// A connection as the connector hands it to tonic: TCP, its first bytes looked at
/// when it carries plaintext HTTP/2 (`sniff.rs`).
pub(crate) type Stream = TokioIo<Sniffed<tokio::net::TcpStream>>;

impl Service<http::Uri> for MarkingConnector {
    type Response = Stream;
    type Error = BoxError;
    type Future = Connecting<Self::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        // A reconnect starts from TCP again.
        self.mark.set(ConnectStage::Tcp);
        if let Some(clock) = &self.clock {
            clock.connecting();
        }
        let (connecting, mark, after) = (self.inner.call(uri), self.mark.clone(), self.after_tcp);
        let (heard, clock) = (self.heard.clone(), self.clock.clone());
        Box::pin(async move {
            let io = connecting.await?;
            mark.set(after);
            if let Some(clock) = clock {
                clock.connected();
            }
            let mut sniffed = Sniffed::new(io.into_inner(), heard);
            if after != ConnectStage::Http2 {
                // Below TLS the server's first bytes are TLS, as they should be.
                sniffed.stop();
            }
            Ok(TokioIo::new(sniffed))
        })
    }
}

/// Whether a failed connect failed because a connect timer fired (tonic's over TCP
/// and TLS, or the TCP connector's own).
pub(crate) fn is_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    causes(err).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            || e.is::<tokio::time::error::Elapsed>()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_round_trip_through_the_mark() {
        let mark = StageMark::default();
        assert_eq!(mark.get(), ConnectStage::Tcp);
        for stage in [ConnectStage::Tls, ConnectStage::Http2, ConnectStage::Tcp] {
            mark.set(stage);
            assert_eq!(mark.get(), stage);
        }
    }

    #[test]
    fn the_stage_after_tcp_follows_the_scheme() {
        for (url, after) in [
            ("http://127.0.0.1:1", ConnectStage::Http2),
            ("https://127.0.0.1:1", ConnectStage::Tls),
            ("HTTPS://127.0.0.1:1", ConnectStage::Tls),
        ] {
            let endpoint = Endpoint::from_shared(url).unwrap();
            let connector = MarkingConnector::new(&endpoint, StageMark::default(), Arc::default());
            assert_eq!(connector.after_tcp, after, "{url}");
        }
    }

    #[test]
    fn timeouts_are_told_from_other_failures() {
        let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect");
        assert!(is_timeout(&timed_out));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(!is_timeout(&refused));
    }
}
