//! SW4-003's client metrics (`MetricFamily::Sw4003`): `sw4rm_rpc_duration_seconds`,
//! `sw4rm_rpc_requests_total` by final status, and `sw4rm_rpc_in_flight`, the calls
//! executing now by service (one up when a call's first attempt is sent and its tally
//! made, one down when the tally ends with the call, whichever way it ends: so never
//! below 0, and back to 0 when the calls stop).

use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};
use opentelemetry::KeyValue;

use super::buckets::seconds_boundaries;
use super::Attributes;

/// Name of SW4-003's duration histogram (seconds).
pub(crate) const DURATION_SECONDS: &str = "sw4rm_rpc_duration_seconds";
/// Name of SW4-003's call counter, with a `status` attribute.
pub(crate) const REQUESTS_TOTAL: &str = "sw4rm_rpc_requests_total";
/// Name of SW4-003's gauge of calls executing now (`service`).
pub(crate) const IN_FLIGHT: &str = "sw4rm_rpc_in_flight";

/// SW4-003's instruments.
#[derive(Clone, Debug)]
pub(super) struct Sw4003 {
    duration: Histogram<f64>,
    requests: Counter<u64>,
    in_flight: UpDownCounter<i64>,
}

impl Sw4003 {
    pub(super) fn new(meter: &Meter) -> Self {
        Sw4003 {
            duration: meter
                .f64_histogram(DURATION_SECONDS)
                .with_description("Duration of SW4RM RPCs in seconds (SW4-003)")
                .with_unit("s")
                .with_boundaries(seconds_boundaries())
                .build(),
            requests: meter
                .u64_counter(REQUESTS_TOTAL)
                .with_description("SW4RM RPCs by final gRPC status (SW4-003)")
                .build(),
            in_flight: meter
                .i64_up_down_counter(IN_FLIGHT)
                .with_description("SW4RM RPCs executing now (SW4-003)")
                .build(),
        }
    }

    /// One finished call, `status` its final code's name.
    pub(super) fn record(&self, seconds: f64, status: &'static str, attrs: &Attributes) {
        self.duration.record(seconds, &attrs.sw4);
        let [profile, service, method] = &attrs.sw4;
        self.requests.add(
            1,
            &[
                profile.clone(),
                service.clone(),
                method.clone(),
                KeyValue::new("status", status),
            ],
        );
    }

    /// A call began (`+1`) or ended (`-1`).
    pub(super) fn in_flight(&self, delta: i64, attrs: &Attributes) {
        self.in_flight
            .add(delta, std::slice::from_ref(&attrs.sw4[1]));
    }
}
