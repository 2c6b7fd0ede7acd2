//! The marker on an answer that work returned early because its time was nearly up
//! (the wrap-up notice): response metadata `sw4rm-partial`, readable by any gRPC
//! stack.

use tonic::metadata::{MetadataMap, MetadataValue};

/// The response metadata key of the partial-answer marker.
pub const PARTIAL_KEY: &str = "sw4rm-partial";

/// Why an answer is partial: a normal answer (status `OK`) with what the work had,
/// not a `DEADLINE_EXCEEDED`.
///
/// ```
/// use sw4rm_timeouts::Partial;
/// let mut response = tonic::Response::new(());
/// Partial::TimeBudget.mark(response.metadata_mut());
/// assert_eq!(response.metadata().get("sw4rm-partial").unwrap(), "time-budget");
/// assert_eq!(Partial::of(response.metadata()), Some(Partial::TimeBudget));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Partial {
    /// The work was told its time was nearly up and returned what it had
    /// (`sw4rm-partial: time-budget`).
    TimeBudget,
}

impl Partial {
    /// The marker's value on the wire.
    pub fn as_str(&self) -> &'static str {
        match self {
            Partial::TimeBudget => "time-budget",
        }
    }

    /// Puts the marker on an answer's metadata.
    pub fn mark(&self, metadata: &mut MetadataMap) {
        metadata.insert(PARTIAL_KEY, MetadataValue::from_static(self.as_str()));
    }

    /// The marker an answer carries, if any (an unknown value reads as none).
    pub fn of(metadata: &MetadataMap) -> Option<Partial> {
        match metadata.get(PARTIAL_KEY)?.as_bytes() {
            b"time-budget" => Some(Partial::TimeBudget),
            _ => None,
        }
    }
}
