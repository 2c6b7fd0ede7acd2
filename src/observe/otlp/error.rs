//! What an OTLP export says when it cannot start or did not deliver.

use std::fmt;

/// Why an OTLP export could not start, or did not deliver on a flush or shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpError {
    what: String,
}

impl OtlpError {
    pub(super) fn export(signal: &str, endpoint: &str, e: impl fmt::Display) -> Self {
        OtlpError {
            what: format!(
                "the OTLP export of {signal} to {endpoint} did not complete: {e}; check \
                 that a receiver (an OpenTelemetry Collector's OTLP/gRPC port) is up there"
            ),
        }
    }

    pub(super) fn build(endpoint: &str, e: impl fmt::Display) -> Self {
        OtlpError {
            what: format!(
                "the OTLP exporter for {endpoint} could not be built: {e}; give \
                 `OtlpBuilder::endpoint` a URL such as http://otel-collector:4317 (an \
                 https:// one needs a `tls-*` feature of sw4rm-timeouts)"
            ),
        }
    }

    pub(super) fn header(name: &str, rule: &str) -> Self {
        OtlpError {
            what: format!(
                "the OTLP header {} {rule}; give `OtlpBuilder::header` a lower-case ASCII \
                 name and a printable ASCII value",
                crate::policy::quote::quoted(name)
            ),
        }
    }

    pub(super) fn thread(e: std::io::Error) -> Self {
        OtlpError {
            what: format!("the OTLP export thread could not be started: {e}"),
        }
    }

    pub(super) fn stopped() -> Self {
        OtlpError {
            what: "the OTLP export thread stopped before it answered".into(),
        }
    }
}

impl fmt::Display for OtlpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for OtlpError {}
