//! State shared by every call through one layer: the profile table, the
//! instruments and the prebuilt metric attributes. Immutable after construction.

use std::collections::HashSet;
use std::sync::Mutex;

use opentelemetry::KeyValue;

use crate::metrics::{attributes, Instruments};
use crate::profile_set::ProfileSet;

/// Unknown paths remembered for "logged once" (bounded so it cannot grow forever).
const MAX_REMEMBERED_UNKNOWN_PATHS: usize = 1_024;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) profiles: ProfileSet,
    pub(crate) instruments: Option<Instruments>,
    /// Aligned with `profiles.routes.exact`.
    pub(crate) route_attrs: Vec<[KeyValue; 3]>,
    unknown_paths: Mutex<HashSet<Box<str>>>,
}

impl Shared {
    pub(crate) fn new(profiles: ProfileSet, instruments: Option<Instruments>) -> Self {
        let route_attrs = profiles
            .routes
            .exact
            .iter()
            .map(|(path, route)| {
                let (service, method) = crate::route::split_path(path).unwrap_or(("", ""));
                attributes(&profiles.get(route.profile).profile.name, service, method)
            })
            .collect();
        Shared {
            profiles,
            instruments,
            route_attrs,
            unknown_paths: Mutex::new(HashSet::new()),
        }
    }

    /// Logs a path outside the routing table at debug level, once per path. Only
    /// paths that use the fallback get here, and only when debug logging is on.
    pub(crate) fn note_unknown_path(&self, path: &str, profile: &str) {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let first = match self.unknown_paths.lock() {
            Ok(mut seen) if seen.len() < MAX_REMEMBERED_UNKNOWN_PATHS => seen.insert(path.into()),
            Ok(seen) => !seen.contains(path),
            Err(_) => true,
        };
        if first {
            tracing::debug!(
                path,
                profile,
                "SW4RM path outside the routing table: using the fallback profile"
            );
        }
    }
}
