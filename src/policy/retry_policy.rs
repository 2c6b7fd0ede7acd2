//! [`RetryPolicy`]: how a call is retried (SW4-002 §5.2), its named builder, and the
//! bounds it is checked against. The decisions made with it are `retry.rs`.

use std::fmt;
use std::time::Duration;

use super::profile::{ProfileField, ProfileRule, ProfileViolation};
use super::profile_error::write_violations;

/// gRPC status code `UNAVAILABLE`.
pub(super) const UNAVAILABLE: i32 = 14;

/// How a call is retried (SW4-002 §5.2): up to `max_attempts` attempts inside the
/// call's one deadline, exponential backoff with full jitter between them, and an
/// optional timeout per attempt.
///
/// Build one with [`RetryPolicy::builder`]; [`RetryPolicy::standard`] is the default
/// every profile starts from, [`RetryPolicy::off`] sends every call once.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::RetryPolicy;
/// let policy = RetryPolicy::builder()
///     .max_attempts(4)
///     .initial_backoff(Duration::from_millis(20))
///     .max_backoff(Duration::from_millis(500))
///     .attempt_timeout(Duration::from_secs(2))
///     .build()?;
/// assert_eq!(policy.max_attempts(), 4);
/// assert_eq!(policy.attempt_timeout(), Some(Duration::from_secs(2)));
/// assert!(RetryPolicy::builder().max_attempts(9).build().is_err());
/// # Ok::<(), sw4rm_timeouts::RetryPolicyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    pub(super) max_attempts: u32,
    pub(super) initial_backoff: Duration,
    pub(super) max_backoff: Duration,
    pub(super) multiplier: u32,
    pub(super) attempt_timeout: Option<Duration>,
    /// Bit `n` set: gRPC status code `n` is retried.
    pub(super) codes: u32,
}

impl RetryPolicy {
    /// The largest `max_attempts` (gRPC A6 caps it at 5).
    pub const MAX_ATTEMPTS: u32 = 5;

    /// The standard policy: 3 attempts, backoff from 50 ms doubling up to 1 s, no
    /// separate attempt timeout (each attempt may use what remains of the deadline),
    /// `UNAVAILABLE` retried.
    pub const fn standard() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
            multiplier: 2,
            attempt_timeout: None,
            codes: 1 << UNAVAILABLE,
        }
    }

    /// One attempt: no retries.
    pub const fn off() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::standard()
        }
    }

    /// A builder starting from [`RetryPolicy::standard`].
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder {
            policy: RetryPolicy::standard(),
        }
    }

    /// Attempts in all, the first included (1 = no retries).
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The backoff ceiling before the first retry.
    pub fn initial_backoff(&self) -> Duration {
        self.initial_backoff
    }

    /// The largest backoff ceiling.
    pub fn max_backoff(&self) -> Duration {
        self.max_backoff
    }

    /// Each retry's backoff ceiling is the previous one times this (1 = constant).
    pub fn backoff_multiplier(&self) -> u32 {
        self.multiplier
    }

    /// The longest one attempt may take (`None`: what remains of the deadline).
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }

    /// Whether a status code (its gRPC number) is retried.
    ///
    /// ```
    /// use sw4rm_timeouts::RetryPolicy;
    /// assert!(RetryPolicy::standard().retries_code(tonic::Code::Unavailable));
    /// assert!(!RetryPolicy::standard().retries_code(tonic::Code::Internal));
    /// ```
    pub fn retries_code(&self, code: impl Into<i32>) -> bool {
        let code: i32 = code.into();
        (0..32).contains(&code) && self.codes & (1 << code) != 0
    }

    /// Whether retries are on at all.
    pub fn is_on(&self) -> bool {
        self.max_attempts > 1
    }

    /// The policy as configuration values (`retry.*` keys of a profile), in
    /// [`ProfileField`] order: max attempts, initial backoff (ms), max backoff (ms),
    /// multiplier, attempt timeout (ms, 0 = none).
    pub(crate) fn fields(&self) -> [u32; 5] {
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        [
            self.max_attempts,
            ms(self.initial_backoff),
            ms(self.max_backoff),
            self.multiplier,
            self.attempt_timeout.map_or(0, ms),
        ]
    }

    /// The policy from configuration values (see [`RetryPolicy::fields`]), keeping
    /// this policy's status codes; every rule broken, each naming its field.
    pub(crate) fn with_fields(
        self,
        [attempts, initial, max, multiplier, attempt]: [u32; 5],
        min_timeout_ms: u32,
    ) -> (RetryPolicy, Vec<ProfileViolation>) {
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        let policy = RetryPolicy {
            max_attempts: attempts,
            initial_backoff: ms(initial),
            max_backoff: ms(max),
            multiplier,
            attempt_timeout: (attempt != 0).then(|| ms(attempt)),
            codes: self.codes,
        };
        let violations = policy.violations(ms(min_timeout_ms));
        (policy, violations)
    }

    /// Every bound this policy breaks, each naming its field; an attempt timeout
    /// must not be below `min_timeout` (the profile's minimum).
    pub(crate) fn violations(&self, min_timeout: Duration) -> Vec<ProfileViolation> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut v = |field, value: u64, rule| {
            out.push(ProfileViolation { field, value, rule });
        };
        if !(1..=Self::MAX_ATTEMPTS).contains(&self.max_attempts) {
            v(
                ProfileField::RetryMaxAttempts,
                u64::from(self.max_attempts),
                ProfileRule::AttemptsOutOfRange,
            );
        }
        let durations = [
            (
                ProfileField::RetryInitialBackoff,
                Some(self.initial_backoff),
            ),
            (ProfileField::RetryMaxBackoff, Some(self.max_backoff)),
            (ProfileField::RetryAttemptTimeout, self.attempt_timeout),
        ];
        for (field, d) in durations {
            if let Some(d) = d.filter(|d| d.as_millis() > u128::from(u32::MAX)) {
                v(field, ms(d), ProfileRule::NotWholeMillis);
            }
        }
        if self.initial_backoff.is_zero() {
            v(
                ProfileField::RetryInitialBackoff,
                0,
                ProfileRule::BackoffIsZero,
            );
        }
        if self.max_backoff.is_zero() {
            v(ProfileField::RetryMaxBackoff, 0, ProfileRule::BackoffIsZero);
        } else if self.max_backoff < self.initial_backoff {
            v(
                ProfileField::RetryMaxBackoff,
                ms(self.max_backoff),
                ProfileRule::MaxBackoffBelowInitial,
            );
        }
        if self.multiplier == 0 {
            v(
                ProfileField::RetryMultiplier,
                0,
                ProfileRule::MultiplierIsZero,
            );
        }
        match self.attempt_timeout {
            Some(t) if t.is_zero() => v(
                ProfileField::RetryAttemptTimeout,
                0,
                ProfileRule::AttemptTimeoutIsZero,
            ),
            Some(t) if t < min_timeout => v(
                ProfileField::RetryAttemptTimeout,
                ms(t),
                ProfileRule::AttemptTimeoutBelowMin,
            ),
            _ => {}
        }
        out
    }

    /// The backoff ceiling before retry `n` (1 = the first retry):
    /// `min(initial · multiplier^(n−1), max)`.
    pub(crate) fn backoff_ceiling(&self, retry: u32) -> Duration {
        let factor = u64::from(self.multiplier).saturating_pow(retry.saturating_sub(1));
        let factor = u32::try_from(factor).unwrap_or(u32::MAX);
        self.initial_backoff
            .checked_mul(factor)
            .unwrap_or(Duration::MAX)
            .min(self.max_backoff)
    }

    /// Full jitter: `random(0, ceiling)`, with `jitter` uniform in `[0, 1)`.
    pub(crate) fn backoff(&self, retry: u32, jitter: f64) -> Duration {
        let ceiling = self.backoff_ceiling(retry);
        Duration::try_from_secs_f64(ceiling.as_secs_f64() * jitter.clamp(0.0, 1.0))
            .map_or(ceiling, |d| d.min(ceiling))
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::standard()
    }
}

/// Builds a [`RetryPolicy`]; [`build`](RetryPolicyBuilder::build) checks the bounds.
#[derive(Clone, Debug)]
pub struct RetryPolicyBuilder {
    policy: RetryPolicy,
}

impl RetryPolicyBuilder {
    /// Attempts in all, 1 to 5 (1 = no retries).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.policy.max_attempts = attempts;
        self
    }

    /// The backoff ceiling before the first retry (> 0).
    pub fn initial_backoff(mut self, backoff: Duration) -> Self {
        self.policy.initial_backoff = backoff;
        self
    }

    /// The largest backoff ceiling (≥ the initial backoff).
    pub fn max_backoff(mut self, backoff: Duration) -> Self {
        self.policy.max_backoff = backoff;
        self
    }

    /// Each retry's ceiling is the previous one times this (≥ 1).
    pub fn backoff_multiplier(mut self, multiplier: u32) -> Self {
        self.policy.multiplier = multiplier;
        self
    }

    /// The longest one attempt may take; later attempts never get more. It is raised
    /// to the profile's minimum if below it.
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.policy.attempt_timeout = Some(timeout);
        self
    }

    /// Also retry this status code (`UNAVAILABLE` is retried by default).
    pub fn retry_on(mut self, code: impl Into<i32>) -> Self {
        let code: i32 = code.into();
        if (0..32).contains(&code) {
            self.policy.codes |= 1 << code;
        }
        self
    }

    /// Retry only these status codes (none: only attempt timeouts and requests that
    /// never reached the server).
    pub fn retry_only_on<C: Into<i32>>(mut self, codes: impl IntoIterator<Item = C>) -> Self {
        self.policy.codes = 0;
        for code in codes {
            self = self.retry_on(code);
        }
        self
    }

    /// Checks every bound and returns the policy, or every rule it breaks.
    pub fn build(self) -> Result<RetryPolicy, RetryPolicyError> {
        let violations = self.policy.violations(Duration::ZERO);
        if violations.is_empty() {
            Ok(self.policy)
        } else {
            Err(RetryPolicyError { violations })
        }
    }
}

/// A [`RetryPolicy`] that breaks its bounds: every rule broken, each with its field.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicyError {
    /// What is wrong, field by field.
    pub violations: Vec<ProfileViolation>,
}

impl fmt::Display for RetryPolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid retry policy (builder):")?;
        write_violations(f, " ", &self.violations)
    }
}

impl std::error::Error for RetryPolicyError {}
