//! What the layer observes, and what is made of it: the OpenTelemetry instruments
//! (`metrics.rs`), per-route latency estimates (`latency/`: the histogram the advisor
//! reads) and the advisor
//! (`advise/`). Nothing here knows the tower layer: the layer records into these.

pub mod advise;
pub(crate) mod latency;
pub mod metrics;
