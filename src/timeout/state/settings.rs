//! A layer's settings (instruments, span level, retries, propagation, hedging, the
//! progress rules), and the layer's state made from them: new, over a reloaded
//! profile table, or as a variant with other settings (and a table's variant, or
//! the table made live).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::per_path::PerPath;
use super::reload::{Family, LiveCell};
use super::shared::{PathTable, Shared, Table};
use crate::attempts::{HedgeCap, HedgeRate, RetryBudget, DEFAULT_REPLAY_LIMIT};
use crate::config::ProfileSet;
use crate::observe::metrics::{BudgetReader, Instruments};
use crate::policy::inherit::Propagation;
use crate::policy::message_ids::DeclaredIds;
use crate::policy::progress::{ProgressRoutes, ProgressRule};
use crate::policy::route::RoutePattern;

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
    /// How long a call waited for a connection, when the client marks it (a `Sw4rm`
    /// built from a URL or an `Endpoint`).
    pub(crate) connect_clock: Option<crate::wire::connect_clock::ConnectClock>,
    /// Keep a latency estimate per route (`with_observations`).
    pub(crate) observe: bool,
    /// Hedge calls whose policy says so (`without_hedging` turns it off).
    pub(crate) hedging: bool,
    /// Whether a request body taken whole is kept to watch for tonic's cancel
    /// ([`crate::TimeoutProfileLayer::with_tonic_cancel_watch`]).
    pub(crate) watch_tonic_cancel: bool,
    /// Which messages of a stream are progress, by route (`with_progress`).
    pub(crate) progress: ProgressRoutes,
    /// The cap on the share of calls that hedge, counted for the whole layer (its
    /// variants and reloads share the count).
    pub(crate) hedge_cap: Option<Arc<HedgeRate>>,
    /// Put an [`crate::Answered`] on every answer
    /// ([`crate::TimeoutProfileLayer::with_answer_deadlines`]).
    pub(crate) answered: bool,
    /// Read `agent_id` and `task_id` from requests for the call's span
    /// ([`crate::TimeoutProfileLayer::with_agent_ids`]).
    pub(crate) agent_ids: bool,
    /// Where the requests of routes the layer was told of carry SW4-003's ids
    /// ([`crate::TimeoutProfileLayer::with_message_ids`]).
    pub(crate) message_ids: DeclaredIds,
    /// The propagator that writes the call's trace context into its metadata
    /// ([`crate::TimeoutProfileLayer::with_trace_propagator`]).
    #[cfg(feature = "otel")]
    pub(crate) propagator: Option<crate::observe::trace_context::Propagator>,
    /// The OpenTelemetry name of the call's span
    /// ([`crate::TimeoutProfileLayer::with_span_name`]).
    #[cfg(feature = "otel")]
    pub(crate) span_name: crate::SpanName,
    /// The server the span names (`server.address`, `server.port`), from the
    /// endpoint when it is known.
    #[cfg(feature = "otel")]
    pub(crate) server: Option<crate::observe::span_name::ServerName>,
}

impl Settings {
    /// A new layer's settings: no instruments, spans at DEBUG, retries with their
    /// budget, hedging allowed under the default cap, nothing observed.
    pub(crate) fn standard() -> Self {
        Settings {
            instruments: None,
            span_level: tracing::Level::DEBUG,
            retry: RetrySettings::default(),
            propagation: Propagation::default(),
            endpoint: None,
            heard: None,
            connect_clock: None,
            observe: false,
            hedging: true,
            watch_tonic_cancel: false,
            progress: standard_progress(),
            hedge_cap: Some(Arc::new(HedgeRate::new(HedgeCap::default()))),
            answered: false,
            agent_ids: false,
            message_ids: DeclaredIds::default(),
            #[cfg(feature = "otel")]
            propagator: None,
            #[cfg(feature = "otel")]
            span_name: crate::SpanName::Rpc,
            #[cfg(feature = "otel")]
            server: None,
        }
    }
}

/// The crate's standard progress rules: `ToolService/CallStream` reads its
/// `ToolFrame`s (progress unless empty and not final, marker `frame_no`), so that a
/// cut tool stream says where to resume. Any rule the layer or a call sets wins.
fn standard_progress() -> ProgressRoutes {
    ProgressRoutes::default().with_standard(
        RoutePattern::Exact("/sw4rm.tool.ToolService/CallStream".into()),
        ProgressRule::raw(crate::wire::tool_frame::heard),
    )
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
        let paths_len = paths.len();
        Shared {
            profiles,
            settings,
            transport_warned: AtomicBool::new(false),
            paths,
            observed,
            learned,
            plans: PerPath::new(paths_len),
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
            plans: PerPath::new(self.paths.len()),
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

impl Table {
    /// The same table with other settings. A live table's variant joins its family:
    /// the handle swaps it too.
    pub(crate) fn variant(&self, settings: Settings) -> Table {
        match self {
            Table::Fixed(shared) => Table::Fixed(Arc::new(shared.variant(settings))),
            Table::Live(cell) => {
                let family = cell.family.clone();
                let mut cells = family.members();
                // Under the family's lock: a reload cannot slip between reading the
                // table and joining the family.
                let shared = cell.current.load().variant(settings);
                let joined = Arc::new(LiveCell::new(Arc::new(shared), family.clone()));
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
                let cell = Arc::new(LiveCell::new(shared.clone(), family.clone()));
                family.members().push(Arc::downgrade(&cell));
                (Table::Live(cell), family)
            }
        }
    }
}
