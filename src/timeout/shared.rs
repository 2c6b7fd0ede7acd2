//! State shared by every call through one layer: the profile table, the instruments,
//! the span level and the per-path labels (service, method, metric attributes),
//! built once per path and read without locks or allocation afterwards.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::budget::RetryBudget;
use super::retry::DEFAULT_REPLAY_LIMIT;
use crate::policy::inherit::Propagation;

use arc_swap::ArcSwap;

use crate::config::ProfileSet;
use crate::metrics::{attributes, Attributes, Instruments};
use crate::policy::route::{Lookup, Matched, PathHasher};

/// Paths outside the exact routes whose labels are kept (bounded so a client sending
/// arbitrary paths cannot grow memory forever; beyond it, labels are built per call).
const MAX_CACHED_PATHS: usize = 1_024;

/// What metrics and details say about one path.
#[derive(Debug)]
pub(crate) struct Labels {
    pub(crate) service: Arc<str>,
    pub(crate) method: Arc<str>,
    /// The metric attributes, sharing the strings above.
    pub(crate) attrs: Attributes,
}

impl Labels {
    fn new(profile: &str, service: &str, method: &str) -> Self {
        let (service, method): (Arc<str>, Arc<str>) = (service.into(), method.into());
        Labels {
            attrs: attributes(profile, service.clone(), method.clone()),
            service,
            method,
        }
    }
}

type PathMap = HashMap<Box<str>, Arc<Labels>, BuildHasherDefault<PathHasher>>;

/// How a layer retries (SW4-002 §5.2).
#[derive(Clone, Debug)]
pub(crate) struct RetrySettings {
    /// Retries at all (each call still needs a policy with more than one attempt).
    pub(crate) on: bool,
    /// Shared by every call of the layer.
    pub(crate) budget: Option<RetryBudget>,
    /// The largest request body kept for replay.
    pub(crate) replay_limit: usize,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            on: true,
            budget: Some(RetryBudget::default()),
            replay_limit: DEFAULT_REPLAY_LIMIT,
        }
    }
}

/// What a layer is configured with besides its profile table.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) instruments: Option<Instruments>,
    pub(crate) span_level: tracing::Level,
    pub(crate) retry: RetrySettings,
    pub(crate) propagation: Propagation,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) profiles: ProfileSet,
    /// Metrics, span level, retries, propagation: kept whole, so that a variant of the
    /// layer starts from a copy.
    pub(crate) settings: Settings,
    /// Whether a transport timeout shorter than the profiles was warned about.
    pub(crate) transport_warned: AtomicBool,
    /// Aligned with the exact routes of `profiles`.
    exact: Vec<Arc<Labels>>,
    /// Service-route and fallback paths seen so far.
    others: ArcSwap<PathMap>,
}

impl Shared {
    pub(crate) fn new(profiles: ProfileSet, settings: Settings) -> Self {
        let exact = profiles
            .routes
            .exact
            .iter()
            .map(|(path, route)| {
                let (service, method) = crate::policy::route::split_path(path).unwrap_or(("", ""));
                let profile = &profiles.get(route.profile).profile.name;
                Arc::new(Labels::new(profile, service, method))
            })
            .collect();
        Shared {
            profiles,
            settings,
            transport_warned: AtomicBool::new(false),
            exact,
            others: ArcSwap::from_pointee(PathMap::default()),
        }
    }

    /// The labels of a routed path. Paths outside the exact routes are built on
    /// first sight (and a fallback path is logged then, at debug level).
    pub(crate) fn labels(&self, route: &Lookup<'_>, path: &str) -> Arc<Labels> {
        if let Matched::Exact(i) = route.matched {
            if let Some(labels) = self.exact.get(i) {
                return labels.clone();
            }
        }
        if let Some(labels) = self.others.load().get(path) {
            return labels.clone();
        }
        let profile = &self.profiles.get(route.profile).profile.name;
        if route.matched == Matched::Fallback {
            tracing::debug!(
                path,
                profile = %profile,
                "SW4RM path outside the routing table: using the fallback profile"
            );
        }
        let labels = Arc::new(Labels::new(profile, route.service, route.method));
        if self.others.load().len() < MAX_CACHED_PATHS {
            self.others.rcu(|map| {
                let mut map = PathMap::clone(map);
                map.entry(path.into()).or_insert_with(|| labels.clone());
                map
            });
        }
        labels
    }
}
