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
use crate::observe::advise::{Advice, RouteLatency};
use crate::observe::latency::LatencyStats;

/// One estimate per slot of the layer's path table.
#[derive(Debug)]
pub(crate) struct Observed {
    stats: Box<[OnceLock<Box<LatencyStats>>]>,
}

impl Observed {
    pub(crate) fn new(len: usize) -> Self {
        Observed {
            stats: (0..len).map(|_| OnceLock::new()).collect(),
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
        let stats = slot.get_or_init(|| Box::new(LatencyStats::new()));
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
    pub(crate) shared: Arc<Shared>,
}

impl Observations {
    /// Every route observed so far (at least one call), by path.
    pub fn routes(&self) -> Vec<RouteLatency> {
        let Some(observed) = &self.shared.observed else {
            return Vec::new();
        };
        let mut routes: Vec<RouteLatency> = self
            .shared
            .paths
            .seated()
            .filter_map(|(i, labels, profile)| {
                let stats = observed.stats.get(i)?.get()?;
                Some(RouteLatency::new(
                    labels.service.as_ref(),
                    labels.method.as_ref(),
                    self.shared.profiles.get(profile).profile.name.as_ref(),
                    stats.snapshot(),
                ))
            })
            .collect();
        routes.sort_by_key(RouteLatency::path);
        routes
    }

    /// The advisor's verdicts on what was observed, against the layer's own profile
    /// table, and its proposal ([`Advice::overlay`]).
    pub fn advise(&self) -> Advice {
        Advice::new(&self.shared.profiles, &self.routes())
    }
}
