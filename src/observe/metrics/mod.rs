//! SW4-002 §6 metrics through OpenTelemetry: `sw4rm_rpc_timeout_total` (counter) and
//! `sw4rm_rpc_duration_ms` (histogram), both with the attributes `profile`,
//! `service` (full gRPC name) and `method`; and, opt-in per layer, the families other
//! dashboards expect ([`MetricFamily`]).

use std::sync::Arc;
use std::time::Duration;

use opentelemetry::metrics::{Counter, Histogram, Meter, MeterProvider};
use opentelemetry::KeyValue;
use tonic::Code;

use crate::wire::status::code_name;

mod buckets;
mod configured;
#[cfg(feature = "prometheus")]
mod exposition;
mod grpc;
mod made;
mod sw4_003;

use buckets::seconds_boundaries;
pub use buckets::DURATION_BOUNDARIES_MS;
pub(crate) use configured::BudgetReader;
use configured::ConfiguredTimeouts;
pub use configured::CONFIGURED_TIMEOUT_MS;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
#[allow(deprecated)]
pub use exposition::{
    prometheus_exporter, prometheus_provider, render, Registry, SdkMeterProvider, TEXT_FORMAT,
};
pub(crate) use grpc::CallTally;
use grpc::{AttemptInstruments, RetryInstruments};
use sw4_003::Sw4003;

/// Name of the timeout counter.
pub const TIMEOUT_TOTAL: &str = "sw4rm_rpc_timeout_total";
/// Name of the duration histogram (milliseconds).
pub const DURATION_MS: &str = "sw4rm_rpc_duration_ms";
/// Name of the retry counter: attempts sent after the first, beside the two SW4-002
/// metrics (the duration keeps one point per call, the timeout counter counts a call
/// once, however many attempts it made).
pub const RETRIES_TOTAL: &str = "sw4rm_rpc_retries_total";
/// Name of the hedge counter: hedged attempts sent after the first (gRPC A6 hedging).
pub const HEDGES_TOTAL: &str = "sw4rm_rpc_hedges_total";
/// Name of the counter of hedged calls whose answer came from a hedge, not the first
/// attempt.
pub const HEDGE_WINS_TOTAL: &str = "sw4rm_rpc_hedge_wins_total";
/// Name of the counter of calls cancelled by their scope (the caller of the inbound
/// call went away, a budget or a delegation was cancelled), with a `cause` attribute
/// beside the three of every SW4RM metric. Kept apart from the timeout counter, which
/// counts timeouts only.
pub const CANCELLED_TOTAL: &str = "sw4rm_rpc_cancelled_total";
/// Name of the counter of reloads (`ReloadHandle`), with `outcome` = `applied` or
/// `refused` (an invalid table, which left the one in use in place).
pub const RELOADS_TOTAL: &str = "sw4rm_config_reloads_total";
/// The instrumentation scope name.
pub const METER_NAME: &str = "sw4rm-timeouts";

/// Name of OpenTelemetry's RPC client duration histogram (seconds).
pub(crate) const RPC_CLIENT_CALL_DURATION: &str = "rpc.client.call.duration";

/// A family of metrics a layer can emit in addition to SW4-002's
/// (`TimeoutProfileLayer::with_metric_family`). Each records one point per call, with
/// the call's final gRPC status by its canonical name (`OK`, `DEADLINE_EXCEEDED`, …;
/// a call the caller dropped counts as `CANCELLED`).
///
/// ```
/// use sw4rm_timeouts::{MetricFamily, TimeoutProfileLayer};
/// let layer = TimeoutProfileLayer::standard()
///     .with_metric_family(MetricFamily::Sw4003)
///     .with_metric_family(MetricFamily::OpenTelemetryRpc);
/// # drop(layer);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MetricFamily {
    /// SW4RM's observability extension (SW4-003): `sw4rm_rpc_duration_seconds`
    /// (histogram; `profile`, `service`, `method`), `sw4rm_rpc_requests_total`
    /// (counter; `profile`, `service`, `method`, `status`) and `sw4rm_rpc_in_flight`
    /// (up-down counter; `service`): the calls executing now, each counted once from
    /// its first attempt until it ends, however it ends (an answer, a timeout, a
    /// cancel, a drop; hedges and retries inside it count once; a call refused before
    /// it was sent never counts).
    Sw4003,
    /// OpenTelemetry's RPC semantic conventions: `rpc.client.call.duration` (histogram,
    /// seconds; `rpc.system.name` = `grpc`, `rpc.method` = `package.Service/Method`,
    /// `rpc.response.status_code`, and `error.type` = the status for every status but
    /// `OK`). Through `prometheus_provider` (feature `prometheus`) it is exposed as
    /// `rpc_client_call_duration`.
    OpenTelemetryRpc,
    /// gRPC's per-attempt metrics (gRFC A66): `grpc.client.attempt.started` (counter)
    /// and `grpc.client.attempt.duration` (histogram, seconds, A66's latency buckets),
    /// with `grpc.method`, `grpc.target` and, on the duration, `grpc.status`. An
    /// attempt that lost to a hedge, or was still in flight when the call ended
    /// otherwise, ends `CANCELLED`. Exposed by `prometheus_provider` as
    /// `grpc_client_attempt_started` and `grpc_client_attempt_duration`.
    GrpcAttempts,
    /// gRPC's retry metrics (gRFC A96), one point per call that made any:
    /// `grpc.client.call.retries` and `grpc.client.call.hedges` (buckets 1–5),
    /// `grpc.client.call.transparent_retries` (1–5, 10) and
    /// `grpc.client.call.retry_delay` (seconds), with `grpc.method` and `grpc.target`.
    /// A call with none of one kind records nothing for it. With them, gRFC A121's
    /// `grpc.client.call.delay.duration` (seconds, `grpc.delay_type` = `connecting`):
    /// the time a call of a `Sw4rm` waited while its channel had no connection (TCP
    /// not up), recorded for calls that waited.
    GrpcRetries,
    /// The configured timeouts, `sw4rm_rpc_configured_timeout_ms` (gauge; `profile`,
    /// `bound` = `default`, `min` or `max`): the threshold a dashboard draws beside
    /// the durations, updated by every reload.
    ConfiguredTimeouts,
}

/// The attributes of one path, built once per path.
#[derive(Debug)]
pub(crate) struct Attributes {
    /// `profile`, `service`, `method`.
    sw4: [KeyValue; 3],
    /// OpenTelemetry's `rpc.method`.
    rpc_method: KeyValue,
    /// gRPC's `grpc.method` (the same string).
    grpc_method: KeyValue,
}

/// The attribute sets of one path (shared strings: copying one allocates nothing).
pub(crate) fn attributes(profile: &str, service: Arc<str>, method: Arc<str>) -> Attributes {
    let rpc_method = Arc::<str>::from(format!("{service}/{method}"));
    Attributes {
        sw4: [
            KeyValue::new("profile", Arc::<str>::from(profile)),
            KeyValue::new("service", service),
            KeyValue::new("method", method),
        ],
        grpc_method: KeyValue::new("grpc.method", rpc_method.clone()),
        rpc_method: KeyValue::new("rpc.method", rpc_method),
    }
}

/// The instruments.
#[derive(Clone, Debug)]
pub(crate) struct Instruments {
    meter: Meter,
    timeouts: Counter<u64>,
    duration: Histogram<f64>,
    retries: Counter<u64>,
    hedges: Counter<u64>,
    hedge_wins: Counter<u64>,
    cancelled: Counter<u64>,
    reloads: Counter<u64>,
    sw4_003: Option<Sw4003>,
    rpc_duration: Option<Histogram<f64>>,
    attempts: Option<AttemptInstruments>,
    grpc_retries: Option<RetryInstruments>,
    configured: Option<ConfiguredTimeouts>,
    /// gRPC's `grpc.target`: the endpoint, when the layer knows it.
    target: KeyValue,
}

impl Instruments {
    pub(crate) fn from_provider(provider: &impl MeterProvider) -> Self {
        Instruments::from_meter(provider.meter(METER_NAME))
    }

    pub(crate) fn from_global() -> Self {
        Instruments::from_meter(opentelemetry::global::meter(METER_NAME))
    }

    /// The same instruments on another provider, with the same families.
    pub(crate) fn on_provider(&self, provider: &impl MeterProvider) -> Self {
        let mut moved = Instruments::from_provider(provider);
        moved.target = self.target.clone();
        for (on, family) in [
            (self.sw4_003.is_some(), MetricFamily::Sw4003),
            (self.rpc_duration.is_some(), MetricFamily::OpenTelemetryRpc),
            (self.attempts.is_some(), MetricFamily::GrpcAttempts),
            (self.grpc_retries.is_some(), MetricFamily::GrpcRetries),
            (self.configured.is_some(), MetricFamily::ConfiguredTimeouts),
        ] {
            if on {
                moved = moved.with_family(family);
            }
        }
        moved
    }

    /// The same instruments, naming `endpoint` as `grpc.target`.
    pub(crate) fn with_target(mut self, endpoint: &Arc<str>) -> Self {
        self.target = KeyValue::new("grpc.target", endpoint.clone());
        self
    }

    /// These instruments and the ones of `family`.
    pub(crate) fn with_family(mut self, family: MetricFamily) -> Self {
        match family {
            MetricFamily::Sw4003 => {
                self.sw4_003 = Some(Sw4003::new(&self.meter));
            }
            MetricFamily::OpenTelemetryRpc => {
                self.rpc_duration = Some(
                    self.meter
                        .f64_histogram(RPC_CLIENT_CALL_DURATION)
                        .with_description(
                            "Measures the duration of outbound remote procedure calls.",
                        )
                        .with_unit("s")
                        .with_boundaries(seconds_boundaries())
                        .build(),
                );
            }
            MetricFamily::GrpcAttempts => {
                self.attempts = Some(AttemptInstruments::new(&self.meter));
            }
            MetricFamily::GrpcRetries => {
                self.grpc_retries = Some(RetryInstruments::new(&self.meter));
            }
            MetricFamily::ConfiguredTimeouts => {
                self.configured = Some(ConfiguredTimeouts::new(&self.meter));
            }
        }
        self
    }

    /// Whether calls keep a [`CallTally`] (a gRPC family is on, or SW4-003's, whose
    /// in-flight gauge counts a call while its tally lives).
    #[inline]
    pub(crate) fn wants_tally(&self) -> bool {
        self.attempts.is_some() || self.grpc_retries.is_some() || self.sw4_003.is_some()
    }

    /// `grpc.method` and `grpc.target` of a call on the path with `attrs`.
    fn grpc_call(&self, attrs: &Attributes) -> [KeyValue; 2] {
        [attrs.grpc_method.clone(), self.target.clone()]
    }

    /// An attempt that ended before the call did (a retry follows it).
    pub(crate) fn attempt_ended(&self, took: Duration, status: Code, attrs: &Attributes) {
        if let Some(attempts) = &self.attempts {
            attempts.ended(took, status, &self.grpc_call(attrs));
        }
    }

    /// A call's tally when it ends with `code`: its attempts still in flight, its
    /// count of attempts and retries.
    /// Whether a call's wait for a connection is recorded (gRFC A121's call delay,
    /// with the `GrpcRetries` family).
    pub(crate) fn wants_connect_wait(&self) -> bool {
        self.grpc_retries.is_some()
    }

    pub(crate) fn tally_ended(&self, tally: &mut CallTally, code: Code, attrs: &Attributes) {
        if let Some(sw4_003) = &self.sw4_003 {
            sw4_003.in_flight(-1, attrs);
        }
        if self.attempts.is_none() && self.grpc_retries.is_none() {
            return;
        }
        let call = self.grpc_call(attrs);
        if let Some(attempts) = &self.attempts {
            attempts.started(u64::from(tally.started), &call);
            for (took, status) in tally.ended(code, tokio::time::Instant::now()) {
                attempts.ended(took, status, &call);
            }
        }
        if let Some(retries) = &self.grpc_retries {
            retries.record(tally, &call);
        }
    }

    /// Reports `profiles` on the configured-timeout gauge, and the retry budget
    /// `budget` reads, when the family is on.
    pub(crate) fn configure(
        &self,
        profiles: &crate::config::ProfileSet,
        budget: impl FnOnce() -> Option<BudgetReader>,
    ) {
        if let Some(configured) = &self.configured {
            configured.set(profiles, budget());
        }
    }

    /// The meter the instruments were made on (for the crates beside this one).
    pub(crate) fn meter(&self) -> &Meter {
        &self.meter
    }

    /// Counts one reload: applied, or refused.
    pub(crate) fn reloaded(&self, applied: bool) {
        let outcome = if applied { "applied" } else { "refused" };
        self.reloads.add(1, &[KeyValue::new("outcome", outcome)]);
    }

    /// Whether a finished call's status code is needed (a family that records it is on).
    pub(crate) fn wants_status(&self) -> bool {
        self.sw4_003.is_some() || self.rpc_duration.is_some() || self.wants_tally()
    }

    /// A route's first call: its counters at 0 (timeouts, retries, hedges, hedge
    /// wins, and cancels by every cause), so that the series exist before the first
    /// event (a `rate()` reads 0, not "no data").
    #[cold]
    pub(crate) fn route_seen(&self, attrs: &Attributes) {
        for counter in [
            &self.timeouts,
            &self.retries,
            &self.hedges,
            &self.hedge_wins,
        ] {
            counter.add(0, &attrs.sw4);
        }
        let [profile, service, method] = &attrs.sw4;
        for reason in crate::policy::cancel::CancelReason::ALL {
            self.cancelled.add(
                0,
                &[
                    profile.clone(),
                    service.clone(),
                    method.clone(),
                    KeyValue::new("cause", reason.as_str()),
                ],
            );
        }
    }

    /// Counts one retry.
    pub(crate) fn retried(&self, attrs: &Attributes) {
        self.retries.add(1, &attrs.sw4);
    }

    /// Counts one hedge sent.
    pub(crate) fn hedged(&self, attrs: &Attributes) {
        self.hedges.add(1, &attrs.sw4);
    }

    /// Counts one call answered by a hedge.
    pub(crate) fn hedge_won(&self, attrs: &Attributes) {
        self.hedge_wins.add(1, &attrs.sw4);
    }

    /// Counts one call cancelled by its scope, by `reason`.
    pub(crate) fn cancelled(
        &self,
        reason: crate::policy::cancel::CancelReason,
        attrs: &Attributes,
    ) {
        let [profile, service, method] = &attrs.sw4;
        self.cancelled.add(
            1,
            &[
                profile.clone(),
                service.clone(),
                method.clone(),
                KeyValue::new("cause", reason.as_str()),
            ],
        );
    }

    /// A call's first attempt is sent: SW4-003's in-flight gauge, when that family is
    /// on (the call's tally, made with it, counts its end: [`Instruments::tally_ended`]).
    pub(crate) fn call_began(&self, attrs: &Attributes) {
        if let Some(sw4_003) = &self.sw4_003 {
            sw4_003.in_flight(1, attrs);
        }
    }

    /// Records one finished call (and the timeout, if it timed out); `code` is asked
    /// for only when a family that records the status is on.
    pub(crate) fn record(
        &self,
        elapsed: Duration,
        timed_out: bool,
        code: impl FnOnce() -> Code,
        attrs: &Attributes,
    ) {
        self.duration
            .record(elapsed.as_secs_f64() * 1_000.0, &attrs.sw4);
        if timed_out {
            self.timeouts.add(1, &attrs.sw4);
        }
        if !self.wants_status() {
            return;
        }
        let code = code();
        let status = code_name(code);
        let seconds = elapsed.as_secs_f64();
        if let Some(sw4_003) = &self.sw4_003 {
            sw4_003.record(seconds, status, attrs);
        }
        if let Some(rpc_duration) = &self.rpc_duration {
            let otel = [
                KeyValue::new("rpc.system.name", "grpc"),
                attrs.rpc_method.clone(),
                KeyValue::new("rpc.response.status_code", status),
                KeyValue::new("error.type", status),
            ];
            let n = if code == Code::Ok { 3 } else { 4 };
            rpc_duration.record(seconds, &otel[..n]);
        }
    }
}
