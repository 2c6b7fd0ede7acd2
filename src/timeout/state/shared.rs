//! State shared by every call through one layer: the profile table, the settings
//! (`settings.rs`: how the state is made, reloaded and varied), the table of routed
//! paths ([`PathTable`]) and [`Table`], where a call finds it (fixed, or live).
//!
//! **The path table** is what the layer knows about each path it has routed: the
//! route, and what metrics, logs and timeout details say about it (service, method,
//! metric attributes). Built once per path, then only read: a call costs one hash (none
//! when its handle's last call had the same path), one load and one string
//! comparison, whatever kind of route the path has, and keeps an index into the table,
//! not a copy or a reference count.
//!
//! The table is a fixed array of write-once slots: the exact routes are seated when
//! the layer is built, other paths (whole-service routes, the fallback) on first
//! sight. It is only a cache: a path that finds no slot is routed by the profile
//! table on every call, with labels of its own.

use std::hash::{BuildHasher, BuildHasherDefault};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use super::per_path::PerPath;
use super::reload::LiveCell;
pub(crate) use super::settings::Settings;
use crate::attempts::RecentLatency;
use crate::config::ProfileSet;
use crate::observe::latency::LatencyStats;
use crate::observe::metrics::{attributes, Attributes, Instruments};
use crate::policy::message_ids::IdFields;
use crate::policy::route::{Lookup, Matched, PathHasher, ProfileId, Routed};
use crate::timeout::plan::RoutePlan;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) profiles: ProfileSet,
    /// Metrics, span level, retries, propagation: kept whole, so that a variant of the
    /// layer starts from a copy.
    pub(crate) settings: Settings,
    /// Whether a transport timeout shorter than the profiles was warned about.
    pub(crate) transport_warned: AtomicBool,
    /// The route and labels of every path routed so far (shared by the variants of
    /// a layer: they route with the same profile table).
    pub(crate) paths: Arc<PathTable>,
    /// Per-route latency estimates, when observed, by the path table's indices (so
    /// shared with the table).
    pub(crate) observed: Option<Arc<PerPath<LatencyStats>>>,
    /// Each hedged route's recent latency, by the path table's indices.
    pub(crate) learned: Arc<PerPath<RecentLatency>>,
    /// Each route's plan under this state's profiles and settings, made on the first
    /// call it decides, by the path table's indices (a reload or a variant starts
    /// afresh: both change what a plan reads).
    pub(crate) plans: PerPath<RoutePlan>,
}

// Where a layer finds its state for each call: fixed when the layer is built, or
// live — swapped by a [`crate::timeout::ReloadHandle`] while calls run. A call reads it once,
// when it starts, and keeps what it read to the end, so a call in flight finishes on
// the table it started with. Live, a service keeps the state it last read with the
// cell's version, and a call reads one atomic (the version) unless a reload changed
// it: no lock, no allocation, no reference count.
/// A layer's state: fixed, or live.
#[derive(Clone, Debug)]
pub(crate) enum Table {
    Fixed(Arc<Shared>),
    Live(Arc<LiveCell>),
}

/// A service's read of its layer's state: fixed, or live with the state it last read
/// and the cell's version then.
#[derive(Clone, Debug)]
pub(crate) enum Reader {
    Fixed(Arc<Shared>),
    Live {
        cell: Arc<LiveCell>,
        version: u64,
        shared: Arc<Shared>,
    },
}

impl Reader {
    pub(crate) fn new(table: Table) -> Self {
        match table {
            Table::Fixed(shared) => Reader::Fixed(shared),
            Table::Live(cell) => {
                let version = cell.version.load(Ordering::Acquire);
                let shared = cell.current.load_full();
                Reader::Live {
                    cell,
                    version,
                    shared,
                }
            }
        }
    }

    /// The state for a call starting now: live, one atomic load unless a reload
    /// happened since the last call.
    #[inline]
    pub(crate) fn current(&mut self) -> &Arc<Shared> {
        match self {
            Reader::Fixed(shared) => shared,
            Reader::Live {
                cell,
                version,
                shared,
            } => {
                let now = cell.version.load(Ordering::Acquire);
                if now != *version {
                    *shared = cell.current.load_full();
                    *version = now;
                }
                shared
            }
        }
    }

    /// The state now, kept (for handles read later: the profiles).
    pub(crate) fn full(&self) -> Arc<Shared> {
        match self {
            Reader::Fixed(shared) => shared.clone(),
            Reader::Live { cell, .. } => cell.current.load_full(),
        }
    }
}

impl Table {
    /// The state now, kept (for handles read later: observations, the profiles).
    pub(crate) fn full(&self) -> Arc<Shared> {
        match self {
            Table::Fixed(shared) => shared.clone(),
            Table::Live(cell) => cell.current.load_full(),
        }
    }
}

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
    /// The route's profile's name (what an answer's [`crate::Answered`] names).
    pub(crate) profile: Arc<str>,
    /// The metric attributes, sharing the strings above.
    pub(crate) attrs: Attributes,
    /// Whether the route's RPC is idempotent (what a timeout's effect is read from).
    pub(crate) idempotent: bool,
}

impl Labels {
    fn of(profiles: &ProfileSet, route: &Lookup<'_>) -> Self {
        let profile = &profiles.by_id(route.profile).profile.name;
        let (service, method): (Arc<str>, Arc<str>) = (route.service.into(), route.method.into());
        Labels {
            attrs: attributes(profile, service.clone(), method.clone()),
            service,
            method,
            profile: Arc::from(&**profile),
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

impl LabelsRef {
    /// The path's slot in the table (`None`: it found none), where what is kept per
    /// path is kept too ([`PerPath`]).
    #[inline]
    pub(crate) fn slot(&self) -> Option<usize> {
        match self {
            LabelsRef::Seen(i) => Some(*i as usize),
            LabelsRef::Owned(_) => None,
        }
    }
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

/// Where a handle's last call found its path in the table ([`PathTable::find_after`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LastPath {
    /// The address of the path's bytes (compared, never read through), and its slot.
    addr: usize,
    slot: u32,
}

/// The path found in slot `at`, seated with `seen`: its route under the names its
/// labels split the path into when it was seated, its first call counted.
#[inline(always)]
fn hit<'a>(seen: &'a Seen, at: u32, instruments: Option<&Instruments>) -> Found<'a> {
    let route = seen.routed.named(&seen.labels.service, &seen.labels.method);
    if let Some(instruments) = instruments {
        seen.called(instruments);
    }
    Found {
        route,
        labels: LabelsRef::Seen(at),
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
        &'a self,
        profiles: &ProfileSet,
        path: &'a str,
        instruments: Option<&Instruments>,
    ) -> Option<Found<'a>> {
        self.probe(profiles, path, instruments, &mut LastPath::default())
    }

    /// [`PathTable::find`] trying first the slot of the handle's `last` call when the
    /// path has its address (a generated client's paths are static), then leaving
    /// `last` at this one's. Only a guess: the slot's path is compared before use.
    #[inline(always)]
    pub(crate) fn find_after<'a>(
        &'a self,
        profiles: &ProfileSet,
        path: &'a str,
        instruments: Option<&Instruments>,
        last: &mut LastPath,
    ) -> Option<Found<'a>> {
        if last.addr == path.as_ptr() as usize {
            if let Some(seen) = self.slots.get(last.slot as usize).and_then(OnceLock::get) {
                if *seen.path == *path {
                    return Some(hit(seen, last.slot, instruments));
                }
            }
        }
        self.probe(profiles, path, instruments, last)
    }

    /// A path's slot by the path's hash, from which `last` is left pointing at it.
    #[inline(never)]
    fn probe<'a>(
        &'a self,
        profiles: &ProfileSet,
        path: &'a str,
        instruments: Option<&Instruments>,
        last: &mut LastPath,
    ) -> Option<Found<'a>> {
        #[cfg(test)]
        tests::PROBES.with(|n| n.set(n.get() + 1));
        let mask = self.slots.len().wrapping_sub(1);
        // The hash's high bits: a multiplication carries bits upward only, so its high
        // bits depend on the whole path and its low bits on a few of the state's (a
        // table of 10,000 routes alike but for a number crowded into runs of slots,
        // probed past each other: +12 % a call where it is now +1.5 %).
        let hash = BuildHasherDefault::<PathHasher>::default().hash_one(path);
        let bits = self.slots.len().trailing_zeros();
        let home = hash.checked_shr(u64::BITS - bits).unwrap_or(0) as usize;
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
                // The slot's index fits (the table is far shorter than `u32::MAX`).
                let Ok(at) = u32::try_from(i) else { break };
                let found = hit(seen, at, instruments);
                *last = LastPath {
                    addr: path.as_ptr() as usize,
                    slot: at,
                };
                return Some(found);
            }
        }
        let route = route_of(profiles, path)?;
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

/// The route of `path`, with the SW4-003 ids its requests carry (named by the RPC,
/// whatever profile it runs under): what a call's path is found with.
fn route_of<'a>(profiles: &ProfileSet, path: &'a str) -> Option<Lookup<'a>> {
    let mut route = profiles.lookup(path)?;
    route.ids = IdFields::of(route.service, route.method);
    Some(route)
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
    let route = route_of(profiles, path)?;
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
            profile = %profiles.by_id(route.profile).profile.name,
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
        profile: "".into(),
        attrs: attributes("", "".into(), "".into()),
        idempotent: false,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    std::thread_local! {
        /// Lookups by hash on this thread (a test's), to tell them from the hint's.
        pub(super) static PROBES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn settings() -> Settings {
        Settings {
            observe: true,
            hedge_cap: None,
            ..Settings::standard()
        }
    }

    #[test]
    fn a_reload_keeps_what_each_path_observed_and_learned() {
        const PATH: &str = "/sw4rm.registry.RegistryService/Heartbeat";
        let old = Shared::new(ProfileSet::standard(), settings());
        let at = old.paths.find(&old.profiles, PATH, None).unwrap().labels;
        let observed = old.observed.as_ref().unwrap();
        observed.record(at.slot(), Duration::from_millis(7), false, true);
        let window = old.learned.window(at.slot()).unwrap();

        // A table that routes more paths: the slots move, the estimates follow.
        let wider = ProfileSet::builder()
            .without_global()
            .route("/acme.Batch/Run", "tool_call")
            .build()
            .unwrap();
        let new = old.reloaded(wider);
        let moved = new.paths.find(&new.profiles, PATH, None).unwrap().labels;
        let routes = super::super::observations::routes_of(&new);
        let heartbeat = routes.iter().find(|r| r.method == "Heartbeat").unwrap();
        assert_eq!(heartbeat.latency.successes(), 1);
        assert!(Arc::ptr_eq(
            &new.learned.window(moved.slot()).unwrap(),
            &window
        ));
    }

    // The path table.

    fn profiles() -> ProfileSet {
        ProfileSet::builder()
            .without_global()
            .route("/acme.Batch/*", "workflow_status")
            .route("/acme.Batch/Stop", "heartbeat")
            .route("/sw4rm.router.RouterService/SendMessage", "workflow_status")
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
            // A route of the caller's own keeps the RPC's ids.
            ("/sw4rm.router.RouterService/SendMessage", "workflow_status"),
        ];
        for (path, profile) in rows {
            let want = profiles.lookup(path).expect("a gRPC path");
            for sight in ["first", "again"] {
                let found = table.find(&profiles, path, None).expect("a gRPC path");
                let got = &found.route;
                assert_eq!(got.matched, want.matched, "{path} {sight}");
                assert_eq!(
                    &*profiles.by_id(got.profile).profile.name,
                    profile,
                    "{path} {sight}"
                );
                assert_eq!(
                    (got.service, got.method, got.streaming, got.idempotent),
                    (want.service, want.method, want.streaming, want.idempotent),
                    "{path} {sight}"
                );
                assert_eq!(got.message_field, want.message_field, "{path} {sight}");
                let ids = IdFields::of(want.service, want.method);
                assert_eq!(got.ids, ids, "{path} {sight}");
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

    /// What a lookup says of a path, to compare two lookups of it.
    fn said(table: &PathTable, found: Option<Found<'_>>) -> Option<(Matched, ProfileId, String)> {
        let found = found?;
        let labels = table.get(&found.labels);
        let named = format!(
            "{} {} {}",
            found.route.service, found.route.method, labels.method
        );
        Some((found.route.matched, found.route.profile, named))
    }

    proptest::proptest! {
        /// A handle's last path is only a guess: whatever came before (another path
        /// at the same address, another table, a path that is no gRPC path), a call
        /// finds what a lookup without it finds, in the same slot.
        #[test]
        fn a_handles_last_path_never_changes_what_a_call_finds(
            steps in proptest::collection::vec((0usize..8, proptest::bool::ANY, proptest::bool::ANY), 1..40)
        ) {
            // Some of the same length: a guess is told from the path by its bytes.
            const PATHS: [&str; 8] = [
                "/sw4rm.registry.RegistryService/Heartbeat",
                "/acme.Batch/Run",
                "/acme.Batch/Ran",
                "/acme.Batch/Stop",
                "/acme.Other/Run",
                "/unknown.Service/Method",
                "/nope",
                "/sw4rm.registry.RegistryService/Register",
            ];
            let narrow = profiles();
            let wide = ProfileSet::builder()
                .without_global()
                .route("/acme.Other/Run", "tool_call")
                .route("/acme.Batch/Run", "heartbeat")
                .build()
                .unwrap();
            let tables = [(&narrow, PathTable::new(&narrow)), (&wide, PathTable::new(&wide))];
            // One buffer, written over: every path it holds has the same address.
            let mut buffer = String::with_capacity(64);
            let mut last = LastPath::default();
            for (path, reused, second) in steps {
                let (profiles, table) = &tables[usize::from(second)];
                let owned;
                let path: &str = if reused {
                    buffer.clear();
                    buffer.push_str(PATHS[path]);
                    &buffer
                } else {
                    owned = PATHS[path].to_owned();
                    &owned
                };
                let after = table.find_after(profiles, path, None, &mut last);
                let slot = after.as_ref().and_then(|f| f.labels.slot());
                let want = table.find(profiles, path, None);
                proptest::prop_assert_eq!(slot, want.as_ref().and_then(|f| f.labels.slot()));
                proptest::prop_assert_eq!(said(table, after), said(table, want), "{}", path);
            }
        }
    }

    /// A path found is remembered where it was found, and a call on the same path
    /// (its same bytes) is found there without its hash.
    #[test]
    fn a_handle_remembers_where_its_last_path_was() {
        let profiles = profiles();
        let table = PathTable::new(&profiles);
        const PATH: &str = "/acme.Batch/Stop";
        let mut last = LastPath::default();
        let found = table.find_after(&profiles, PATH, None, &mut last).unwrap();
        let slot = found.labels.slot().unwrap();
        assert_eq!(
            (last.addr, last.slot as usize),
            (PATH.as_ptr() as usize, slot)
        );
        // The remembered slot holds the path: the call finds it there, with no hash.
        let probed = PROBES.with(std::cell::Cell::get);
        let again = table.find_after(&profiles, PATH, None, &mut last).unwrap();
        assert_eq!(again.labels.slot(), Some(slot));
        assert_eq!(
            PROBES.with(std::cell::Cell::get),
            probed,
            "the call hashed its path"
        );
        // The same bytes at another address are looked up by their hash.
        let elsewhere = PATH.to_owned();
        let other = table
            .find_after(&profiles, &elsewhere, None, &mut last)
            .unwrap();
        assert_eq!(other.labels.slot(), Some(slot));
        assert_eq!(PROBES.with(std::cell::Cell::get), probed + 1);
    }
}
