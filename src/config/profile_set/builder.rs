//! The client level (SW4-002 §2.3): settings given in code, without touching the
//! environment or files.

use crate::config::{
    ConfigError, ConfigIssue, Field, GlobalConfig, Overrides, RouteSetting, Sourced,
};
use crate::policy::hedge::HedgingPolicy;
use crate::policy::profile::TimeoutProfile;
use crate::policy::retry::RetryPolicy;
use crate::policy::source::Source;
use crate::policy::streaming::StreamingTimeoutPolicy;

use super::ProfileSet;

#[derive(Clone, Debug, Default)]
enum Global {
    /// Load the file and environment at `build()`.
    #[default]
    Load,
    /// Load this file and the environment at `build()`.
    File(std::path::PathBuf),
    /// This text, read from this file (by a file watch), and the environment.
    FileText(std::path::PathBuf, String),
    Given(GlobalConfig),
    None,
}

/// Builds a [`ProfileSet`] from client settings laid over the global configuration
/// and the standard table, field by field. Nothing is checked until [`build`], which
/// reports every problem at once.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::{ProfileSet, StreamingTimeoutPolicy};
/// let set = ProfileSet::builder()
///     .without_global()                              // ignore SW4RM_* and sw4rm.toml
///     .max_timeout_ms("heartbeat", 10_000)           // keeps the other heartbeat fields
///     .route("/acme.Batch/*", "workflow_submit")
///     .streaming("tool_call", StreamingTimeoutPolicy { initial_timeout_ms: 5_000, message_gap_timeout_ms: 2_000, ..Default::default() })
///     .build()?;
/// assert_eq!(set.profile("heartbeat").unwrap().max_timeout_ms, 10_000);
/// assert_eq!(set.profile_for_path("/acme.Batch/Run").name, "workflow_submit");
/// # Ok::<(), sw4rm_timeouts::ConfigError>(())
/// ```
///
/// [`build`]: ProfileSetBuilder::build
#[derive(Clone, Debug, Default)]
pub struct ProfileSetBuilder {
    global: Global,
    client: Overrides,
    issues: Vec<ConfigIssue>,
}

impl ProfileSetBuilder {
    /// Use this global configuration instead of loading it.
    pub fn global(mut self, global: GlobalConfig) -> Self {
        self.global = Global::Given(global);
        self
    }

    /// The global level from the TOML file at `path` (the one your application chose)
    /// and the `SW4RM_*` environment over it, read at [`build`](Self::build), which
    /// reports every problem of the file, the environment and the merged table at
    /// once. (Reading the file with [`GlobalConfig::from_file_and_env`] first stops at
    /// the file's own problems, and the table's appear only once those are fixed.)
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("sw4rm-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let path = dir.join("timeouts.toml");
    /// std::fs::write(&path, "[profiles.heartbeat]\nmin_timeout_ms = \"soon\"\n\
    ///     [routes]\n\"/acme.Batch/*\" = \"nightly\"\n").unwrap();
    /// let err = sw4rm_timeouts::ProfileSet::builder().global_file(&path).build().unwrap_err();
    /// assert_eq!(err.issues().len(), 2, "{err}"); // the bad value and the unknown profile
    /// # std::fs::remove_dir_all(&dir).ok();
    /// ```
    pub fn global_file(mut self, path: impl AsRef<std::path::Path>) -> Self {
        self.global = Global::File(path.as_ref().to_path_buf());
        self
    }

    /// The file [`build`](Self::build) reads, if any: the one given to
    /// [`global_file`](Self::global_file), else the one the SDK finds (`SW4RM_CONFIG`,
    /// else `./sw4rm.toml`); `None` for a builder given its global level or none.
    pub(crate) fn file(&self) -> Option<std::path::PathBuf> {
        match &self.global {
            Global::File(path) | Global::FileText(path, _) => Some(path.clone()),
            Global::Load => Some(
                std::env::var_os(crate::config::CONFIG_PATH_VAR)
                    .map(std::path::PathBuf::from)
                    .unwrap_or_else(|| crate::config::DEFAULT_CONFIG_FILE.into()),
            ),
            Global::Given(_) | Global::None => None,
        }
    }

    /// The same builder with the text of its file as given (read by a file watch),
    /// so that what is built is what was looked at. No change for a builder that
    /// reads no file.
    pub(crate) fn with_file_text(mut self, text: String) -> Self {
        if let Some(path) = self.file() {
            self.global = Global::FileText(path, text);
        }
        self
    }

    /// Opt out of global configuration entirely (no file, no environment).
    pub fn without_global(mut self) -> Self {
        self.global = Global::None;
        self
    }

    fn set(mut self, profile: &str, field: Field, value: u32) -> Self {
        self.client.patch(profile).set(field, value, Source::Client);
        self
    }

    /// Sets a profile's default timeout.
    pub fn default_timeout_ms(self, profile: &str, ms: u32) -> Self {
        self.set(profile, Field::Default, ms)
    }

    /// Sets a profile's lower bound.
    pub fn min_timeout_ms(self, profile: &str, ms: u32) -> Self {
        self.set(profile, Field::Min, ms)
    }

    /// Sets a profile's upper bound.
    pub fn max_timeout_ms(self, profile: &str, ms: u32) -> Self {
        self.set(profile, Field::Max, ms)
    }

    /// Sets whether 0 means infinite for a profile.
    pub fn allow_infinite(self, profile: &str, allow: bool) -> Self {
        self.set(profile, Field::AllowInfinite, u32::from(allow))
    }

    /// Defines a new profile, or replaces all four fields of an existing one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::{ProfileSet, TimeoutProfile};
    /// let batch = TimeoutProfile::builder("batch")
    ///     .default_timeout(Duration::from_secs(120))
    ///     .min_timeout(Duration::from_secs(1))
    ///     .max_timeout(Duration::from_secs(900))
    ///     .build()?;
    /// let set = ProfileSet::builder().without_global().profile(&batch).route("/acme.Batch/*", "batch").build()?;
    /// assert_eq!(set.profile_for_path("/acme.Batch/Run").default_timeout_ms, 120_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn profile(self, profile: &TimeoutProfile) -> Self {
        let name = profile.name.clone();
        self.set(&name, Field::Default, profile.default_timeout_ms)
            .set(&name, Field::Min, profile.min_timeout_ms)
            .set(&name, Field::Max, profile.max_timeout_ms)
            .set(
                &name,
                Field::AllowInfinite,
                u32::from(profile.allow_infinite),
            )
    }

    /// Sets a profile's streaming policy (all four fields).
    pub fn streaming(self, profile: &str, policy: StreamingTimeoutPolicy) -> Self {
        self.set(profile, Field::StreamInitial, policy.initial_timeout_ms)
            .set(profile, Field::StreamGap, policy.message_gap_timeout_ms)
            .set(profile, Field::StreamTotal, policy.total_timeout_ms)
            .set(profile, Field::StreamIdle, policy.idle_timeout_ms)
    }

    /// Routes `/pkg.Service/Method` or `/pkg.Service/*` to a profile (unary).
    pub fn route(self, pattern: &str, profile: &str) -> Self {
        self.add_route(pattern, profile, false)
    }

    /// Routes a server-streaming path (or service) to a profile: its response body is
    /// watched with the streaming timers.
    pub fn streaming_route(self, pattern: &str, profile: &str) -> Self {
        self.add_route(pattern, profile, true)
    }

    /// Routes a long-lived server stream that may stay idle (an inbox, a
    /// subscription): watched as a stream, but without the time-to-first-message and
    /// gap timers that would otherwise default to the profile's timeout; only those
    /// the profile's streaming policy or the call sets run.
    ///
    /// ```
    /// use sw4rm_timeouts::ProfileSet;
    /// let set = ProfileSet::builder()
    ///     .without_global()
    ///     .long_lived_route("/acme.Events/Subscribe", "message_route")
    ///     .build()
    ///     .unwrap();
    /// let route = set.routes().find(|r| r.pattern == "/acme.Events/Subscribe").unwrap();
    /// assert!(route.streaming && route.long_lived);
    /// ```
    pub fn long_lived_route(mut self, pattern: &str, profile: &str) -> Self {
        self = self.add_route(pattern, profile, true);
        if let Some(last) = self.client.routes.last_mut() {
            last.long_lived = Some(true);
        }
        self
    }

    fn add_route(mut self, pattern: &str, profile: &str, streaming: bool) -> Self {
        self.client.routes.push(RouteSetting {
            pattern: pattern.to_owned(),
            profile: profile.to_ascii_lowercase(),
            streaming,
            long_lived: None,
            idempotent: None,
            source: Source::Client,
        });
        self
    }

    /// Marks a routed path (or whole service) as idempotent or not: an idempotent
    /// RPC is retried after any retryable failure, any other only when the request
    /// never reached the server. The standard routes come marked (read-only and
    /// naturally idempotent RPCs); custom routes start unmarked.
    ///
    /// ```
    /// use sw4rm_timeouts::ProfileSet;
    /// let set = ProfileSet::builder()
    ///     .without_global()
    ///     .idempotent("/sw4rm.scheduler.SchedulerService/SubmitTask", true)
    ///     .build()?;
    /// assert!(set.is_idempotent("/sw4rm.scheduler.SchedulerService/SubmitTask"));
    /// assert!(ProfileSet::builder().without_global().idempotent("/no.Such/Route", true).build().is_err());
    /// # Ok::<(), sw4rm_timeouts::ConfigError>(())
    /// ```
    pub fn idempotent(mut self, pattern: &str, idempotent: bool) -> Self {
        self.client.idempotency.push(Sourced {
            value: (pattern.to_owned(), idempotent),
            source: Source::Client,
        });
        self
    }

    /// Sets a profile's retry policy (all five `retry.*` fields).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::{ProfileSet, RetryPolicy};
    /// let set = ProfileSet::builder()
    ///     .without_global()
    ///     .retry("workflow_status", RetryPolicy::builder().max_attempts(5).build()?)
    ///     .retry("heartbeat", RetryPolicy::off())
    ///     .build()?;
    /// assert_eq!(set.resolved("workflow_status").unwrap().retry().max_attempts(), 5);
    /// assert!(!set.resolved("heartbeat").unwrap().retry().is_on());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retry(mut self, profile: &str, policy: RetryPolicy) -> Self {
        for (field, value) in Field::RETRY.into_iter().zip(policy.fields()) {
            self = self.set(profile, field, value);
        }
        self
    }

    /// Sets a profile's hedging policy (all five `hedging.*` fields). Only the
    /// profile's idempotent unary routes are hedged.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::{HedgingPolicy, ProfileSet};
    /// let set = ProfileSet::builder()
    ///     .without_global()
    ///     .hedging("workflow_status", HedgingPolicy::builder().max_attempts(2).build()?)
    ///     .build()?;
    /// assert_eq!(set.resolved("workflow_status").unwrap().hedging().max_attempts(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hedging(mut self, profile: &str, policy: HedgingPolicy) -> Self {
        for (field, value) in Field::HEDGING.into_iter().zip(policy.fields()) {
            self = self.set(profile, field, value);
        }
        self
    }

    /// The profile for paths outside the routing table (default `universal`).
    pub fn fallback_profile(mut self, profile: &str) -> Self {
        self.client.fallback = Some(Sourced {
            value: profile.to_ascii_lowercase(),
            source: Source::Client,
        });
        self
    }

    /// Merges and validates all levels.
    pub fn build(self) -> Result<ProfileSet, ConfigError> {
        let mut issues = self.issues;
        let global = match self.global {
            Global::Load => {
                let (global, problems) = GlobalConfig::load_partial();
                issues.extend(problems);
                global
            }
            Global::File(path) => {
                let (global, problems) = GlobalConfig::file_and_env_partial(&path);
                issues.extend(problems);
                global
            }
            Global::FileText(path, text) => {
                let (global, problems) = GlobalConfig::text_and_env_partial(&text, &path);
                issues.extend(problems);
                global
            }
            Global::Given(g) => g,
            Global::None => GlobalConfig::empty(),
        };
        let mut merged = Overrides::default();
        merged.merge(&global.overrides);
        merged.merge(&self.client);
        super::build::build(&merged, issues)
    }
}
