//! The advisor's rules and readers; the public module is `crate::advise` (in
//! `lib.rs`), which adds the layer's [`Observations`](crate::timeout::Observations).
//!
//! Reading order: `crate::observe::latency` (the per-route estimate, its error bound) →
//! `rules.rs` (the verdicts, one pure function) → `advice.rs` (verdicts on every
//! route and profile, and the proposal as a TOML overlay) → `exposition.rs` (the same
//! from a Prometheus exposition, for the `sw4rm-timeouts advise` command). The layer's
//! side, recording each call, is `timeout/observations.rs`.

mod advice;
mod exposition;
mod rules;

pub use crate::observe::latency::{LatencySnapshot, Resolution};
pub use advice::{Advice, Finding, ProfileAdvice, RouteLatency};
pub use exposition::{from_exposition, ExpositionError};
pub use rules::{
    Bound, Verdict, CLUSTER_SHARE, HEADROOM, MIN_CALLS, MISFIT_FACTOR, SLOW_FACTOR, TIMEOUT_SHARE,
};
