//! Configuration levels and the table they produce: the global file/environment
//! loader, one level's partial settings, the client builder, the merged and
//! validated [`ProfileSet`], and the error type that reports every problem at once.
//!
//! Reading order: `profile_set/mod.rs` (the table every call reads) →
//! `profile_set/builder.rs` (client level) → `global.rs` and `walk.rs` (global level)
//! → `profile_set/build.rs` (merging and validation) → `error.rs`. `file_look.rs` is
//! what a live reload's file watch sees of the file.

mod env;
mod error;
pub(crate) mod file_look;
mod global;
mod overrides;
mod profile_set;
mod walk;

pub(crate) use error::did_you_mean;
pub use error::{ConfigError, ConfigIssue};
pub use global::{GlobalConfig, CONFIG_PATH_VAR, DEFAULT_CONFIG_FILE};
pub use profile_set::{
    ProfileSet, ProfileSetBuilder, ResolvedProfile, RouteEntry, ServiceConfigMode,
};

pub(crate) use error::hint;
pub(crate) use overrides::{Field, Overrides, RouteSetting, Sourced};
