//! The metrics SW4-004 §8.1 and SW4-005 §10 name: the caller's loop's, and the
//! delegations cancelled. Agent and gateway ids are label values only when asked for
//! ([`crate::Delegation::with_agent_labels`]): they are unbounded. They are recorded
//! on the meter provider of the timeout layer a client runs under (the cancels), or
//! the one a `Delegation` is given (the loop).

use opentelemetry::metrics::{Counter, Histogram, Meter, MeterProvider};
use opentelemetry::KeyValue;

use crate::DelegationEnd;
use sw4rm_timeouts::metrics::{DURATION_BOUNDARIES_MS, METER_NAME};

/// Name of the counter of delegations cancelled (SW4-004 §8.1): each cancel the cancel
/// cascade sent, and each [`crate::DelegationCancel`] sent, once however many
/// times it was sent again. With `trigger` (`explicit`: a `DelegationCancel`, or a
/// budget, a call or a delegation cancelled on purpose, or the caller gone;
/// `deadline`: the inbound call's deadline passed) and `outcome` (what the cancel came
/// to, [`crate::CancelOutcome::as_str`]: `acknowledged`, `not_acknowledged`,
/// `ended_in_grace`, `forced`, `deadline_fallback` for a delegate that answered
/// `UNIMPLEMENTED`, `unknown`; and `not_sent` when the cascade could not send).
pub const SWARM_CANCELLATIONS_TOTAL: &str = "sw4rm_swarm_cancellations_total";
/// Delegation loops run, with `outcome` ([`DelegationEnd::as_str`]).
pub const SWARM_DELEGATIONS_TOTAL: &str = "sw4rm_swarm_delegations_total";
/// `OVERLOADED` answers received.
pub const SWARM_OVERLOADED_TOTAL: &str = "sw4rm_swarm_overloaded_total";
/// Sends after the first, with `reason` = `overloaded` or `redirect` (and, when
/// asked for, `from_agent` and `to_agent`).
pub const SWARM_RETRY_TOTAL: &str = "sw4rm_swarm_retry_total";
/// Delegations that ended with their budget spent (`ACK_TIMEOUT`).
pub const SWARM_BUDGET_EXHAUSTED_TOTAL: &str = "sw4rm_swarm_budget_exhausted_total";
/// Redirects followed.
pub const SWARM_REDIRECTS_TOTAL: &str = "sw4rm_swarm_redirects_total";
/// Delegations that ended on a `REDIRECT` past `max_redirects`.
pub const SWARM_REDIRECT_LIMIT_REACHED_TOTAL: &str = "sw4rm_swarm_redirect_limit_reached_total";
/// What redirects cost a delegation, ms: from the first `REDIRECT` answer to the
/// final answer (one point per delegation that followed a redirect).
pub const SWARM_REDIRECT_LATENCY_MS: &str = "sw4rm_swarm_redirect_latency_ms";

/// The loop's instruments.
#[derive(Clone, Debug)]
pub(crate) struct SwarmInstruments {
    delegations: Counter<u64>,
    overloaded: Counter<u64>,
    retries: Counter<u64>,
    exhausted: Counter<u64>,
    redirects: Counter<u64>,
    redirect_limit: Counter<u64>,
    redirect_latency: Histogram<f64>,
}

impl SwarmInstruments {
    pub(crate) fn global() -> Self {
        SwarmInstruments::from_meter(&opentelemetry::global::meter(METER_NAME))
    }

    pub(crate) fn from_provider(provider: &impl MeterProvider) -> Self {
        SwarmInstruments::from_meter(&provider.meter(METER_NAME))
    }

    fn from_meter(meter: &Meter) -> Self {
        let counter = |name: &'static str, what: &'static str| {
            meter.u64_counter(name).with_description(what).build()
        };
        SwarmInstruments {
            delegations: counter(SWARM_DELEGATIONS_TOTAL, "SW4RM delegation loops run"),
            overloaded: counter(SWARM_OVERLOADED_TOTAL, "OVERLOADED answers received"),
            retries: counter(SWARM_RETRY_TOTAL, "RequestHandoff sends after the first"),
            exhausted: counter(
                SWARM_BUDGET_EXHAUSTED_TOTAL,
                "Delegations ended with their budget spent",
            ),
            redirects: counter(SWARM_REDIRECTS_TOTAL, "Redirects followed"),
            redirect_limit: counter(
                SWARM_REDIRECT_LIMIT_REACHED_TOTAL,
                "Delegations ended past max_redirects",
            ),
            redirect_latency: meter
                .f64_histogram(SWARM_REDIRECT_LATENCY_MS)
                .with_unit("ms")
                .with_description("From the first REDIRECT answer to the final answer")
                .with_boundaries(DURATION_BOUNDARIES_MS.to_vec())
                .build(),
        }
    }

    pub(crate) fn overloaded(&self) {
        self.overloaded.add(1, &[]);
    }

    /// A send after the first: `reason` `overloaded` or `redirect`; `agents` the
    /// `from_agent` and `to_agent` labels when asked for.
    pub(crate) fn retry(&self, reason: &'static str, agents: Option<(&str, &str)>) {
        match agents {
            Some((from, to)) => self.retries.add(
                1,
                &[
                    KeyValue::new("reason", reason),
                    KeyValue::new("from_agent", from.to_owned()),
                    KeyValue::new("to_agent", to.to_owned()),
                ],
            ),
            None => self.retries.add(1, &[KeyValue::new("reason", reason)]),
        }
    }

    /// A redirect followed.
    pub(crate) fn redirected(&self) {
        self.redirects.add(1, &[]);
    }

    /// The loop ended with `end`; `redirect_ms` the time since the first redirect.
    pub(crate) fn ended(&self, end: Option<DelegationEnd>, redirect_ms: Option<f64>) {
        let outcome = end.map_or("error", DelegationEnd::as_str);
        self.delegations
            .add(1, &[KeyValue::new("outcome", outcome)]);
        if end.is_some_and(DelegationEnd::is_budget) {
            self.exhausted.add(1, &[]);
        }
        if end == Some(DelegationEnd::RedirectLimit) {
            self.redirect_limit.add(1, &[]);
        }
        if let Some(ms) = redirect_ms {
            self.redirect_latency.record(ms, &[]);
        }
    }
}

/// The counter of delegations cancelled ([`SWARM_CANCELLATIONS_TOTAL`]), on the meter
/// of the timeout layer the cancels go through.
#[derive(Clone, Debug)]
pub(crate) struct Cancellations(Counter<u64>);

impl Cancellations {
    /// The counter on `meter`.
    pub(crate) fn on(meter: &Meter) -> Self {
        Cancellations(
            meter
                .u64_counter(SWARM_CANCELLATIONS_TOTAL)
                .with_description(
                    "SW4RM delegations cancelled (the cascade's and DelegationCancel's), by trigger and outcome",
                )
                .build(),
        )
    }

    /// The counter on the meter of the layer `service` runs under (`None`: its
    /// metrics are off).
    pub(crate) fn of<S>(service: &sw4rm_timeouts::TimeoutProfileService<S>) -> Option<Self> {
        sw4rm_timeouts::seams::meter(service).map(|meter| Cancellations::on(&meter))
    }

    /// A `CancelDelegation` sent: `trigger` (`explicit` or `deadline`) and `outcome`
    /// (what the delegate answered).
    pub(crate) fn count(&self, trigger: &'static str, outcome: &'static str) {
        self.0.add(
            1,
            &[
                KeyValue::new("trigger", trigger),
                KeyValue::new("outcome", outcome),
            ],
        );
    }
}
