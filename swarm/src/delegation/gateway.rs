//! How the loop reaches a gateway: anything that turns a `RequestHandoff` into the
//! gateway's `HandoffResponse` ([`Gateway`]; a closure is one), and the crate's own
//! over a [`Sw4rm`] client ([`SwarmGateway`]), where the answer comes back as the
//! gateway's `AcceptHandoff` or `RejectHandoff` call ([`HandoffAnswers`]).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tonic::{Request, Status};

use sw4rm_timeouts::proto::sw4rm::handoff::{HandoffRequest, HandoffResponse};
use sw4rm_timeouts::seams::{cut, QUOTE_LIMIT};
use sw4rm_timeouts::Sw4rm;

/// Sends one `RequestHandoff` to the gateway its `to_agent` names and gives that
/// gateway's answer. The delegation loop calls it once per send, with the same
/// `request_id` and metadata on every send.
///
/// Any `FnMut(Request<HandoffRequest>) -> impl Future<Output = Result<HandoffResponse,
/// Status>>` is a gateway (a transport of your own, or a scripted one in a test):
///
/// ```
/// use sw4rm_timeouts::proto::sw4rm::handoff::HandoffResponse;
/// use sw4rm_swarm::Gateway;
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
/// use sw4rm_swarm::HandoffAnswers;
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
    by_id: HashMap<String, Waiter>,
    next: u64,
}

/// One send waiting: its number, the gateways the same request went to before it
/// (an answer naming one of them is late, for an earlier send), and where the answer
/// goes.
struct Waiter {
    number: u64,
    earlier: Vec<String>,
    tx: oneshot::Sender<HandoffResponse>,
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
    /// for a request this agent did not send; or when its `accepting_agent` names a
    /// gateway the same request was sent to *before* the waiting send (a late or
    /// duplicate answer to an earlier send: gateway A's "accepted" arriving while the
    /// loop, redirected by A, waits for B).
    ///
    /// Answers are matched by `request_id`, which every send of one delegation
    /// shares: a duplicate of an earlier answer from the *same* gateway that arrives
    /// after the next send to it went out (after an `OVERLOADED`, say) cannot be told
    /// from that send's answer. A gateway answers each send once.
    pub fn deliver(&self, response: HandoffResponse) -> bool {
        let mut waiting = self.lock();
        let late = waiting.by_id.get(&response.request_id).is_some_and(|w| {
            let agent = response.accepting_agent.trim();
            !agent.is_empty() && w.earlier.iter().any(|e| e == agent)
        });
        if late {
            drop(waiting);
            tracing::debug!(
                request_id = %cut(&response.request_id, QUOTE_LIMIT),
                accepting_agent = %cut(&response.accepting_agent, QUOTE_LIMIT),
                "SW4RM handoff answer from a gateway sent to earlier dropped: it answers an \
                 earlier send"
            );
            return false;
        }
        let waiter = waiting.by_id.remove(&response.request_id);
        drop(waiting);
        match waiter {
            Some(w) => w.tx.send(response).is_ok(),
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

    /// Waits for the answer to `request_id` (the one waiting before is replaced);
    /// `earlier`: the gateways the same request went to before this send.
    fn await_answer(&self, request_id: &str, earlier: Vec<String>) -> Result<Waiting, Status> {
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
        waiting.by_id.insert(
            request_id.to_owned(),
            Waiter {
                number,
                earlier,
                tx,
            },
        );
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
            .is_some_and(|w| w.number == self.number)
        {
            waiting.by_id.remove(&self.request_id);
        }
    }
}

/// The crate's gateway: sends `RequestHandoff` through a [`Sw4rm`] client (so it gets
/// the `handoff` profile, the layer's retries, the scope's caps) and a
/// [`crate::HandoffLayer`] (the stamped envelope) and waits for the gateway's `AcceptHandoff` or `RejectHandoff`, handed
/// to `answers` by this agent's `HandoffService`.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use sw4rm_swarm::{HandoffAnswers, SwarmGateway};
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
    /// The gateways each recent request went to, in order (the last
    /// [`SENDS_REMEMBERED`] requests).
    sent: VecDeque<(String, Vec<String>)>,
}

/// Requests a [`SwarmGateway`] remembers the gateways of, to tell a late answer from
/// an earlier gateway (see [`HandoffAnswers::deliver`]).
const SENDS_REMEMBERED: usize = 64;

impl SwarmGateway {
    /// Sends through `client`; answers arrive on `answers`.
    pub fn new(client: Sw4rm, answers: HandoffAnswers) -> Self {
        SwarmGateway {
            client,
            answers,
            sent: VecDeque::new(),
        }
    }

    /// The gateways `request_id` went to before, and `to` noted as its next.
    fn note_send(&mut self, request_id: &str, to: &str) -> Vec<String> {
        let at = self.sent.iter().position(|(id, _)| id == request_id);
        let mut entry = match at.and_then(|i| self.sent.remove(i)) {
            Some(entry) => entry,
            None => (request_id.to_owned(), Vec::new()),
        };
        let earlier: Vec<String> = entry.1.iter().filter(|g| *g != to).cloned().collect();
        entry.1.push(to.to_owned());
        if self.sent.len() >= SENDS_REMEMBERED {
            self.sent.pop_front();
        }
        self.sent.push_back(entry);
        earlier
    }
}

impl Gateway for SwarmGateway {
    fn request_handoff(
        &mut self,
        request: Request<HandoffRequest>,
    ) -> impl Future<Output = Result<HandoffResponse, Status>> + Send {
        let (id, to) = (
            &request.get_ref().request_id,
            request.get_ref().to_agent.trim(),
        );
        let earlier = self.note_send(id, to);
        let waiting = self.answers.await_answer(id, earlier);
        let mut client = crate::HandoffLayer::new().client(&self.client);
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
            .map(|i| answers.await_answer(&format!("r-{i}"), Vec::new()).unwrap())
            .collect();
        assert_eq!(answers.waiting(), MAX_WAITING_ANSWERS);
        let refused = answers
            .await_answer("one-too-many", Vec::new())
            .err()
            .unwrap();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        // The same id waits again in its place (a later send of the same request).
        assert!(answers.await_answer("r-0", Vec::new()).is_ok());
        drop(waiting);
        assert_eq!(answers.waiting(), 0, "every send that stopped waiting left");
    }

    #[tokio::test]
    async fn an_answer_reaches_the_send_waiting_on_its_request_id() {
        let answers = HandoffAnswers::new();
        let mut waiting = answers.await_answer("r-1", vec!["gw-a".into()]).unwrap();
        let late = HandoffResponse {
            request_id: "r-1".into(),
            accepted: true,
            accepting_agent: "gw-a".into(),
            ..HandoffResponse::default()
        };
        assert!(!answers.deliver(late), "gw-a answered an earlier send");
        assert_eq!(answers.waiting(), 1, "still waiting for this send's answer");
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
