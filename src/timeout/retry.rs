//! Retries inside one deadline (SW4-002 §5.2), carried out for the response future:
//! the request kept for replay, the attempt and backoff timer, what an attempt's end
//! means for retrying, and the retry budget. The decisions themselves are the pure
//! rules of `policy/retry.rs`.
//!
//! Only what happens before the response headers reach the caller is retried: a
//! trailers-only answer (a gRPC error status), a transport error, or an attempt
//! timeout. Once headers are delivered the call is committed, so a server stream is
//! never retried after its first message.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use tokio::time::{Instant, Sleep};

use super::budget::RetryBudget;
use super::BoxError;
use crate::policy::deadline::Cap;
use crate::policy::retry::{decide, Decision, Failed, Failure, Pushback, RetryPolicy, Stop};
use crate::wire::grpc_timeout::{self, GRPC_TIMEOUT};
use crate::wire::replay::Replay;
use crate::wire::status::{causes, status_number, GRPC_STATUS};

type Request = http::Request<tonic::body::Body>;

/// The largest request body kept for replay by default (64 KiB); larger requests are
/// sent once.
pub(crate) const DEFAULT_REPLAY_LIMIT: usize = 64 * 1024;

/// The header a final answer carries when the call made more than one attempt.
pub const ATTEMPTS_HEADER: &str = "sw4rm-attempts";

/// Status codes as the retry rules (`policy/retry.rs`, which knows no tonic) number
/// them, named.
pub(crate) const CANCELLED: i32 = tonic::Code::Cancelled as i32;
pub(crate) const DEADLINE_EXCEEDED: i32 = tonic::Code::DeadlineExceeded as i32;
pub(crate) const UNAVAILABLE: i32 = tonic::Code::Unavailable as i32;

/// gRPC A6's request header on attempts after the first: how many attempts came
/// before, so servers and proxies can tell a retry from a new call.
const PREVIOUS_ATTEMPTS: http::HeaderName =
    http::HeaderName::from_static("grpc-previous-rpc-attempts");

/// What the plan decided about retrying one call.
#[derive(Clone, Debug)]
pub(crate) struct RetryPlan {
    pub(crate) policy: RetryPolicy,
    pub(crate) idempotent: bool,
    pub(crate) min_timeout: Duration,
    /// The first attempt's timeout when it is below the call's deadline, as a cap.
    pub(crate) first: Option<Cap>,
}

/// The retry state of one call.
#[derive(Debug)]
pub(crate) struct Retry<S> {
    /// The inner service, kept between attempts.
    pub(crate) svc: Option<S>,
    parts: http::request::Parts,
    body: Bytes,
    plan: RetryPlan,
    budget: Option<RetryBudget>,
    /// The attempt in flight (or the last one), from 1.
    pub(crate) attempt: u32,
    /// The timeout of the attempt in flight, and when it ends.
    timeout: Option<Duration>,
    attempt_deadline: Option<Instant>,
    /// The call's own deadline.
    deadline: Option<Instant>,
    /// The attempt or backoff timer, created when first needed: a call answered by
    /// its first attempt without an attempt timeout never makes one.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<S> Retry<S> {
    /// The state after the first attempt was planned and sent with `first_timeout`.
    pub(crate) fn new(
        parts: http::request::Parts,
        body: Bytes,
        plan: RetryPlan,
        budget: Option<RetryBudget>,
        start: Instant,
        deadline: Option<Instant>,
    ) -> Self {
        let timeout = plan.first.as_ref().map(|c| c.limit());
        // An attempt timeout past any representable instant is no attempt timeout.
        let attempt_deadline = timeout.and_then(|t| start.checked_add(t));
        Retry {
            svc: None,
            parts,
            body,
            plan,
            budget,
            attempt: 1,
            timeout,
            attempt_deadline,
            deadline,
            timer: attempt_deadline.map(|at| Box::pin(tokio::time::sleep_until(at))),
        }
    }

    /// The attempt timeout of the attempt in flight, when it is shorter than the
    /// call's deadline.
    pub(crate) fn attempt_cap(&self) -> Option<Cap> {
        let limit = self.timeout?;
        let source = self
            .plan
            .first
            .as_ref()
            .map_or(crate::Source::Standard, |c| c.source.clone());
        Some(Cap::new(limit, source))
    }

    /// Polls the attempt timer: ready when the attempt in flight reached its timeout.
    pub(crate) fn poll_attempt(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match (&mut self.timer, self.attempt_deadline) {
            (Some(timer), Some(_)) => timer.as_mut().poll(cx),
            _ => Poll::Pending,
        }
    }

    /// Whether the attempt in flight has reached its own timeout.
    pub(crate) fn attempt_expired(&self) -> bool {
        self.attempt_deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// After a failed attempt: the backoff to wait before the next one, or `None`
    /// when this failure is the call's answer (and why, for the log).
    pub(crate) fn after_failure(
        &mut self,
        failure: Failure,
        pushback: Pushback,
    ) -> Result<Duration, Stop> {
        let now = Instant::now();
        let decision = decide(
            &self.plan.policy,
            Failed {
                attempt: self.attempt,
                failure,
                idempotent: self.plan.idempotent,
                last_timeout: self.timeout,
                remaining: self.deadline.map(|d| d.saturating_duration_since(now)),
                min_timeout: self.plan.min_timeout,
                pushback,
                jitter: jitter(),
            },
        );
        let (attempt, backoff, timeout) = match decision {
            Decision::Retry {
                attempt,
                backoff,
                timeout,
            } => (attempt, backoff, timeout),
            Decision::Stop(stop) => {
                self.settle(failure);
                return Err(stop);
            }
        };
        // The budget is charged for every failure the policy would retry.
        if let Some(budget) = &self.budget {
            if !budget.fail() {
                return Err(Stop::Budget);
            }
        }
        // A server's pushback is peer input: one past any representable instant ends
        // the retries instead of the process.
        let Some(resume) = now.checked_add(backoff) else {
            return Err(Stop::Pushback);
        };
        self.attempt = attempt;
        self.timeout = timeout;
        self.arm(resume);
        Ok(backoff)
    }

    /// A final answer that is not a retryable failure gives the budget back.
    pub(crate) fn answered(&self) {
        if let Some(budget) = &self.budget {
            budget.succeed();
        }
    }

    fn settle(&self, failure: Failure) {
        // A status the policy does not retry is still an answer from the server.
        if let Failure::Code(code) = failure {
            if !self.plan.policy.retries_code(code) {
                self.answered();
            }
        }
    }

    /// Polls the backoff timer.
    pub(crate) fn poll_backoff(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.timer {
            Some(timer) => timer.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }

    fn arm(&mut self, at: Instant) {
        match &mut self.timer {
            Some(timer) => timer.as_mut().reset(at),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(at))),
        }
    }

    /// The next attempt's request (byte-identical body, its own `grpc-timeout`), with
    /// its timer armed.
    pub(crate) fn next_request(&mut self) -> Request {
        let mut parts = self.parts.clone();
        let now = Instant::now();
        // The backoff timer fires on the timer's tick, a little after the backoff:
        // the attempt gets what remains now, never more.
        if let Some(deadline) = self.deadline {
            let remaining = deadline.saturating_duration_since(now);
            self.timeout = Some(self.timeout.map_or(remaining, |t| t.min(remaining)));
        }
        match self.timeout.and_then(|t| Some((t, now.checked_add(t)?))) {
            Some((t, at)) => {
                parts.headers.insert(GRPC_TIMEOUT, grpc_timeout::encode(t));
                self.attempt_deadline = Some(at);
                self.arm(at);
            }
            None => {
                parts.headers.remove(GRPC_TIMEOUT);
                self.attempt_deadline = None;
            }
        }
        let previous = self.attempt.saturating_sub(1);
        parts
            .headers
            .insert(PREVIOUS_ATTEMPTS, HeaderValue::from(previous));
        let body = tonic::body::Body::new(Replay::whole(self.body.clone()));
        http::Request::from_parts(parts, body)
    }

    /// Marks a final answer with the number of attempts made.
    pub(crate) fn mark<B>(&self, response: &mut http::Response<B>) {
        if self.attempt > 1 {
            response
                .headers_mut()
                .insert(ATTEMPTS_HEADER, HeaderValue::from(self.attempt));
        }
    }
}

/// gRPC's server pushback header.
const RETRY_PUSHBACK: http::HeaderName = http::HeaderName::from_static("grpc-retry-pushback-ms");

/// A response head's retry meaning: `Some` for a trailers-only gRPC error.
pub(crate) fn classify_response(headers: &http::HeaderMap) -> Option<(Failure, Pushback)> {
    let code = headers.get(GRPC_STATUS).and_then(status_number)?;
    if code == 0 {
        return None;
    }
    let pushback = Pushback::parse(headers.get(RETRY_PUSHBACK).map(HeaderValue::as_bytes));
    Some((Failure::Code(code), pushback))
}

/// A transport error's retry meaning: the request provably never reached the server
/// (connection refused, the stream refused by HTTP/2), or an `UNAVAILABLE` that may
/// have reached it.
pub(crate) fn classify_error(err: &BoxError) -> Failure {
    let never_sent = causes(&**err).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
            || e.downcast_ref::<h2::Error>()
                .is_some_and(|h2| h2.reason() == Some(h2::Reason::REFUSED_STREAM))
    });
    if never_sent {
        Failure::NotSent
    } else {
        Failure::Code(UNAVAILABLE)
    }
}

/// Uniform in `[0, 1)`: a per-thread xorshift seeded from the standard library's
/// random hasher keys (no dependency, no lock).
fn jitter() -> f64 {
    use std::cell::Cell;
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x5157_4d52);
            h.finish() | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_in_range_and_varies() {
        let values: Vec<f64> = (0..1_000).map(|_| jitter()).collect();
        assert!(values.iter().all(|v| (0.0..1.0).contains(v)));
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!((0.4..0.6).contains(&mean), "{mean}");
    }

    #[test]
    fn responses_and_errors() {
        let mut h = http::HeaderMap::new();
        assert_eq!(classify_response(&h), None);
        h.insert("grpc-status", HeaderValue::from_static("0"));
        assert_eq!(classify_response(&h), None);
        h.insert("grpc-status", HeaderValue::from_static("14"));
        assert_eq!(
            classify_response(&h),
            Some((Failure::Code(UNAVAILABLE), Pushback::None))
        );
        h.insert("grpc-retry-pushback-ms", HeaderValue::from_static("-1"));
        assert_eq!(
            classify_response(&h),
            Some((Failure::Code(UNAVAILABLE), Pushback::Stop))
        );
        let refused: BoxError =
            Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify_error(&refused), Failure::NotSent);
        let stream: BoxError = Box::new(h2::Error::from(h2::Reason::REFUSED_STREAM));
        assert_eq!(classify_error(&stream), Failure::NotSent);
        let reset: BoxError = Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(classify_error(&reset), Failure::Code(UNAVAILABLE));
    }
}
