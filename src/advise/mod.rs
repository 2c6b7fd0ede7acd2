//! The timeout advisor: what calls really took, per route, and the profile values that
//! fit it (SW4-002's question: a timeout too short fails calls that would have
//! succeeded, one too long notices a dead peer late).
//!
//! Reading order: `crate::latency` (the per-route estimate, its error bound) →
//! `rules.rs` (the verdicts, one pure function) → `advice.rs` (verdicts on every
//! route and profile, and the proposal as a TOML overlay) → `exposition.rs` (the same
//! from a Prometheus exposition, for the `sw4rm-timeouts advise` command). The layer's
//! side, recording each call, is `timeout/observed.rs`.

mod advice;
mod exposition;
mod rules;

pub use crate::latency::{LatencySnapshot, Resolution};
pub use crate::timeout::Observations;
pub use advice::{Advice, Finding, ProfileAdvice, RouteLatency};
pub use exposition::{from_exposition, ExpositionError};
pub use rules::{
    Bound, Verdict, CLUSTER_SHARE, HEADROOM, MIN_CALLS, MISFIT_FACTOR, SLOW_FACTOR, TIMEOUT_SHARE,
};
