//! The configured timeouts as a gauge, opt-in: `sw4rm_rpc_configured_timeout_ms` with
//! `profile` and `bound` (`default`, `min`, `max`), so that a panel can draw the
//! threshold beside the durations and an alert can compare a percentile to it. The
//! values are the table's at the last build or reload; the gauge is read at each
//! collection, never on a call's path. Beside it, the layer's retry budget:
//! `sw4rm_retry_budget_tokens` and `sw4rm_retry_budget_max_tokens` (hedges stop at
//! half of the maximum, retries at none left).

use std::sync::{Arc, Mutex};

use opentelemetry::metrics::{Meter, ObservableGauge};
use opentelemetry::KeyValue;

use crate::config::ProfileSet;

/// Name of the configured-timeout gauge (milliseconds).
pub const CONFIGURED_TIMEOUT_MS: &str = "sw4rm_rpc_configured_timeout_ms";
/// Name of the gauge of the tokens in the layer's retry budget.
pub const RETRY_BUDGET_TOKENS: &str = "sw4rm_retry_budget_tokens";
/// Name of the gauge of the most tokens the layer's retry budget holds.
pub const RETRY_BUDGET_MAX_TOKENS: &str = "sw4rm_retry_budget_max_tokens";

/// Reads a retry budget: its tokens now and its most.
pub(crate) type BudgetReader = Arc<dyn Fn() -> (f64, f64) + Send + Sync>;

/// One point of the gauge: `profile` and `bound`, and the value in milliseconds.
type Point = ([KeyValue; 2], f64);

/// The gauge, and the values it reports.
#[derive(Clone)]
pub(crate) struct ConfiguredTimeouts {
    values: Arc<Mutex<Vec<Point>>>,
    budget: Arc<Mutex<Option<BudgetReader>>>,
    /// Kept with the instruments (the callback is registered as long as the meter
    /// provider lives).
    _gauges: [ObservableGauge<f64>; 3],
}

impl std::fmt::Debug for ConfiguredTimeouts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfiguredTimeouts").finish_non_exhaustive()
    }
}

impl ConfiguredTimeouts {
    pub(crate) fn new(meter: &Meter) -> Self {
        let values: Arc<Mutex<Vec<Point>>> = Arc::default();
        let read = values.clone();
        let gauge = meter
            .f64_observable_gauge(CONFIGURED_TIMEOUT_MS)
            .with_description(
                "Configured SW4RM timeout per profile in milliseconds: its default, min and max (SW4-002)",
            )
            .with_unit("ms")
            .with_callback(move |observer| {
                let values = match read.lock() {
                    Ok(values) => values,
                    Err(poisoned) => poisoned.into_inner(),
                };
                for (attrs, ms) in values.iter() {
                    observer.observe(*ms, attrs);
                }
            })
            .build();
        let budget: Arc<Mutex<Option<BudgetReader>>> = Arc::default();
        let reading = |read: Arc<Mutex<Option<BudgetReader>>>, max: bool| {
            move |observer: &dyn opentelemetry::metrics::AsyncInstrument<f64>| {
                let reader = match read.lock() {
                    Ok(reader) => reader.clone(),
                    Err(poisoned) => poisoned.into_inner().clone(),
                };
                if let Some(reader) = reader {
                    let (tokens, most) = reader();
                    observer.observe(if max { most } else { tokens }, &[]);
                }
            }
        };
        let tokens = meter
            .f64_observable_gauge(RETRY_BUDGET_TOKENS)
            .with_description(
                "Tokens left in the SW4RM layer's retry budget (shared by retries and hedges)",
            )
            .with_callback(reading(budget.clone(), false))
            .build();
        let most = meter
            .f64_observable_gauge(RETRY_BUDGET_MAX_TOKENS)
            .with_description("Most tokens the SW4RM layer's retry budget holds")
            .with_callback(reading(budget.clone(), true))
            .build();
        ConfiguredTimeouts {
            values,
            budget,
            _gauges: [gauge, tokens, most],
        }
    }

    /// Reports `profiles`, and the budget `budget` reads, from now on.
    pub(crate) fn set(&self, profiles: &ProfileSet, budget: Option<BudgetReader>) {
        let table = table(profiles);
        match self.values.lock() {
            Ok(mut values) => *values = table,
            Err(poisoned) => *poisoned.into_inner() = table,
        }
        match self.budget.lock() {
            Ok(mut reader) => *reader = budget,
            Err(poisoned) => *poisoned.into_inner() = budget,
        }
    }
}

/// Every profile's three values, with their attributes.
fn table(profiles: &ProfileSet) -> Vec<Point> {
    let mut out = Vec::new();
    for p in profiles.profiles() {
        let t = p.profile();
        let name: Arc<str> = Arc::from(t.name.as_ref());
        for (bound, ms) in [
            ("default", t.default_timeout_ms),
            ("min", t.min_timeout_ms),
            ("max", t.max_timeout_ms),
        ] {
            let attrs = [
                KeyValue::new("profile", name.clone()),
                KeyValue::new("bound", bound),
            ];
            out.push((attrs, f64::from(ms)));
        }
    }
    out
}
