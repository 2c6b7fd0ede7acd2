//! What the layer observes: the OpenTelemetry instruments (`metrics/`) and per-route
//! latency estimates (`latency/`: the histogram the advisor, `sw4rm-advise`, reads).
//! Nothing here knows the tower layer: the layer records into these.

pub(crate) mod latency;
pub mod metrics;
