//! [`HandoffLayer`]: SW4-004 for the handoffs an agent sends, as a layer stacked over
//! the timeout layer. A `RequestHandoff` made inside a scope carries the scope's
//! `BudgetEnvelope` (`stamp.rs`) and, with the cascade on, is remembered so that
//! cancelling the scope sends `CancelDelegation` for it (`cascade.rs`). Every other
//! call goes through untouched.

mod cascade;
pub(crate) mod envelope;
mod outgoing;
mod stamp;

use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

use crate::metrics::Cancellations;
pub use cascade::remembered_handoffs;
use cascade::{remember, CascadeSender};
use envelope::peek_request_id;
use stamp::stamp_handoff;
use sw4rm_timeouts::proto::sw4rm::handoff::handoff_service_client::HandoffServiceClient;
use sw4rm_timeouts::BoxError;
use sw4rm_timeouts::Sw4rm;
use sw4rm_timeouts::TimeoutProfileService;

/// The one path the layer acts on.
const REQUEST_HANDOFF: &str = "/sw4rm.handoff.HandoffService/RequestHandoff";

type Request = http::Request<tonic::body::Body>;

/// Stacks over a [`TimeoutProfileService`] (the layer reads the scope the timeout
/// layer reads, and a delegation it refuses ends there as a call does): every
/// `RequestHandoff` made inside a scope (an inherited deadline, an
/// [`sw4rm_timeouts::OperationBudget`]) carries an envelope no larger than what remains, one
/// hop deeper; one beyond `max_delegation_depth`, or with nothing left, is refused
/// before it is sent. With [`HandoffLayer::with_cancel_cascade`], cancelling the
/// scope sends `CancelDelegation` for each handoff made in it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use sw4rm_timeouts::proto::sw4rm::handoff::HandoffRequest;
/// use sw4rm_swarm::HandoffLayer;
/// use sw4rm_timeouts::{OperationBudget, Sw4rm, TimeoutProfileLayer};
/// # let server = sw4rm_timeouts::testing::TestServer::start().await?;
/// let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard()).await?;
/// let mut handoff = HandoffLayer::new().client(&sw4rm);
/// OperationBudget::new(Duration::from_secs(20))
///     .run(handoff.request_handoff(HandoffRequest::default()))
///     .await?;
/// let sent = server.calls()[0].request_as::<HandoffRequest>().expect("a handoff");
/// let envelope = sent.budget.expect("stamped");
/// assert_eq!(envelope.current_depth, 1);
/// assert!(envelope.wall_time_remaining_ms <= 20_000);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct HandoffLayer {
    envelopes: bool,
    cascade: Option<Duration>,
}

impl Default for HandoffLayer {
    fn default() -> Self {
        HandoffLayer::new()
    }
}

impl HandoffLayer {
    /// Envelopes stamped, no cancel cascade.
    pub fn new() -> Self {
        HandoffLayer {
            envelopes: true,
            cascade: None,
        }
    }

    /// SW4-004's cancel cascade: a handoff made in a scope is remembered (its
    /// `request_id`, the delegation's correlation id), and when the scope is
    /// cancelled — its caller went away, its budget or its own delegation was
    /// cancelled — `CancelDelegation` is sent for it through the same client, with
    /// `grace` as the grace period (the receiver raises 0 to 5000 ms). Only direct
    /// children: each delegate cascades to its own. Off by default.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_swarm::HandoffLayer;
    /// let layer = HandoffLayer::new().with_cancel_cascade(Duration::from_secs(10));
    /// # drop(layer);
    /// ```
    pub fn with_cancel_cascade(self, grace: Duration) -> Self {
        HandoffLayer {
            cascade: Some(grace),
            ..self
        }
    }

    /// Leaves every handoff's `BudgetEnvelope` as the caller wrote it (or absent);
    /// per call: [`CallBudgetEnvelope::AsWritten`].
    ///
    /// ```
    /// let layer = sw4rm_swarm::HandoffLayer::new().without_budget_envelopes();
    /// # drop(layer);
    /// ```
    pub fn without_budget_envelopes(self) -> Self {
        HandoffLayer {
            envelopes: false,
            ..self
        }
    }

    /// A `HandoffService` client over `sw4rm`'s connection and layer, through this
    /// layer.
    pub fn client<S, B>(&self, sw4rm: &Sw4rm<S>) -> HandoffServiceClient<HandoffStamped<S>>
    where
        S: Service<Request, Response = http::Response<B>> + Clone + Send + Sync + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<BoxError> + Send,
    {
        HandoffServiceClient::new(self.layer(sw4rm.channel()))
    }
}

impl<S, B> Layer<TimeoutProfileService<S>> for HandoffLayer
where
    S: Service<Request, Response = http::Response<B>> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError> + Send,
{
    type Service = HandoffStamped<S>;

    fn layer(&self, inner: TimeoutProfileService<S>) -> HandoffStamped<S> {
        // The cascade's `CancelDelegation` goes through the timeout layer (its route's
        // profile), not through this one.
        let cascade = self.cascade.map(|grace| {
            let client = HandoffServiceClient::new(inner.clone());
            let send = CascadeSender::new(move |message| {
                let mut client = client.clone();
                Box::pin(async move { client.cancel_delegation(message).await })
            });
            (grace, send)
        });
        HandoffStamped {
            cancellations: Cancellations::of(&inner),
            inner,
            envelopes: self.envelopes,
            cascade,
        }
    }
}

/// The service [`HandoffLayer`] makes of a [`TimeoutProfileService`].
#[derive(Clone, Debug)]
pub struct HandoffStamped<S> {
    inner: TimeoutProfileService<S>,
    envelopes: bool,
    cascade: Option<(Duration, CascadeSender)>,
    /// Where the cascade's cancels are counted (the timeout layer's meter).
    cancellations: Option<Cancellations>,
}

impl<S> HandoffStamped<S> {
    /// The timeout service under this one.
    pub fn get_ref(&self) -> &TimeoutProfileService<S> {
        &self.inner
    }

    /// Stamps a handoff's envelope with what the scope has left, and remembers its
    /// `request_id` for the cancel cascade; a refusal (nothing left, too deep) goes
    /// to the timeout layer as the call's end.
    fn handoff(&self, req: &mut Request) {
        let (scope, cancel) = sw4rm_timeouts::seams::current(Instant::now());
        let propagation = sw4rm_timeouts::seams::propagation(&self.inner);
        let as_written = req.extensions().get::<CallBudgetEnvelope>().is_some();
        let mut body = std::mem::take(req.body_mut());
        let mut request_id = None;
        if let Some(scope) = scope.as_ref().filter(|_| self.envelopes && !as_written) {
            match stamp_handoff(&mut body, scope, &propagation) {
                Ok(id) => request_id = id,
                Err(refusal) => {
                    *req.body_mut() = body;
                    req.extensions_mut().insert(refusal);
                    return;
                }
            }
        }
        // Not remembered when the timeout layer will not send it: made in a scope
        // already cancelled, or with nothing left.
        let spent = scope.is_some_and(|s| s.left(&propagation) == Some(Duration::ZERO));
        if let (Some((grace, send)), Some(signal)) = (&self.cascade, cancel) {
            if !spent && signal.reason().is_none() {
                if let Some(id) = request_id.or_else(|| peek_request_id(&mut body)) {
                    let counted = self.cancellations.clone();
                    remember(&signal, id, *grace, Some(send.clone()), counted);
                }
            }
        }
        *req.body_mut() = body;
    }
}

impl<S> Service<Request> for HandoffStamped<S>
where
    TimeoutProfileService<S>: Service<Request>,
{
    type Response = <TimeoutProfileService<S> as Service<Request>>::Response;
    type Error = <TimeoutProfileService<S> as Service<Request>>::Error;
    type Future = <TimeoutProfileService<S> as Service<Request>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        if req.uri().path() == REQUEST_HANDOFF {
            self.handoff(&mut req);
        }
        self.inner.call(req)
    }
}

/// What [`HandoffLayer`] does with a handoff's SW4-004 `BudgetEnvelope`, for one
/// call.
///
/// By default a `RequestHandoff` made inside a scope carries an envelope whose wall
/// time and epoch deadline are no later than what remains of the scope (and than
/// what the caller wrote), one hop deeper; a delegation beyond
/// `max_delegation_depth`, or with nothing left, is refused before it is sent.
///
/// ```
/// use sw4rm_swarm::CallBudgetEnvelope;
/// use sw4rm_timeouts::proto::sw4rm::handoff::HandoffRequest;
/// let mut req = tonic::Request::new(HandoffRequest::default());
/// CallBudgetEnvelope::AsWritten.apply(&mut req); // sent exactly as written
/// assert_eq!(req.extensions().get::<CallBudgetEnvelope>(), Some(&CallBudgetEnvelope::AsWritten));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallBudgetEnvelope {
    /// Send the request's envelope as the caller wrote it (or without one).
    AsWritten,
}

impl CallBudgetEnvelope {
    /// Attaches this choice to a request.
    pub fn apply<T>(self, request: &mut tonic::Request<T>) {
        request.extensions_mut().insert(self);
    }
}
