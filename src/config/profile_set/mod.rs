//! The resolved, immutable profile table: standard ⊕ global ⊕ client, validated once,
//! then read lock-free by every call.

mod build;
mod builder;
mod diff;
mod explain;
mod routes;
mod service_config;

use std::collections::HashMap;

use http::HeaderValue;

pub use builder::ProfileSetBuilder;
pub use service_config::ServiceConfigMode;

use crate::config::{ConfigError, ConfigIssue};
use crate::policy::hedge::HedgingPolicy;
use crate::policy::profile::{ProfileField, TimeoutProfile};
use crate::policy::retry::RetryPolicy;
use crate::policy::route::{Lookup, ProfileId, RouteTable};
use crate::policy::source::Source;
use crate::policy::streaming::{SourcedPolicy, StreamingTimeoutPolicy};

/// A profile after all levels were merged, with the source of every field.
#[derive(Clone, Debug)]
pub struct ResolvedProfile {
    pub(crate) profile: TimeoutProfile,
    pub(crate) streaming: StreamingTimeoutPolicy,
    pub(crate) retry: RetryPolicy,
    pub(crate) hedging: HedgingPolicy,
    /// Indexed by `Field::index()`.
    pub(crate) sources: [Source; crate::config::Field::COUNT],
    /// `grpc-timeout` of the default, formatted once.
    pub(crate) default_header: HeaderValue,
}

impl ResolvedProfile {
    /// The effective profile values.
    pub fn profile(&self) -> &TimeoutProfile {
        &self.profile
    }

    /// The effective streaming policy (SW4-002 §4.1) of the profile.
    pub fn streaming(&self) -> StreamingTimeoutPolicy {
        self.streaming
    }

    /// The effective retry policy (SW4-002 §5.2) of the profile.
    ///
    /// ```
    /// use sw4rm_timeouts::ProfileSet;
    /// let set = ProfileSet::standard();
    /// assert_eq!(set.resolved("heartbeat").unwrap().retry().max_attempts(), 3);
    /// ```
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// The effective hedging policy of the profile (standard: off).
    ///
    /// ```
    /// use sw4rm_timeouts::ProfileSet;
    /// let set = ProfileSet::standard();
    /// assert!(!set.resolved("workflow_status").unwrap().hedging().is_on());
    /// ```
    pub fn hedging(&self) -> HedgingPolicy {
        self.hedging
    }

    /// Where a field's value came from.
    ///
    /// ```
    /// use sw4rm_timeouts::{ProfileField, ProfileSet, Source};
    /// let set = ProfileSet::builder().without_global().max_timeout_ms("heartbeat", 9_000).build().unwrap();
    /// let hb = set.resolved("heartbeat").unwrap();
    /// assert_eq!(hb.source_of(ProfileField::Max), &Source::Client);
    /// assert_eq!(hb.source_of(ProfileField::Default), &Source::Standard);
    /// ```
    pub fn source_of(&self, field: ProfileField) -> &Source {
        &self.sources[field.index()]
    }

    pub(crate) fn default_source(&self) -> &Source {
        &self.sources[crate::config::Field::Default.index()]
    }

    /// The streaming policy with the source of each field.
    pub(crate) fn sourced_streaming(&self) -> SourcedPolicy<'_> {
        use crate::config::Field;
        SourcedPolicy {
            policy: self.streaming,
            sources: [
                &self.sources[Field::StreamInitial.index()],
                &self.sources[Field::StreamGap.index()],
                &self.sources[Field::StreamTotal.index()],
                &self.sources[Field::StreamIdle.index()],
            ],
        }
    }
}

/// One route of a [`ProfileSet`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouteEntry<'a> {
    /// `/package.Service/Method`, or `/package.Service/*` for a whole service.
    pub pattern: String,
    /// The profile's name.
    pub profile: &'a str,
    /// Watched with the streaming timers.
    pub streaming: bool,
    /// A long-lived stream: not ended for being idle unless its profile's streaming
    /// policy (or the call) sets an idle timer.
    pub long_lived: bool,
    /// Retried after any retryable failure.
    pub idempotent: bool,
    /// Where the route came from.
    pub source: &'a Source,
}

/// The effective timeout configuration: profiles, routes and the fallback.
///
/// Build it once (from the standard table, the global configuration and client
/// settings) and share it; lookups take no locks and do not allocate.
///
/// ```
/// use sw4rm_timeouts::ProfileSet;
/// let set = ProfileSet::standard();
/// let p = set.profile_for_path("/sw4rm.registry.RegistryService/Heartbeat");
/// assert_eq!(p.name, "heartbeat");
/// assert_eq!(set.profile_for_path("/other.Service/Method").name, "universal");
/// ```
#[derive(Clone, Debug)]
pub struct ProfileSet {
    pub(crate) profiles: Vec<ResolvedProfile>,
    pub(crate) by_name: HashMap<Box<str>, ProfileId>,
    pub(crate) routes: RouteTable,
    pub(crate) fallback: ProfileId,
    pub(crate) fallback_source: Source,
    pub(crate) warnings: Vec<ConfigIssue>,
}

impl ProfileSet {
    /// What the loader changed to make the table valid, each naming the key, the value
    /// as set, the rule and where it came from: a stream's idle limit above its cap is
    /// lowered to the cap (it could never fire). Also logged as warnings.
    ///
    /// ```
    /// use sw4rm_timeouts::{ProfileSet, StreamingTimeoutPolicy};
    /// let set = ProfileSet::builder()
    ///     .without_global()
    ///     .streaming("tool_call", StreamingTimeoutPolicy { idle_timeout_ms: 5_000, total_timeout_ms: 1_000, ..Default::default() })
    ///     .build()?;
    /// assert_eq!(set.resolved("tool_call").unwrap().streaming().idle_timeout_ms, 1_000);
    /// let w = &set.warnings()[0];
    /// assert_eq!((w.key.as_str(), w.value.as_str()), ("profiles.tool_call.streaming.idle_timeout_ms", "5000"));
    /// assert!(w.rule.contains("clamped to 1000"), "{}", w.rule);
    /// # Ok::<(), sw4rm_timeouts::ConfigError>(())
    /// ```
    pub fn warnings(&self) -> &[ConfigIssue] {
        &self.warnings
    }

    /// Only the SW4-002 standard profiles and routes; no file, no environment.
    pub fn standard() -> Self {
        match ProfileSet::builder().without_global().build() {
            Ok(set) => set,
            // The standard table is checked by this crate's tests; it cannot fail.
            Err(e) => unreachable!("standard table invalid: {e}"),
        }
    }

    /// Standard profiles with the global configuration (file and `SW4RM_*`
    /// environment, see [`crate::GlobalConfig::load`]).
    pub fn from_global() -> Result<Self, ConfigError> {
        ProfileSet::builder().build()
    }

    /// A builder for client-level settings.
    pub fn builder() -> ProfileSetBuilder {
        ProfileSetBuilder::default()
    }

    /// The effective profile of that name (case-insensitive).
    pub fn profile(&self, name: &str) -> Option<&TimeoutProfile> {
        self.resolved(name).map(|r| &r.profile)
    }

    /// The effective profile with field sources.
    pub fn resolved(&self, name: &str) -> Option<&ResolvedProfile> {
        let id = match self.by_name.get(name) {
            Some(&id) => id,
            None => *self.by_name.get(name.to_ascii_lowercase().as_str())?,
        };
        self.profiles.get(id)
    }

    /// All profiles, in table order (standard first).
    pub fn profiles(&self) -> impl Iterator<Item = &ResolvedProfile> {
        self.profiles.iter()
    }

    /// The profile a request path is routed to (the fallback for unknown or
    /// malformed paths).
    pub fn profile_for_path(&self, path: &str) -> &TimeoutProfile {
        let id = self.lookup(path).map_or(self.fallback, |l| l.profile);
        &self.profiles[id].profile
    }

    /// Whether a path is marked idempotent (retried after any retryable failure, not
    /// only when the request never reached the server). Paths outside the routing
    /// table are not.
    ///
    /// ```
    /// let set = sw4rm_timeouts::ProfileSet::standard();
    /// assert!(set.is_idempotent("/sw4rm.registry.RegistryService/Heartbeat"));
    /// assert!(!set.is_idempotent("/sw4rm.scheduler.SchedulerService/SubmitTask"));
    /// ```
    pub fn is_idempotent(&self, path: &str) -> bool {
        self.lookup(path).is_some_and(|l| l.idempotent)
    }

    /// Every route, exact paths first (in table order), then whole services (by name),
    /// each with its profile and where it came from.
    ///
    /// ```
    /// let set = sw4rm_timeouts::ProfileSet::standard();
    /// let hb = set.routes().find(|r| r.pattern.ends_with("/Heartbeat")).unwrap();
    /// assert_eq!((hb.profile, hb.idempotent), ("heartbeat", true));
    /// ```
    pub fn routes(&self) -> impl Iterator<Item = RouteEntry<'_>> {
        let exact = self
            .routes
            .exact
            .iter()
            .map(|(path, r)| (path.to_string(), r));
        let mut services: Vec<_> = self
            .routes
            .services()
            .map(|(s, r)| (format!("/{s}/*"), r))
            .collect();
        services.sort_by(|a, b| a.0.cmp(&b.0));
        exact.chain(services).map(move |(pattern, r)| RouteEntry {
            pattern,
            profile: &self.profiles[r.profile].profile.name,
            streaming: r.streaming,
            long_lived: r.long_lived,
            idempotent: r.idempotent,
            source: &r.source,
        })
    }

    /// The fallback profile for paths outside the routing table.
    pub fn fallback(&self) -> &TimeoutProfile {
        &self.profiles[self.fallback].profile
    }

    pub(crate) fn lookup<'a>(&self, path: &'a str) -> Option<Lookup<'a>> {
        self.routes.lookup(path, self.fallback)
    }

    /// The profile `id` names (not `get`: a user of `profiles()` reaches this type
    /// through `Deref`, and a private `get` beside the public `profile(name)` reads
    /// as an error).
    pub(crate) fn by_id(&self, id: ProfileId) -> &ResolvedProfile {
        &self.profiles[id]
    }
}

impl Default for ProfileSet {
    fn default() -> Self {
        ProfileSet::standard()
    }
}
