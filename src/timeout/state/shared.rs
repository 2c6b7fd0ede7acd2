//! State shared by every call through one layer: the profile table, the settings
//! (instruments, span level, retries, propagation) and the table of routed paths
//! (`paths.rs`); and [`Table`], where a call finds it (fixed, or live).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use arc_swap::ArcSwap;

use crate::attempts::{HedgeCap, HedgeRate, RecentLatency, RetryBudget, DEFAULT_REPLAY_LIMIT};
use crate::config::ProfileSet;
use crate::observe::latency::LatencyStats;
use crate::observe::metrics::{BudgetReader, Instruments};
use crate::policy::inherit::Propagation;
use crate::policy::progress::ProgressRoutes;
use crate::timeout::routes::{PathTable, PerPath};

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
    /// The endpoint the service under the layer connects to, when known (a `Sw4rm`
    /// built from a URL or an `Endpoint`): named when a call cannot connect.
    pub(crate) endpoint: Option<Arc<str>>,
    /// What the endpoint's server said first, when the client sniffs it (a lazily
    /// connected `Sw4rm`): a TLS server behind `http://` is named as such.
    pub(crate) heard: Option<Arc<crate::wire::first_words::Heard>>,
    /// Write a `BudgetEnvelope` into handoffs made inside a scope.
    pub(crate) envelopes: bool,
    /// Keep a latency estimate per route (`with_observations`).
    pub(crate) observe: bool,
    /// Hedge calls whose policy says so (`without_hedging` turns it off).
    pub(crate) hedging: bool,
    /// Which messages of a stream are progress, by route (`with_progress`).
    pub(crate) progress: ProgressRoutes,
    /// Send `CancelDelegation` for the handoffs made in a scope when it is cancelled,
    /// with this grace (`with_cancel_cascade`).
    pub(crate) cascade: Option<std::time::Duration>,
    /// The cap on the share of calls that hedge, counted for the whole layer (its
    /// variants and reloads share the count).
    pub(crate) hedge_cap: Option<Arc<HedgeRate>>,
}

impl Settings {
    /// A new layer's settings: no instruments, spans at DEBUG, retries with their
    /// budget, envelopes stamped, hedging allowed under the default cap, nothing
    /// observed, no cascade.
    pub(crate) fn standard() -> Self {
        Settings {
            instruments: None,
            span_level: tracing::Level::DEBUG,
            retry: RetrySettings::default(),
            propagation: Propagation::default(),
            endpoint: None,
            heard: None,
            envelopes: true,
            observe: false,
            hedging: true,
            progress: ProgressRoutes::default(),
            cascade: None,
            hedge_cap: Some(Arc::new(HedgeRate::new(HedgeCap::default()))),
        }
    }
}

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
}

impl Shared {
    pub(crate) fn new(profiles: ProfileSet, settings: Settings) -> Self {
        if let Some(instruments) = &settings.instruments {
            instruments.configure(&profiles, || budget_reader(&settings));
        }
        let paths = Arc::new(PathTable::new(&profiles));
        let observed = settings
            .observe
            .then(|| Arc::new(PerPath::new(paths.len())));
        let learned = Arc::new(PerPath::new(paths.len()));
        Shared {
            profiles,
            settings,
            transport_warned: AtomicBool::new(false),
            paths,
            observed,
            learned,
        }
    }

    /// The same layer over another profile table (a reload): the same settings, a
    /// path table routed by `profiles`, and what was observed and learned of each path
    /// routed so far kept.
    pub(crate) fn reloaded(&self, profiles: ProfileSet) -> Self {
        let next = Shared::new(profiles, self.settings.clone());
        for (from, path) in self.paths.seated_paths() {
            let Some(to) = next.paths.slot_of(&next.profiles, path) else {
                continue;
            };
            if let (Some(old), Some(new)) = (&self.observed, &next.observed) {
                new.carry(old, (from, to));
            }
            next.learned.carry(&self.learned, (from, to));
        }
        next
    }

    /// The same layer with other settings: the same table of routed paths, and the
    /// same observations while they stay on (so a handle taken from any variant sees
    /// the calls of the one in use).
    pub(crate) fn variant(&self, settings: Settings) -> Self {
        let observed = match (&self.observed, settings.observe) {
            (_, false) => None,
            (Some(observed), true) => Some(observed.clone()),
            (None, true) => Some(Arc::new(PerPath::new(self.paths.len()))),
        };
        if let Some(instruments) = &settings.instruments {
            instruments.configure(&self.profiles, || budget_reader(&settings));
        }
        Shared {
            profiles: self.profiles.clone(),
            settings,
            transport_warned: AtomicBool::new(false),
            paths: self.paths.clone(),
            observed,
            learned: self.learned.clone(),
        }
    }
}

/// How the retry-budget gauges read the layer's budget.
fn budget_reader(settings: &Settings) -> Option<BudgetReader> {
    let budget = settings.retry.budget.clone()?;
    Some(Arc::new(move || {
        (budget.tokens(), f64::from(budget.max_tokens()))
    }))
}

// Where a layer finds its state for each call: fixed when the layer is built, or
// live — swapped by a [`crate::timeout::ReloadHandle`] while calls run. A call reads it once,
// when it starts, and keeps what it read to the end, so a call in flight finishes on
// the table it started with. Live, a service keeps the state it last read with the
// cell's version, and a call reads one atomic (the version) unless a reload changed
// it: no lock, no allocation, no reference count.
/// One variant of a reloadable layer: its state, swapped whole on every reload.
#[derive(Debug)]
pub(crate) struct Cell {
    pub(crate) current: ArcSwap<Shared>,
    /// Bumped after every store: a service reads `current` again only when it moved.
    version: AtomicU64,
    /// Every variant of the layer, for the handle to swap them all.
    pub(crate) family: Arc<Family>,
}

impl Cell {
    fn new(shared: Arc<Shared>, family: Arc<Family>) -> Self {
        Cell {
            current: ArcSwap::new(shared),
            version: AtomicU64::new(0),
            family,
        }
    }

    /// Makes `shared` the state for calls that start from now on.
    pub(crate) fn store(&self, shared: Arc<Shared>) {
        self.current.store(shared);
        // After the store: a service that sees the new version reads the new state.
        self.version.fetch_add(1, Ordering::Release);
    }
}

/// The variants of one reloadable layer (the layer as built, and each made from it
/// with other settings), swapped together.
#[derive(Debug, Default)]
pub(crate) struct Family {
    pub(crate) cells: Mutex<Vec<Weak<Cell>>>,
    /// Tables applied by the handle.
    pub(crate) applied: AtomicU64,
    /// Tables the handle refused (invalid).
    pub(crate) refused: AtomicU64,
    /// The last refusal, whole (the WARN carries it too).
    pub(crate) last_refusal: Mutex<Option<crate::config::ConfigError>>,
}

impl Family {
    /// The first variant still in use (the layer as built, unless it is gone).
    pub(crate) fn first(&self) -> Option<Arc<Cell>> {
        self.lock().iter().find_map(Weak::upgrade)
    }

    /// The cells, locked: variants cannot join while a reload swaps them.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<Weak<Cell>>> {
        match self.cells.lock() {
            Ok(cells) => cells,
            // A panic elsewhere while the list was held leaves it usable.
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// A layer's state: fixed, or live.
#[derive(Clone, Debug)]
pub(crate) enum Table {
    Fixed(Arc<Shared>),
    Live(Arc<Cell>),
}

/// A service's read of its layer's state: fixed, or live with the state it last read
/// and the cell's version then.
#[derive(Clone, Debug)]
pub(crate) enum Reader {
    Fixed(Arc<Shared>),
    Live {
        cell: Arc<Cell>,
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

    /// The same table with other settings. A live table's variant joins its family:
    /// the handle swaps it too.
    pub(crate) fn variant(&self, settings: Settings) -> Table {
        match self {
            Table::Fixed(shared) => Table::Fixed(Arc::new(shared.variant(settings))),
            Table::Live(cell) => {
                let family = cell.family.clone();
                let mut cells = family.lock();
                // Under the family's lock: a reload cannot slip between reading the
                // table and joining the family.
                let shared = cell.current.load().variant(settings);
                let joined = Arc::new(Cell::new(Arc::new(shared), family.clone()));
                cells.push(Arc::downgrade(&joined));
                drop(cells);
                Table::Live(joined)
            }
        }
    }

    /// This table made live, in a family of its own (a live table stays as it is).
    pub(crate) fn live(&self) -> (Table, Arc<Family>) {
        match self {
            Table::Live(cell) => (self.clone(), cell.family.clone()),
            Table::Fixed(shared) => {
                let family = Arc::new(Family::default());
                let cell = Arc::new(Cell::new(shared.clone(), family.clone()));
                family.lock().push(Arc::downgrade(&cell));
                (Table::Live(cell), family)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

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
        observed.record(&at, Duration::from_millis(7), false, true);
        let window = old.learned.window(&at).unwrap();

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
        assert!(Arc::ptr_eq(&new.learned.window(&moved).unwrap(), &window));
    }
}
