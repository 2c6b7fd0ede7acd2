//! Submit once, then follow: the loop of [`Follow::run`] and what it reports.

use std::pin::{pin, Pin};
use std::time::Duration;

use tokio::time::sleep;
use tonic::{Code, Status};

use super::operation::{LongOperation, Submitted};
use crate::policy::cancel::CancelReason;
use crate::policy::effect::CallEffect;
use crate::policy::ids::{random_u64, unit_draw};
use crate::policy::poll::{poll_wait, PollRule};
use crate::scope::{cancelled, detach, remaining, with_deadline, Cancelled};
use crate::wire::cancel::CancelDetails;
use crate::wire::details::TimeoutDetails;
use crate::wire::status::passes;

/// How a long operation is followed: polled at an interval that starts at
/// `poll_every` and grows by `backoff` up to `max_interval` (each wait half fixed,
/// half random), inside the budget of the scope it runs in.
///
/// ```no_run
/// # async fn f(sw4rm: sw4rm_timeouts::Sw4rm) {
/// use std::time::Duration;
/// use sw4rm_timeouts::follow::{Follow, FollowError, SchedulerTask};
/// use sw4rm_timeouts::proto::sw4rm::scheduler::SubmitTaskRequest;
/// use sw4rm_timeouts::OperationBudget;
/// let mut task = SchedulerTask::new(sw4rm, SubmitTaskRequest { task_id: "t-7".into(), ..Default::default() });
/// let followed = OperationBudget::new(Duration::from_secs(600))
///     .run(Follow::new().submit_timeout(Duration::from_secs(5)).run(&mut task))
///     .await;
/// match followed {
///     Ok(done) => println!("t-7 ended {:?} after {} polls", done.status.state(), done.polls),
///     Err(FollowError::Cancelled { cancel, .. }) => println!("cancelled; CancelTask: {cancel:?}"),
///     Err(other) => eprintln!("t-7: {other}"),
/// }
/// # }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a Follow does nothing until it runs an operation"]
pub struct Follow {
    rule: PollRule,
    submit_timeout: Option<Duration>,
    max_failed_polls: u32,
    seed: Option<u64>,
}

impl Default for Follow {
    fn default() -> Self {
        Follow::new()
    }
}

/// What a followed operation ended with.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Followed<S> {
    /// The terminal status.
    pub status: S,
    /// Status polls answered.
    pub polls: u32,
    /// Status polls that failed and were sent again.
    pub failed_polls: u32,
    /// `None` when the submit was answered; the effect of a submit whose answer was
    /// lost (it was followed by status, never sent again).
    pub submit_unanswered: Option<CallEffect>,
}

/// What the cancel RPC came to, when the scope was cancelled.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CancelSent {
    /// Nothing had been submitted: nothing to cancel, nothing sent.
    NotNeeded,
    /// Sent; the server said whether it cancelled.
    Answered {
        /// Whether the server says it cancelled the operation.
        cancelled: bool,
    },
    /// Sent, and it failed: the operation may run on.
    Failed(Status),
}

/// Why a followed operation did not reach a terminal state.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum FollowError<S> {
    /// The submit never reached the transport: nothing happened; safe to run again.
    NotSubmitted(Status),
    /// The server answered the submit and did not take it.
    Refused(String),
    /// The server answered the submit with an error.
    SubmitFailed(Status),
    /// The submit's answer was lost, and the status RPC does not know the operation
    /// (`NOT_FOUND`): it did not take effect; safe to submit again.
    NotTaken(Status),
    /// The scope was cancelled; the cancel RPC was sent once (if anything had been
    /// submitted) and this is what it came to.
    Cancelled {
        /// Why the scope was cancelled.
        reason: CancelReason,
        /// The cancel RPC's outcome.
        cancel: CancelSent,
        /// The last status seen.
        last: Option<S>,
    },
    /// The scope's budget ran out before a terminal state: the operation runs on.
    BudgetSpent {
        /// The last status seen.
        last: Option<S>,
    },
    /// A status poll failed in a way that does not pass (or too many in a row did).
    Poll {
        /// The poll's status.
        status: Status,
        /// The last status seen.
        last: Option<S>,
    },
}

impl<S> std::fmt::Display for FollowError<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FollowError::NotSubmitted(s) => {
                write!(f, "not submitted (safe to run again): {}", s.message())
            }
            FollowError::Refused(r) => write!(f, "the server refused the submit: {r}"),
            FollowError::SubmitFailed(s) => {
                write!(f, "the submit failed: {:?} {}", s.code(), s.message())
            }
            FollowError::NotTaken(s) => write!(
                f,
                "the submit's answer was lost and the server does not know the operation \
                 ({}): it did not take effect; safe to submit again",
                s.message()
            ),
            FollowError::Cancelled { reason, cancel, .. } => {
                write!(
                    f,
                    "cancelled ({}); the cancel RPC: {cancel:?}",
                    reason.as_str()
                )
            }
            FollowError::BudgetSpent { .. } => f.write_str(
                "the budget ran out before the operation ended: it runs on (follow it again \
                 with a new budget, or cancel it)",
            ),
            FollowError::Poll { status, .. } => {
                write!(
                    f,
                    "a status poll failed: {:?} {}",
                    status.code(),
                    status.message()
                )
            }
        }
    }
}

impl<S: std::fmt::Debug> std::error::Error for FollowError<S> {}

/// The wait a failed poll's server asked for (`grpc-retry-pushback-ms`).
fn pushback(status: &Status) -> Option<Duration> {
    let ms = status
        .metadata()
        .get("grpc-retry-pushback-ms")?
        .to_str()
        .ok()?;
    ms.parse::<u64>().ok().map(Duration::from_millis)
}

impl Follow {
    /// Polls first after 500 ms, then ×1.5 each time up to 10 s; gives up after 10
    /// failed polls in a row.
    pub fn new() -> Self {
        Follow {
            rule: PollRule {
                first: Duration::from_millis(500),
                multiplier: 1.5,
                max: Duration::from_secs(10),
            },
            submit_timeout: None,
            max_failed_polls: 10,
            seed: None,
        }
    }

    /// The first poll interval.
    pub fn poll_every(mut self, first: Duration) -> Self {
        self.rule.first = first;
        self
    }

    /// The interval's growth per poll (1.0: none; below 1 or not a number: 1.0) and
    /// its ceiling.
    pub fn poll_backoff(mut self, multiplier: f64, max_interval: Duration) -> Self {
        self.rule.multiplier = if multiplier.is_finite() && multiplier >= 1.0 {
            multiplier
        } else {
            1.0
        };
        self.rule.max = max_interval;
        self
    }

    /// How long to wait for the submit's answer before following by status instead
    /// (default: the submit RPC's profile). A limit like an inherited deadline: not
    /// raised to the profile's minimum.
    pub fn submit_timeout(mut self, timeout: Duration) -> Self {
        self.submit_timeout = Some(timeout);
        self
    }

    /// Failed polls in a row before giving up (default 10; at least 1).
    pub fn max_failed_polls(mut self, n: u32) -> Self {
        self.max_failed_polls = n.max(1);
        self
    }

    /// Seeds the poll jitter (reproducible tests).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Submits `operation` once and follows it to a terminal state (see the module
    /// docs for what happens on each failure).
    pub async fn run<O: LongOperation>(
        self,
        operation: &mut O,
    ) -> Result<Followed<O::Status>, FollowError<O::Status>> {
        let mut cancel = pin!(cancelled());
        let mut run = Running {
            follow: self,
            draws: 0,
            last: None,
        };
        run.draws = run.follow.seed.unwrap_or_else(random_u64);
        let submit_unanswered = run.submit(operation, cancel.as_mut()).await?;
        run.poll(operation, cancel.as_mut(), submit_unanswered)
            .await
    }
}

/// A follow under way.
struct Running<S> {
    follow: Follow,
    draws: u64,
    last: Option<S>,
}

impl<S> Running<S> {
    /// Sends the submit once; `Some(effect)` when its answer was lost.
    async fn submit<O: LongOperation<Status = S>>(
        &mut self,
        operation: &mut O,
        mut cancel: Pin<&mut Cancelled>,
    ) -> Result<Option<CallEffect>, FollowError<S>> {
        let sent = async {
            match self.follow.submit_timeout {
                Some(t) => with_deadline(tokio::time::Instant::now() + t, operation.submit()).await,
                None => operation.submit().await,
            }
        };
        if let Some(reason) = crate::scope::cancel_reason() {
            // Cancelled before anything was sent: nothing to cancel.
            return Err(FollowError::Cancelled {
                reason,
                cancel: CancelSent::NotNeeded,
                last: None,
            });
        }
        let answer = tokio::select! {
            biased;
            // Cancelled while it was being sent: it may have arrived.
            reason = &mut cancel => return Err(self.cancelled(reason, operation).await),
            answer = sent => answer,
        };
        match answer {
            Ok(Submitted::Accepted) => Ok(None),
            Ok(Submitted::Refused(reason)) => Err(FollowError::Refused(reason)),
            Err(status) => {
                let effect = TimeoutDetails::from_status(&status)
                    .and_then(|d| d.effect())
                    .or_else(|| CancelDetails::from_status(&status).and_then(|d| d.effect()));
                match effect {
                    Some(CallEffect::NotSent) => Err(FollowError::NotSubmitted(status)),
                    Some(effect) => Ok(Some(effect)),
                    // An answer lost on the way: it may have taken effect.
                    None if passes(status.code()) || status.code() == Code::Cancelled => {
                        Ok(Some(CallEffect::MutationIndeterminate))
                    }
                    None => Err(FollowError::SubmitFailed(status)),
                }
            }
        }
    }

    /// Polls until a terminal state.
    async fn poll<O: LongOperation<Status = S>>(
        &mut self,
        operation: &mut O,
        mut cancel: Pin<&mut Cancelled>,
        submit_unanswered: Option<CallEffect>,
    ) -> Result<Followed<S>, FollowError<S>> {
        let (mut interval, mut suggested) = (self.follow.rule.first, None);
        let (mut polls, mut failed, mut in_a_row) = (0u32, 0u32, 0u32);
        loop {
            let wait = poll_wait(interval, suggested, unit_draw(&mut self.draws));
            if remaining().is_some_and(|left| left <= wait) {
                return Err(FollowError::BudgetSpent {
                    last: self.last.take(),
                });
            }
            let answer = tokio::select! {
                biased;
                reason = &mut cancel => return Err(self.cancelled(reason, operation).await),
                answer = async { sleep(wait).await; operation.status().await } => answer,
            };
            match answer {
                Ok(status) => {
                    polls += 1;
                    in_a_row = 0;
                    if operation.is_terminal(&status) {
                        return Ok(Followed {
                            status,
                            polls,
                            failed_polls: failed,
                            submit_unanswered,
                        });
                    }
                    suggested = operation.suggested_poll(&status);
                    self.last = Some(status);
                    interval = self.follow.rule.next(interval);
                }
                Err(status)
                    if status.code() == Code::NotFound
                        && submit_unanswered.is_some()
                        && polls == 0 =>
                {
                    return Err(FollowError::NotTaken(status));
                }
                Err(status)
                    if passes(status.code()) && in_a_row + 1 < self.follow.max_failed_polls =>
                {
                    failed += 1;
                    in_a_row += 1;
                    suggested = pushback(&status);
                }
                Err(status) => {
                    return Err(FollowError::Poll {
                        status,
                        last: self.last.take(),
                    })
                }
            }
        }
    }

    /// The scope was cancelled after the submit went out: sends the cancel RPC once,
    /// outside the scope (a cancel must not be cancelled). A submit cut while it was
    /// being sent may have arrived, so it is cancelled too (cancelling what never
    /// arrived is harmless; leaving it running is not).
    async fn cancelled<O: LongOperation<Status = S>>(
        &mut self,
        reason: CancelReason,
        operation: &mut O,
    ) -> FollowError<S> {
        let cancel = match detach(operation.cancel()).await {
            Ok(cancelled) => CancelSent::Answered { cancelled },
            Err(status) => CancelSent::Failed(status),
        };
        FollowError::Cancelled {
            reason,
            cancel,
            last: self.last.take(),
        }
    }
}
