//! TLS for the embedded server: a certificate authority made at start, a server
//! certificate it signs for `localhost` and `127.0.0.1`, and (for mutual TLS) a client
//! identity it signs, all handed to the test so it can trust them.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// The certificates of a TLS [`super::TestServer`]: the CA to trust, and the client
/// identity it accepts when it asks for one (mutual TLS).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
/// use sw4rm_timeouts::testing::TestServer;
/// use sw4rm_timeouts::tonic::transport::Endpoint;
/// use sw4rm_timeouts::Sw4rm;
///
/// let server = TestServer::start_tls().await?;
/// assert!(server.url().starts_with("https://127.0.0.1:"));
/// let tls = server.tls().expect("a TLS server").client_tls_config();
/// let endpoint = Endpoint::from_shared(server.url())?.tls_config(tls)?;
/// let sw4rm = Sw4rm::builder(endpoint).connect().await?;
/// sw4rm.registry().heartbeat(HeartbeatRequest::default()).await?;
/// assert_eq!(server.calls()[0].grpc_timeout.as_deref(), Some("5000000u"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct TestTls {
    ca: String,
    server: (String, String),
    client: (String, String),
    mutual: bool,
}

impl TestTls {
    /// New certificates; `mutual`: the server requires a client identity signed by
    /// its CA.
    pub(crate) fn generate(mutual: bool) -> Result<TestTls, rcgen::Error> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "sw4rm-timeouts TestServer CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;

        let leaf = |names: Vec<String>, usage| -> Result<(String, String), rcgen::Error> {
            let mut params = CertificateParams::new(names)?;
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate()?;
            let cert = params.signed_by(&key, &ca)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        let server = leaf(
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let client = leaf(
            vec!["sw4rm-test-agent".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        Ok(TestTls {
            ca: ca.pem(),
            server,
            client,
            mutual,
        })
    }

    /// The CA certificate (PEM) that signed the server's certificate and the client
    /// identity.
    pub fn ca_certificate_pem(&self) -> &str {
        &self.ca
    }

    /// The client identity (certificate PEM, private key PEM) the server accepts.
    pub fn client_identity_pem(&self) -> (&str, &str) {
        (&self.client.0, &self.client.1)
    }

    /// The server's own identity (certificate PEM, private key PEM), signed by the CA.
    pub fn server_identity_pem(&self) -> (&str, &str) {
        (&self.server.0, &self.server.1)
    }

    /// Whether the server requires a client identity (mutual TLS).
    pub fn is_mutual(&self) -> bool {
        self.mutual
    }

    /// A client TLS configuration that trusts the server, with the client identity
    /// when the server requires one.
    pub fn client_tls_config(&self) -> ClientTlsConfig {
        let config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&self.ca));
        match self.mutual {
            true => config.identity(Identity::from_pem(&self.client.0, &self.client.1)),
            false => config,
        }
    }

    /// The server's TLS configuration.
    pub(crate) fn server_tls_config(&self) -> ServerTlsConfig {
        let config =
            ServerTlsConfig::new().identity(Identity::from_pem(&self.server.0, &self.server.1));
        match self.mutual {
            true => config.client_ca_root(Certificate::from_pem(&self.ca)),
            false => config,
        }
    }
}

/// Installs a process-wide crypto provider for the server's TLS when none is installed
/// yet: `ring`'s with `tls-ring` (the one tonic's client takes when it has the choice),
/// else `aws-lc-rs`'s. With one provider built in, this is what rustls would install on
/// first use anyway; with both (the two features, or another crate in the build
/// turning on the other one), rustls cannot choose for a server and tonic's server
/// would panic. A provider the application installed is kept.
pub(crate) fn choose_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_some() {
        return;
    }
    #[cfg(feature = "tls-ring")]
    let provider = rustls::crypto::ring::default_provider();
    #[cfg(not(feature = "tls-ring"))]
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    // Another thread may have installed one meanwhile: theirs stands.
    let _ = provider.install_default();
}
