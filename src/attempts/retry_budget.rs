//! [`RetryBudget`]: how many retries one layer may send while its calls fail.
//!
//! It is gRPC's retry throttling, shared by every call of one layer, read and
//! updated with atomics (no locks). gRPC's throttling is chosen over tower's
//! `TpsBudget` because it is what the other SW4RM languages get from the same service
//! config (`retryThrottling`), and because it reacts to *failures* rather than to
//! request rates: a healthy, busy agent never runs out, a failing dependency stops
//! being retried after a handful of failures.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::policy::retry::Throttle;

/// How many retries one layer may send while its calls fail: a bucket of
/// `max_tokens`; each failed attempt takes one token, each call answered without a
/// retryable failure gives back `token_ratio`; retries are sent only while more than
/// half the bucket is left. When the bucket is that low, the failure is returned as
/// it is. Every service a layer builds shares the layer's bucket.
///
/// The default is gRPC's example: 10 tokens, ratio 0.1.
///
/// ```
/// use sw4rm_timeouts::{RetryBudget, TimeoutProfileLayer};
/// let budget = RetryBudget::new(20).with_token_ratio(0.5);
/// let layer = TimeoutProfileLayer::standard().with_retry_budget(budget.clone());
/// assert_eq!(budget.tokens(), 20.0);
/// # drop(layer);
/// ```
#[derive(Clone, Debug)]
pub struct RetryBudget {
    inner: Arc<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    rule: Throttle,
    milli: AtomicU32,
}

impl RetryBudget {
    /// A full bucket of `max_tokens` (at least 1, at most 1,000) with the default
    /// ratio 0.1.
    pub fn new(max_tokens: u32) -> Self {
        RetryBudget::from_rule(Throttle {
            max_milli: max_tokens.clamp(1, 1_000) * 1_000,
            ratio_milli: 100,
        })
    }

    /// Tokens given back by each call answered without a retryable failure
    /// (0.001 to the bucket's size; gRPC allows three decimals).
    pub fn with_token_ratio(self, ratio: f64) -> Self {
        let rule = self.inner.rule;
        let milli = if ratio.is_finite() {
            (ratio * 1_000.0)
                .round()
                .clamp(1.0, f64::from(rule.max_milli)) as u32
        } else {
            rule.ratio_milli
        };
        RetryBudget::from_rule(Throttle {
            ratio_milli: milli,
            ..rule
        })
    }

    fn from_rule(rule: Throttle) -> Self {
        RetryBudget {
            inner: Arc::new(Bucket {
                rule,
                milli: AtomicU32::new(rule.max_milli),
            }),
        }
    }

    /// Tokens left now.
    pub fn tokens(&self) -> f64 {
        f64::from(self.inner.milli.load(Ordering::Relaxed)) / 1_000.0
    }

    /// The bucket's size.
    pub fn max_tokens(&self) -> u32 {
        self.inner.rule.max_milli / 1_000
    }

    /// Tokens given back by each call answered without a retryable failure.
    ///
    /// ```
    /// let budget = sw4rm_timeouts::RetryBudget::new(20).with_token_ratio(0.5);
    /// assert_eq!((budget.max_tokens(), budget.token_ratio()), (20, 0.5));
    /// ```
    pub fn token_ratio(&self) -> f64 {
        f64::from(self.inner.rule.ratio_milli) / 1_000.0
    }

    /// A failed attempt takes a token; returns whether a retry may follow.
    pub(crate) fn fail(&self) -> bool {
        let rule = self.inner.rule;
        let before = self.update(|t| rule.after_failure(t));
        rule.allows(rule.after_failure(before))
    }

    /// Whether one more attempt may be sent now (a hedge; the bucket is not charged).
    pub(crate) fn allows(&self) -> bool {
        self.inner
            .rule
            .allows(self.inner.milli.load(Ordering::Relaxed))
    }

    /// A call answered without a retryable failure gives back the ratio.
    pub(crate) fn succeed(&self) {
        let rule = self.inner.rule;
        self.update(|t| rule.after_success(t));
    }

    /// Applies `f` atomically; returns the value before. A change to nothing (a
    /// success with the bucket full, the common case) writes nothing, so that calls
    /// on many threads do not contend for the bucket's cache line.
    fn update(&self, f: impl Fn(u32) -> u32) -> u32 {
        let cell = &self.inner.milli;
        let mut current = cell.load(Ordering::Relaxed);
        loop {
            let next = f(current);
            if next == current {
                return current;
            }
            match cell.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(before) => return before,
                Err(now) => current = now,
            }
        }
    }
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget::new(10)
    }
}
