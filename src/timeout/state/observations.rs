//! Per-route latency observed by one layer (opt-in, [`TimeoutProfileLayer::with_observations`]),
//! read back for the advisor: the estimates are recorded per path by
//! `per_path.rs` (a few relaxed atomic additions: no lock, no allocation); a
//! layer built without observations keeps none and does nothing per call.
//!
//! [`TimeoutProfileLayer::with_observations`]: crate::timeout::TimeoutProfileLayer::with_observations

use super::reload::CurrentProfiles;
use super::shared::{Shared, Table};
use crate::observe::latency::RouteLatency;

/// What a layer built with
/// [`with_observations`](crate::timeout::TimeoutProfileLayer::with_observations) has observed:
/// a latency estimate per route, read at any time while the layer serves calls.
///
/// ```
/// use sw4rm_timeouts::TimeoutProfileLayer;
/// let layer = TimeoutProfileLayer::standard().with_observations();
/// let observations = layer.observations().expect("observed");
/// assert!(observations.routes().is_empty(), "no call yet");
/// let (profiles, routes) = observations.read();
/// assert!(routes.is_empty());
/// assert_eq!(profiles.profile("heartbeat").unwrap().default_timeout_ms, 5_000);
/// ```
///
/// The advisor (the `sw4rm-advise` crate) weighs these against the table in use.
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

    /// The layer's profile table in use and every route observed so far, read
    /// together (a reload between two separate reads could pair routes with a table
    /// they did not run under).
    pub fn read(&self) -> (CurrentProfiles, Vec<RouteLatency>) {
        let shared = self.table.full();
        let routes = routes_of(&shared);
        (CurrentProfiles(shared), routes)
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
