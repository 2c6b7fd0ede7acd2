//! What metrics, logs and timeout details say about one path (service, method, metric
//! attributes), built once per path and then only read: a call keeps an index into
//! the layer's tables, not a copy or a reference count.
//!
//! Exact routes have their labels built with the layer. Other paths (whole-service
//! routes, the fallback) get theirs on first sight, in a fixed table of write-once
//! slots allocated with the first such path: a hit is one hash, one load and one
//! string comparison, with no lock and no atomic read-modify-write.

use std::hash::{BuildHasher, BuildHasherDefault};
use std::sync::{Arc, OnceLock};

use crate::config::ProfileSet;
use crate::metrics::{attributes, Attributes};
use crate::policy::route::{split_path, Lookup, Matched, PathHasher};

/// Slots for paths outside the exact routes (a power of two). Bounded so that a client
/// sending arbitrary paths cannot grow memory forever; a path that finds no slot gets
/// labels of its own, built per call.
const SLOTS: usize = 1_024;

/// Slots tried from a path's own before giving up (linear probing).
const PROBES: usize = 8;

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

/// Where one call's labels are.
#[derive(Clone, Debug)]
pub(crate) enum LabelsRef {
    /// The labels of the exact route with this index.
    Exact(u32),
    /// The slot with this index in the table of other paths.
    Seen(u32),
    /// Built for this call alone (the table of other paths had no room).
    Owned(Arc<Labels>),
}

/// A path seen outside the exact routes, with its labels.
#[derive(Debug)]
struct Seen {
    path: Box<str>,
    labels: Labels,
}

type Slots = Box<[OnceLock<Box<Seen>>]>;

/// The labels of every path one layer has routed.
#[derive(Debug)]
pub(crate) struct LabelTable {
    /// Aligned with the exact routes of the profile table.
    exact: Box<[Labels]>,
    /// Other paths, allocated at the first one.
    seen: OnceLock<Slots>,
}

impl LabelTable {
    pub(crate) fn new(profiles: &ProfileSet) -> Self {
        let exact = profiles
            .routes
            .exact
            .iter()
            .map(|(path, route)| {
                let (service, method) = split_path(path).unwrap_or(("", ""));
                let profile = &profiles.get(route.profile).profile.name;
                Labels::new(profile, service, method)
            })
            .collect();
        LabelTable {
            exact,
            seen: OnceLock::new(),
        }
    }

    /// Finds (or, on a path's first sight, builds) the labels of a routed path. A
    /// fallback path is logged, at debug level, whenever its labels are built.
    pub(crate) fn find(&self, profiles: &ProfileSet, route: &Lookup<'_>, path: &str) -> LabelsRef {
        if let Matched::Exact(i) = route.matched {
            if let Ok(i) = u32::try_from(i) {
                if (i as usize) < self.exact.len() {
                    return LabelsRef::Exact(i);
                }
            }
        }
        let build = || {
            let profile = &profiles.get(route.profile).profile.name;
            if route.matched == Matched::Fallback {
                tracing::debug!(
                    path,
                    profile = %profile,
                    "SW4RM path outside the routing table: using the fallback profile"
                );
            }
            Labels::new(profile, route.service, route.method)
        };
        let slots = self
            .seen
            .get_or_init(|| (0..SLOTS).map(|_| OnceLock::new()).collect());
        let home = BuildHasherDefault::<PathHasher>::default().hash_one(path) as usize;
        for probe in 0..PROBES {
            let i = (home.wrapping_add(probe)) & (SLOTS - 1);
            let Some(slot) = slots.get(i) else { break };
            let seen = slot.get_or_init(|| {
                Box::new(Seen {
                    path: path.into(),
                    labels: build(),
                })
            });
            if *seen.path == *path {
                // `i < SLOTS`, which fits.
                return LabelsRef::Seen(i as u32);
            }
        }
        LabelsRef::Owned(Arc::new(build()))
    }

    /// The labels `at` points to.
    pub(crate) fn get<'a>(&'a self, at: &'a LabelsRef) -> &'a Labels {
        let found = match at {
            LabelsRef::Exact(i) => self.exact.get(*i as usize),
            LabelsRef::Seen(i) => self
                .seen
                .get()
                .and_then(|slots| slots.get(*i as usize))
                .and_then(OnceLock::get)
                .map(|seen| &seen.labels),
            LabelsRef::Owned(labels) => return labels,
        };
        // Every index was handed out by `find` on this table.
        found.unwrap_or_else(|| unreachable_labels())
    }
}

/// Labels for an index that `find` never handed out (cannot happen: indices come
/// only from the same table, whose entries are never removed).
#[cold]
fn unreachable_labels() -> &'static Labels {
    static EMPTY: OnceLock<Labels> = OnceLock::new();
    EMPTY.get_or_init(|| Labels::new("", "", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> (ProfileSet, LabelTable) {
        let profiles = ProfileSet::builder()
            .without_global()
            .route("/acme.Batch/*", "heartbeat")
            .build()
            .expect("profiles");
        let table = LabelTable::new(&profiles);
        (profiles, table)
    }

    fn find<'a>(profiles: &'a ProfileSet, table: &LabelTable, path: &'a str) -> LabelsRef {
        let route = profiles.lookup(path).expect("a gRPC path");
        table.find(profiles, &route, path)
    }

    #[test]
    fn each_kind_of_path_finds_its_own_service_and_method() {
        let (profiles, table) = table();
        let rows = [
            (
                "/sw4rm.registry.RegistryService/Heartbeat",
                "sw4rm.registry.RegistryService",
                "Heartbeat",
            ),
            ("/acme.Batch/Run", "acme.Batch", "Run"),
            ("/acme.Batch/Stop", "acme.Batch", "Stop"),
            ("/unknown.Service/Method", "unknown.Service", "Method"),
        ];
        for (path, service, method) in rows {
            let at = find(&profiles, &table, path);
            let labels = table.get(&at);
            assert_eq!(
                (&*labels.service, &*labels.method),
                (service, method),
                "{path}"
            );
        }
        assert!(matches!(
            find(&profiles, &table, rows[0].0),
            LabelsRef::Exact(_)
        ));
    }

    #[test]
    fn a_path_seen_again_finds_the_same_slot() {
        let (profiles, table) = table();
        let first = find(&profiles, &table, "/acme.Batch/Run");
        let again = find(&profiles, &table, "/acme.Batch/Run");
        let other = find(&profiles, &table, "/acme.Batch/Stop");
        match (first, again, other) {
            (LabelsRef::Seen(a), LabelsRef::Seen(b), LabelsRef::Seen(c)) => {
                assert_eq!(a, b);
                assert_ne!(a, c);
            }
            other => panic!("expected slots, got {other:?}"),
        }
    }

    #[test]
    fn beyond_the_table_labels_are_built_per_call() {
        let (profiles, table) = table();
        let paths: Vec<String> = (0..SLOTS + 64)
            .map(|i| format!("/acme.Batch/M{i}"))
            .collect();
        let mut owned = 0;
        for path in &paths {
            let at = find(&profiles, &table, path);
            owned += usize::from(matches!(at, LabelsRef::Owned(_)));
            let method = path.rsplit('/').next().unwrap_or_default();
            assert_eq!(&*table.get(&at).method, method);
        }
        // At most SLOTS paths hold a slot; every other one still gets its labels.
        assert!(owned >= 64, "{owned} paths without a slot");
    }
}
