//! The advisor's rules and readers; the public module is `crate::advise` (in
//! `lib.rs`), which adds the layer's `Observations` (kept by the tower glue).
//!
//! Reading order: `crate::observe::latency` (the per-route estimate, its error bound) →
//! `rules.rs` (the verdicts, one pure function) → `advice.rs` (verdicts on every
//! route and profile) → `trial.rs` (each proposal tried on the observed
//! calls: does it dominate the value in use?) → `overlay.rs` (the proposal as a TOML
//! overlay, values only where they dominate) → `report/` (the same as an HTML page
//! with a chart per route) → `exposition.rs` (the same
//! from a Prometheus exposition, for the `sw4rm-timeouts advise` command; `scraped.rs`
//! the table in use as the scrape tells it). The layer's side, recording each call, is
//! `timeout/state/per_path.rs` (read back by `timeout/state/observations.rs`).

mod advice;
mod exposition;
mod overlay;
mod report;
mod rules;
mod scraped;
mod trial;

pub use crate::observe::latency::{LatencySnapshot, Resolution};
pub use advice::{Advice, Finding, ProfileAdvice, RouteLatency};
pub use exposition::{from_exposition, ExpositionError};
pub use overlay::SUGGESTION;
pub use rules::{
    Bound, Verdict, CLUSTER_SHARE, HEADROOM, MIN_CALLS, MISFIT_FACTOR, SLOW_FACTOR, TIMEOUT_SHARE,
};
pub use scraped::{ScrapedBounds, ScrapedTable};
pub use trial::{Evaluation, NotDominant, Trial};
