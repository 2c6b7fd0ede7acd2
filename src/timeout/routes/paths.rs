//! What the layer knows about each path it has routed: the route, and what metrics,
//! logs and timeout details say about it (service, method, metric attributes). Built
//! once per path, then only read: a call costs one hash, one load and one string
//! comparison, whatever kind of route the path has, and keeps an index into the
//! table, not a copy or a reference count.
//!
//! The table is a fixed array of write-once slots: the exact routes are seated when
//! the layer is built, other paths (whole-service routes, the fallback) on first
//! sight. It is only a cache: a path that finds no slot is routed by the profile
//! table on every call, with labels of its own.

use std::hash::{BuildHasher, BuildHasherDefault};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::config::ProfileSet;
use crate::observe::metrics::{attributes, Attributes, Instruments};
use crate::policy::route::{Lookup, Matched, PathHasher, ProfileId, Routed};

/// Slots for paths outside the exact routes. Bounded so that a client sending
/// arbitrary paths cannot grow memory forever.
const OTHER_PATHS: usize = 1_024;

/// Slots tried from a path's own before giving up (linear probing).
const PROBES: usize = 8;

/// What metrics and details say about one path.
#[derive(Debug)]
pub(crate) struct Labels {
    pub(crate) service: Arc<str>,
    pub(crate) method: Arc<str>,
    /// The metric attributes, sharing the strings above.
    pub(crate) attrs: Attributes,
    /// Whether the route's RPC is idempotent (what a timeout's effect is read from).
    pub(crate) idempotent: bool,
}

impl Labels {
    fn of(profiles: &ProfileSet, route: &Lookup<'_>) -> Self {
        let profile = &profiles.get(route.profile).profile.name;
        let (service, method): (Arc<str>, Arc<str>) = (route.service.into(), route.method.into());
        Labels {
            attrs: attributes(profile, service.clone(), method.clone()),
            service,
            method,
            idempotent: route.idempotent,
        }
    }
}

/// Where one call's labels are.
#[derive(Clone, Debug)]
pub(crate) enum LabelsRef {
    /// The slot with this index in the table.
    Seen(u32),
    /// Built for this call alone (the path found no slot).
    Owned(Arc<Labels>),
}

/// A routed path.
#[derive(Debug)]
struct Seen {
    path: Box<str>,
    routed: Routed,
    labels: Labels,
    /// A call has come this way (its counters were set at 0 then).
    called: AtomicBool,
}

impl Seen {
    /// The route's first call gives its counters at 0: one relaxed load a call after.
    #[inline]
    fn called(&self, instruments: &Instruments) {
        if !self.called.load(Ordering::Relaxed) && !self.called.swap(true, Ordering::Relaxed) {
            instruments.route_seen(&self.labels.attrs);
        }
    }
}

/// The route and the labels of a path.
#[derive(Debug)]
pub(crate) struct Found<'a> {
    pub(crate) route: Lookup<'a>,
    pub(crate) labels: LabelsRef,
}

/// Every path one layer has routed.
#[derive(Debug)]
pub(crate) struct PathTable {
    /// A power of two long.
    slots: Box<[OnceLock<Box<Seen>>]>,
}

impl PathTable {
    /// A table with the exact routes of `profiles` seated.
    pub(crate) fn new(profiles: &ProfileSet) -> Self {
        let len = (profiles.routes.exact.len() + OTHER_PATHS).next_power_of_two();
        let table = PathTable {
            slots: (0..len).map(|_| OnceLock::new()).collect(),
        };
        for (path, _) in &profiles.routes.exact {
            table.find(profiles, path, None);
        }
        table
    }

    /// Routes `path` (the table first, the profile table on a path's first sight) and
    /// finds its labels; `None` when it is not a gRPC path. A fallback path is logged,
    /// at debug level, whenever its labels are built.
    ///
    /// On a path's first sight, `instruments` (when the layer records metrics) get the
    /// route's counters at 0, so that a panel's `rate()` reads 0, not "no data",
    /// until the first retry, hedge, timeout or cancel.
    pub(crate) fn find<'a>(
        &self,
        profiles: &ProfileSet,
        path: &'a str,
        instruments: Option<&Instruments>,
    ) -> Option<Found<'a>> {
        let mask = self.slots.len().wrapping_sub(1);
        let home = BuildHasherDefault::<PathHasher>::default().hash_one(path) as usize;
        for probe in 0..PROBES {
            let i = home.wrapping_add(probe) & mask;
            let Some(slot) = self.slots.get(i) else { break };
            let seen = match slot.get() {
                Some(seen) => seen,
                None => match seat(slot, profiles, path)? {
                    Some(seen) => seen,
                    None => break,
                },
            };
            if *seen.path == *path {
                // The slot's index fits (the table is far shorter than `u32::MAX`),
                // and its route lies back onto the path it was made from.
                if let (Ok(at), Some(route)) = (u32::try_from(i), seen.routed.on(path)) {
                    if let Some(instruments) = instruments {
                        seen.called(instruments);
                    }
                    let labels = LabelsRef::Seen(at);
                    return Some(Found { route, labels });
                }
                break;
            }
        }
        let route = profiles.lookup(path)?;
        let labels = LabelsRef::Owned(Arc::new(labels(profiles, &route, path)));
        Some(Found { route, labels })
    }

    /// How many slots the table has (indices of [`LabelsRef::Seen`] are below it).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Every seated path: its slot's index, its labels and its profile.
    pub(crate) fn seated(&self) -> impl Iterator<Item = (usize, &Labels, ProfileId)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, slot)| {
            let seen = slot.get()?;
            Some((i, &seen.labels, seen.routed.profile()))
        })
    }

    /// Every seated path: its slot's index and the path.
    pub(crate) fn seated_paths(&self) -> impl Iterator<Item = (usize, &str)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, slot)| Some((i, &*slot.get()?.path)))
    }

    /// Where `path` sits in this table, seating it if it can be (`None`: no slot).
    pub(crate) fn slot_of(&self, profiles: &ProfileSet, path: &str) -> Option<usize> {
        match self.find(profiles, path, None)?.labels {
            LabelsRef::Seen(i) => Some(i as usize),
            LabelsRef::Owned(_) => None,
        }
    }

    /// The labels `at` points to.
    pub(crate) fn get<'a>(&'a self, at: &'a LabelsRef) -> &'a Labels {
        match at {
            LabelsRef::Owned(labels) => labels,
            LabelsRef::Seen(i) => match self.slots.get(*i as usize).and_then(OnceLock::get) {
                Some(seen) => &seen.labels,
                // Cannot happen: indices come only from `find` on this table, whose
                // slots are never emptied.
                None => empty_labels(),
            },
        }
    }
}

/// A path's first sight at an empty slot: routes it and takes the slot, unless another
/// call took it first (for this path or another). `None`: not a gRPC path;
/// `Some(None)`: a path that cannot be kept.
#[cold]
#[inline(never)]
fn seat<'t>(
    slot: &'t OnceLock<Box<Seen>>,
    profiles: &ProfileSet,
    path: &str,
) -> Option<Option<&'t Seen>> {
    let route = profiles.lookup(path)?;
    let Some(routed) = route.routed(path) else {
        return Some(None);
    };
    let seen = slot.get_or_init(|| {
        Box::new(Seen {
            path: path.into(),
            routed,
            labels: labels(profiles, &route, path),
            called: AtomicBool::new(false),
        })
    });
    Some(Some(seen))
}

/// Builds the labels of a routed path, logging a fallback path.
fn labels(profiles: &ProfileSet, route: &Lookup<'_>, path: &str) -> Labels {
    if route.matched == Matched::Fallback {
        tracing::debug!(
            path,
            profile = %profiles.get(route.profile).profile.name,
            "SW4RM path outside the routing table: using the fallback profile"
        );
    }
    Labels::of(profiles, route)
}

#[cold]
fn empty_labels() -> &'static Labels {
    static EMPTY: OnceLock<Labels> = OnceLock::new();
    EMPTY.get_or_init(|| Labels {
        service: "".into(),
        method: "".into(),
        attrs: attributes("", "".into(), "".into()),
        idempotent: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profiles() -> ProfileSet {
        ProfileSet::builder()
            .without_global()
            .route("/acme.Batch/*", "workflow_status")
            .route("/acme.Batch/Stop", "heartbeat")
            .build()
            .expect("profiles")
    }

    /// Each kind of path, twice (first sight, then from the table): the same route
    /// as the profile table's, and its own service and method.
    #[test]
    fn every_kind_of_path_routes_as_the_profile_table_does() {
        let profiles = profiles();
        let table = PathTable::new(&profiles);
        let rows = [
            ("/sw4rm.registry.RegistryService/Heartbeat", "heartbeat"),
            ("/acme.Batch/Run", "workflow_status"),
            ("/acme.Batch/Stop", "heartbeat"),
            ("/unknown.Service/Method", "universal"),
            ("/sw4rm.tool.ToolService/CallStream", "tool_call"),
        ];
        for (path, profile) in rows {
            let want = profiles.lookup(path).expect("a gRPC path");
            for sight in ["first", "again"] {
                let found = table.find(&profiles, path, None).expect("a gRPC path");
                let got = &found.route;
                assert_eq!(got.matched, want.matched, "{path} {sight}");
                assert_eq!(
                    &*profiles.get(got.profile).profile.name,
                    profile,
                    "{path} {sight}"
                );
                assert_eq!(
                    (got.service, got.method, got.streaming, got.idempotent),
                    (want.service, want.method, want.streaming, want.idempotent),
                    "{path} {sight}"
                );
                assert_eq!(got.message_field, want.message_field, "{path} {sight}");
                let labels = table.get(&found.labels);
                assert_eq!(
                    (&*labels.service, &*labels.method),
                    (want.service, want.method),
                    "{path} {sight}"
                );
                assert!(matches!(found.labels, LabelsRef::Seen(_)), "{path} {sight}");
            }
        }
    }

    #[test]
    fn a_path_seen_again_finds_the_same_slot_and_others_their_own() {
        let profiles = profiles();
        let table = PathTable::new(&profiles);
        let slot = |path| match table.find(&profiles, path, None).map(|f| f.labels) {
            Some(LabelsRef::Seen(i)) => i,
            other => panic!("{path}: {other:?}"),
        };
        assert_eq!(slot("/acme.Batch/Run"), slot("/acme.Batch/Run"));
        assert_ne!(slot("/acme.Batch/Run"), slot("/acme.Batch/Go"));
    }

    #[test]
    fn a_path_that_is_not_a_grpc_path_is_refused_and_not_kept() {
        let profiles = profiles();
        let table = PathTable::new(&profiles);
        for bad in ["/", "/NoMethod", "nope", "/a/b/c", "//x"] {
            assert!(table.find(&profiles, bad, None).is_none(), "{bad}");
        }
        let seated = table.slots.iter().filter(|s| s.get().is_some()).count();
        assert_eq!(seated, profiles.routes.exact.len());
    }

    #[test]
    fn beyond_the_table_paths_are_routed_and_labelled_per_call() {
        let profiles = profiles();
        let table = PathTable::new(&profiles);
        let paths: Vec<String> = (0..table.slots.len() + 64)
            .map(|i| format!("/acme.Batch/M{i}"))
            .collect();
        let mut owned = 0;
        for path in &paths {
            let found = table.find(&profiles, path, None).expect("a gRPC path");
            owned += usize::from(matches!(found.labels, LabelsRef::Owned(_)));
            let method = path.rsplit('/').next().unwrap_or_default();
            assert_eq!(found.route.method, method);
            assert_eq!(&*table.get(&found.labels).method, method);
            assert_eq!(found.route.matched, Matched::Service);
        }
        // At most one path per slot; every other one is still routed and labelled.
        assert!(owned >= 64, "{owned} paths without a slot");
    }
}
