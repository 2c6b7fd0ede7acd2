//! [`TimeoutProfileLayer`]: wraps any gRPC client service (a tonic `Channel`, or
//! anything under a generated client) in a [`TimeoutProfileService`].

use crate::policy::message_ids::MessageIds;
use crate::policy::progress::ProgressRule;
use crate::policy::route::RoutePattern;
use std::sync::Arc;

use opentelemetry::metrics::MeterProvider;
use tower_layer::Layer;

use super::service::TimeoutProfileService;
use super::state::observations::Observations;
use super::state::reload::{CurrentProfiles, ReloadHandle};
use super::state::shared::{LastPath, Reader, Settings, Shared, Table};
use crate::attempts::{HedgeCap, HedgeRate, RetryBudget, SpareSlot};
use crate::config::{ConfigError, ProfileSet};
use crate::observe::metrics::{Instruments, MetricFamily};
use crate::policy::inherit::Propagation;

/// Applies SW4-002 timeout profiles to every call of the service it wraps.
///
/// ```
/// use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
/// use tower::ServiceBuilder;
/// # async fn demo(channel: tonic::transport::Channel) {
/// let layer = TimeoutProfileLayer::new(ProfileSet::standard());
/// let service = ServiceBuilder::new().layer(layer).service(channel);
/// let client = sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient::new(service);
/// # let _ = client; }
/// ```
///
/// Metrics go to the global OpenTelemetry `MeterProvider` as it is when the layer is
/// built (install yours first), or to the one given with
/// [`TimeoutProfileLayer::with_meter_provider`]. Each RPC runs in a `sw4rm_rpc`
/// tracing span at DEBUG level (as tower-http's trace layer does), or at the level
/// given with [`TimeoutProfileLayer::with_span_level`]; clamp and timeout warnings are
/// emitted inside it.
#[derive(Clone, Debug)]
pub struct TimeoutProfileLayer {
    table: Table,
}

impl TimeoutProfileLayer {
    /// A layer over this profile table, recording to the global meter provider.
    pub fn new(profiles: ProfileSet) -> Self {
        TimeoutProfileLayer {
            table: Table::Fixed(Arc::new(Shared::new(
                profiles,
                Settings {
                    instruments: Some(Instruments::from_global()),
                    ..Settings::standard()
                },
            ))),
        }
    }

    /// A layer with the standard profiles only (no file, no environment).
    pub fn standard() -> Self {
        TimeoutProfileLayer::new(ProfileSet::standard())
    }

    /// A layer with the standard profiles and the global configuration
    /// (`SW4RM_CONFIG` / `sw4rm.toml` and `SW4RM_*` variables).
    pub fn from_global() -> Result<Self, ConfigError> {
        Ok(TimeoutProfileLayer::new(ProfileSet::from_global()?))
    }

    /// Records metrics to this meter provider instead of the global one (with the
    /// metric families already added).
    pub fn with_meter_provider(self, provider: &impl MeterProvider) -> Self {
        let instruments = Some(match &self.table.full().settings.instruments {
            Some(current) => current.on_provider(provider),
            None => Instruments::from_provider(provider),
        });
        self.with_settings(|s| s.instruments = instruments)
    }

    /// Also emits `family` (SW4-003's or OpenTelemetry's RPC metrics), beside the
    /// SW4-002 metrics, which stay as they are. No effect after
    /// [`without_metrics`](Self::without_metrics).
    ///
    /// ```
    /// use sw4rm_timeouts::{MetricFamily, TimeoutProfileLayer};
    /// let layer = TimeoutProfileLayer::standard().with_metric_family(MetricFamily::Sw4003);
    /// # drop(layer);
    /// ```
    pub fn with_metric_family(self, family: MetricFamily) -> Self {
        self.with_settings(|s| s.instruments = s.instruments.take().map(|i| i.with_family(family)))
    }

    /// Records no metrics at all (tracing events stay).
    pub fn without_metrics(self) -> Self {
        self.with_settings(|s| s.instruments = None)
    }

    /// The level of the per-RPC `sw4rm_rpc` span (default DEBUG).
    ///
    /// ```
    /// use sw4rm_timeouts::TimeoutProfileLayer;
    /// let layer = TimeoutProfileLayer::standard().with_span_level(tracing::Level::INFO);
    /// # drop(layer);
    /// ```
    pub fn with_span_level(self, level: tracing::Level) -> Self {
        self.with_settings(|s| s.span_level = level)
    }

    /// Writes each call's trace context into its metadata with `propagator`
    /// (feature `otel`): the context of the call's `sw4rm_rpc` span, or of the span the
    /// call was made in when that one is off, so that the server's span is its child.
    /// `TraceContextPropagator` (`opentelemetry_sdk::propagation`) writes W3C
    /// `traceparent` and `tracestate`; a `TextMapCompositePropagator` with
    /// `BaggagePropagator` adds baggage. The spans reach OpenTelemetry through
    /// `tracing-opentelemetry`'s layer. Retries and hedges carry the same context.
    ///
    /// ```
    /// use opentelemetry_sdk::propagation::TraceContextPropagator;
    /// use sw4rm_timeouts::TimeoutProfileLayer;
    /// let layer = TimeoutProfileLayer::standard().with_trace_propagator(TraceContextPropagator::new());
    /// # drop(layer);
    /// ```
    #[cfg(feature = "otel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
    pub fn with_trace_propagator(
        self,
        propagator: impl opentelemetry::propagation::TextMapPropagator + Send + Sync + 'static,
    ) -> Self {
        let propagator: crate::observe::trace_context::Propagator = Arc::new(propagator);
        self.with_settings(|s| s.propagator = Some(propagator.clone()))
    }

    /// Reads `agent_id` and `task_id` from the requests of the SW4RM RPCs that carry
    /// them (a heartbeat's, a task's) onto the call's span as `sw4rm.agent_id` and
    /// `sw4rm.task_id` (SW4-003 §2). Off by default: it reads each such request's
    /// first frame, and the heartbeat is the busiest call an agent makes. A call's
    /// `correlation_id` is read whether or not this is on, wherever the request has
    /// one (an envelope's, a log event's, a negotiation's, a delegation's cancel), and
    /// named in every log line the layer writes for the call. Each id is cut to 128
    /// bytes; one with a control character is not read.
    ///
    /// ```
    /// use sw4rm_timeouts::TimeoutProfileLayer;
    /// let layer = TimeoutProfileLayer::standard().with_agent_ids(true);
    /// # drop(layer);
    /// ```
    pub fn with_agent_ids(self, on: bool) -> Self {
        self.with_settings(|s| s.agent_ids = on)
    }

    /// Reads SW4-003's ids from the requests of `route` where `ids` says: for RPCs of
    /// your own, whose `correlation_id` the layer names in its log lines for each call
    /// and on its span, as for SW4RM's (`agent_id`, `task_id` with
    /// [`with_agent_ids`](Self::with_agent_ids)). They replace what the layer knows of
    /// a SW4RM RPC on that route (`MessageIds::new()` reads none); an exact route wins
    /// over a whole service. Each id is bounded as SW4RM's are.
    ///
    /// ```
    /// use sw4rm_timeouts::{route::RoutePattern, MessageIds, TimeoutProfileLayer};
    /// // message RunRequest { string task_id = 1; Meta meta = 2; }  message Meta { string correlation_id = 5; }
    /// let layer = TimeoutProfileLayer::standard().with_message_ids(
    ///     RoutePattern::parse("/acme.tools.Runner/Run")?,
    ///     MessageIds::new().correlation_id(&[2, 5]).task_id(&[1]),
    /// );
    /// # drop(layer);
    /// # Ok::<(), String>(())
    /// ```
    pub fn with_message_ids(self, route: RoutePattern, ids: MessageIds) -> Self {
        self.with_settings(|s| s.message_ids.set(route, ids))
    }

    /// What the call's span is called in OpenTelemetry (feature `otel`):
    /// `package.Service/Method` by OpenTelemetry's RPC conventions (the default), or
    /// SW4-003's `sw4rm.registry.register_agent` with [`crate::SpanName::Sw4003`];
    /// `rpc.method` keeps the other form on the span either way.
    ///
    /// ```
    /// use sw4rm_timeouts::{SpanName, TimeoutProfileLayer};
    /// let layer = TimeoutProfileLayer::standard().with_span_name(SpanName::Sw4003);
    /// # drop(layer);
    /// ```
    #[cfg(feature = "otel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
    pub fn with_span_name(self, name: crate::SpanName) -> Self {
        self.with_settings(|s| s.span_name = name)
    }

    /// How a deadline inherited from the inbound call a task serves is passed on to
    /// its outgoing calls (default: a 5 ms hop offset, no cap, refused below 1 ms;
    /// see [`crate::scope`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::{Propagation, TimeoutProfileLayer};
    /// let layer = TimeoutProfileLayer::standard()
    ///     .with_propagation(Propagation::default().with_hop_offset(Duration::from_millis(20)));
    /// # drop(layer);
    /// ```
    pub fn with_propagation(self, propagation: Propagation) -> Self {
        self.with_settings(|s| s.propagation = propagation)
    }

    /// The same table with settings changed by `f`.
    fn with_settings(&self, f: impl FnOnce(&mut Settings)) -> Self {
        let mut settings = self.table.full().settings.clone();
        f(&mut settings);
        TimeoutProfileLayer {
            table: self.table.variant(settings),
        }
    }

    /// This layer, and a handle that swaps its profile table while it serves calls:
    /// calls that start after a swap use the new table, calls in flight finish on the
    /// one they started with, and no call fails because of a swap (see
    /// [`ReloadHandle`]). Layers, services and clients made from the returned layer
    /// (with other settings too, and a [`Sw4rm`](crate::Sw4rm) connected with it) are
    /// swapped together. What each route observed and learned is kept across a swap.
    /// A call pays one atomic load for it; a layer that is not reloadable pays nothing.
    ///
    /// ```
    /// use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
    /// let (layer, handle) = TimeoutProfileLayer::standard().reloadable();
    /// let quiet = layer.clone().with_span_level(tracing::Level::TRACE); // swapped too
    /// handle.reload(ProfileSet::builder().without_global().default_timeout_ms("heartbeat", 3_000).build()?);
    /// assert_eq!(quiet.profiles().profile("heartbeat").unwrap().default_timeout_ms, 3_000);
    /// # Ok::<(), sw4rm_timeouts::ConfigError>(())
    /// ```
    pub fn reloadable(self) -> (Self, ReloadHandle) {
        let (table, family) = self.table.live();
        (TimeoutProfileLayer { table }, ReloadHandle { family })
    }

    /// Keeps a latency estimate per route (successful unary calls, and how many timed
    /// out) for the advisor: [`TimeoutProfileLayer::observations`] reads it. Off by
    /// default; off, it costs nothing per call. Each observed route takes 8 KiB, on its
    /// first call; recording takes no lock and allocates nothing. Layers made from this
    /// one with other settings (and a [`Sw4rm`](crate::Sw4rm) connected with it) share
    /// its observations.
    ///
    /// ```
    /// let layer = sw4rm_timeouts::TimeoutProfileLayer::standard().with_observations();
    /// assert!(layer.observations().is_some());
    /// assert!(sw4rm_timeouts::TimeoutProfileLayer::standard().observations().is_none());
    /// ```
    pub fn with_observations(self) -> Self {
        self.with_settings(|s| s.observe = true)
    }

    /// Ends a call that may be retried or hedged at once, in every state (waiting for
    /// headers, during a hedge delay, between retries, reading its response body),
    /// when its caller cancels it with tonic's `Request::cancellation_handle()`: the
    /// layer keeps tonic's request body and watches it, as tonic fails only that
    /// body. Off by default, as tonic's own cancel works only while a request is still
    /// being written, and a unary request is written at once. The cost: tonic's encode
    /// buffer (8 KiB) held for each such call in flight, where it is freed as soon as
    /// the request is sent otherwise (`benches/README.md`, "live heap per in-flight
    /// call"). To end a call you no longer want, drop its future, or cancel its scope
    /// (`OperationBudget::cancel`): both cost nothing.
    ///
    /// ```
    /// let layer = sw4rm_timeouts::TimeoutProfileLayer::standard().with_tonic_cancel_watch();
    /// # drop(layer);
    /// ```
    pub fn with_tonic_cancel_watch(self) -> Self {
        self.with_settings(|s| s.watch_tonic_cancel = true)
    }

    /// Puts an [`crate::Answered`] on every answer's extensions: the timeout it ran
    /// under and where that came from, the attempts, the time to the answer and what
    /// was left (so a caller can log "answered in 1.2 s of 5 s (heartbeat, standard)"
    /// without a tracer). Off by default: it costs the answer an allocation.
    ///
    /// ```
    /// let layer = sw4rm_timeouts::TimeoutProfileLayer::standard().with_answer_deadlines();
    /// # drop(layer);
    /// ```
    pub fn with_answer_deadlines(self) -> Self {
        self.with_settings(|s| s.answered = true)
    }

    /// What this layer has observed, if built [`with_observations`](Self::with_observations).
    pub fn observations(&self) -> Option<Observations> {
        self.table.full().observed.as_ref().map(|_| Observations {
            table: self.table.clone(),
        })
    }

    /// Sends every call once, whatever the retry policies say.
    ///
    /// ```
    /// let layer = sw4rm_timeouts::TimeoutProfileLayer::standard().without_retries();
    /// # drop(layer);
    /// ```
    pub fn without_retries(self) -> Self {
        self.with_settings(|s| s.retry.on = false)
    }

    /// Sends no hedges, whatever the hedging policies say (hedging is off in every
    /// standard profile; a profile or a call turns it on). A call whose profile
    /// hedges is then retried as its retry policy says.
    ///
    /// ```
    /// let layer = sw4rm_timeouts::TimeoutProfileLayer::standard().without_hedging();
    /// # drop(layer);
    /// ```
    pub fn without_hedging(self) -> Self {
        self.with_settings(|s| s.hedging = false)
    }

    /// Caps the hedges the layer sends: in any window, a burst plus a share of the
    /// hedged calls (default: 10 plus 10 % of the calls of any one second). A layer
    /// with few calls hedges as its policies say; a step change that makes every call
    /// of a loaded layer slow hedges no more than that while the learned delay catches
    /// up. A hedge the cap refuses is not sent; the call goes on with
    /// its attempts in flight (logged at DEBUG with reason `hedge_cap`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::{HedgeCap, TimeoutProfileLayer};
    /// let layer = TimeoutProfileLayer::standard().with_hedge_cap(HedgeCap::share(0.05));
    /// # drop(layer);
    /// ```
    pub fn with_hedge_cap(self, cap: HedgeCap) -> Self {
        self.with_settings(|s| s.hedge_cap = Some(Arc::new(HedgeRate::new(cap))))
    }

    /// Hedges as the hedging policies say, with no cap on the share of calls that
    /// hedge (the retry budget still applies).
    pub fn without_hedge_cap(self) -> Self {
        self.with_settings(|s| s.hedge_cap = None)
    }

    /// Shares this retry budget among the layer's calls, retries and hedges alike
    /// (default: a bucket of 10 tokens, ratio 0.1, per layer). Give the same budget to several layers to
    /// share it among them.
    pub fn with_retry_budget(self, budget: RetryBudget) -> Self {
        self.with_settings(|s| s.retry.budget = Some(budget))
    }

    /// Retries without a budget: only each call's policy limits them.
    pub fn without_retry_budget(self) -> Self {
        self.with_settings(|s| s.retry.budget = None)
    }

    /// The largest request body kept for replaying a call (default 64 KiB). A
    /// larger request, or one still streaming when the call starts (client
    /// streaming), is sent once.
    pub fn with_replay_limit(self, bytes: usize) -> Self {
        self.with_settings(|s| s.retry.replay_limit = bytes)
    }

    /// Reads the messages of the streams on `route` with `rule`: only those it calls
    /// progress restart a stream's idle limit (`streaming.idle_timeout_ms`), and its
    /// markers appear in a timeout's details. Without a rule every message is
    /// progress; a [`crate::CallProgress`] on a call replaces the route's rule.
    ///
    /// ```
    /// use sw4rm_timeouts::{route::RoutePattern, ProgressRule, TimeoutProfileLayer};
    /// use sw4rm_timeouts::proto::sw4rm::tool::ToolFrame;
    /// let layer = TimeoutProfileLayer::standard().with_progress(
    ///     RoutePattern::parse("/sw4rm.tool.ToolService/CallStream")?,
    ///     ProgressRule::of::<ToolFrame>(),
    /// );
    /// # drop(layer);
    /// # Ok::<(), String>(())
    /// ```
    pub fn with_progress(self, route: RoutePattern, rule: ProgressRule) -> Self {
        self.with_settings(|s| s.progress.set(route, rule))
    }

    /// Names `endpoint` in the status of a call that cannot connect to it.
    pub(crate) fn naming_endpoint(self, endpoint: String) -> Self {
        let endpoint: std::sync::Arc<str> = endpoint.into();
        self.with_settings(|s| {
            s.instruments = s.instruments.take().map(|i| i.with_target(&endpoint));
            #[cfg(feature = "otel")]
            {
                s.server = crate::observe::span_name::ServerName::of(&endpoint);
            }
            s.endpoint = Some(endpoint);
        })
    }

    /// Asks `heard` what the endpoint's server said first when a call cannot connect.
    pub(crate) fn hearing(self, heard: std::sync::Arc<crate::wire::first_words::Heard>) -> Self {
        self.with_settings(|s| s.heard = Some(heard))
    }

    /// Reads from `clock` how long each call waited for a connection.
    pub(crate) fn clocking(self, clock: crate::wire::connect_clock::ConnectClock) -> Self {
        self.with_settings(|s| s.connect_clock = Some(clock.clone()))
    }

    /// The profile table in use now (after a reload, the new one).
    pub fn profiles(&self) -> CurrentProfiles {
        CurrentProfiles(self.table.full())
    }
}

impl<S> Layer<S> for TimeoutProfileLayer {
    type Service = TimeoutProfileService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TimeoutProfileService::from_table(inner, self.table.clone())
    }
}

impl<S> TimeoutProfileService<S> {
    pub(crate) fn from_table(inner: S, table: Table) -> Self {
        TimeoutProfileService {
            inner,
            spare: SpareSlot::default(),
            table: Reader::new(table),
            last_path: LastPath::default(),
        }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably. Attempts after a call's first go through the
    /// service as it is after this borrow, for calls made after it.
    pub fn get_mut(&mut self) -> &mut S {
        self.spare = SpareSlot::default();
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The profile table in use now (after a reload, the new one).
    pub fn profiles(&self) -> CurrentProfiles {
        CurrentProfiles(self.table.full())
    }

    /// The layer's propagation settings now, for a handoff's envelope.
    pub(crate) fn propagation(&self) -> Propagation {
        self.table.full().settings.propagation
    }

    /// The layer's instruments now (`None`: metrics off), for what is counted beside
    /// a call (a delegation's cancel).
    pub(crate) fn instruments(&self) -> Option<crate::observe::metrics::Instruments> {
        self.table.full().settings.instruments.clone()
    }
}
