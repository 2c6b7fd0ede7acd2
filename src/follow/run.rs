//! Submit once, then follow: the loop of [`Follow::run`].

use std::pin::{pin, Pin};
use std::time::Duration;

use tokio::time::{sleep, Instant};
use tonic::{Code, Status};

use super::operation::{LongOperation, Submitted};
use super::outcome::{CancelSent, FollowError, Followed};
use crate::policy::cancel::CancelReason;
use crate::policy::effect::CallEffect;
use crate::policy::ids::{random_u64, unit_draw};
use crate::policy::poll::{not_taken, poll_wait, PollRule};
use crate::scope::{cancelled, detach, remaining, Cancelled, OperationBudget};
use crate::wire::cancel::CancelDetails;
use crate::wire::details::TimeoutDetails;
use crate::wire::status::passes;

/// How long a follow runs at most when nobody said otherwise ([`Follow::limit`]),
/// inside any budget of its scope: without it a follow outside any budget, of a task
/// that stays `RUNNING`, would never return.
pub const DEFAULT_FOLLOW_LIMIT: Duration = Duration::from_secs(3_600);

/// How long the cancel RPC sent when the scope is cancelled may take
/// ([`Follow::cancel_timeout`]): it runs outside the cancelled scope, so without a
/// bound of its own it would wait its route's whole timeout on a scheduler that does
/// not answer.
pub const DEFAULT_CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// How long `NOT_FOUND` must hold, from the moment a submit whose answer was lost
/// was sent, before the follow concludes it was not taken
/// ([`Follow::not_found_settle`]).
pub const DEFAULT_NOT_FOUND_SETTLE: Duration = Duration::from_secs(10);

/// The least number of `NOT_FOUND` polls before the follow concludes a submit whose
/// answer was lost was not taken (with [`DEFAULT_NOT_FOUND_SETTLE`]).
pub const NOT_FOUND_POLLS: u32 = 3;

/// How a long operation is followed: polled at an interval that starts at
/// `poll_every` and grows by `backoff` up to `max_interval` (each wait half fixed,
/// half random, never below 50 ms), inside the budget of the scope it runs in and
/// its own [`limit`](Follow::limit).
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
///     Err(FollowError::Indeterminate { .. }) => println!("t-7 may have started: follow it again"),
///     Err(other) => eprintln!("t-7: {other}"),
/// }
/// # }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a Follow does nothing until it runs an operation"]
pub struct Follow {
    rule: PollRule,
    submit_timeout: Option<Duration>,
    cancel_timeout: Duration,
    limit: Duration,
    settle: Duration,
    max_failed_polls: u32,
    seed: Option<u64>,
}

impl Default for Follow {
    fn default() -> Self {
        Follow::new()
    }
}

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
    /// failed polls in a row; runs at most [`DEFAULT_FOLLOW_LIMIT`]; a cancel RPC
    /// waits at most [`DEFAULT_CANCEL_TIMEOUT`]; a lost submit's `NOT_FOUND` must hold
    /// for [`DEFAULT_NOT_FOUND_SETTLE`].
    pub fn new() -> Self {
        Follow {
            rule: PollRule {
                first: Duration::from_millis(500),
                multiplier: 1.5,
                max: Duration::from_secs(10),
            },
            submit_timeout: None,
            cancel_timeout: DEFAULT_CANCEL_TIMEOUT,
            limit: DEFAULT_FOLLOW_LIMIT,
            settle: DEFAULT_NOT_FOUND_SETTLE,
            max_failed_polls: 10,
            seed: None,
        }
    }

    /// The first poll interval. No wait between polls is shorter than 50 ms, whatever
    /// is set here (a zero interval would poll as fast as the server answers).
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
    /// (default: the submit RPC's profile). The submit runs under a budget of this
    /// long (its timeout details say source `budget`, as do the follow's
    /// [`limit`](Self::limit) and [`cancel_timeout`](Self::cancel_timeout)): a limit,
    /// not raised to the profile's minimum. `Duration::MAX` is no limit of its own.
    pub fn submit_timeout(mut self, timeout: Duration) -> Self {
        self.submit_timeout = Some(timeout);
        self
    }

    /// How long the whole follow may run, submit included, inside any budget of its
    /// scope (default [`DEFAULT_FOLLOW_LIMIT`]); when it runs out the follow ends with
    /// [`FollowError::BudgetSpent`] and the operation runs on. `Duration::MAX`: no
    /// limit but the scope's.
    pub fn limit(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// How long the cancel RPC may take when the scope is cancelled (default
    /// [`DEFAULT_CANCEL_TIMEOUT`]): it is sent outside the cancelled scope, under this
    /// bound instead of its route's whole timeout. When it runs out the follow ends at
    /// once with [`CancelSent::Failed`].
    pub fn cancel_timeout(mut self, timeout: Duration) -> Self {
        self.cancel_timeout = timeout;
        self
    }

    /// How long `NOT_FOUND` must hold, from the moment a submit whose answer was lost
    /// was *sent*, over at least [`NOT_FOUND_POLLS`] polls, before the follow says it
    /// was not taken ([`FollowError::NotTaken`]: safe to submit again); default
    /// [`DEFAULT_NOT_FOUND_SETTLE`]. A handler cut by the caller's timeout may still
    /// commit, and a scheduler may register a task a moment after it arrived: an
    /// early `NOT_FOUND` proves nothing. A budget that ends inside the window ends the
    /// follow with [`FollowError::Indeterminate`]. Set it to at least the time your
    /// service may take to make a submit it received visible to its status RPC.
    pub fn not_found_settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
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
        // The follow's own bounds are budgets (a cap the caller set on an operation:
        // timeout details say `budget`), inside any budget of the scope.
        let limit = OperationBudget::new(self.limit);
        let mut run = Running {
            draws: self.seed.unwrap_or_else(random_u64),
            follow: self,
            last: None,
        };
        let follow = async {
            let mut cancel = pin!(cancelled());
            let sent = Instant::now();
            let submit_unanswered = run.submit(operation, cancel.as_mut()).await?;
            run.poll(operation, cancel.as_mut(), submit_unanswered, sent)
                .await
        };
        limit.run(follow).await
    }
}

/// A follow under way.
struct Running<S> {
    follow: Follow,
    draws: u64,
    last: Option<S>,
}

/// `NOT_FOUND`s seen for a submit whose answer was lost, before any status.
#[derive(Default)]
struct NotFound {
    polls: u32,
    last: Option<(Status, Duration)>,
}

impl<S> Running<S> {
    /// Sends the submit once; `Some(effect)` when its answer was lost.
    async fn submit<O: LongOperation<Status = S>>(
        &mut self,
        operation: &mut O,
        mut cancel: Pin<&mut Cancelled>,
    ) -> Result<Option<CallEffect>, FollowError<S>> {
        let bound = self.follow.submit_timeout;
        let sent = async {
            match bound {
                Some(t) => OperationBudget::new(t).run(operation.submit()).await,
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

    /// Polls until a terminal state; `sent`: when the submit was sent.
    async fn poll<O: LongOperation<Status = S>>(
        &mut self,
        operation: &mut O,
        mut cancel: Pin<&mut Cancelled>,
        submit_unanswered: Option<CallEffect>,
        sent: Instant,
    ) -> Result<Followed<S>, FollowError<S>> {
        let (mut interval, mut suggested) = (self.follow.rule.first, None);
        let (mut polls, mut failed, mut in_a_row) = (0u32, 0u32, 0u32);
        let mut not_found = NotFound::default();
        loop {
            let wait = poll_wait(interval, suggested, unit_draw(&mut self.draws));
            if remaining().is_some_and(|left| left <= wait) {
                return Err(self.spent(not_found));
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
                    not_found.polls += 1;
                    let since_sent = sent.elapsed();
                    if not_taken(
                        since_sent,
                        not_found.polls,
                        self.follow.settle,
                        NOT_FOUND_POLLS,
                    ) {
                        return Err(FollowError::NotTaken(status));
                    }
                    failed += 1;
                    suggested = None;
                    not_found.last = Some((status, since_sent));
                    interval = self.follow.rule.next(interval);
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

    /// The budget ends before a terminal state: indeterminate while a lost submit's
    /// `NOT_FOUND` had not held over its settle window, else spent.
    fn spent(&mut self, not_found: NotFound) -> FollowError<S> {
        match not_found.last {
            Some((status, since_sent)) => FollowError::Indeterminate {
                status,
                not_found_polls: not_found.polls,
                since_sent,
            },
            None => FollowError::BudgetSpent {
                last: self.last.take(),
            },
        }
    }

    /// The scope was cancelled after the submit went out: sends the cancel RPC once,
    /// outside the scope (a cancel must not be cancelled) and under its own bound. A
    /// submit cut while it was being sent may have arrived, so it is cancelled too
    /// (cancelling what never arrived is harmless; leaving it running is not).
    async fn cancelled<O: LongOperation<Status = S>>(
        &mut self,
        reason: CancelReason,
        operation: &mut O,
    ) -> FollowError<S> {
        let bound = self.follow.cancel_timeout;
        // Made inside the detached scope: the budget must not adopt the cancelled one.
        let sent = detach(async { OperationBudget::new(bound).run(operation.cancel()).await });
        let cancel = match sent.await {
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
