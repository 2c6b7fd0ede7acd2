//! Where a value came from: the precedence levels of SW4-002 §2.3, and the caps that
//! limit a call's deadline. One type serves resolution, timers, logs, metrics and
//! [`crate::TimeoutDetails`].

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The level (and, for global configuration, the exact place) that supplied a value.
///
/// Its `Display` is the text written into the `source` metadata of timeout details;
/// [`Source::parse`] reads it back.
///
/// ```
/// use sw4rm_timeouts::Source;
/// let s = Source::Env("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS".into());
/// assert_eq!(s.level(), "global");
/// assert_eq!(s.to_string(), "global (env SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS)");
/// assert_eq!(Source::parse(&s.to_string()), Some(s));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Source {
    /// The SW4-002 standard table compiled into the crate.
    Standard,
    /// Global configuration: a TOML file.
    File(Arc<Path>),
    /// Global configuration: an environment variable (its name, exactly as set).
    Env(Arc<str>),
    /// Client configuration (the builder).
    Client,
    /// A timeout carried inside the request message (for example
    /// `WaitForDecisionRequest.timeout_seconds`).
    Message,
    /// A per-call override (`Request::set_timeout` or [`crate::CallTimeout`]).
    PerCall,
    /// The deadline of the inbound call this call serves, passed on (a cap, never
    /// raised to a profile's minimum).
    Inherited,
    /// What remained of an [`crate::OperationBudget`] (a cap).
    Budget,
    /// What remained of an [`crate::OperationBudget`] built from a handoff's SW4-004
    /// `BudgetEnvelope` ([`crate::OperationBudget::from_envelope`]): a budget (level
    /// `budget`) that came from the delegating agent.
    BudgetEnvelope,
    /// A limit set by the serving side's long-work guard (`scope::LongWork`: its idle
    /// limit or its own cap), as the caller reads it from the guard's timeout details:
    /// the server's setting, not the caller's.
    Server,
    /// A shorter deadline below the layer that tonic enforced (`Endpoint::timeout`, or
    /// a `grpc-timeout` written under the layer); its value is not known, the time
    /// it fired is.
    Transport,
}

impl Source {
    /// The precedence level (`standard`, `global`, `client`, `message` or
    /// `per_call`), or the kind of cap (`inherited`, `budget`, `server`, `transport`).
    pub fn level(&self) -> &'static str {
        match self {
            Source::Standard => "standard",
            Source::File(_) | Source::Env(_) => "global",
            Source::Client => "client",
            Source::Message => "message",
            Source::PerCall => "per_call",
            Source::Inherited => "inherited",
            Source::Budget | Source::BudgetEnvelope => "budget",
            Source::Server => "server",
            Source::Transport => "transport",
        }
    }

    /// Whether a value from this source is a **limit** (an inherited deadline, a budget,
    /// a server's or the transport's cap) rather than a setting or a request. SW4-002
    /// §2.2 clamps what callers ask for into a profile's bounds; a limit is never raised
    /// to a profile's minimum: when too little of it is left, the call fails fast, and a
    /// retry under it may run under less than the minimum.
    ///
    /// ```
    /// use sw4rm_timeouts::Source;
    ///
    /// assert!(Source::Inherited.is_limit());
    /// assert!(Source::BudgetEnvelope.is_limit());
    /// assert!(!Source::PerCall.is_limit());
    /// assert!(!Source::Standard.is_limit());
    /// ```
    pub fn is_limit(&self) -> bool {
        // Exhaustive: a new kind of source must say which it is.
        match self {
            Source::Standard
            | Source::File(_)
            | Source::Env(_)
            | Source::Client
            | Source::Message
            | Source::PerCall => false,
            Source::Inherited
            | Source::Budget
            | Source::BudgetEnvelope
            | Source::Server
            | Source::Transport => true,
        }
    }

    /// Reads back the text written by `Display`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Source> {
        if let Some(path) = text
            .strip_prefix("global (file ")
            .and_then(|r| r.strip_suffix(')'))
        {
            return Some(Source::File(Arc::from(Path::new(path))));
        }
        if let Some(var) = text
            .strip_prefix("global (env ")
            .and_then(|r| r.strip_suffix(')'))
        {
            return Some(Source::Env(var.into()));
        }
        Some(match text {
            "standard" => Source::Standard,
            "client" => Source::Client,
            "message" => Source::Message,
            "per_call" => Source::PerCall,
            "inherited" => Source::Inherited,
            "budget" => Source::Budget,
            "budget (envelope)" => Source::BudgetEnvelope,
            "server" => Source::Server,
            "transport" => Source::Transport,
            _ => return None,
        })
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "global (file {})", p.display()),
            Source::Env(v) => write!(f, "global (env {v})"),
            Source::BudgetEnvelope => f.write_str("budget (envelope)"),
            other => f.write_str(other.level()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which sources are limits (never raised to a profile's minimum) and which are
    /// settings or requests, one row per kind.
    #[test]
    fn limits_and_requests() {
        let table = [
            (Source::Standard, false),
            (Source::File(Arc::from(Path::new("sw4rm.toml"))), false),
            (Source::Env("SW4RM_X".into()), false),
            (Source::Client, false),
            (Source::Message, false),
            (Source::PerCall, false),
            (Source::Inherited, true),
            (Source::Budget, true),
            (Source::BudgetEnvelope, true),
            (Source::Server, true),
            (Source::Transport, true),
        ];
        for (source, limit) in table {
            assert_eq!(source.is_limit(), limit, "{source}");
        }
    }

    #[test]
    fn display_and_parse_round_trip() {
        let table = [
            (Source::Standard, "standard"),
            (Source::Client, "client"),
            (Source::Message, "message"),
            (Source::PerCall, "per_call"),
            (Source::Inherited, "inherited"),
            (Source::Budget, "budget"),
            (Source::BudgetEnvelope, "budget (envelope)"),
            (Source::Transport, "transport"),
            (Source::Server, "server"),
            (
                Source::File(Arc::from(Path::new("/etc/sw4rm.toml"))),
                "global (file /etc/sw4rm.toml)",
            ),
            (Source::Env("SW4RM_X".into()), "global (env SW4RM_X)"),
        ];
        for (source, text) in table {
            assert_eq!(source.to_string(), text);
            assert_eq!(Source::parse(text), Some(source));
        }
        for bad in ["", "global", "global (file x", "PerCall", "global (disk x)"] {
            assert_eq!(Source::parse(bad), None, "{bad}");
        }
    }
}
