//! [`ConnectError`]: why connecting failed, in one line that names the endpoint and
//! what actually went wrong.

use std::fmt;

use super::scheme::{
    SchemeError, TlsConfigBy, PROVIDER_AND_ROOTS_FEATURES, PROVIDER_FEATURES, ROOTS_FEATURES,
};
use super::stage::ConnectStage;
use crate::config::ConfigError;
use crate::wire::status::{root_cause, tls_hint, CLOSED_BEFORE_HTTP2, SERVER_SPEAKS_TLS};

/// Why connecting failed.
///
/// Every message stands alone: the endpoint, what went wrong and, where it helps,
/// what to do. No variant has a `source()`, so reporters that print the chain
/// (anyhow, eyre) do not repeat it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use sw4rm_timeouts::{ConnectError, Sw4rm, TimeoutProfileLayer};
/// let err = Sw4rm::connect_with("grpc://127.0.0.1:50051", TimeoutProfileLayer::standard())
///     .await
///     .unwrap_err();
/// assert!(matches!(err, ConnectError::UnsupportedScheme { .. }));
/// assert_eq!(
///     err.to_string(),
///     "SW4RM endpoint grpc://127.0.0.1:50051/: the scheme `grpc` is not supported: \
///      use http:// (plaintext) or https:// (TLS)"
/// );
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The global configuration is invalid; `Display` lists every problem, one per
    /// line, as `sw4rm-timeouts check` prints them.
    Config(ConfigError),
    /// The endpoint is not a valid URI.
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// Why tonic rejected it.
        error: tonic::transport::Error,
    },
    /// The endpoint's port is not a port number (1 to 65535): tonic would connect to
    /// the scheme's default port instead.
    InvalidPort {
        /// The endpoint's URI.
        endpoint: String,
        /// The port as given.
        port: String,
    },
    /// The endpoint's scheme is neither `http` nor `https`.
    UnsupportedScheme {
        /// The endpoint's URI.
        endpoint: String,
        /// The scheme as given (empty when there is none).
        scheme: String,
    },
    /// An `https://` endpoint in a build that cannot do what TLS needs here: it is
    /// refused rather than reached in plaintext.
    TlsUnavailable {
        /// The endpoint's URI.
        endpoint: String,
        /// What would make it work: the crate features, by kind.
        features: &'static str,
    },
    /// The connection was not set up within the connect timeout: `stage` did not
    /// finish (a peer that accepts TCP and never answers TLS stalls in
    /// [`ConnectStage::Tls`]).
    TimedOut {
        /// The endpoint's URI.
        endpoint: String,
        /// The stage that did not finish.
        stage: ConnectStage,
        /// The connect timeout that ran out.
        timeout: std::time::Duration,
    },
    /// An `http://` (plaintext) endpoint whose server speaks TLS: use `https://`.
    ServerSpeaksTls {
        /// The endpoint's URI.
        endpoint: String,
    },
    /// The peer accepted the connection and closed it before speaking HTTP/2 (not a
    /// gRPC server, or one that refused this client).
    ClosedBeforeHttp2 {
        /// The endpoint's URI.
        endpoint: String,
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
    /// The transport error, if tonic reported one.
    pub fn transport_error(&self) -> Option<&tonic::transport::Error> {
        match self {
            ConnectError::InvalidEndpoint { error, .. }
            | ConnectError::Unreachable { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The error for an endpoint whose scheme cannot be connected to as asked.
    pub(crate) fn scheme(endpoint: String, error: SchemeError) -> Self {
        let features = match error {
            SchemeError::Unsupported(scheme) => {
                return ConnectError::UnsupportedScheme { endpoint, scheme }
            }
            SchemeError::NoProvider(TlsConfigBy::Caller) => PROVIDER_FEATURES,
            SchemeError::NoProvider(TlsConfigBy::Sdk) => PROVIDER_AND_ROOTS_FEATURES,
            SchemeError::NoRoots => ROOTS_FEATURES,
        };
        ConnectError::TlsUnavailable { endpoint, features }
    }
}

/// What tonic says when an `https` endpoint has no TLS configuration.
const HTTPS_WITHOUT_TLS: &str = "Connecting to HTTPS without TLS enabled";

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Config(e) => fmt::Display::fmt(e, f),
            ConnectError::InvalidEndpoint { endpoint, error } => write!(
                f,
                "invalid SW4RM endpoint {endpoint:?}: {}",
                root_cause(error)
            ),
            ConnectError::InvalidPort { endpoint, port } => write!(
                f,
                "invalid SW4RM endpoint {endpoint}: the port `{port}` is not a port number: \
                 use one from 1 to 65535"
            ),
            ConnectError::UnsupportedScheme { endpoint, scheme } if scheme.is_empty() => write!(
                f,
                "SW4RM endpoint {endpoint}: no scheme: use http:// (plaintext) or https:// (TLS)"
            ),
            ConnectError::UnsupportedScheme { endpoint, scheme } => write!(
                f,
                "SW4RM endpoint {endpoint}: the scheme `{scheme}` is not supported: \
                 use http:// (plaintext) or https:// (TLS)"
            ),
            ConnectError::TlsUnavailable { endpoint, features } => write!(
                f,
                "SW4RM endpoint {endpoint}: https:// needs TLS, and this build of \
                 sw4rm-timeouts cannot provide it: enable {features} \
                 (the endpoint is never reached in plaintext)"
            ),
            ConnectError::TimedOut {
                endpoint,
                stage,
                timeout,
            } => write!(
                f,
                "cannot connect to the SW4RM endpoint {endpoint}: the {stage} did not finish \
                 within the connect timeout of {} ms ({})",
                timeout.as_millis(),
                stage.hint()
            ),
            ConnectError::ServerSpeaksTls { endpoint } => write!(
                f,
                "cannot connect to the SW4RM endpoint {endpoint}: {SERVER_SPEAKS_TLS}"
            ),
            ConnectError::ClosedBeforeHttp2 { endpoint } => write!(
                f,
                "cannot connect to the SW4RM endpoint {endpoint}: {CLOSED_BEFORE_HTTP2}"
            ),
            ConnectError::Unreachable { endpoint, error } => {
                let cause = root_cause(error).to_string();
                write!(
                    f,
                    "cannot connect to the SW4RM endpoint {endpoint}: {cause}"
                )?;
                if cause == HTTPS_WITHOUT_TLS {
                    f.write_str(
                        " (give the Endpoint a TLS configuration: \
                         `.tls_config(ClientTlsConfig::new().with_enabled_roots())`, \
                         or your own CA and domain name)",
                    )?;
                }
                if let Some(hint) = tls_hint(&cause, endpoint) {
                    write!(f, " ({hint})")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConnectError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message lists every problem of the configuration, without `source()`.
    #[test]
    fn a_configuration_error_lists_its_problems() {
        let config = crate::config::ProfileSet::builder()
            .without_global()
            .default_timeout_ms("heartbeat", 0)
            .min_timeout_ms("tool_call", 0)
            .build()
            .unwrap_err();
        let problems = config.issues().len();
        assert!(problems >= 2, "{config}");
        let err = ConnectError::Config(config);
        let text = err.to_string();
        assert_eq!(text.lines().count(), problems + 1, "{text}");
        assert!(text.contains("profiles.heartbeat."), "{text}");
        assert!(text.contains("profiles.tool_call.min_timeout_ms"), "{text}");
        assert!(std::error::Error::source(&err).is_none());
    }
}
