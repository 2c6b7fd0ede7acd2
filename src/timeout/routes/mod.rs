//! What a layer knows of each path it routes: `paths.rs` (the path's route and labels,
//! asked of the profile table once per path, then one hash and one load per call) and
//! `per_path.rs` (what is kept per path beside them: a hedged route's recent latency,
//! an observed route's latency).

pub(crate) mod paths;
pub(crate) mod per_path;

pub(crate) use paths::{Labels, LabelsRef, PathTable};
pub(crate) use per_path::PerPath;
