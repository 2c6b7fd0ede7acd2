//! What a layer keeps for each routed path besides its labels, by the path table's
//! slot: a hedged route's recent latency (for a learned hedge delay), on a layer built
//! `with_observations()` its observed latency (for the advisor), and the route's plan
//! (`RoutePlan`, for the calls it alone decides). Each value is allocated on the
//! path's first call that needs it: a path that never needs one costs a null slot.
//! Latencies are shared by the variants of a layer, as the path table is, and carried
//! across a reload to the path's new slot; a plan belongs to one profile table and one
//! set of settings, so each variant and each reload makes its own.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::attempts::RecentLatency;
use crate::observe::latency::LatencyStats;

/// One value per slot of the layer's path table.
#[derive(Debug)]
pub(crate) struct PerPath<T> {
    slots: Box<[OnceLock<Arc<T>>]>,
}

impl<T> PerPath<T> {
    /// A store for a path table of `len` slots, every slot empty.
    pub(crate) fn new(len: usize) -> Self {
        PerPath {
            slots: (0..len).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The value at slot `from` of another store, kept at slot `to` of this one (a
    /// reload keeps what each path learned and observed).
    pub(crate) fn carry(&self, from: &PerPath<T>, (from_slot, to_slot): (usize, usize)) {
        let kept = from.slots.get(from_slot).and_then(OnceLock::get);
        if let (Some(kept), Some(slot)) = (kept, self.slots.get(to_slot)) {
            let _ = slot.set(kept.clone());
        }
    }

    /// The value at slot `i`, if one was made.
    pub(crate) fn get(&self, i: usize) -> Option<&Arc<T>> {
        self.slots.get(i)?.get()
    }

    /// The value of the path at slot `at`, made with `make` on first use (`None`: a
    /// path without a slot in the table).
    #[inline]
    pub(crate) fn at(&self, at: Option<usize>, make: impl FnOnce() -> T) -> Option<&Arc<T>> {
        let slot = self.slots.get(at?)?;
        Some(slot.get_or_init(|| Arc::new(make())))
    }
}

impl PerPath<RecentLatency> {
    /// The recent latency of the hedged route at slot `at` (`None`: a path without a
    /// slot in the table, which hedges after its policy's cap).
    pub(crate) fn window(&self, at: Option<usize>) -> Option<Arc<RecentLatency>> {
        self.at(at, RecentLatency::new).cloned()
    }
}

impl PerPath<LatencyStats> {
    /// A unary call ended: a success's latency, or a timeout. Other failures say
    /// nothing about how long the RPC takes. Paths without a slot in the table (past
    /// its bound) are not observed.
    #[inline]
    pub(crate) fn record(&self, at: Option<usize>, elapsed: Duration, timed_out: bool, ok: bool) {
        if !(timed_out || ok) {
            return;
        }
        let Some(stats) = self.at(at, LatencyStats::new) else {
            return;
        };
        match timed_out {
            true => stats.timed_out(),
            false => stats.record(elapsed),
        }
    }
}
