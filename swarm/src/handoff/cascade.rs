//! SW4-004's cancel cascade, the layer's side: a handoff made in a scope is
//! remembered on the scope's cancel signal (its `request_id`, the correlation id of
//! the delegation); when the scope is cancelled, the agent sends `CancelDelegation` for
//! it to the agent it was handed to — its direct children only: each child cascades
//! to its own. Opt-in per layer ([`super::HandoffLayer::with_cancel_cascade`]);
//! what is remembered goes with the scope when it ends uncancelled.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;

use crate::cancel::child_grace;
use crate::cancel::outcome::CancelOutcome;
use crate::metrics::Cancellations;
use sw4rm_timeouts::proto::sw4rm::handoff::{CancelDelegation, CancelDelegationResponse};
use sw4rm_timeouts::seams::Signal as CancelSignal;
use sw4rm_timeouts::CancelReason;

/// Sends one `CancelDelegation` (made by the client the layer serves).
type SendFn =
    dyn Fn(CancelDelegation) -> Pin<Box<dyn Future<Output = Answered> + Send>> + Send + Sync;

/// The answer to a `CancelDelegation`.
pub(crate) type Answered = Result<tonic::Response<CancelDelegationResponse>, Status>;

/// How a layered service sends `CancelDelegation`: through the client it serves, set
/// when the client is built (`Sw4rm` over a tonic `Channel` does it).
#[derive(Clone)]
pub(crate) struct CascadeSender(Arc<SendFn>);

impl CascadeSender {
    pub(crate) fn new(
        send: impl Fn(CancelDelegation) -> Pin<Box<dyn Future<Output = Answered> + Send>>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        CascadeSender(Arc::new(send))
    }
}

impl fmt::Debug for CascadeSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CascadeSender")
    }
}

/// Handoffs remembered now, in every scope of the process.
static REMEMBERED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Handoffs remembered for a cancel cascade, now: made in a scope that is still alive
/// and not cancelled (for leak checks and dashboards; 0 when no scope holds one).
///
/// ```
/// assert_eq!(sw4rm_swarm::remembered_handoffs(), 0);
/// ```
pub fn remembered_handoffs() -> usize {
    REMEMBERED.load(std::sync::atomic::Ordering::Relaxed)
}

/// One handoff remembered on a signal, counted while it lives.
#[derive(Debug)]
struct RememberedHandoff(());

impl RememberedHandoff {
    fn new() -> Self {
        REMEMBERED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        RememberedHandoff(())
    }
}

impl Drop for RememberedHandoff {
    fn drop(&mut self) {
        REMEMBERED.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// One handoff made in a scope.
struct Remembered {
    request_id: String,
    grace: Duration,
    send: Option<CascadeSender>,
    instruments: Option<Cancellations>,
    /// Counted in [`remembered_handoffs`] while it lives.
    _counted: RememberedHandoff,
}

/// Remembers the handoff `request_id` on `signal`, to cancel it with the scope
/// through `send` (`None`: the client cannot send; the cancel is logged), counted on
/// `instruments`.
pub(crate) fn remember(
    signal: &CancelSignal,
    request_id: String,
    grace: Duration,
    send: Option<CascadeSender>,
    instruments: Option<Cancellations>,
) {
    let handoff = Remembered {
        request_id,
        grace,
        send,
        instruments,
        _counted: RememberedHandoff::new(),
    };
    signal.on_cancel(Box::new(move |reason, grace_until| {
        handoff.cancel(reason, grace_until);
    }));
}

/// The `trigger` of `sw4rm_swarm_cancellations_total` for a cancel of `reason`.
fn trigger(reason: CancelReason) -> &'static str {
    match reason {
        CancelReason::InboundDeadline => "deadline",
        _ => "explicit",
    }
}

impl Remembered {
    /// The scope was cancelled: sends `CancelDelegation` in a task of its own, outside
    /// any scope (the cancel must not be cancelled), under its route's profile. A
    /// scope cancelled by its own delegator passes on no more grace than it has left
    /// (T-016, with the 5000 ms floor).
    fn cancel(self, reason: CancelReason, grace_until: Option<Instant>) {
        let count = |outcome: &'static str| {
            if let Some(instruments) = &self.instruments {
                instruments.count(trigger(reason), outcome);
            }
        };
        let Some(send) = self.send.clone() else {
            count("not_sent");
            tracing::warn!(
                request_id = %self.request_id,
                "SW4RM cancel cascade is on, but the client under the layer cannot send \
                 CancelDelegation (build it with Sw4rm over a tonic Channel)"
            );
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            count("not_sent");
            return;
        };
        let left = grace_until.map(|until| until.saturating_duration_since(Instant::now()));
        let grace = child_grace(self.grace, left);
        let message = CancelDelegation {
            correlation_id: self.request_id.clone(),
            reason: format!("{}: {}", reason.as_str(), reason.describe()),
            grace_period_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
        };
        let Remembered {
            request_id,
            instruments,
            ..
        } = self;
        runtime.spawn(sw4rm_timeouts::scope::detach(async move {
            let answered = (send.0)(message).await;
            let outcome = CancelOutcome::of(answered.as_ref().map(|r| (r.metadata(), r.get_ref())));
            if let Some(instruments) = &instruments {
                instruments.count(trigger(reason), outcome.as_str());
            }
            log(&request_id, reason, &outcome);
        }));
    }
}

/// The parent's record of what a cascaded cancel came to.
fn log(request_id: &str, reason: CancelReason, outcome: &CancelOutcome) {
    let cause = reason.as_str();
    match outcome {
        CancelOutcome::Unknown { .. } => tracing::warn!(
            %request_id, cause, %outcome,
            "SW4RM CancelDelegation failed: the delegate may run on until its budget ends"
        ),
        CancelOutcome::DeadlineFallback => tracing::info!(
            %request_id, cause, %outcome,
            "SW4RM delegate does not implement CancelDelegation: its work ends with its \
             budget (SW4-004 §5.7)"
        ),
        _ => tracing::debug!(%request_id, cause, %outcome, "SW4RM delegation cancelled"),
    }
}
