//! [`HandoffRefused`]: why a handoff made in a scope was refused before it was sent,
//! and [`PeerText`], a peer's words bounded before they are kept or shown.

use sw4rm_timeouts::seams::quoted;
use sw4rm_timeouts::EnvelopeError;

/// Why [`Delegations::run`](super::Delegations::run) started no work.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandoffRefused {
    /// The handoff's envelope grants no work.
    Envelope(EnvelopeError),
    /// A delegation with this `request_id` already runs here (a retried handoff
    /// reuses its id): the first run goes on, and stays the one `CancelDelegation`
    /// reaches. Answer the duplicate as accepted, or with an error, as your protocol
    /// says; do not start the work twice.
    AlreadyRunning {
        /// The id, cut to a bound (it came from a peer).
        request_id: PeerText,
    },
}

/// Text from a peer, kept cut to a bound: at most 128 bytes quoted, the length named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerText(String);

impl PeerText {
    pub(super) fn new(text: &str) -> Self {
        PeerText(quoted(text).to_string())
    }

    /// The quoted text (with its length named when it was cut).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PeerText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<EnvelopeError> for HandoffRefused {
    fn from(e: EnvelopeError) -> Self {
        HandoffRefused::Envelope(e)
    }
}

impl std::fmt::Display for HandoffRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandoffRefused::Envelope(e) => e.fmt(f),
            HandoffRefused::AlreadyRunning { request_id } => write!(
                f,
                "a delegation with request_id {request_id} already runs here: the \
                 first run goes on (a retried handoff must not start the work twice)"
            ),
        }
    }
}

impl std::error::Error for HandoffRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HandoffRefused::Envelope(e) => Some(e),
            HandoffRefused::AlreadyRunning { .. } => None,
        }
    }
}
