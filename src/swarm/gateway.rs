//! How the loop reaches a gateway: anything that turns a `RequestHandoff` into the
//! gateway's `HandoffResponse` ([`Gateway`]; a closure is one), and the crate's own
//! over a [`Sw4rm`] client ([`SwarmGateway`]), where the answer comes back as the
//! gateway's `AcceptHandoff` or `RejectHandoff` call ([`HandoffAnswers`]).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tonic::{Request, Status};

use crate::clients::Sw4rm;
use crate::policy::quote::{cut, QUOTE_LIMIT};
use crate::proto::sw4rm::handoff::{HandoffRequest, HandoffResponse};

/// Sends one `RequestHandoff` to the gateway its `to_agent` names and gives that
/// gateway's answer. The delegation loop calls it once per send, with the same
/// `request_id` and metadata on every send.
///
/// Any `FnMut(Request<HandoffRequest>) -> impl Future<Output = Result<HandoffResponse,
/// Status>>` is a gateway (a transport of your own, or a scripted one in a test):
///
/// ```
/// use sw4rm_timeouts::proto::sw4rm::handoff::HandoffResponse;
/// use sw4rm_timeouts::swarm::Gateway;
/// fn is_gateway(_: impl Gateway) {}
/// is_gateway(|request: tonic::Request<_>| async move {
///     Ok::<_, tonic::Status>(HandoffResponse { accepted: true, ..Default::default() })
/// });
/// ```
pub trait Gateway {
    /// Sends `request` and waits for the gateway's answer.
    fn request_handoff(
        &mut self,
        request: Request<HandoffRequest>,
    ) -> impl Future<Output = Result<HandoffResponse, Status>> + Send;
}

impl<F, Fut> Gateway for F
where
    F: FnMut(Request<HandoffRequest>) -> Fut,
    Fut: Future<Output = Result<HandoffResponse, Status>> + Send,
{
    fn request_handoff(
        &mut self,
        request: Request<HandoffRequest>,
    ) -> impl Future<Output = Result<HandoffResponse, Status>> + Send {
        self(request)
    }
}

/// At most this many sends wait for their answer at once on one [`HandoffAnswers`];
/// a send beyond it fails with `RESOURCE_EXHAUSTED` before it is made.
pub const MAX_WAITING_ANSWERS: usize = 4_096;

/// Answers to `RequestHandoff`s this agent sent, delivered by its own
/// `HandoffService`: SW4RM's `RequestHandoff` returns `Empty`, and the gateway gives
/// its answer by calling `AcceptHandoff` or `RejectHandoff` with a `HandoffResponse`
/// whose `request_id` names the request. Hand each of those to [`deliver`]; a
/// [`SwarmGateway`] waiting on that `request_id` gets it.
///
/// ```
/// use sw4rm_timeouts::proto::sw4rm::handoff::HandoffResponse;
/// use sw4rm_timeouts::swarm::HandoffAnswers;
/// let answers = HandoffAnswers::new();
/// // Nobody waits on "r-1": the answer is dropped (and said so).
/// assert!(!answers.deliver(HandoffResponse { request_id: "r-1".into(), ..Default::default() }));
/// ```
///
/// [`deliver`]: HandoffAnswers::deliver
#[derive(Clone, Default)]
pub struct HandoffAnswers {
    waiting: Arc<Mutex<Waiters>>,
}

/// The sends waiting, by `request_id`, each numbered so that a send that stops
/// waiting takes out its own entry and not a later send's.
#[derive(Default)]
struct Waiters {
    by_id: HashMap<String, (u64, oneshot::Sender<HandoffResponse>)>,
    next: u64,
}

impl fmt::Debug for HandoffAnswers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandoffAnswers")
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl HandoffAnswers {
    /// An empty set: nobody waits.
    pub fn new() -> Self {
        HandoffAnswers::default()
    }

    /// Gives `response` to the send waiting on its `request_id`; `false` (and the
    /// answer dropped) when none waits: an answer after the loop stopped waiting, or
    /// for a request this agent did not send.
    pub fn deliver(&self, response: HandoffResponse) -> bool {
        let waiter = self.lock().by_id.remove(&response.request_id);
        match waiter {
            Some((_, tx)) => tx.send(response).is_ok(),
            None => {
                tracing::debug!(
                    request_id = %cut(&response.request_id, QUOTE_LIMIT),
                    "SW4RM handoff answer for no waiting request dropped"
                );
                false
            }
        }
    }

    /// Sends waiting for an answer now.
    pub fn waiting(&self) -> usize {
        self.lock().by_id.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiters> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for the answer to `request_id` (the one waiting before is replaced).
    fn expect(&self, request_id: &str) -> Result<Waiting, Status> {
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.lock();
        if waiting.by_id.len() >= MAX_WAITING_ANSWERS && !waiting.by_id.contains_key(request_id) {
            return Err(Status::resource_exhausted(format!(
                "RequestHandoff not sent: {MAX_WAITING_ANSWERS} handoffs already wait for \
                 their answer on this HandoffAnswers"
            )));
        }
        waiting.next += 1;
        let number = waiting.next;
        waiting.by_id.insert(request_id.to_owned(), (number, tx));
        Ok(Waiting {
            answers: self.clone(),
            request_id: request_id.to_owned(),
            number,
            rx,
        })
    }
}

/// One send waiting for its answer; stops waiting when dropped.
struct Waiting {
    answers: HandoffAnswers,
    request_id: String,
    number: u64,
    rx: oneshot::Receiver<HandoffResponse>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut waiting = self.answers.lock();
        // Only this send's entry (a later send of the same request may wait now).
        if waiting
            .by_id
            .get(&self.request_id)
            .is_some_and(|(number, _)| *number == self.number)
        {
            waiting.by_id.remove(&self.request_id);
        }
    }
}

/// The crate's gateway: sends `RequestHandoff` through a [`Sw4rm`] client (so it gets
/// the `handoff` profile, the layer's retries, the scope's caps and the stamped
/// envelope) and waits for the gateway's `AcceptHandoff` or `RejectHandoff`, handed
/// to `answers` by this agent's `HandoffService`.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use sw4rm_timeouts::swarm::{HandoffAnswers, SwarmGateway};
/// use sw4rm_timeouts::Sw4rm;
/// let answers = HandoffAnswers::new(); // also given to this agent's HandoffService
/// let sw4rm = Sw4rm::connect("http://gateway.swarm-b:50051").await?;
/// let gateway = SwarmGateway::new(sw4rm, answers.clone());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SwarmGateway {
    client: Sw4rm,
    answers: HandoffAnswers,
}

impl SwarmGateway {
    /// Sends through `client`; answers arrive on `answers`.
    pub fn new(client: Sw4rm, answers: HandoffAnswers) -> Self {
        SwarmGateway { client, answers }
    }
}

impl Gateway for SwarmGateway {
    fn request_handoff(
        &mut self,
        request: Request<HandoffRequest>,
    ) -> impl Future<Output = Result<HandoffResponse, Status>> + Send {
        let waiting = self.answers.expect(&request.get_ref().request_id);
        let mut client = self.client.handoff();
        async move {
            let mut waiting = waiting?;
            client.request_handoff(request).await?;
            (&mut waiting.rx).await.map_err(|_| {
                Status::unavailable(
                    "the gateway's answer was replaced by a later send of the same request",
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_answers_are_bounded_and_a_send_that_stops_waiting_leaves_nothing() {
        let answers = HandoffAnswers::new();
        let waiting: Vec<_> = (0..MAX_WAITING_ANSWERS)
            .map(|i| answers.expect(&format!("r-{i}")).unwrap())
            .collect();
        assert_eq!(answers.waiting(), MAX_WAITING_ANSWERS);
        let refused = answers.expect("one-too-many").err().unwrap();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        // The same id waits again in its place (a later send of the same request).
        assert!(answers.expect("r-0").is_ok());
        drop(waiting);
        assert_eq!(answers.waiting(), 0, "every send that stopped waiting left");
    }

    #[tokio::test]
    async fn an_answer_reaches_the_send_waiting_on_its_request_id() {
        let answers = HandoffAnswers::new();
        let mut waiting = answers.expect("r-1").unwrap();
        let other = HandoffResponse {
            request_id: "r-2".into(),
            ..HandoffResponse::default()
        };
        assert!(!answers.deliver(other), "nobody waits on r-2");
        let answer = HandoffResponse {
            request_id: "r-1".into(),
            accepted: true,
            ..HandoffResponse::default()
        };
        assert!(answers.deliver(answer.clone()));
        assert_eq!((&mut waiting.rx).await.unwrap(), answer);
        drop(waiting);
        assert_eq!(answers.waiting(), 0);
    }
}
