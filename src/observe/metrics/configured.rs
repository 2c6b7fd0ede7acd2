//! The configured timeouts as a gauge, opt-in: `sw4rm_rpc_configured_timeout_ms` with
//! `profile` and `bound` (`default`, `min`, `max`), so that a panel can draw the
//! threshold beside the durations and an alert can compare a percentile to it. The
//! values are the table's at the last build or reload; the gauge is read at each
//! collection, never on a call's path.

use std::sync::{Arc, Mutex};

use opentelemetry::metrics::{Meter, ObservableGauge};
use opentelemetry::KeyValue;

use crate::config::ProfileSet;

/// Name of the configured-timeout gauge (milliseconds).
pub const CONFIGURED_TIMEOUT_MS: &str = "sw4rm_rpc_configured_timeout_ms";

/// One point of the gauge: `profile` and `bound`, and the value in milliseconds.
type Point = ([KeyValue; 2], f64);

/// The gauge, and the values it reports.
#[derive(Clone, Debug)]
pub(crate) struct ConfiguredTimeouts {
    values: Arc<Mutex<Vec<Point>>>,
    /// Kept with the instruments (the callback is registered as long as the meter
    /// provider lives).
    _gauge: ObservableGauge<f64>,
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
        ConfiguredTimeouts {
            values,
            _gauge: gauge,
        }
    }

    /// Reports `profiles` from now on.
    pub(crate) fn set(&self, profiles: &ProfileSet) {
        let table = table(profiles);
        match self.values.lock() {
            Ok(mut values) => *values = table,
            Err(poisoned) => *poisoned.into_inner() = table,
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
