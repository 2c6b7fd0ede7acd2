//! A delegate's answer to `CancelDelegation` in one call: cancel, and, when the
//! parent asked to wait ([`CANCEL_WAIT_KEY`]), answer once the work has ended, saying
//! how ([`CANCEL_OUTCOME_KEY`]).

use std::time::Duration;

use tonic::metadata::MetadataValue;
use tonic::{Request, Response};

use super::{Delegations, Ended};
use crate::cancel::effective_grace;
use crate::cancel::outcome::{
    CANCEL_OUTCOME_KEY, CANCEL_WAIT_KEY, ENDED_FORCED, ENDED_IN_GRACE, WAIT_ENDED,
};
use sw4rm_timeouts::proto::sw4rm::handoff::{CancelDelegation, CancelDelegationResponse};

/// How much longer than the grace a waiting answer waits for the work's end (the run
/// drops forced work at the grace; this covers its last poll).
const END_MARGIN: Duration = Duration::from_secs(1);

impl Delegations {
    /// Answers a `CancelDelegation` RPC: [`cancel`](Delegations::cancel), and, when
    /// the parent asked to wait until the work ended (request metadata
    /// `sw4rm-cancel-wait: ended`, sent by the parent's `CancelWait::UntilEnded`),
    /// answers once it has, with `sw4rm-cancel-outcome: ended` (within its grace) or
    /// `forced` (dropped at the grace's end). The work must be running
    /// ([`run`](Delegations::run)'s future polled, e.g. in a task of its own); at most
    /// the grace and a second after, the answer goes without an outcome.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use sw4rm_timeouts::proto::sw4rm::handoff::{CancelDelegation, HandoffRequest};
    /// use sw4rm_swarm::Delegations;
    /// use sw4rm_timeouts::scope;
    /// let delegations = Delegations::new();
    /// let handoff = HandoffRequest { request_id: "h-1".into(), ..Default::default() };
    /// let run = delegations.run(&handoff, async { scope::cancelled().await }).unwrap();
    /// tokio::spawn(scope::detach(run));
    /// let mut request = tonic::Request::new(CancelDelegation { correlation_id: "h-1".into(), ..Default::default() });
    /// request.metadata_mut().insert("sw4rm-cancel-wait", "ended".parse().unwrap());
    /// let answer = delegations.answer_cancel(request).await;
    /// assert!(answer.get_ref().acknowledged);
    /// assert_eq!(answer.metadata().get("sw4rm-cancel-outcome").unwrap(), "ended");
    /// # }
    /// ```
    pub async fn answer_cancel(
        &self,
        request: Request<CancelDelegation>,
    ) -> Response<CancelDelegationResponse> {
        let wait = request
            .metadata()
            .get(CANCEL_WAIT_KEY)
            .is_some_and(|v| v.as_bytes() == WAIT_ENDED.as_bytes());
        let message = request.into_inner();
        // Subscribed before the cancel, so a quick end is not missed.
        let ended = wait.then(|| self.ended(&message.correlation_id)).flatten();
        let answer = self.cancel(&message);
        let mut response = Response::new(answer);
        let Some(mut ended) = ended.filter(|_| response.get_ref().acknowledged) else {
            return response;
        };
        let limit = effective_grace(message.grace_period_ms).saturating_add(END_MARGIN);
        let end = tokio::time::timeout(limit, ended.wait_for(|e| *e != Ended::Running)).await;
        let how = match end {
            Ok(Ok(e)) if *e == Ended::Forced => Some(ENDED_FORCED),
            Ok(Ok(_)) => Some(ENDED_IN_GRACE),
            // The run went away without a word, or the work outlived the wait.
            Ok(Err(_)) => Some(ENDED_IN_GRACE),
            Err(_) => None,
        };
        if let Some(how) = how {
            response
                .metadata_mut()
                .insert(CANCEL_OUTCOME_KEY, MetadataValue::from_static(how));
        }
        response
    }
}
