//! Per-route latency observed by one layer (opt-in, [`TimeoutProfileLayer::with_observations`]),
//! read back for the advisor: the estimates are recorded per path by
//! `per_path.rs` (a few relaxed atomic additions: no lock, no allocation); a
//! layer built without observations keeps none and does nothing per call.
//!
//! [`TimeoutProfileLayer::with_observations`]: crate::timeout::TimeoutProfileLayer::with_observations

use super::shared::{Shared, Table};
use crate::observe::advise::{Advice, RouteLatency};

/// What a layer built with
/// [`with_observations`](crate::timeout::TimeoutProfileLayer::with_observations) has observed:
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
            let stats = observed.get(i)?;
            Some(RouteLatency::new(
                labels.service.as_ref(),
                labels.method.as_ref(),
                shared.profiles.by_id(profile).profile.name.as_ref(),
                stats.snapshot(),
            ))
        })
        .collect();
    routes.sort_by_key(RouteLatency::path);
    routes
}
