//! Timeout profiles (SW4-002 §1): the profile type, the twelve standard profiles and
//! the fallback profile for RPCs outside the routing table.

use std::borrow::Cow;
use std::time::Duration;

pub use super::profile_error::{ProfileError, ProfileField, ProfileRule, ProfileViolation};

/// Names of the standard profiles (SW4-002 §1.2) and of the fallback profile.
pub mod names {
    /// Agent liveness detection.
    pub const HEARTBEAT: &str = "heartbeat";
    /// Agent registration and deregistration.
    pub const REGISTRATION: &str = "registration";
    /// Task submission to the scheduler.
    pub const TASK_SUBMIT: &str = "task_submit";
    /// Message routing operations.
    pub const MESSAGE_ROUTE: &str = "message_route";
    /// Opening negotiation sessions.
    pub const NEGOTIATION_OPEN: &str = "negotiation_open";
    /// Vote collection.
    pub const NEGOTIATION_VOTE: &str = "negotiation_vote";
    /// Decision retrieval.
    pub const NEGOTIATION_DECISION: &str = "negotiation_decision";
    /// Agent handoff operations.
    pub const HANDOFF: &str = "handoff";
    /// Workflow submission.
    pub const WORKFLOW_SUBMIT: &str = "workflow_submit";
    /// Workflow status queries.
    pub const WORKFLOW_STATUS: &str = "workflow_status";
    /// Tool invocations.
    pub const TOOL_CALL: &str = "tool_call";
    /// Human-in-the-loop escalation.
    pub const HITL_ESCALATE: &str = "hitl_escalate";
    /// RPCs outside the routing table: the core spec's universal 30 s timeout.
    pub const UNIVERSAL: &str = "universal";
}

/// A named timeout profile (SW4-002 §1.1). All values are milliseconds.
///
/// Read the fields directly; build one with [`TimeoutProfile::builder`], whose named
/// setters cannot swap the default and the bounds.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::TimeoutProfile;
/// let hb = TimeoutProfile::standard_named("heartbeat").unwrap();
/// assert_eq!(hb.default_timeout_ms, 5_000);
/// assert_eq!(hb.default_timeout(), Duration::from_secs(5));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimeoutProfile {
    /// Profile name, lowercase (`heartbeat`, `tool_call`, ...).
    pub name: Cow<'static, str>,
    /// Timeout used when the caller gives none.
    pub default_timeout_ms: u32,
    /// Smallest timeout a caller may ask for.
    pub min_timeout_ms: u32,
    /// Largest timeout a caller may ask for.
    pub max_timeout_ms: u32,
    /// Whether a requested timeout of 0 means "no deadline".
    pub allow_infinite: bool,
}

const fn std_profile(
    name: &'static str,
    default: u32,
    min: u32,
    max: u32,
    inf: bool,
) -> TimeoutProfile {
    TimeoutProfile {
        name: Cow::Borrowed(name),
        default_timeout_ms: default,
        min_timeout_ms: min,
        max_timeout_ms: max,
        allow_infinite: inf,
    }
}

/// The twelve standard profiles of SW4-002 §1.2, with the spec's exact values.
pub const STANDARD_PROFILES: &[TimeoutProfile] = &[
    std_profile(names::HEARTBEAT, 5_000, 1_000, 30_000, false),
    std_profile(names::REGISTRATION, 30_000, 5_000, 120_000, false),
    std_profile(names::TASK_SUBMIT, 30_000, 5_000, 300_000, false),
    std_profile(names::MESSAGE_ROUTE, 10_000, 1_000, 60_000, false),
    std_profile(names::NEGOTIATION_OPEN, 60_000, 10_000, 600_000, false),
    std_profile(names::NEGOTIATION_VOTE, 300_000, 30_000, 1_800_000, true),
    std_profile(names::NEGOTIATION_DECISION, 60_000, 5_000, 300_000, false),
    std_profile(names::HANDOFF, 60_000, 10_000, 300_000, false),
    std_profile(names::WORKFLOW_SUBMIT, 30_000, 5_000, 120_000, false),
    std_profile(names::WORKFLOW_STATUS, 10_000, 1_000, 60_000, false),
    std_profile(names::TOOL_CALL, 30_000, 1_000, 3_600_000, true),
    std_profile(names::HITL_ESCALATE, 300_000, 60_000, 3_600_000, true),
];

/// The fallback profile for paths outside the routing table: the core spec's
/// universal 30 s default, overridable from 1 ms to 1 h, no infinite.
pub const UNIVERSAL_PROFILE: TimeoutProfile =
    std_profile(names::UNIVERSAL, 30_000, 1, 3_600_000, false);

/// Builds a [`TimeoutProfile`] with named values; see [`TimeoutProfile::builder`].
#[derive(Clone, Debug)]
pub struct TimeoutProfileBuilder {
    name: String,
    default: Duration,
    min: Duration,
    max: Duration,
    allow_infinite: bool,
}

impl TimeoutProfileBuilder {
    /// Timeout used when the caller gives none.
    pub fn default_timeout(mut self, d: Duration) -> Self {
        self.default = d;
        self
    }

    /// Smallest timeout a caller may ask for.
    pub fn min_timeout(mut self, d: Duration) -> Self {
        self.min = d;
        self
    }

    /// Largest timeout a caller may ask for.
    pub fn max_timeout(mut self, d: Duration) -> Self {
        self.max = d;
        self
    }

    /// Whether a requested timeout of 0 means "no deadline" (default `false`).
    pub fn allow_infinite(mut self, allow: bool) -> Self {
        self.allow_infinite = allow;
        self
    }

    /// Checks every invariant and returns the profile, or all violations at once.
    pub fn build(self) -> Result<TimeoutProfile, ProfileError> {
        let mut violations = Vec::new();
        let mut ms = |field, d: Duration| match whole_millis(d) {
            Some(v) => v,
            None => {
                violations.push(ProfileViolation {
                    field,
                    value: u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
                    rule: ProfileRule::NotWholeMillis,
                });
                0
            }
        };
        let profile = TimeoutProfile {
            name: Cow::Owned(self.name.to_ascii_lowercase()),
            default_timeout_ms: ms(ProfileField::Default, self.default),
            min_timeout_ms: ms(ProfileField::Min, self.min),
            max_timeout_ms: ms(ProfileField::Max, self.max),
            allow_infinite: self.allow_infinite,
        };
        if violations.is_empty() {
            violations = profile.violations();
        }
        if violations.is_empty() {
            Ok(profile)
        } else {
            Err(ProfileError {
                profile: profile.name.into_owned(),
                violations,
            })
        }
    }
}

/// `d` in whole milliseconds, when it is one and fits in `u32`.
fn whole_millis(d: Duration) -> Option<u32> {
    d.subsec_nanos()
        .is_multiple_of(1_000_000)
        .then(|| u32::try_from(d.as_millis()).ok())
        .flatten()
}

impl TimeoutProfile {
    /// A builder for a profile named `name` (lowercased: profile names are
    /// case-insensitive). Every timeout must be set; `allow_infinite` defaults to false.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::{ProfileField, TimeoutProfile};
    /// let slow = TimeoutProfile::builder("slow_tool")
    ///     .default_timeout(Duration::from_secs(60))
    ///     .min_timeout(Duration::from_secs(1))
    ///     .max_timeout(Duration::from_secs(600))
    ///     .allow_infinite(true)
    ///     .build()?;
    /// assert_eq!(slow.max_timeout_ms, 600_000);
    ///
    /// let err = TimeoutProfile::builder("bad")
    ///     .default_timeout(Duration::from_millis(500))
    ///     .min_timeout(Duration::from_secs(1))
    ///     .max_timeout(Duration::from_secs(600))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.violations[0].field, ProfileField::Min);
    /// assert_eq!(err.to_string(), "invalid timeout profile `bad`: min_timeout_ms = 1000: must be <= default_timeout_ms (500)");
    /// # Ok::<(), sw4rm_timeouts::ProfileError>(())
    /// ```
    pub fn builder(name: impl Into<String>) -> TimeoutProfileBuilder {
        TimeoutProfileBuilder {
            name: name.into(),
            default: Duration::ZERO,
            min: Duration::ZERO,
            max: Duration::ZERO,
            allow_infinite: false,
        }
    }

    /// The standard profile (or the fallback `universal`) of that name.
    pub fn standard_named(name: &str) -> Option<TimeoutProfile> {
        STANDARD_PROFILES
            .iter()
            .chain(std::iter::once(&UNIVERSAL_PROFILE))
            .find(|p| p.name.eq_ignore_ascii_case(name))
            .cloned()
    }

    /// Every invariant this profile breaks: `min > 0`, `min ≤ default ≤ max`.
    ///
    /// ```
    /// use sw4rm_timeouts::{ProfileField, TimeoutProfile};
    /// let mut p = TimeoutProfile::standard_named("heartbeat").unwrap();
    /// p.min_timeout_ms = 0;
    /// assert_eq!(p.violations()[0].field, ProfileField::Min);
    /// ```
    pub fn violations(&self) -> Vec<ProfileViolation> {
        let mut out = Vec::new();
        let v = |field, value: u32, rule| ProfileViolation {
            field,
            value: u64::from(value),
            rule,
        };
        if self.min_timeout_ms == 0 {
            out.push(v(ProfileField::Min, 0, ProfileRule::MinIsZero));
        }
        if self.default_timeout_ms == 0 {
            // The value written is the default: the minimum above it follows from it.
            out.push(v(ProfileField::Default, 0, ProfileRule::DefaultIsZero));
        } else if self.min_timeout_ms > self.default_timeout_ms {
            out.push(v(
                ProfileField::Min,
                self.min_timeout_ms,
                ProfileRule::MinAboveDefault {
                    default_ms: self.default_timeout_ms,
                },
            ));
        }
        if self.default_timeout_ms > self.max_timeout_ms {
            out.push(v(
                ProfileField::Max,
                self.max_timeout_ms,
                ProfileRule::MaxBelowDefault {
                    default_ms: self.default_timeout_ms,
                },
            ));
        }
        out
    }

    /// The default timeout as a [`Duration`]: the field `default_timeout_ms` (the word
    /// of `ProfileSetBuilder::default_timeout_ms`, which sets milliseconds), read in
    /// the unit of [`TimeoutProfileBuilder::default_timeout`], which sets a
    /// `Duration`. Each getter has its setter's word; the two setters differ in unit.
    pub fn default_timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.default_timeout_ms))
    }

    /// The lower bound as a [`Duration`].
    pub fn min_timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.min_timeout_ms))
    }

    /// The upper bound as a [`Duration`].
    pub fn max_timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.max_timeout_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_table_matches_the_spec() {
        // (name, default, min, max, allow_infinite) copied from SW4-002 §1.2.
        let spec: [(&str, u32, u32, u32, bool); 12] = [
            ("heartbeat", 5_000, 1_000, 30_000, false),
            ("registration", 30_000, 5_000, 120_000, false),
            ("task_submit", 30_000, 5_000, 300_000, false),
            ("message_route", 10_000, 1_000, 60_000, false),
            ("negotiation_open", 60_000, 10_000, 600_000, false),
            ("negotiation_vote", 300_000, 30_000, 1_800_000, true),
            ("negotiation_decision", 60_000, 5_000, 300_000, false),
            ("handoff", 60_000, 10_000, 300_000, false),
            ("workflow_submit", 30_000, 5_000, 120_000, false),
            ("workflow_status", 10_000, 1_000, 60_000, false),
            ("tool_call", 30_000, 1_000, 3_600_000, true),
            ("hitl_escalate", 300_000, 60_000, 3_600_000, true),
        ];
        for (p, (name, d, min, max, inf)) in STANDARD_PROFILES.iter().zip(spec) {
            assert_eq!(
                (
                    p.name.as_ref(),
                    p.default_timeout_ms,
                    p.min_timeout_ms,
                    p.max_timeout_ms,
                    p.allow_infinite
                ),
                (name, d, min, max, inf)
            );
            assert!(p.violations().is_empty(), "{name}");
        }
    }

    #[test]
    fn violations_name_field_and_value() {
        use ProfileField::{Default, Max, Min};
        type Row = ((u32, u32, u32), &'static [(ProfileField, u64)]);
        let table: [Row; 7] = [
            ((5, 1, 10), &[]),
            ((5, 0, 10), &[(Min, 0)]),
            // A zero default is the value written: the minimum above it is not blamed.
            ((0, 1_000, 30_000), &[(Default, 0)]),
            ((0, 0, 10), &[(Min, 0), (Default, 0)]),
            ((5, 6, 10), &[(Min, 6)]),
            ((11, 1, 10), &[(Max, 10)]),
            ((5, 20, 4), &[(Min, 20), (Max, 4)]),
        ];
        for ((d, min, max), want) in table {
            let p = std_profile("x", d, min, max, false);
            let got: Vec<_> = p.violations().iter().map(|v| (v.field, v.value)).collect();
            assert_eq!(got, want.to_vec(), "d={d} min={min} max={max}");
        }
    }

    #[test]
    fn builder_rejects_values_that_are_not_whole_millis() {
        let err = TimeoutProfile::builder("x")
            .default_timeout(Duration::from_micros(1_500))
            .min_timeout(Duration::from_millis(1))
            .max_timeout(Duration::from_secs(u64::from(u32::MAX)))
            .build()
            .unwrap_err();
        let fields: Vec<_> = err.violations.iter().map(|v| (v.field, v.rule)).collect();
        assert_eq!(
            fields,
            [
                (ProfileField::Default, ProfileRule::NotWholeMillis),
                (ProfileField::Max, ProfileRule::NotWholeMillis)
            ]
        );
    }
}
