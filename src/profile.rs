//! Timeout profiles (SW4-002 §1): the profile type, the twelve standard profiles and
//! the fallback profile for RPCs outside the routing table.

use std::borrow::Cow;
use std::time::Duration;

use crate::proto::sw4rm::timeouts as pb;

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
/// ```
/// use sw4rm_timeouts::TimeoutProfile;
/// let hb = TimeoutProfile::standard_named("heartbeat").unwrap();
/// assert_eq!(hb.default_timeout_ms, 5_000);
/// assert_eq!(hb.default_timeout(), std::time::Duration::from_secs(5));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
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
pub const STANDARD_PROFILES: [TimeoutProfile; 12] = [
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

/// One broken profile invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileViolation {
    /// The field that breaks the rule (`min_timeout_ms`, ...).
    pub field: &'static str,
    /// The field's value.
    pub value: u32,
    /// The rule, in words.
    pub rule: String,
}

impl TimeoutProfile {
    /// A validated profile. The name is lowercased (profile names are case-insensitive).
    ///
    /// ```
    /// use sw4rm_timeouts::TimeoutProfile;
    /// assert!(TimeoutProfile::new("slow_tool", 60_000, 1_000, 600_000, true).is_ok());
    /// let err = TimeoutProfile::new("bad", 500, 1_000, 600_000, false).unwrap_err();
    /// assert_eq!(err[0].field, "min_timeout_ms");
    /// ```
    pub fn new(
        name: impl Into<String>,
        default_timeout_ms: u32,
        min_timeout_ms: u32,
        max_timeout_ms: u32,
        allow_infinite: bool,
    ) -> Result<Self, Vec<ProfileViolation>> {
        let profile = TimeoutProfile {
            name: Cow::Owned(name.into().to_ascii_lowercase()),
            default_timeout_ms,
            min_timeout_ms,
            max_timeout_ms,
            allow_infinite,
        };
        let violations = profile.violations();
        if violations.is_empty() {
            Ok(profile)
        } else {
            Err(violations)
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
    pub fn violations(&self) -> Vec<ProfileViolation> {
        let mut out = Vec::new();
        if self.min_timeout_ms == 0 {
            out.push(ProfileViolation {
                field: "min_timeout_ms",
                value: 0,
                rule: "must be greater than 0".into(),
            });
        }
        if self.min_timeout_ms > self.default_timeout_ms {
            out.push(ProfileViolation {
                field: "min_timeout_ms",
                value: self.min_timeout_ms,
                rule: format!(
                    "must be <= default_timeout_ms ({})",
                    self.default_timeout_ms
                ),
            });
        }
        if self.default_timeout_ms > self.max_timeout_ms {
            out.push(ProfileViolation {
                field: "max_timeout_ms",
                value: self.max_timeout_ms,
                rule: format!(
                    "must be >= default_timeout_ms ({})",
                    self.default_timeout_ms
                ),
            });
        }
        out
    }

    /// The default timeout as a [`Duration`].
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

impl From<&TimeoutProfile> for pb::TimeoutProfile {
    fn from(p: &TimeoutProfile) -> Self {
        pb::TimeoutProfile {
            profile_name: p.name.to_string(),
            default_timeout_ms: p.default_timeout_ms,
            min_timeout_ms: p.min_timeout_ms,
            max_timeout_ms: p.max_timeout_ms,
            allow_infinite: p.allow_infinite,
        }
    }
}

impl TryFrom<pb::TimeoutProfile> for TimeoutProfile {
    type Error = Vec<ProfileViolation>;

    /// Validates the wire message like [`TimeoutProfile::new`].
    fn try_from(m: pb::TimeoutProfile) -> Result<Self, Self::Error> {
        TimeoutProfile::new(
            m.profile_name,
            m.default_timeout_ms,
            m.min_timeout_ms,
            m.max_timeout_ms,
            m.allow_infinite,
        )
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
        type Row = ((u32, u32, u32), &'static [(&'static str, u32)]);
        let table: [Row; 5] = [
            ((5, 1, 10), &[]),
            ((5, 0, 10), &[("min_timeout_ms", 0)]),
            ((5, 6, 10), &[("min_timeout_ms", 6)]),
            ((11, 1, 10), &[("max_timeout_ms", 10)]),
            ((5, 20, 4), &[("min_timeout_ms", 20), ("max_timeout_ms", 4)]),
        ];
        for ((d, min, max), want) in table {
            let p = std_profile("x", d, min, max, false);
            let got: Vec<_> = p.violations().iter().map(|v| (v.field, v.value)).collect();
            assert_eq!(got, want.to_vec(), "d={d} min={min} max={max}");
        }
    }

    #[test]
    fn proto_round_trip_and_validation() {
        for p in STANDARD_PROFILES.iter() {
            let m = pb::TimeoutProfile::from(p);
            assert_eq!(&TimeoutProfile::try_from(m).unwrap(), p);
        }
        let bad = pb::TimeoutProfile {
            profile_name: "X".into(),
            default_timeout_ms: 1,
            min_timeout_ms: 0,
            max_timeout_ms: 1,
            allow_infinite: false,
        };
        assert_eq!(
            TimeoutProfile::try_from(bad).unwrap_err()[0].field,
            "min_timeout_ms"
        );
    }
}
