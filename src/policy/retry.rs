//! SW4-002 §5.2 retries as pure rules: the policy and its bounds, exponential
//! backoff with full jitter, the server's pushback, the decision after a failed
//! attempt (retry, with which backoff and attempt timeout, or stop and why), and the
//! arithmetic of the retry budget (gRPC's retry throttling).
//!
//! The whole call's deadline covers every attempt and backoff; this module only
//! decides. `src/attempts/` carries the decision out (the attempt future, the kept
//! request, the retry state and budget).

use std::time::Duration;

#[cfg(test)]
use super::retry_policy::UNAVAILABLE;
pub use super::retry_policy::{RetryPolicy, RetryPolicyBuilder, RetryPolicyError};

/// Why an attempt failed, as far as retrying is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The server answered with this gRPC status code.
    Code(i32),
    /// The attempt reached its own attempt timeout (the call's deadline had not).
    AttemptTimeout,
    /// The request provably never reached the server (connection refused,
    /// `REFUSED_STREAM`): safe to send again whatever the RPC does.
    NotSent,
}

/// What the server's `grpc-retry-pushback-ms` trailer said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pushback {
    /// No pushback: the policy's backoff.
    None,
    /// Retry after exactly this long.
    After(Duration),
    /// A negative or malformed value: do not retry.
    Stop,
}

impl Pushback {
    /// Reads a `grpc-retry-pushback-ms` value.
    pub(crate) fn parse(value: Option<&[u8]>) -> Pushback {
        let Some(value) = value else {
            return Pushback::None;
        };
        match std::str::from_utf8(value).ok().map(str::parse::<u64>) {
            Some(Ok(ms)) => Pushback::After(Duration::from_millis(ms)),
            _ => Pushback::Stop,
        }
    }
}

/// The longest pushback honoured (the longest SW4-002 maximum, 1 h); a longer one
/// means "do not retry".
pub(crate) const MAX_PUSHBACK: Duration = Duration::from_secs(3_600);

/// Why a failed attempt is the call's last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The status is not one the policy retries.
    NotRetryable,
    /// The request may have reached the server and the RPC is not idempotent.
    NotIdempotent,
    /// `max_attempts` reached.
    Attempts,
    /// The server's pushback said not to.
    Pushback,
    /// After the backoff, less than the profile's minimum would remain.
    NoTimeLeft,
    /// The retry budget is spent.
    Budget,
}

impl Stop {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stop::NotRetryable => "not_retryable",
            Stop::NotIdempotent => "not_idempotent",
            Stop::Attempts => "max_attempts",
            Stop::Pushback => "pushback",
            Stop::NoTimeLeft => "no_time_left",
            Stop::Budget => "budget",
        }
    }
}

/// The decision after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Wait `backoff`, then send attempt `attempt` with `timeout` (`None`: no
    /// deadline on the attempt).
    Retry {
        attempt: u32,
        backoff: Duration,
        timeout: Option<Duration>,
    },
    /// The failure is the call's answer.
    Stop(Stop),
}

/// Everything the decision depends on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Failed {
    /// The attempt that failed, from 1.
    pub(crate) attempt: u32,
    pub(crate) failure: Failure,
    /// The RPC (or this call) may be sent twice.
    pub(crate) idempotent: bool,
    /// The attempt timeout the failed attempt ran under.
    pub(crate) last_timeout: Option<Duration>,
    /// What remains of the call's deadline now (`None`: no deadline).
    pub(crate) remaining: Option<Duration>,
    /// The profile's minimum: no attempt runs under less.
    pub(crate) min_timeout: Duration,
    pub(crate) pushback: Pushback,
    /// Uniform in `[0, 1)`.
    pub(crate) jitter: f64,
}

/// The first attempt's timeout: `min(attempt timeout raised to the profile's
/// minimum, the whole deadline)`.
pub(crate) fn first_timeout(
    policy: &RetryPolicy,
    deadline: Option<Duration>,
    min_timeout: Duration,
) -> Option<Duration> {
    min_some(policy.attempt_timeout.map(|t| t.max(min_timeout)), deadline)
}

fn min_some(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Retry or stop after a failed attempt (SW4-002 §5.2).
pub(crate) fn decide(policy: &RetryPolicy, f: Failed) -> Decision {
    let retryable = match f.failure {
        Failure::Code(code) => policy.retries_code(code),
        Failure::AttemptTimeout | Failure::NotSent => true,
    };
    if !retryable {
        return Decision::Stop(Stop::NotRetryable);
    }
    if !f.idempotent && f.failure != Failure::NotSent {
        return Decision::Stop(Stop::NotIdempotent);
    }
    if f.attempt >= policy.max_attempts {
        return Decision::Stop(Stop::Attempts);
    }
    let backoff = match f.pushback {
        // Longer than any SW4-002 profile allows a call to take: as good as "never".
        Pushback::After(d) if d > MAX_PUSHBACK => return Decision::Stop(Stop::Pushback),
        Pushback::Stop => return Decision::Stop(Stop::Pushback),
        Pushback::After(d) => d,
        Pushback::None => policy.backoff(f.attempt, f.jitter),
    };
    let remaining = match f.remaining {
        Some(r) => match r.checked_sub(backoff) {
            Some(left) => Some(left),
            None => return Decision::Stop(Stop::NoTimeLeft),
        },
        None => None,
    };
    // Fast-fail: never more than the attempt timeout, what remains, or the last
    // attempt had.
    let attempt_timeout = policy.attempt_timeout.map(|t| t.max(f.min_timeout));
    let timeout = min_some(min_some(attempt_timeout, remaining), f.last_timeout);
    if timeout.is_some_and(|t| t < f.min_timeout) {
        return Decision::Stop(Stop::NoTimeLeft);
    }
    Decision::Retry {
        attempt: f.attempt + 1,
        backoff,
        timeout,
    }
}

/// Retry throttling as gRPC defines it: a bucket of `max_tokens`; each failed
/// attempt takes one token, each answer that is not a failure gives back
/// `token_ratio`; retries are allowed only while more than half the bucket is left.
/// Tokens are counted in thousandths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Throttle {
    pub(crate) max_milli: u32,
    pub(crate) ratio_milli: u32,
}

impl Throttle {
    /// Tokens after a failed attempt.
    pub(crate) fn after_failure(self, tokens: u32) -> u32 {
        tokens.saturating_sub(1_000)
    }

    /// Tokens after an answer that is not a failure.
    pub(crate) fn after_success(self, tokens: u32) -> u32 {
        tokens.saturating_add(self.ratio_milli).min(self.max_milli)
    }

    /// Whether a retry may be sent with this many tokens.
    pub(crate) fn allows(self, tokens: u32) -> bool {
        tokens > self.max_milli / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::profile::{ProfileField, ProfileRule};
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn failed(attempt: u32, failure: Failure) -> Failed {
        Failed {
            attempt,
            failure,
            idempotent: true,
            last_timeout: None,
            remaining: Some(ms(10_000)),
            min_timeout: ms(100),
            pushback: Pushback::None,
            jitter: 0.5,
        }
    }

    fn policy() -> RetryPolicy {
        RetryPolicy::builder()
            .max_attempts(3)
            .initial_backoff(ms(100))
            .max_backoff(ms(1_000))
            .attempt_timeout(ms(2_000))
            .build()
            .unwrap()
    }

    #[test]
    fn decision_table() {
        struct Row {
            name: &'static str,
            failed: Failed,
            want: Decision,
        }
        let retry = |attempt, backoff, timeout: Option<u64>| Decision::Retry {
            attempt,
            backoff: ms(backoff),
            timeout: timeout.map(ms),
        };
        let base = failed(1, Failure::Code(UNAVAILABLE));
        let rows = [
            Row {
                name: "unavailable retries with half the first ceiling (jitter 0.5)",
                failed: base,
                want: retry(2, 50, Some(2_000)),
            },
            Row {
                name: "the second retry's ceiling doubles",
                failed: Failed {
                    attempt: 2,
                    last_timeout: Some(ms(2_000)),
                    ..base
                },
                want: retry(3, 100, Some(2_000)),
            },
            Row {
                name: "max attempts reached",
                failed: Failed { attempt: 3, ..base },
                want: Decision::Stop(Stop::Attempts),
            },
            Row {
                name: "a code the policy does not retry",
                failed: failed(1, Failure::Code(13)),
                want: Decision::Stop(Stop::NotRetryable),
            },
            Row {
                name: "a mutation that may have reached the server",
                failed: Failed {
                    idempotent: false,
                    ..base
                },
                want: Decision::Stop(Stop::NotIdempotent),
            },
            Row {
                name: "a mutation that never reached the server",
                failed: Failed {
                    idempotent: false,
                    failure: Failure::NotSent,
                    ..base
                },
                want: retry(2, 50, Some(2_000)),
            },
            Row {
                name: "an attempt timeout with time left",
                failed: failed(1, Failure::AttemptTimeout),
                want: retry(2, 50, Some(2_000)),
            },
            Row {
                name: "the remaining time caps the next attempt",
                failed: Failed {
                    remaining: Some(ms(850)),
                    ..base
                },
                want: retry(2, 50, Some(800)),
            },
            Row {
                name: "later attempts never get more than earlier ones",
                failed: Failed {
                    last_timeout: Some(ms(700)),
                    ..base
                },
                want: retry(2, 50, Some(700)),
            },
            Row {
                name: "less than the profile minimum would remain",
                failed: Failed {
                    remaining: Some(ms(140)),
                    ..base
                },
                want: Decision::Stop(Stop::NoTimeLeft),
            },
            Row {
                name: "the backoff would outlast the deadline",
                failed: Failed {
                    remaining: Some(ms(30)),
                    ..base
                },
                want: Decision::Stop(Stop::NoTimeLeft),
            },
            Row {
                name: "pushback replaces the backoff",
                failed: Failed {
                    pushback: Pushback::After(ms(300)),
                    ..base
                },
                want: retry(2, 300, Some(2_000)),
            },
            Row {
                name: "pushback that says stop",
                failed: Failed {
                    pushback: Pushback::Stop,
                    ..base
                },
                want: Decision::Stop(Stop::Pushback),
            },
            Row {
                name: "a pushback longer than any profile: do not retry",
                failed: Failed {
                    pushback: Pushback::After(Duration::from_millis(u64::MAX)),
                    remaining: None,
                    ..base
                },
                want: Decision::Stop(Stop::Pushback),
            },
            Row {
                name: "no deadline: the attempt timeout alone",
                failed: Failed {
                    remaining: None,
                    ..base
                },
                want: retry(2, 50, Some(2_000)),
            },
        ];
        for row in rows {
            assert_eq!(decide(&policy(), row.failed), row.want, "{}", row.name);
        }
        // Without an attempt timeout each attempt may use what remains.
        let open = RetryPolicy::standard();
        assert_eq!(
            decide(&open, base),
            retry(2, 25, Some(9_975)),
            "standard policy"
        );
        assert_eq!(
            decide(
                &open,
                Failed {
                    remaining: None,
                    ..base
                }
            ),
            retry(2, 25, None)
        );
    }

    #[test]
    fn first_attempt_timeout() {
        let p = policy();
        assert_eq!(first_timeout(&p, Some(ms(5_000)), ms(100)), Some(ms(2_000)));
        assert_eq!(first_timeout(&p, Some(ms(500)), ms(100)), Some(ms(500)));
        assert_eq!(first_timeout(&p, None, ms(100)), Some(ms(2_000)));
        assert_eq!(
            first_timeout(&p, Some(ms(5_000)), ms(3_000)),
            Some(ms(3_000)),
            "raised to the profile minimum"
        );
        assert_eq!(first_timeout(&RetryPolicy::standard(), None, ms(100)), None);
    }

    #[test]
    fn pushback_values() {
        let table: [(Option<&[u8]>, Pushback); 6] = [
            (None, Pushback::None),
            (Some(b"250"), Pushback::After(ms(250))),
            (Some(b"0"), Pushback::After(ms(0))),
            (Some(b"-1"), Pushback::Stop),
            (Some(b"soon"), Pushback::Stop),
            (Some(b""), Pushback::Stop),
        ];
        for (value, want) in table {
            assert_eq!(Pushback::parse(value), want, "{value:?}");
        }
    }

    #[test]
    fn builder_rules_name_each_field() {
        let err = RetryPolicy::builder()
            .max_attempts(0)
            .initial_backoff(ms(0))
            .max_backoff(ms(0))
            .backoff_multiplier(0)
            .attempt_timeout(ms(0))
            .build()
            .unwrap_err();
        let got: Vec<_> = err.violations.iter().map(|v| (v.field, v.rule)).collect();
        assert_eq!(
            got,
            [
                (
                    ProfileField::RetryMaxAttempts,
                    ProfileRule::AttemptsOutOfRange
                ),
                (
                    ProfileField::RetryInitialBackoff,
                    ProfileRule::BackoffIsZero
                ),
                (ProfileField::RetryMaxBackoff, ProfileRule::BackoffIsZero),
                (ProfileField::RetryMultiplier, ProfileRule::MultiplierIsZero),
                (
                    ProfileField::RetryAttemptTimeout,
                    ProfileRule::AttemptTimeoutIsZero
                ),
            ]
        );
        assert!(err
            .to_string()
            .starts_with("invalid retry policy (builder): retry.max_attempts = 0: must be 1 to 5"));
        let err = RetryPolicy::builder()
            .initial_backoff(ms(500))
            .max_backoff(ms(100))
            .build()
            .unwrap_err();
        assert_eq!(err.violations[0].rule, ProfileRule::MaxBackoffBelowInitial);
        assert!(RetryPolicy::builder().max_attempts(6).build().is_err());
        let err = RetryPolicy::builder()
            .max_backoff(Duration::MAX)
            .attempt_timeout(Duration::MAX)
            .build()
            .unwrap_err();
        let got: Vec<_> = err.violations.iter().map(|v| (v.field, v.rule)).collect();
        assert_eq!(
            got,
            [
                (ProfileField::RetryMaxBackoff, ProfileRule::NotWholeMillis),
                (
                    ProfileField::RetryAttemptTimeout,
                    ProfileRule::NotWholeMillis
                ),
            ]
        );
        assert!(RetryPolicy::builder().max_attempts(5).build().is_ok());
        assert!(!RetryPolicy::off().is_on());
    }

    #[test]
    fn throttle_arithmetic() {
        // gRPC's example: max 10 tokens, ratio 0.1.
        let t = Throttle {
            max_milli: 10_000,
            ratio_milli: 100,
        };
        let mut tokens = t.max_milli;
        for _ in 0..4 {
            tokens = t.after_failure(tokens);
        }
        assert_eq!(tokens, 6_000);
        assert!(t.allows(tokens));
        tokens = t.after_failure(tokens);
        assert_eq!(tokens, 5_000);
        assert!(!t.allows(tokens), "exactly half is not more than half");
        tokens = t.after_success(tokens);
        assert!(t.allows(tokens));
        assert_eq!(t.after_success(t.max_milli), t.max_milli);
        assert_eq!(t.after_failure(0), 0);
    }

    proptest! {
        #[test]
        fn backoff_stays_within_its_ceiling(
            retry in 1u32..10,
            initial in 1u64..5_000,
            extra in 0u64..60_000,
            multiplier in 1u32..10,
            jitter in 0.0f64..1.0,
        ) {
            let p = RetryPolicy::builder()
                .initial_backoff(ms(initial))
                .max_backoff(ms(initial + extra))
                .backoff_multiplier(multiplier)
                .build()
                .unwrap();
            let ceiling = p.backoff_ceiling(retry);
            prop_assert!(ceiling <= ms(initial + extra));
            prop_assert!(ceiling >= ms(initial).min(ms(initial + extra)));
            prop_assert!(p.backoff(retry, jitter) <= ceiling);
        }

        #[test]
        fn a_retry_never_outlasts_the_deadline_nor_grows(
            attempt in 1u32..5,
            remaining in 0u64..20_000,
            last in 1u64..20_000,
            jitter in 0.0f64..1.0,
        ) {
            let f = Failed {
                attempt,
                remaining: Some(ms(remaining)),
                last_timeout: Some(ms(last)),
                jitter,
                ..failed(attempt, Failure::Code(UNAVAILABLE))
            };
            if let Decision::Retry { backoff, timeout: Some(t), .. } = decide(&policy(), f) {
                prop_assert!(backoff + t <= ms(remaining));
                prop_assert!(t <= ms(last));
                prop_assert!(t >= ms(100));
            }
        }
    }
}
