//! The parent's side of cancelling a delegation (SW4-004): send `CancelDelegation`,
//! wait as the caller chose, and report what happened ([`CancelReport`]), in the
//! spirit of Temporal's Nexus cancellation types.

use std::time::Duration;

use tokio::time::Instant;
use tonic::metadata::MetadataValue;

use crate::cancel::outcome::{CancelOutcome, CANCEL_WAIT_KEY, WAIT_ENDED};
use crate::cancel::{child_grace, effective_grace};
use sw4rm_timeouts::proto::sw4rm::handoff::CancelDelegation;
use sw4rm_timeouts::scope::detach;
use sw4rm_timeouts::seams::passes;
use sw4rm_timeouts::Sw4rm;

/// How the parent waits on a cancel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelWait {
    /// Send it in a task of its own and do not wait: [`CancelOutcome::Abandoned`].
    Abandon,
    /// Send it once and report the delegate's answer.
    #[default]
    Try,
    /// Send it again after a failure that may pass (`UNAVAILABLE`,
    /// `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `ABORTED`), until the delegate
    /// answers or the grace is over.
    UntilAcknowledged,
    /// Ask the delegate to answer once its work has ended, and report how:
    /// [`CancelOutcome::EndedInGrace`] or [`CancelOutcome::Forced`] (a delegate that
    /// does not say: [`CancelOutcome::Acknowledged`]). Waits at most the grace and a
    /// few seconds.
    UntilEnded,
}

/// What a cancel came to ([`DelegationCancel::send`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CancelReport {
    /// What happened, as far as the parent can know.
    pub outcome: CancelOutcome,
    /// The grace the delegate was given: the requested one, clamped to what is left
    /// of this agent's own grace when its delegator cancelled it (T-016), never
    /// below 5000 ms.
    pub grace: Duration,
    /// `CancelDelegation` calls made (0 when abandoned): calls, not attempts on the
    /// wire (the layer's retries of one call are inside it).
    pub sends: u32,
}

/// A `CancelDelegation` to send, and how to wait on it.
///
/// ```no_run
/// # async fn f(sw4rm: sw4rm_timeouts::Sw4rm) {
/// use std::time::Duration;
/// use sw4rm_swarm::{CancelOutcome, CancelWait, DelegationCancel};
/// let report = DelegationCancel::new("deleg-1")
///     .with_reason("the user gave up")
///     .with_grace(Duration::from_secs(10))
///     .with_wait(CancelWait::UntilEnded)
///     .send(&sw4rm)
///     .await;
/// match report.outcome {
///     CancelOutcome::EndedInGrace => { /* stopped cleanly */ }
///     CancelOutcome::Forced => { /* dropped at the grace: FORCED_PREEMPTION */ }
///     CancelOutcome::DeadlineFallback => { /* it ends with its budget */ }
///     other => eprintln!("cancel of deleg-1: {other}"),
/// }
/// # }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a cancel does nothing until it is sent"]
pub struct DelegationCancel {
    request: CancelDelegation,
    wait: CancelWait,
}

/// The most time [`CancelWait::UntilEnded`] waits beyond the grace for the answer.
const ANSWER_MARGIN: Duration = Duration::from_secs(3);

impl DelegationCancel {
    /// A cancel of the delegation `correlation_id` (the handoff's `request_id`), with
    /// the 5000 ms floor as its grace, sent once ([`CancelWait::Try`]).
    pub fn new(correlation_id: impl Into<String>) -> Self {
        DelegationCancel {
            request: CancelDelegation {
                correlation_id: correlation_id.into(),
                ..CancelDelegation::default()
            },
            wait: CancelWait::Try,
        }
    }

    /// Why, for the delegate's logs.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.request.reason = reason.into();
        self
    }

    /// The grace the delegate gets to wind down (at least 5000 ms).
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.request.grace_period_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// How to wait on it.
    pub fn with_wait(mut self, wait: CancelWait) -> Self {
        self.wait = wait;
        self
    }

    /// Sends it through `client` (the `handoff` profile), outside the current scope
    /// (a cancel must not be cancelled with the work it stops), and reports.
    ///
    /// With the client's metrics on, the cancel is counted once in
    /// `sw4rm_swarm_cancellations_total{trigger="explicit"}`, its `outcome` what it
    /// came to ([`CancelOutcome::as_str`]); an abandoned cancel is counted when its
    /// send ends, with what the delegate answered.
    pub async fn send(mut self, client: &Sw4rm) -> CancelReport {
        let parent_left = sw4rm_timeouts::seams::own_grace_left();
        let grace = child_grace(effective_grace(self.request.grace_period_ms), parent_left);
        self.request.grace_period_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        let instruments = crate::metrics::Cancellations::of(&client.channel());
        let count = move |outcome: &CancelOutcome| {
            if let Some(instruments) = &instruments {
                instruments.count("explicit", outcome.as_str());
            }
        };
        let report = |outcome: CancelOutcome, sends| {
            if sends > 0 {
                count(&outcome);
            }
            CancelReport {
                outcome,
                grace,
                sends,
            }
        };
        match self.wait {
            CancelWait::Abandon => {
                let sent = once(client.clone(), self.request, None);
                let counted = count.clone();
                tokio::spawn(detach(async move { counted(&sent.await) }));
                report(CancelOutcome::Abandoned, 0)
            }
            CancelWait::Try => {
                let outcome = detach(once(client.clone(), self.request, None)).await;
                report(outcome, 1)
            }
            CancelWait::UntilEnded => {
                let timeout = grace.saturating_add(ANSWER_MARGIN);
                let outcome = detach(once(client.clone(), self.request, Some(timeout))).await;
                report(outcome, 1)
            }
            CancelWait::UntilAcknowledged => {
                let (outcome, sends) = detach(until_answered(client, self.request, grace)).await;
                report(outcome, sends)
            }
        }
    }
}

/// One send; with `wait_for_end`, asking the delegate to answer once its work ended
/// (and waiting that long).
async fn once(
    client: Sw4rm,
    request: CancelDelegation,
    wait_for_end: Option<Duration>,
) -> CancelOutcome {
    let mut call = tonic::Request::new(request);
    if let Some(timeout) = wait_for_end {
        call.metadata_mut()
            .insert(CANCEL_WAIT_KEY, MetadataValue::from_static(WAIT_ENDED));
        // Not `set_timeout`: tonic panics on a timeout it cannot write (a grace of
        // `Duration::MAX`); the layer clamps this one into the route's bounds.
        sw4rm_timeouts::CallTimeout::After(timeout).apply(&mut call);
    }
    let answered = client.handoff().cancel_delegation(call).await;
    CancelOutcome::of(answered.as_ref().map(|r| (r.metadata(), r.get_ref())))
}

/// Sends until the delegate answers (or says it does not implement the RPC), a
/// failure that will not pass, or the grace is over.
async fn until_answered(
    client: &Sw4rm,
    request: CancelDelegation,
    grace: Duration,
) -> (CancelOutcome, u32) {
    // A grace past any representable instant: sent until answered, whatever it takes.
    let until = Instant::now().checked_add(grace);
    let mut backoff = Duration::from_millis(100);
    let mut sends = 0;
    loop {
        sends += 1;
        let outcome = once(client.clone(), request.clone(), None).await;
        let passing = matches!(
            &outcome,
            CancelOutcome::Unknown { code, .. } if passes(*code)
        );
        if !passing || until.is_some_and(|until| Instant::now() + backoff >= until) {
            return (outcome, sends);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}
