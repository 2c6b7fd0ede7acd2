//! # sw4rm-advise
//!
//! For operators: what an agent's calls really took, against the SW4-002 profile
//! table in use, and the values that fit (a timeout too short fails calls that would
//! have succeeded, one too long notices a dead peer late). Agents need only
//! `sw4rm-timeouts`; this crate reads what its layer observed.
//!
//! * from a layer built `with_observations()`: [`Advice::observed`];
//! * from a Prometheus scrape of `sw4rm_rpc_duration_ms` and the timeout counters:
//!   [`from_exposition`] and [`ScrapedTable`] (the table in use, as the scrape tells);
//! * from the whole fleet, through Prometheus's (or Thanos's, or Mimir's) query API
//!   over a window: [`fleet`] (instances on another table and outliers named);
//! * the `sw4rm-timeouts` command (`cargo install sw4rm-advise`): `advise`, and the
//!   table's own `explain`, `check`, `routes` and `service-config`;
//! * timeout SLOs per profile as Prometheus rules: [`SloRules`] (`slo-rules`).
//!
//! The guide's chapter: [`guide`].
//!
//! Reading order: `sw4rm_timeouts::observations` (the per-route estimate, its error
//! bound) → `rules.rs` (the verdicts, one pure function) → `advice.rs` (verdicts on
//! every route and profile) → `trial.rs` (each proposal tried on the observed calls:
//! does it dominate the value in use?) → `overlay.rs` (the proposal as a TOML overlay,
//! values only where they dominate) → `report/` (the same as an HTML page with a
//! chart per route) → `exposition.rs` (the same from a Prometheus exposition, for the
//! `sw4rm-timeouts advise` command; `scraped.rs` the table in use as the scrape tells
//! it). Beside them, `slo.rs`: the table's timeout SLOs as Prometheus rules. The
//! layer's side, recording each call, is the core's `timeout/state/per_path.rs`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod advice;
mod exposition;
pub mod fleet;
mod overlay;
mod report;
mod rules;
mod scraped;
mod slo;
mod trial;

pub use advice::{Advice, Finding, ProfileAdvice};
pub use exposition::{from_exposition, ExpositionError};
pub use overlay::SUGGESTION;
pub use rules::{
    Bound, Verdict, CLUSTER_SHARE, HEADROOM, MIN_CALLS, MISFIT_FACTOR, SLOW_FACTOR, TIMEOUT_SHARE,
};
pub use scraped::{ScrapedBounds, ScrapedTable};
pub use slo::{ObjectiveError, SloRules, DEFAULT_OBJECTIVE};
pub use sw4rm_timeouts::observations::{LatencySnapshot, Observations, Resolution, RouteLatency};
pub use trial::{Evaluation, NotDominant, Trial};

#[doc = include_str!("../docs/advisor.md")]
pub mod guide {}

// The README's example compiles and runs.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
struct ReadmeDoctests;
