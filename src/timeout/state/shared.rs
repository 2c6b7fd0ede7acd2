//! State shared by every call through one layer: the profile table, the settings
//! (instruments, span level, retries, propagation) and the table of routed paths
//! (`paths.rs`).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::attempts::{HedgeCap, HedgeRate, RecentLatency, RetryBudget, DEFAULT_REPLAY_LIMIT};
use crate::policy::inherit::Propagation;
use crate::policy::progress::ProgressRoutes;

use crate::config::ProfileSet;
use crate::observe::latency::LatencyStats;
use crate::observe::metrics::{BudgetReader, Instruments};
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
