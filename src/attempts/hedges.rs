//! [`Hedges`]: the concurrent attempts of one hedged call (gRPC A6 hedging). The
//! first attempt is sent at once; each next one when the attempts before it have not
//! answered after the hedging delay, or at once after a non-fatal answer, while
//! `policy/hedge.rs` allows it. Every attempt runs under what remains of the call's one
//! deadline, with no timeout of its own: the first through the layer's own handle on
//! the inner service, each later one through its own, taken from the call's
//! [`Spare`].
//! The call loop (`call_loop.rs`) polls them and judges each ended attempt
//! (`hedge_verdict.rs`);
//! dropping the hedges drops every attempt still running, and hyper resets their
//! streams.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tower_service::Service;

use super::attempt::Timer;
use super::attempt::{Attempt, Ended, WireTimeout};
use super::hedge_delay::RecentLatency;
use super::hedge_rate::HedgeRate;
use super::replay::{ReplayRequest, Spare};
use super::retry_budget::RetryBudget;
use super::ATTEMPTS_HEADER;
use crate::policy::hedge::{
    hedge_delay, may_hedge, HedgeFacts, HedgingDelay, HedgingPolicy, NoHedge,
};
use crate::policy::retry::Pushback;
use crate::wire::error::BoxError;

type Request = http::Request<tonic::body::Body>;

/// What the plan decided about hedging one call.
#[derive(Clone, Debug)]
pub(crate) struct HedgePlan {
    pub(crate) policy: HedgingPolicy,
    /// No hedge is sent with less than this left of the deadline.
    pub(crate) floor: Duration,
}

/// What a hedged call shares with the layer (its retry budget, shared with retries,
/// is reached through the call's record and passed to each step that uses it).
#[derive(Debug)]
pub(crate) struct HedgeContext {
    /// The call's own deadline.
    pub(crate) deadline: Option<Instant>,
    /// The route's recent latency (`None`: a path without a slot in the layer's table).
    pub(crate) recent: Option<Arc<RecentLatency>>,
    /// When the call started.
    pub(crate) start: Instant,
    /// The layer's cap on the share of calls that hedge (`None`: no cap).
    pub(crate) rate: Option<Arc<HedgeRate>>,
}

pin_project! {
    /// The attempts of one hedged call.
    #[project = HedgesProj]
    #[derive(Debug)]
    pub(crate) struct Hedges<S, F> {
        // When the next hedge is due.
        #[pin]
        timer: Timer,
        running: Vec<Running<S, F>>,
        // Where each attempt after the first takes its handle on the inner service.
        spare: Spare<S>,
        kept: ReplayRequest,
        policy: HedgingPolicy,
        floor: Duration,
        context: HedgeContext,
        // The delay before each hedge, fixed when the call started.
        delay: Duration,
        // Attempts sent, the first included.
        sent: u32,
        // When the next hedge is due; `None`: no more by the delay.
        next_at: Option<Instant>,
        pushed_back: bool,
    }
}

/// One attempt in flight, numbered from 1.
#[derive(Debug)]
struct Running<S, F> {
    attempt: u32,
    future: Pin<Box<Attempt<S, F>>>,
}

/// What happened while the hedges were polled.
#[derive(Debug)]
pub(crate) enum Polled<R> {
    /// Hedge `attempt` was sent because the ones before it took longer than `delay`.
    Sent { attempt: u32, delay: Duration },
    /// The delay passed but no hedge was sent, and none will be by the delay.
    NotSent(NoHedge),
    /// Attempt `attempt` ended.
    Ended { attempt: u32, ended: Ended<R> },
}

impl<S: Clone, F> Hedges<S, F> {
    /// A hedged call whose first attempt is `first` (started through the layer's own
    /// handle); later attempts are made from `kept` and sent through handles taken
    /// from `spare`.
    pub(crate) fn new(
        spare: Spare<S>,
        first: Attempt<S, F>,
        (kept, plan, context): (ReplayRequest, HedgePlan, HedgeContext),
    ) -> Self {
        if let Some(rate) = &context.rate {
            rate.call(context.start);
        }
        let learned = match plan.policy.delay() {
            HedgingDelay::Learned { percentile, .. } => context
                .recent
                .as_ref()
                .and_then(|r| r.percentile(percentile, context.start)),
            HedgingDelay::Fixed(_) => None,
        };
        let delay = hedge_delay(&plan.policy, learned);
        let next_at = (plan.policy.max_attempts() > 1)
            .then(|| context.start.checked_add(delay))
            .flatten();
        Hedges {
            timer: Timer::new(),
            running: vec![Running {
                attempt: 1,
                future: Box::pin(first),
            }],
            spare,
            kept,
            policy: plan.policy,
            floor: plan.floor,
            context,
            delay,
            sent: 1,
            next_at,
            pushed_back: false,
        }
    }

    /// The hedging policy.
    pub(crate) fn policy(&self) -> &HedgingPolicy {
        &self.policy
    }

    /// Attempts sent so far, the first included.
    pub(crate) fn sent(&self) -> u32 {
        self.sent
    }

    /// Polls the delay and every attempt in flight; a hedge due is sent if the layer's
    /// `budget` allows one.
    pub(crate) fn poll<R>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        budget: Option<&RetryBudget>,
    ) -> Poll<Polled<R>>
    where
        S: Service<Request, Response = R, Future = F>,
        S::Error: Into<BoxError>,
        F: std::future::Future<Output = Result<R, S::Error>>,
    {
        let mut this = self.project();
        if let Some(at) = *this.next_at {
            if this.timer.as_mut().poll_until(at, cx).is_ready() {
                *this.next_at = None;
                let delay = *this.delay;
                return Poll::Ready(match send(&mut this, budget) {
                    Ok(attempt) => Polled::Sent { attempt, delay },
                    Err(why) => Polled::NotSent(why),
                });
            }
        }
        for i in 0..this.running.len() {
            if let Poll::Ready(ended) = this.running[i].future.as_mut().poll(cx) {
                let attempt = this.running.swap_remove(i).attempt;
                return Poll::Ready(Polled::Ended { attempt, ended });
            }
        }
        Poll::Pending
    }

    /// After a non-fatal answer (`pushback`: the server's): the layer's retry `budget`
    /// is charged, and the next hedge is sent at once if allowed. `Ok(attempt)`: the
    /// hedge sent; `Err`: why none was. Either way other attempts may still be running
    /// ([`Hedges::is_idle`]).
    pub(crate) fn after_non_fatal(
        self: Pin<&mut Self>,
        pushback: Pushback,
        budget: Option<&RetryBudget>,
    ) -> Result<u32, NoHedge> {
        let mut this = self.project();
        if pushback != Pushback::None {
            *this.pushed_back = true;
        }
        if let Some(budget) = budget {
            budget.fail();
        }
        let sent = send(&mut this, budget);
        if sent.is_err() {
            *this.next_at = None;
        }
        sent
    }

    /// Nothing is running and no hedge will be sent: the last ended attempt is the
    /// call's answer.
    pub(crate) fn is_idle(&self) -> bool {
        self.running.is_empty() && self.next_at.is_none()
    }

    /// The call's answer, from `attempt`: the layer's `budget` gets its success back (an answer
    /// that is a status the policy does not treat as non-fatal is an answer from the
    /// server too), an answer that is not an error teaches the route its latency, and
    /// the response says how many attempts were sent.
    ///
    /// A call a hedge answered is recorded at the delay: its first attempt took at
    /// least that long, and the hedge's own time after it says nothing of the route's
    /// first attempts. (Recorded as delay + hedge, a route whose tail is exactly the
    /// percentile's share would push its delay up by one hedge per refresh until it no
    /// longer cuts the tail.)
    pub(crate) fn answered<B>(
        &self,
        response: &mut http::Response<B>,
        attempt: u32,
        ok: bool,
        budget: Option<&RetryBudget>,
    ) {
        if let Some(budget) = budget {
            budget.succeed();
        }
        if let Some(recent) = self.context.recent.as_ref().filter(|_| ok) {
            let elapsed = self.context.start.elapsed();
            let latency = match attempt {
                1 => elapsed,
                _ => elapsed.min(self.delay),
            };
            recent.record(latency, Instant::now());
        }
        self.mark(response);
    }

    /// Marks a final answer with the number of attempts sent.
    pub(crate) fn mark<B>(&self, response: &mut http::Response<B>) {
        if self.sent > 1 {
            response
                .headers_mut()
                .insert(ATTEMPTS_HEADER, http::HeaderValue::from(self.sent));
        }
    }
}

/// Sends the next hedge now, if the rules allow one; the next after it is due one
/// delay later.
fn send<S: Clone, F>(
    this: &mut HedgesProj<'_, S, F>,
    budget: Option<&RetryBudget>,
) -> Result<u32, NoHedge> {
    let now = Instant::now();
    let remaining = this
        .context
        .deadline
        .map(|d| d.saturating_duration_since(now));
    may_hedge(
        this.policy,
        HedgeFacts {
            sent: *this.sent,
            pushed_back: *this.pushed_back,
            budget_allows: budget.is_none_or(RetryBudget::allows),
            remaining,
            floor: *this.floor,
        },
        || {
            this.context
                .rate
                .as_ref()
                .is_none_or(|rate| rate.try_hedge(now))
        },
    )?;
    let attempt = *this.sent + 1;
    let mut request = this.kept.request(attempt);
    WireTimeout::of(remaining).apply(request.headers_mut());
    this.running.push(Running {
        attempt,
        future: Box::pin(Attempt::new(this.spare.handle(), request, None)),
    });
    *this.sent = attempt;
    *this.next_at = (attempt < this.policy.max_attempts())
        .then(|| now.checked_add(*this.delay))
        .flatten();
    Ok(attempt)
}
