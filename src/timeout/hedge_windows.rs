//! The recent latency of each hedged route (`crate::attempts::RecentLatency`), by the
//! layer's path-table slot, allocated on the route's first hedged call: a route that
//! is never hedged costs a null slot. Shared by the variants of a layer, as the path
//! table is.

use std::sync::{Arc, OnceLock};

use super::paths::LabelsRef;
use crate::attempts::RecentLatency;

/// One window per slot of the layer's path table.
#[derive(Debug)]
pub(crate) struct Learned {
    recent: Box<[OnceLock<Arc<RecentLatency>>]>,
}

impl Learned {
    pub(crate) fn new(len: usize) -> Self {
        Learned {
            recent: (0..len).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The window at slot `from` of another table, kept at slot `to` of this one (a
    /// reload keeps what each route learned).
    pub(crate) fn carry(&self, from: &Learned, (from_slot, to_slot): (usize, usize)) {
        let kept = from.recent.get(from_slot).and_then(OnceLock::get);
        if let (Some(kept), Some(slot)) = (kept, self.recent.get(to_slot)) {
            let _ = slot.set(kept.clone());
        }
    }

    /// The window of the route at `at` (`None`: a path without a slot in the table,
    /// which hedges after its policy's cap).
    pub(crate) fn route(&self, at: &LabelsRef) -> Option<Arc<RecentLatency>> {
        let LabelsRef::Seen(i) = at else { return None };
        let slot = self.recent.get(*i as usize)?;
        Some(slot.get_or_init(|| Arc::new(RecentLatency::new())).clone())
    }
}
