//! Configuration levels: the global file/environment loader, one level's partial
//! settings, and the error type that reports every problem at once.

mod error;
mod global;
mod overrides;
mod walk;

pub use error::{ConfigError, ConfigIssue};
pub use global::{GlobalConfig, CONFIG_PATH_VAR, DEFAULT_CONFIG_FILE};

pub(crate) use error::hint;
pub(crate) use overrides::{Field, Overrides, RouteSetting, Sourced};
