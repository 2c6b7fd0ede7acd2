//! The layer's state: `shared.rs` (what every call of one layer reads: the profile
//! table, the settings, the routed paths, and where a call finds it: fixed, or live),
//! `reload.rs` (the handle that swaps it while calls run, and the file
//! watch), `observations.rs` (what a layer built `with_observations()` has observed,
//! read for the advisor).

pub(crate) mod observations;
pub(crate) mod reload;
pub(crate) mod shared;
