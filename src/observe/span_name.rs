//! What an RPC's span is called in OpenTelemetry (feature `otel`): the RPC
//! conventions' `package.Service/Method`, or SW4-003's `sw4rm.{service}.{method}` in
//! snake case; and the server a client span names (`server.address`, `server.port`).

use std::fmt;
use std::sync::Arc;

/// The OpenTelemetry name of the layers' RPC spans (the `otel.name` field); the
/// fully qualified method stays on every span as `rpc.method` either way
/// (feature `otel`).
///
/// ```
/// use sw4rm_timeouts::{SpanName, TimeoutProfileLayer};
/// let layer = TimeoutProfileLayer::standard().with_span_name(SpanName::Sw4003);
/// # drop(layer);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpanName {
    /// OpenTelemetry's RPC conventions: `sw4rm.registry.RegistryService/RegisterAgent`.
    #[default]
    Rpc,
    /// SW4-003's: `sw4rm.registry.register_agent` (the service's package, then the
    /// method in snake case).
    Sw4003,
}

/// A span's OpenTelemetry name, written without an allocation of its own.
pub(crate) struct Title<'a> {
    pub(crate) name: SpanName,
    /// The service's full name (`sw4rm.registry.RegistryService`).
    pub(crate) service: &'a str,
    pub(crate) method: &'a str,
}

impl fmt::Display for Title<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name {
            SpanName::Rpc => write!(f, "{}/{}", self.service, self.method),
            SpanName::Sw4003 => {
                let package = self.service.rsplit_once('.').map_or("", |(p, _)| p);
                f.write_str(package)?;
                f.write_str(".")?;
                snake(self.method, f)
            }
        }
    }
}

/// `RegisterAgent` as `register_agent`: an underscore before each capital that
/// follows a lower-case letter or a digit, or that starts a word after an acronym.
fn snake(name: &str, f: &mut impl fmt::Write) -> fmt::Result {
    let mut chars = name.chars().peekable();
    let mut before: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(b) = before.filter(|_| c.is_ascii_uppercase()) {
            let after_lower = b.is_ascii_lowercase() || b.is_ascii_digit();
            let ends_acronym =
                b.is_ascii_uppercase() && chars.peek().is_some_and(char::is_ascii_lowercase);
            if after_lower || ends_acronym {
                f.write_char('_')?;
            }
        }
        f.write_char(c.to_ascii_lowercase())?;
        before = Some(c);
    }
    Ok(())
}

/// The server a client's spans name: `server.address` and `server.port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerName {
    pub(crate) address: Arc<str>,
    pub(crate) port: u16,
}

impl ServerName {
    /// The host and port of an endpoint URL (`http://registry:50051`), the port the
    /// scheme's when none is written; `None` for what is no such URL.
    pub(crate) fn of(endpoint: &str) -> Option<ServerName> {
        let uri: http::Uri = endpoint.parse().ok()?;
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
        let port = uri.port_u16().or(match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        })?;
        Some(ServerName {
            address: host.into(),
            port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        let table = [
            (
                SpanName::Rpc,
                "sw4rm.registry.RegistryService",
                "RegisterAgent",
                "sw4rm.registry.RegistryService/RegisterAgent",
            ),
            (
                SpanName::Sw4003,
                "sw4rm.registry.RegistryService",
                "RegisterAgent",
                "sw4rm.registry.register_agent",
            ),
            (
                SpanName::Sw4003,
                "sw4rm.scheduler.SchedulerService",
                "SubmitTask",
                "sw4rm.scheduler.submit_task",
            ),
            (
                SpanName::Sw4003,
                "sw4rm.negotiation_room.NegotiationRoomService",
                "WaitForDecision",
                "sw4rm.negotiation_room.wait_for_decision",
            ),
            (
                SpanName::Sw4003,
                "sw4rm.tool.ToolService",
                "Call",
                "sw4rm.tool.call",
            ),
            (
                SpanName::Sw4003,
                "sw4rm.hitl.HitlService",
                "GetHITLStatus",
                "sw4rm.hitl.get_hitl_status",
            ),
            (SpanName::Sw4003, "sw4rm.x.Svc", "V2Read", "sw4rm.x.v2_read"),
            // A service without a package: the method alone after the dot.
            (SpanName::Sw4003, "Bare", "Ping", ".ping"),
        ];
        for (name, service, method, expected) in table {
            let title = Title {
                name,
                service,
                method,
            }
            .to_string();
            assert_eq!(title, expected, "{name:?} {service} {method}");
        }
    }

    #[test]
    fn server_names() {
        let name = |a: &str, port| {
            Some(ServerName {
                address: a.into(),
                port,
            })
        };
        let table = [
            ("http://registry:50051", name("registry", 50051)),
            ("https://registry.example", name("registry.example", 443)),
            ("http://127.0.0.1", name("127.0.0.1", 80)),
            ("http://[::1]:9000", name("::1", 9000)),
            // An authority alone names its port.
            ("registry:50051", name("registry", 50051)),
            ("registry", None),
            ("not a url", None),
        ];
        for (endpoint, expected) in table {
            assert_eq!(ServerName::of(endpoint), expected, "{endpoint}");
        }
    }
}
