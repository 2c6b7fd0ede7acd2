//! Where a resolved value came from: the precedence levels of SW4-002 §2.3.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The level (and, for global configuration, the exact place) that supplied a value.
///
/// ```
/// use sw4rm_timeouts::Source;
/// let s = Source::Env("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS".into());
/// assert_eq!(s.level(), "global");
/// assert_eq!(s.to_string(), "global (env SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The SW4-002 standard table compiled into the crate.
    Standard,
    /// Global configuration: a TOML file.
    File(Arc<Path>),
    /// Global configuration: an environment variable (its name).
    Env(Arc<str>),
    /// Client configuration (the builder).
    Client,
    /// A timeout carried inside the request message (for example
    /// `WaitForDecisionRequest.timeout_seconds`).
    Message,
    /// A per-call override (`Request::set_timeout` or [`crate::CallTimeout`]).
    PerCall,
}

impl Source {
    /// The precedence level: `standard`, `global`, `client`, `message` or `per_call`.
    pub fn level(&self) -> &'static str {
        match self {
            Source::Standard => "standard",
            Source::File(_) | Source::Env(_) => "global",
            Source::Client => "client",
            Source::Message => "message",
            Source::PerCall => "per_call",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "global (file {})", p.display()),
            Source::Env(v) => write!(f, "global (env {v})"),
            other => f.write_str(other.level()),
        }
    }
}
