//! The layer's state: `settings.rs` (the layer's settings, and the state made from
//! them), `shared.rs` (what every call of one layer reads: the profile
//! table, the settings, the table of routed paths with each path's route and labels,
//! and where a call finds it: fixed, or live), `per_path.rs` (what is kept per path
//! beside them: a hedged route's recent latency, an observed route's latency),
//! `reload.rs` (the handle that swaps it while calls run, and the file watch),
//! `observations.rs` (what a layer built `with_observations()` has observed, read for
//! the advisor).

pub(crate) mod observations;
pub(crate) mod per_path;
pub(crate) mod reload;
pub(crate) mod settings;
pub(crate) mod shared;

pub(crate) use shared::{Labels, LabelsRef};
