//! Per-route latency observed by one layer (opt-in, [`TimeoutProfileLayer::with_observations`]):
//! an estimate (`crate::observe::latency`) per routed path, allocated on the path's first
//! observed call, kept beside the layer's table of routed paths (the same indices).
//! Recording is a few relaxed atomic additions: no lock, no allocation. A layer built
//! without observations has no table and does nothing per call.
//!
//! [`TimeoutProfileLayer::with_observations`]: super::TimeoutProfileLayer::with_observations

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::paths::LabelsRef;
use super::shared::Shared;
use super::table::Table;
use crate::observe::advise::{Advice, RouteLatency};
use crate::observe::latency::LatencyStats;

/// One estimate per slot of the layer's path table.
#[derive(Debug)]
pub(crate) struct Observed {
    stats: Box<[OnceLock<Arc<LatencyStats>>]>,
}

impl Observed {
    pub(crate) fn new(len: usize) -> Self {
        Observed {
            stats: (0..len).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The estimate at slot `from` of another table, kept at slot `to` of this one
    /// (a reload keeps what was observed of each path).
    pub(crate) fn carry(&self, from: &Observed, (from_slot, to_slot): (usize, usize)) {
        let kept = from.stats.get(from_slot).and_then(OnceLock::get);
        if let (Some(kept), Some(slot)) = (kept, self.stats.get(to_slot)) {
            let _ = slot.set(kept.clone());
        }
    }

    /// A unary call ended: a success's latency, or a timeout. Other failures say
    /// nothing about how long the RPC takes. Paths without a slot in the table (past
    /// its bound) are not observed.
    #[inline]
    pub(crate) fn record(&self, at: &LabelsRef, elapsed: Duration, timed_out: bool, ok: bool) {
        let LabelsRef::Seen(i) = at else { return };
        if !(timed_out || ok) {
            return;
        }
        let Some(slot) = self.stats.get(*i as usize) else {
            return;
        };
        let stats = slot.get_or_init(|| Arc::new(LatencyStats::new()));
        match timed_out {
            true => stats.timed_out(),
            false => stats.record(elapsed),
        }
    }
}

/// What a layer built with
/// [`with_observations`](super::TimeoutProfileLayer::with_observations) has observed:
/// a latency estimate per route, read at any time while the layer serves calls.
///
/// ```
/// use sw4rm_timeouts::TimeoutProfileLayer;
/// let layer = TimeoutProfileLayer::standard().with_observations();
/// let observations = layer.observations().expect("observed");
/// assert!(observations.routes().is_empty(), "no call yet");
/// println!("{}", observations.advise().overlay());
/// ```
#[derive(Clone, Debug)]
pub struct Observations {
    /// The layer's table (read anew each time: a reload keeps what was observed).
    pub(crate) table: Table,
}

impl Observations {
    /// Every route observed so far (at least one call), by path.
    pub fn routes(&self) -> Vec<RouteLatency> {
        routes_of(&self.table.full())
    }

    /// The advisor's verdicts on what was observed, against the layer's own profile
    /// table, and its proposal ([`Advice::overlay`]).
    pub fn advise(&self) -> Advice {
        let shared = self.table.full();
        Advice::new(&shared.profiles, &routes_of(&shared))
    }
}

/// Every route `shared` observed so far, by path.
pub(crate) fn routes_of(shared: &Shared) -> Vec<RouteLatency> {
    let Some(observed) = &shared.observed else {
        return Vec::new();
    };
    let mut routes: Vec<RouteLatency> = shared
        .paths
        .seated()
        .filter_map(|(i, labels, profile)| {
            let stats = observed.stats.get(i)?.get()?;
            Some(RouteLatency::new(
                labels.service.as_ref(),
                labels.method.as_ref(),
                shared.profiles.get(profile).profile.name.as_ref(),
                stats.snapshot(),
            ))
        })
        .collect();
    routes.sort_by_key(RouteLatency::path);
    routes
}
