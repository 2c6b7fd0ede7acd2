//! What can be wrong with a profile, in words a user can act on: the field
//! ([`ProfileField`], as configuration spells it), the rule it broke
//! ([`ProfileRule`]), and every violation of one profile at once ([`ProfileError`]).

use std::fmt;

/// A settable field of a profile, as written in configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ProfileField {
    /// `default_timeout_ms`.
    Default,
    /// `min_timeout_ms`.
    Min,
    /// `max_timeout_ms`.
    Max,
    /// `allow_infinite`.
    AllowInfinite,
    /// `streaming.initial_timeout_ms`.
    StreamInitial,
    /// `streaming.message_gap_timeout_ms`.
    StreamGap,
    /// `streaming.total_timeout_ms`.
    StreamTotal,
    /// `streaming.idle_timeout_ms` (the idle limit of long work; 0 = none).
    StreamIdle,
    /// `retry.max_attempts` (a count, 1 to 5).
    RetryMaxAttempts,
    /// `retry.initial_backoff_ms`.
    RetryInitialBackoff,
    /// `retry.max_backoff_ms`.
    RetryMaxBackoff,
    /// `retry.backoff_multiplier` (a whole number, ≥ 1).
    RetryMultiplier,
    /// `retry.attempt_timeout_ms` (0 = each attempt may use what remains).
    RetryAttemptTimeout,
    /// `hedging.max_attempts` (a count, 1 to 5; 1 = no hedging).
    HedgeMaxAttempts,
    /// `hedging.delay_ms` (a fixed delay before each hedge; 0 = learned).
    HedgeDelay,
    /// `hedging.percentile` (a count, 50 to 99: the learned delay's percentile).
    HedgePercentile,
    /// `hedging.min_delay_ms` (the learned delay's floor).
    HedgeMinDelay,
    /// `hedging.max_delay_ms` (the learned delay's cap).
    HedgeMaxDelay,
}

impl ProfileField {
    /// Every field, in table order.
    pub const ALL: &'static [ProfileField] = &[
        ProfileField::Default,
        ProfileField::Min,
        ProfileField::Max,
        ProfileField::AllowInfinite,
        ProfileField::StreamInitial,
        ProfileField::StreamGap,
        ProfileField::StreamTotal,
        ProfileField::StreamIdle,
        ProfileField::RetryMaxAttempts,
        ProfileField::RetryInitialBackoff,
        ProfileField::RetryMaxBackoff,
        ProfileField::RetryMultiplier,
        ProfileField::RetryAttemptTimeout,
        ProfileField::HedgeMaxAttempts,
        ProfileField::HedgeDelay,
        ProfileField::HedgePercentile,
        ProfileField::HedgeMinDelay,
        ProfileField::HedgeMaxDelay,
    ];

    /// The number of fields.
    pub(crate) const COUNT: usize = 18;

    /// The retry fields, in [`crate::RetryPolicy`] field order.
    pub(crate) const RETRY: [ProfileField; 5] = [
        ProfileField::RetryMaxAttempts,
        ProfileField::RetryInitialBackoff,
        ProfileField::RetryMaxBackoff,
        ProfileField::RetryMultiplier,
        ProfileField::RetryAttemptTimeout,
    ];

    /// The hedging fields, in [`crate::HedgingPolicy`] field order.
    pub(crate) const HEDGING: [ProfileField; 5] = [
        ProfileField::HedgeMaxAttempts,
        ProfileField::HedgeDelay,
        ProfileField::HedgePercentile,
        ProfileField::HedgeMinDelay,
        ProfileField::HedgeMaxDelay,
    ];

    /// The key as written in configuration, relative to the profile.
    ///
    /// ```
    /// use sw4rm_timeouts::ProfileField;
    /// assert_eq!(ProfileField::StreamGap.key(), "streaming.message_gap_timeout_ms");
    /// assert_eq!(ProfileField::from_key("max_timeout_ms"), Some(ProfileField::Max));
    /// ```
    pub fn key(self) -> &'static str {
        match self {
            ProfileField::Default => "default_timeout_ms",
            ProfileField::Min => "min_timeout_ms",
            ProfileField::Max => "max_timeout_ms",
            ProfileField::AllowInfinite => "allow_infinite",
            ProfileField::StreamInitial => "streaming.initial_timeout_ms",
            ProfileField::StreamGap => "streaming.message_gap_timeout_ms",
            ProfileField::StreamTotal => "streaming.total_timeout_ms",
            ProfileField::StreamIdle => "streaming.idle_timeout_ms",
            ProfileField::RetryMaxAttempts => "retry.max_attempts",
            ProfileField::RetryInitialBackoff => "retry.initial_backoff_ms",
            ProfileField::RetryMaxBackoff => "retry.max_backoff_ms",
            ProfileField::RetryMultiplier => "retry.backoff_multiplier",
            ProfileField::RetryAttemptTimeout => "retry.attempt_timeout_ms",
            ProfileField::HedgeMaxAttempts => "hedging.max_attempts",
            ProfileField::HedgeDelay => "hedging.delay_ms",
            ProfileField::HedgePercentile => "hedging.percentile",
            ProfileField::HedgeMinDelay => "hedging.min_delay_ms",
            ProfileField::HedgeMaxDelay => "hedging.max_delay_ms",
        }
    }

    /// The field written as `key`.
    pub fn from_key(key: &str) -> Option<ProfileField> {
        ProfileField::ALL.iter().copied().find(|f| f.key() == key)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The sub-table (`streaming`, `retry` or `hedging`) and the key inside it, for the fields
    /// that live in one.
    pub(crate) fn table_key(self) -> Option<(&'static str, &'static str)> {
        self.key().split_once('.')
    }

    /// Whether the value is a count rather than milliseconds.
    pub(crate) fn is_count(self) -> bool {
        matches!(
            self,
            ProfileField::RetryMaxAttempts
                | ProfileField::RetryMultiplier
                | ProfileField::HedgeMaxAttempts
                | ProfileField::HedgePercentile
        )
    }

    pub(crate) fn is_bool(self) -> bool {
        self == ProfileField::AllowInfinite
    }
}

/// The invariant a profile value breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileRule {
    /// `min_timeout_ms` must be greater than 0.
    MinIsZero,
    /// `default_timeout_ms` must be greater than 0 (no deadline is said per call, as
    /// 0, where the profile allows infinite).
    DefaultIsZero,
    /// `min_timeout_ms` must not exceed `default_timeout_ms`.
    MinAboveDefault {
        /// The default it exceeds.
        default_ms: u32,
    },
    /// `max_timeout_ms` must not be below `default_timeout_ms`.
    MaxBelowDefault {
        /// The default it is below.
        default_ms: u32,
    },
    /// `streaming.message_gap_timeout_ms` must not exceed a non-zero total.
    GapAboveTotal {
        /// The gap.
        gap_ms: u32,
        /// The total it exceeds.
        total_ms: u32,
    },
    /// A builder value that is not a whole number of milliseconds up to `u32::MAX`.
    NotWholeMillis,
    /// `retry.max_attempts` must be 1 to 5.
    AttemptsOutOfRange,
    /// A retry backoff must be greater than 0.
    BackoffIsZero,
    /// `retry.max_backoff_ms` must not be below `retry.initial_backoff_ms`.
    MaxBackoffBelowInitial,
    /// `retry.backoff_multiplier` must be at least 1.
    MultiplierIsZero,
    /// `retry.attempt_timeout_ms` must be 0 (none) or at least `min_timeout_ms`.
    AttemptTimeoutBelowMin,
    /// A builder's attempt timeout must be greater than 0.
    AttemptTimeoutIsZero,
    /// `hedging.max_attempts` must be 1 to 5.
    HedgeAttemptsOutOfRange,
    /// `hedging.percentile` must be 50 to 99.
    PercentileOutOfRange,
    /// `hedging.min_delay_ms` must not exceed `hedging.max_delay_ms`.
    MinDelayAboveMax,
}

impl fmt::Display for ProfileRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileRule::MinIsZero => f.write_str("must be greater than 0"),
            ProfileRule::DefaultIsZero => f.write_str(
                "must be greater than 0 (for no deadline, set allow_infinite and pass 0 per call)",
            ),
            ProfileRule::MinAboveDefault { default_ms } => {
                write!(f, "must be <= default_timeout_ms ({default_ms})")
            }
            ProfileRule::MaxBelowDefault { default_ms } => {
                write!(f, "must be >= default_timeout_ms ({default_ms})")
            }
            ProfileRule::GapAboveTotal { gap_ms, total_ms } => write!(
                f,
                "message_gap_timeout_ms ({gap_ms}) must be <= total_timeout_ms ({total_ms}) when both are set"
            ),
            ProfileRule::NotWholeMillis => {
                f.write_str("must be a whole number of milliseconds up to 4294967295")
            }
            ProfileRule::AttemptsOutOfRange => f.write_str("must be 1 to 5 (1 = no retries)"),
            ProfileRule::BackoffIsZero => f.write_str("must be greater than 0"),
            ProfileRule::MaxBackoffBelowInitial => {
                f.write_str("must be >= retry.initial_backoff_ms")
            }
            ProfileRule::MultiplierIsZero => f.write_str("must be at least 1"),
            ProfileRule::AttemptTimeoutBelowMin => {
                f.write_str("must be 0 (none) or >= min_timeout_ms")
            }
            ProfileRule::AttemptTimeoutIsZero => f.write_str("must be greater than 0"),
            ProfileRule::HedgeAttemptsOutOfRange => {
                f.write_str("must be 1 to 5 (1 = no hedging)")
            }
            ProfileRule::PercentileOutOfRange => f.write_str("must be 50 to 99"),
            ProfileRule::MinDelayAboveMax => f.write_str("must be <= hedging.max_delay_ms"),
        }
    }
}

/// One broken profile invariant: the field, its value and the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProfileViolation {
    /// The field that breaks the rule.
    pub field: ProfileField,
    /// The field's value in milliseconds.
    pub value: u64,
    /// The rule.
    pub rule: ProfileRule,
}

impl fmt::Display for ProfileViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}: {}", self.field.key(), self.value, self.rule)
    }
}

/// Every violation of a profile, reported together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileError {
    /// The profile's name.
    pub profile: String,
    /// What is wrong.
    pub violations: Vec<ProfileViolation>,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid timeout profile `{}`", self.profile)?;
        write_violations(f, ": ", &self.violations)
    }
}

/// Writes each violation (`key = value: rule`), the first after `first`, the others
/// after "; ": the one way a profile's, a retry policy's and a hedging policy's errors
/// list what is wrong.
pub(crate) fn write_violations(
    f: &mut fmt::Formatter<'_>,
    first: &str,
    violations: &[ProfileViolation],
) -> fmt::Result {
    for (i, v) in violations.iter().enumerate() {
        f.write_str(if i == 0 { first } else { "; " })?;
        fmt::Display::fmt(v, f)?;
    }
    Ok(())
}

impl std::error::Error for ProfileError {}
