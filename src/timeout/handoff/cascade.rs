//! SW4-004's cancel cascade, the layer's side: a handoff made in a scope is
//! remembered on the scope's cancel signal (its `request_id`, the correlation id of
//! the delegation); when the scope is cancelled, the agent sends `CancelDelegation` for
//! it to the agent it was handed to — its direct children only: each child cascades
//! to its own. Opt-in per layer ([`crate::timeout::TimeoutProfileLayer::with_cancel_cascade`]);
//! what is remembered goes with the scope when it ends uncancelled.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tonic::Status;

use crate::policy::cancel::CancelReason;
use crate::proto::sw4rm::handoff::CancelDelegation;
use crate::scope::{CancelSignal, RememberedHandoff};

/// Sends one `CancelDelegation` (made by the client the layer serves).
type SendFn = dyn Fn(CancelDelegation) -> Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>
    + Send
    + Sync;

/// How a layered service sends `CancelDelegation`: through the client it serves, set
/// when the client is built (`Sw4rm` over a tonic `Channel` does it).
#[derive(Clone)]
pub(crate) struct CascadeSender(Arc<SendFn>);

impl CascadeSender {
    pub(crate) fn new(
        send: impl Fn(CancelDelegation) -> Pin<Box<dyn Future<Output = Result<(), Status>> + Send>>
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

/// One handoff made in a scope.
struct Remembered {
    request_id: String,
    grace: Duration,
    send: Option<CascadeSender>,
    /// Counted in `scope::remembered_handoffs()` while it lives.
    _counted: RememberedHandoff,
}

/// Remembers the handoff `request_id` on `signal`, to cancel it with the scope
/// through `send` (`None`: the client cannot send; the cancel is logged).
pub(crate) fn remember(
    signal: &CancelSignal,
    request_id: String,
    grace: Duration,
    send: Option<CascadeSender>,
) {
    let handoff = Remembered {
        request_id,
        grace,
        send,
        _counted: RememberedHandoff::new(),
    };
    signal.on_cancel(Box::new(move |reason| handoff.cancel(reason)));
}

impl Remembered {
    /// The scope was cancelled: sends `CancelDelegation` in a task of its own, outside
    /// any scope (the cancel must not be cancelled), under its route's profile.
    fn cancel(self, reason: CancelReason) {
        let Some(send) = self.send.clone() else {
            tracing::warn!(
                request_id = %self.request_id,
                "SW4RM cancel cascade is on, but the client under the layer cannot send \
                 CancelDelegation (build it with Sw4rm over a tonic Channel)"
            );
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let message = CancelDelegation {
            correlation_id: self.request_id.clone(),
            reason: format!("{}: {}", reason.as_str(), reason.describe()),
            grace_period_ms: u64::try_from(self.grace.as_millis()).unwrap_or(u64::MAX),
        };
        let request_id = self.request_id.clone();
        runtime.spawn(crate::scope::detach(async move {
            match (send.0)(message).await {
                Ok(()) => tracing::debug!(%request_id, cause = reason.as_str(), "SW4RM delegation cancelled"),
                Err(status) => tracing::warn!(
                    %request_id,
                    cause = reason.as_str(),
                    code = ?status.code(),
                    message = status.message(),
                    "SW4RM CancelDelegation failed: the delegate may run on"
                ),
            }
        }));
    }
}
