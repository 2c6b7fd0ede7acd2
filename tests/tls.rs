//! TLS over loopback, with certificates made by the embedded server at start: a
//! handshake through the caller's own `Endpoint` (own CA) with the profile deadline
//! inside it, an untrusted certificate refused, mutual TLS, and `https://` never
//! reaching a server in plaintext — with the TLS features compiled in (`cargo test`)
//! and without them (`cargo test -p sw4rm-timeouts --features testing --test tls`,
//! which `.ci/run` runs too).

mod common;

use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::tonic::transport::Endpoint;
use sw4rm_timeouts::{ConnectError, Sw4rm, TimeoutProfileLayer};

async fn heartbeat(sw4rm: &Sw4rm) -> Result<(), tonic::Status> {
    sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await
        .map(drop)
}

/// An `https://` URL to a plaintext server: refused, whatever was compiled in, and
/// the server never sees a call.
#[tokio::test]
async fn https_to_a_plaintext_server_is_refused() {
    let server = TestServer::start().await.unwrap();
    let https = format!("https://{}", server.addr());
    let err = Sw4rm::connect_with(https.clone(), TimeoutProfileLayer::standard())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("SW4RM endpoint {https}/")), "{text}");
    let endpoint = Endpoint::from_shared(https).unwrap();
    let eager = Sw4rm::builder(endpoint.clone()).connect().await;
    assert!(eager.is_err());
    match Sw4rm::builder(endpoint).connect_lazy() {
        // With TLS compiled in: the call fails, it is never sent in plaintext.
        Ok(lazy) => {
            let status = heartbeat(&lazy).await.unwrap_err();
            assert_eq!(status.code(), tonic::Code::Unavailable, "{status}");
        }
        Err(err) => assert!(matches!(err, ConnectError::TlsUnavailable { .. }), "{err}"),
    }
    assert_eq!(server.calls().len(), 0, "{:?}", server.calls());
}

#[tokio::test]
async fn schemes_other_than_http_and_https_are_refused() {
    for url in [
        "grpc://127.0.0.1:1",
        "grpcs://127.0.0.1:1",
        "ftp://127.0.0.1:1",
    ] {
        let err = Sw4rm::connect_with(url, TimeoutProfileLayer::standard())
            .await
            .unwrap_err();
        assert!(
            matches!(err, ConnectError::UnsupportedScheme { .. }),
            "{url}: {err}"
        );
        let scheme = url.split(':').next().unwrap();
        assert!(
            err.to_string()
                .contains(&format!("the scheme `{scheme}` is not supported")),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_port_that_is_no_port_number_is_an_invalid_endpoint_not_a_refused_connection() {
    for (url, port) in [
        ("http://127.0.0.1:99999", "99999"),
        ("http://127.0.0.1:0", "0"),
        ("http://[::1]:70000", "70000"),
    ] {
        let err = Sw4rm::connect_with(url, TimeoutProfileLayer::standard())
            .await
            .unwrap_err();
        assert!(
            matches!(err, ConnectError::InvalidPort { .. }),
            "{url}: {err}"
        );
        assert!(
            err.to_string()
                .contains(&format!("the port `{port}` is not a port number")),
            "{err}"
        );
        let lazy = Sw4rm::builder(tonic::transport::Endpoint::from_static(url)).connect_lazy();
        assert!(
            matches!(lazy, Err(ConnectError::InvalidPort { .. })),
            "{url}"
        );
    }
}

/// Built without a crypto provider, `https://` is refused before any connection, with
/// the features to enable named.
#[cfg(not(any(feature = "tls-ring", feature = "tls-aws-lc")))]
mod without_tls {
    use super::*;

    #[tokio::test]
    async fn https_is_refused_naming_the_features() {
        let server = TestServer::start().await.unwrap();
        let https = format!("https://{}", server.addr());
        let err = Sw4rm::connect_with(https.clone(), TimeoutProfileLayer::standard())
            .await
            .unwrap_err();
        assert!(
            matches!(err, ConnectError::TlsUnavailable { .. }),
            "{err:?}"
        );
        // One message names both kinds of feature, and the way for a private CA.
        assert_eq!(
            err.to_string(),
            format!(
                "SW4RM endpoint {https}/: https:// needs TLS, and this build of \
                 sw4rm-timeouts cannot provide it: enable a crypto provider (the feature \
                 `tls-ring` or `tls-aws-lc`) and trust roots (`tls-native-roots` for the \
                 platform's, or `tls-webpki-roots` for Mozilla's); for a server with a \
                 private CA, a provider and `Sw4rm::builder(endpoint)` with your own \
                 `ClientTlsConfig` (CA and domain name) instead of roots (the endpoint is \
                 never reached in plaintext)"
            )
        );
        // Through the builder the caller brings the CA: only a provider is missing.
        let endpoint = Endpoint::from_shared(https.clone()).unwrap();
        let lazy = Sw4rm::builder(endpoint).connect_lazy().unwrap_err();
        assert!(matches!(lazy, ConnectError::TlsUnavailable { .. }));
        assert_eq!(
            lazy.to_string(),
            format!(
                "SW4RM endpoint {https}/: https:// needs TLS, and this build of \
                 sw4rm-timeouts cannot provide it: enable a crypto provider, the feature \
                 `tls-ring` or `tls-aws-lc` (the endpoint is never reached in plaintext)"
            )
        );
        assert_eq!(server.calls().len(), 0);
    }
}

#[cfg(any(feature = "tls-ring", feature = "tls-aws-lc"))]
mod with_tls {
    use super::*;
    use std::time::Duration;
    use sw4rm_timeouts::tonic::transport::ClientTlsConfig;

    use sw4rm_timeouts::ConnectStage;
    use tokio::time::Instant;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// The caller's own `Endpoint` with the server's CA: the handshake works and the
    /// profile's deadline arrives inside the TLS connection.
    #[tokio::test]
    async fn a_handshake_with_our_own_ca_carries_the_profile_deadline() {
        let server = TestServer::start_tls().await.unwrap();
        let tls = server.tls().unwrap().client_tls_config();
        let endpoint = Endpoint::from_shared(server.url())
            .unwrap()
            .tls_config(tls)
            .unwrap();
        let sw4rm = Sw4rm::builder(endpoint).connect().await.unwrap();
        heartbeat(&sw4rm).await.unwrap();
        let calls = server.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].grpc_timeout.as_deref(), Some("5000000u"));
    }

    /// A certificate signed by nobody the client trusts: refused, by
    /// `Sw4rm::connect`'s compiled-in roots and by an `Endpoint` trusting another CA.
    #[tokio::test]
    async fn a_certificate_nobody_trusts_is_refused() {
        let server = TestServer::start_tls().await.unwrap();
        let err = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard())
            .await
            .unwrap_err();
        // With trust roots compiled in, the handshake fails on the issuer; without
        // any, `connect` refuses before it (what to enable, `TlsUnavailable`).
        if cfg!(any(
            feature = "tls-webpki-roots",
            feature = "tls-native-roots"
        )) {
            assert!(matches!(err, ConnectError::Unreachable { .. }), "{err:?}");
            assert!(err.to_string().contains("UnknownIssuer"), "{err}");
            // What to do, as the other TLS mistakes say.
            assert!(
                err.to_string()
                    .contains("not signed by a CA this client trusts"),
                "{err}"
            );
        } else {
            assert!(
                matches!(err, ConnectError::TlsUnavailable { .. }),
                "{err:?}"
            );
        }

        let other = TestServer::start_tls().await.unwrap();
        let endpoint = Endpoint::from_shared(server.url())
            .unwrap()
            .tls_config(other.tls().unwrap().client_tls_config())
            .unwrap();
        let err = Sw4rm::builder(endpoint).connect().await.unwrap_err();
        // Another CA of the same name: the signature does not verify.
        assert!(
            err.to_string().contains("invalid peer certificate"),
            "{err}"
        );
        assert!(err.to_string().contains("ca_certificate"), "{err}");
        assert_eq!(server.calls().len(), 0);
    }

    /// Mutual TLS: the client identity from the caller's `ClientTlsConfig` is
    /// presented, and without one no call reaches the server.
    #[tokio::test]
    async fn mutual_tls_presents_the_client_identity() {
        let server = TestServer::start_mutual_tls().await.unwrap();
        let tls = server.tls().unwrap();
        assert!(tls.is_mutual());
        let endpoint = Endpoint::from_shared(server.url()).unwrap();
        let sw4rm = Sw4rm::builder(
            endpoint
                .clone()
                .tls_config(tls.client_tls_config())
                .unwrap(),
        )
        .connect()
        .await
        .unwrap();
        heartbeat(&sw4rm).await.unwrap();
        assert_eq!(server.calls().len(), 1);

        let anonymous = ClientTlsConfig::new().ca_certificate(
            sw4rm_timeouts::tonic::transport::Certificate::from_pem(tls.ca_certificate_pem()),
        );
        let refused = match Sw4rm::builder(endpoint.tls_config(anonymous).unwrap())
            .connect()
            .await
        {
            // TLS 1.3 may finish the client's side of the handshake before the server
            // refuses: then the first call fails.
            Ok(sw4rm) => heartbeat(&sw4rm).await.is_err(),
            Err(_) => true,
        };
        assert!(refused);
        assert_eq!(server.calls().len(), 1, "no call without the identity");
    }

    /// A peer that accepts TCP and never answers the TLS handshake: the connect
    /// timeout bounds the whole set-up (tonic's covers TCP only), for the SDK's
    /// default and for the caller's own, and the error names the endpoint and the
    /// stage that did not finish.
    #[tokio::test]
    async fn a_peer_that_never_answers_the_tls_handshake_cannot_hang_connect() {
        let (addr, held) = common::silent_tcp_peer().await;
        let server = TestServer::start_tls().await.unwrap();
        let tls = server.tls().unwrap().client_tls_config();
        let url = format!("https://{addr}");
        for (set, want_ms) in [(Some(ms(400)), 400), (None, 5_000)] {
            let endpoint = Endpoint::from_shared(url.clone())
                .unwrap()
                .tls_config(tls.clone())
                .unwrap();
            let mut builder = Sw4rm::builder(endpoint);
            if let Some(t) = set {
                builder = builder.connect_timeout(t);
            }
            let start = Instant::now();
            // Bounded here only so that a regression fails instead of hanging.
            let err = tokio::time::timeout(Duration::from_secs(30), builder.connect())
                .await
                .expect("connect() must end by its connect timeout")
                .unwrap_err();
            assert!(start.elapsed() >= ms(want_ms), "{:?}", start.elapsed());
            match &err {
                ConnectError::TimedOut { stage, timeout, .. } => {
                    assert_eq!(*stage, ConnectStage::Tls);
                    assert_eq!(*timeout, ms(want_ms));
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(
                err.to_string(),
                format!(
                    "cannot connect to the SW4RM endpoint {url}/: the TLS handshake did not \
                     finish within the connect timeout of {want_ms} ms (TCP connected, but \
                     the peer did not complete a TLS handshake: is it serving TLS on this \
                     port?)"
                )
            );
        }
        held.abort();
    }

    /// `https://` to a plaintext server: the message says so, and what to use instead,
    /// for an eager connect and for a lazy call alike (rustls' own words, "received
    /// corrupt message of type InvalidContentType", read like data corruption).
    #[tokio::test]
    async fn https_to_a_plaintext_server_names_the_mistake() {
        let server = TestServer::start().await.unwrap();
        let addr = server.addr();
        let tls = ClientTlsConfig::new().with_enabled_roots();
        let endpoint = Endpoint::from_shared(format!("https://{addr}"))
            .unwrap()
            .tls_config(tls)
            .unwrap();
        let hint = format!(
            "(the server answered in plaintext, not TLS: it does not serve TLS on this \
             port; use http://{addr}/ or the server's TLS port)"
        );
        let err = Sw4rm::builder(endpoint.clone())
            .connect()
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "cannot connect to the SW4RM endpoint https://{addr}/: "
            )) && text.ends_with(&hint),
            "{text}"
        );
        let lazy = Sw4rm::builder(endpoint).connect_lazy().unwrap();
        let status = heartbeat(&lazy).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(status.message().ends_with(&hint), "{}", status.message());
        // The message says it all: no chain for a reporter to print again.
        assert!(std::error::Error::source(&status).is_none(), "{status:?}");
        assert_eq!(server.calls().len(), 0);
    }

    /// The usual `openssl req -x509` certificate is its own CA (CA:TRUE) and cannot
    /// serve: rustls says `CaUsedAsEndEntity`; the message explains it.
    #[tokio::test]
    async fn a_ca_certificate_serving_as_its_own_leaf_is_explained() {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let server = TestServer::start_tls_with(cert.pem(), key.serialize_pem())
            .await
            .unwrap();
        let tls = ClientTlsConfig::new().ca_certificate(
            sw4rm_timeouts::tonic::transport::Certificate::from_pem(cert.pem()),
        );
        let endpoint = Endpoint::from_shared(server.url())
            .unwrap()
            .tls_config(tls)
            .unwrap();
        let err = Sw4rm::builder(endpoint).connect().await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("CaUsedAsEndEntity"), "{text}");
        assert!(
            text.contains(
                "(the server presents a CA certificate (basicConstraints CA:TRUE) as its own, \
                 as `openssl req -x509` makes by default: a certificate that is its own CA \
                 cannot serve TLS; make a CA, sign a server certificate with it, give the \
                 server that certificate and the client the CA (the guide's TLS chapter, \
                 `sw4rm_timeouts::guide::tls`, shows how))"
            ),
            "{text}"
        );
    }

    /// A server on the caller's own certificate and key (here one signed by the
    /// embedded server's CA) serves calls over TLS.
    #[tokio::test]
    async fn the_test_server_serves_tls_on_the_callers_own_certificate() {
        let made = TestServer::start_tls().await.unwrap();
        let made_tls = made.tls().unwrap();
        let (cert, key) = made_tls.server_identity_pem();
        let server = TestServer::start_tls_with(cert, key).await.unwrap();
        assert!(server.tls().is_none());
        let endpoint = Endpoint::from_shared(server.url())
            .unwrap()
            .tls_config(made_tls.client_tls_config())
            .unwrap();
        let sw4rm = Sw4rm::builder(endpoint).connect().await.unwrap();
        heartbeat(&sw4rm).await.unwrap();
        assert_eq!(server.calls().len(), 1);
        assert_eq!(made.calls().len(), 0);
    }

    /// `http://` to a TLS server: the connect fails, saying the server speaks TLS
    /// (before, it succeeded and the first call failed as "operation was canceled").
    #[tokio::test]
    async fn http_to_a_tls_server_names_the_mistake() {
        let server = TestServer::start_tls().await.unwrap();
        let http = format!("http://{}", server.addr());
        let err = Sw4rm::builder(Endpoint::from_shared(http.clone()).unwrap())
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(err, ConnectError::ServerSpeaksTls { .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "cannot connect to the SW4RM endpoint {http}/: the server speaks TLS on this \
                 port, and the endpoint is http:// (plaintext): use https:// with a TLS \
                 configuration"
            )
        );
        let err = Sw4rm::connect_with(http.clone(), TimeoutProfileLayer::standard())
            .await
            .unwrap_err();
        assert!(
            matches!(err, ConnectError::ServerSpeaksTls { .. }),
            "{err:?}"
        );
        // A lazily connected channel: the call names the endpoint and what the client
        // saw first (hyper writes at once: the TLS server's alert, or its closing the
        // connection before the alert could be read), not "transport error".
        let lazy = Sw4rm::builder(Endpoint::from_shared(http.clone()).unwrap())
            .connect_lazy()
            .unwrap();
        let status = heartbeat(&lazy).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        let said = [
            "the server speaks TLS on this port, and the endpoint is http:// (plaintext): \
             use https:// with a TLS configuration",
            "the peer accepted the connection and closed it before speaking HTTP/2: is it \
             a gRPC server, on this port?",
        ]
        .map(|cause| format!("cannot connect to the SW4RM endpoint {http}/: {cause}"));
        assert!(said.contains(&status.message().to_owned()), "{status:?}");
        assert!(std::error::Error::source(&status).is_none(), "{status:?}");
        assert_eq!(server.calls().len(), 0);
    }

    /// An `https` endpoint of the caller's without a TLS configuration: refused, and
    /// the message says what to give it.
    #[tokio::test]
    async fn an_https_endpoint_without_a_tls_configuration_says_what_to_do() {
        let server = TestServer::start_tls().await.unwrap();
        let endpoint = Endpoint::from_shared(server.url()).unwrap();
        let err = Sw4rm::builder(endpoint).connect().await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("Connecting to HTTPS without TLS enabled")
                && text.contains("give the Endpoint a TLS configuration"),
            "{text}"
        );
        assert_eq!(server.calls().len(), 0);
    }
}
