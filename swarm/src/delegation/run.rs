//! The caller's loop (SW4-004 §4.3, SW4-005): send, read the gateway's answer, wait
//! and send again after `OVERLOADED`, follow a `REDIRECT`, spend the budget as it
//! goes. The rules are `policy/delegation.rs`; this file sends, waits and measures.

use std::pin::{pin, Pin};
use std::time::Duration;

use opentelemetry::metrics::MeterProvider;
use tokio::time::{sleep, Instant};
use tonic::metadata::MetadataMap;
use tonic::Request;
use tracing::Instrument;

use super::gateway::Gateway;
use super::outcome::{DelegationEnd, DelegationError, DelegationOutcome};
use crate::delegation::rules::{
    left_ms, next_step, Answer, DelegationRules, LoopProgress, Made, PolicyFields, Settled, Step,
};
use crate::metrics::SwarmInstruments;
use sw4rm_timeouts::proto::sw4rm::handoff::{
    BudgetEnvelope, HandoffRequest, HandoffResponse, SwarmDelegationPolicy,
};
use sw4rm_timeouts::scope::{cancelled, Cancelled};
use sw4rm_timeouts::seams::epoch_ms_now;
use sw4rm_timeouts::seams::long_past;
use sw4rm_timeouts::seams::{cut, QUOTE_LIMIT};
use sw4rm_timeouts::seams::{random_id, random_u64, unit_draw};
use sw4rm_timeouts::Propagation;

use super::token::insert_token;
pub use super::token::IDEMPOTENCY_TOKEN_KEY;

/// The longest `sw4rm.redirect_chain` span attribute, in bytes.
const CHAIN_LIMIT: usize = 1_024;

/// A delegation to another swarm, ready to run: one `HandoffRequest` with its
/// `BudgetEnvelope` (an epoch deadline is required) and `SwarmDelegationPolicy`
/// (absent: upstream's defaults), sent by [`run`](Delegation::run) until a gateway
/// accepts, the policy says stop, or the budget is spent.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use sw4rm_timeouts::proto::sw4rm::common::ErrorCode;
/// use sw4rm_timeouts::proto::sw4rm::handoff::{BudgetEnvelope, HandoffRequest, HandoffResponse};
/// use sw4rm_swarm::{Delegation, DelegationEnd};
/// let request = HandoffRequest {
///     to_agent: "gateway-a".into(),
///     budget: Some(BudgetEnvelope { wall_time_remaining_ms: 5_000, deadline_epoch_ms: u64::MAX, ..Default::default() }),
///     ..Default::default()
/// };
/// // A gateway that is busy once, then accepts.
/// let mut busy = 1;
/// let mut gateway = |_: tonic::Request<HandoffRequest>| {
///     let overloaded = std::mem::take(&mut busy) == 1;
///     async move {
///         Ok(match overloaded {
///             true => HandoffResponse { rejection_code: ErrorCode::Overloaded.into(), retry_after_ms: 200, ..Default::default() },
///             false => HandoffResponse { accepted: true, ..Default::default() },
///         })
///     }
/// };
/// let outcome = Delegation::new(request).unwrap().run(&mut gateway).await.unwrap();
/// assert_eq!((outcome.end, outcome.retries), (DelegationEnd::Accepted, 1));
/// assert!(outcome.budget_left.wall_time_remaining_ms <= 4_800);
/// # }
/// ```
#[derive(Clone, Debug)]
#[must_use = "a delegation does nothing until it is run"]
pub struct Delegation {
    request: HandoffRequest,
    metadata: MetadataMap,
    rules: DelegationRules,
    epoch_now_ms: Option<u64>,
    seed: Option<u64>,
    instruments: Option<SwarmInstruments>,
    agent_labels: bool,
}

impl Delegation {
    /// A delegation of `request`. Its `BudgetEnvelope` must carry
    /// `deadline_epoch_ms` ([`DelegationError::NoDeadline`]); `wall_time_remaining_ms`
    /// 0 means "not set". An empty `request_id` is given a random one (kept on every
    /// send: it is the delegation's correlation id).
    pub fn new(mut request: HandoffRequest) -> Result<Self, DelegationError> {
        if request
            .budget
            .as_ref()
            .is_none_or(|b| b.deadline_epoch_ms == 0)
        {
            return Err(DelegationError::NoDeadline);
        }
        if request.request_id.is_empty() {
            request.request_id = random_id();
        }
        let rules = DelegationRules::of(request.delegation_policy.as_ref().map(fields));
        let mut metadata = MetadataMap::new();
        insert_token(&mut metadata, &request);
        Ok(Delegation {
            request,
            metadata,
            rules,
            epoch_now_ms: None,
            seed: None,
            instruments: None,
            agent_labels: false,
        })
    }

    /// Sends `metadata` (a correlation id, an idempotency token of your own, auth)
    /// with every send, unchanged across retries and redirects (SW4-005 §9). The
    /// crate's [`IDEMPOTENCY_TOKEN_KEY`] is added unless `metadata` has one.
    pub fn with_metadata(mut self, metadata: MetadataMap) -> Self {
        self.metadata = metadata;
        insert_token(&mut self.metadata, &self.request);
        self
    }

    /// The wall clock now, in ms since the Unix epoch, for the budget's
    /// `deadline_epoch_ms` (default: the system clock when the loop starts; time
    /// after that is measured on tokio's clock). For replaying a recorded delegation
    /// or upstream's conformance vectors.
    pub fn with_epoch_now_ms(mut self, now_ms: u64) -> Self {
        self.epoch_now_ms = Some(now_ms);
        self
    }

    /// Seeds the jitter of the waits after `OVERLOADED` (default: a random seed),
    /// for reproducible tests.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Records the loop's metrics through `provider` (default: the global one).
    pub fn with_meter_provider(mut self, provider: &impl MeterProvider) -> Self {
        self.instruments = Some(SwarmInstruments::from_provider(provider));
        self
    }

    /// Adds `from_agent` and `to_agent` to `sw4rm_swarm_retry_total`. Off by
    /// default: agent ids are unbounded label values; turn it on only where the set
    /// of agents and gateways is small and known.
    pub fn with_agent_labels(mut self) -> Self {
        self.agent_labels = true;
        self
    }

    /// Runs the loop through `gateway` to its final answer. Inside an
    /// [`sw4rm_timeouts::OperationBudget`] or an inbound call's scope, the smaller of the
    /// envelope's budget and the scope's cap rules, and a cancel of the scope stops
    /// the loop at once ([`DelegationError::Cancelled`]: nothing is sent after it, a
    /// wait is cut short). A send still unanswered when the budget runs out ends the
    /// loop with `ACK_TIMEOUT`.
    pub async fn run(
        self,
        gateway: &mut impl Gateway,
    ) -> Result<DelegationOutcome, DelegationError> {
        let mut cancel = pin!(cancelled());
        let span = tracing::info_span!(
            "sw4rm.delegate",
            sw4rm.correlation_id = %cut(&self.request.request_id, QUOTE_LIMIT),
            sw4rm.redirect_count = tracing::field::Empty,
            sw4rm.redirect_chain = tracing::field::Empty,
            sw4rm.redirect_terminal_reason = tracing::field::Empty,
        );
        let mut running = Running::start(self);
        if let Some((ago, reads_as_seconds)) =
            long_past(running.deadline_epoch_ms, running.epoch_start_ms)
        {
            return Err(DelegationError::DeadlineLongPast {
                deadline_epoch_ms: running.deadline_epoch_ms,
                ago: std::time::Duration::from_millis(ago),
                reads_as_seconds,
            });
        }
        let result = running
            .drive(gateway, cancel.as_mut())
            .instrument(span.clone())
            .await;
        running.finish(&result, &span);
        result
    }
}

/// A loop under way.
struct Running {
    request: HandoffRequest,
    metadata: MetadataMap,
    rules: DelegationRules,
    instruments: SwarmInstruments,
    agent_labels: bool,
    started: Instant,
    epoch_start_ms: u64,
    /// The envelope's wall time at the start (`None`: not set). What is left is it
    /// less the time since the start: the loop only sends and waits, so every send
    /// and every wait is taken off, measured on one clock with the epoch deadline (so
    /// the two fields never drift apart).
    wall_ms: Option<u64>,
    deadline_epoch_ms: u64,
    progress: LoopProgress,
    sent_to: Vec<String>,
    draws: u64,
    first_redirect: Option<Instant>,
    last_answer: Option<HandoffResponse>,
}

impl Running {
    fn start(d: Delegation) -> Self {
        let budget = d.request.budget.unwrap_or_default();
        let first = d.request.to_agent.trim().to_owned();
        Running {
            metadata: d.metadata,
            rules: d.rules,
            instruments: d.instruments.unwrap_or_else(SwarmInstruments::global),
            agent_labels: d.agent_labels,
            started: Instant::now(),
            epoch_start_ms: d.epoch_now_ms.unwrap_or_else(epoch_ms_now),
            wall_ms: (budget.wall_time_remaining_ms > 0).then_some(budget.wall_time_remaining_ms),
            deadline_epoch_ms: budget.deadline_epoch_ms,
            progress: LoopProgress {
                visited: vec![first],
                ..LoopProgress::default()
            },
            sent_to: Vec::new(),
            draws: d.seed.unwrap_or_else(random_u64),
            first_redirect: None,
            last_answer: None,
            request: HandoffRequest {
                budget: Some(budget),
                ..d.request
            },
        }
    }

    /// Sends until the answer is final.
    async fn drive(
        &mut self,
        gateway: &mut impl Gateway,
        mut cancel: Pin<&mut Cancelled>,
    ) -> Result<DelegationOutcome, DelegationError> {
        let mut target = self.progress.visited[0].clone();
        loop {
            let left = self.left();
            if left == 0 {
                return Ok(self.made(Made::Exhausted));
            }
            let request = self.request_to(&target, left);
            self.sent_to.push(target.clone());
            let answer = tokio::select! {
                biased;
                reason = &mut cancel => return Err(self.cancelled(reason)),
                () = sleep(Duration::from_millis(left)) => None,
                answer = gateway.request_handoff(request) => Some(answer),
            };
            let answer = match answer {
                Some(Ok(answer)) => answer,
                Some(Err(_)) | None if self.left() == 0 => return Ok(self.made(Made::Exhausted)),
                Some(Err(status)) => {
                    return Err(DelegationError::Gateway {
                        to_agent: target,
                        status,
                    })
                }
                None => return Ok(self.made(Made::Exhausted)),
            };
            match self.step(&answer) {
                Step::Keep(kept) => return Ok(self.kept(kept, answer)),
                Step::Make(made) => {
                    self.last_answer = Some(answer);
                    return Ok(self.made(made));
                }
                Step::Retry(wait_ms) => {
                    self.progress.retries += 1;
                    tokio::select! {
                        biased;
                        reason = &mut cancel => return Err(self.cancelled(reason)),
                        () = sleep(Duration::from_millis(wait_ms)) => {}
                    }
                    self.count_retry("overloaded", &target);
                }
                Step::Redirect(next) => {
                    self.progress.redirects += 1;
                    self.first_redirect.get_or_insert_with(Instant::now);
                    self.progress.visited.push(next.clone());
                    self.instruments.redirected();
                    self.count_retry("redirect", &next);
                    target = next;
                }
            }
        }
    }

    /// What the rules make of `answer`, with what is left now.
    fn step(&mut self, answer: &HandoffResponse) -> Step {
        if answer.rejection_code == crate::delegation::rules::OVERLOADED && !answer.accepted {
            self.instruments.overloaded();
        }
        let read = Answer {
            accepted: answer.accepted,
            code: answer.rejection_code,
            retry_after_ms: answer.retry_after_ms,
            redirect_to: &answer.redirect_to_agent_id,
        };
        let unit = unit_draw(&mut self.draws);
        next_step(read, &self.progress, &self.rules, self.left(), unit)
    }

    fn count_retry(&self, reason: &'static str, to: &str) {
        let agents = self
            .agent_labels
            .then_some((self.request.from_agent.as_str(), to));
        self.instruments.retry(reason, agents);
    }

    /// Whole milliseconds since the loop started.
    fn ran_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn now_epoch_ms(&self) -> u64 {
        self.epoch_start_ms.saturating_add(self.ran_ms())
    }

    /// What is left now, in ms: the envelope's wall time and epoch deadline, and the
    /// caps of the scope the loop runs in.
    fn left(&self) -> u64 {
        let scope = sw4rm_timeouts::seams::current(Instant::now())
            .0
            .and_then(|current| current.left(&Propagation::default()))
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let wall = self.wall_ms.map(|w| w.saturating_sub(self.ran_ms()));
        left_ms(
            wall.unwrap_or(u64::MAX),
            self.deadline_epoch_ms,
            self.now_epoch_ms(),
            scope,
        )
    }

    /// The envelope now: both deadline fields say `left`.
    fn envelope(&self, left: u64) -> BudgetEnvelope {
        let mut budget = self.request.budget.unwrap_or_default();
        budget.wall_time_remaining_ms = left;
        budget.deadline_epoch_ms = self.now_epoch_ms().saturating_add(left);
        budget
    }

    /// The request for one send to `target`, with `left` ms of budget.
    fn request_to(&self, target: &str, left: u64) -> Request<HandoffRequest> {
        let message = HandoffRequest {
            to_agent: target.to_owned(),
            budget: Some(self.envelope(left)),
            ..self.request.clone()
        };
        Request::from_parts(self.metadata.clone(), Default::default(), message)
    }

    fn outcome(&self, response: HandoffResponse, end: DelegationEnd) -> DelegationOutcome {
        DelegationOutcome {
            response,
            end,
            sent_to: self.sent_to.clone(),
            retries: self.progress.retries,
            redirects: self.progress.redirects,
            last_gateway_answer: self.last_answer.clone(),
            budget_left: self.envelope(self.left()),
        }
    }

    fn kept(&self, kept: Settled, response: HandoffResponse) -> DelegationOutcome {
        self.outcome(response, DelegationEnd::kept(kept))
    }

    fn made(&self, made: Made) -> DelegationOutcome {
        let response = HandoffResponse {
            request_id: self.request.request_id.clone(),
            accepted: false,
            rejection_reason: made.reason(),
            rejection_code: made.code(),
            ..HandoffResponse::default()
        };
        self.outcome(response, DelegationEnd::made(&made))
    }

    fn cancelled(&self, reason: sw4rm_timeouts::CancelReason) -> DelegationError {
        DelegationError::Cancelled {
            reason,
            sent_to: self.sent_to.clone(),
        }
    }

    /// Metrics, the span's attributes and a log line for the loop's end.
    fn finish(&self, result: &Result<DelegationOutcome, DelegationError>, span: &tracing::Span) {
        let end = result.as_ref().ok().map(|o| o.end);
        let redirect_ms = self
            .first_redirect
            .map(|at| at.elapsed().as_secs_f64() * 1_000.0);
        self.instruments.ended(end, redirect_ms);
        let terminal = match result {
            Ok(outcome) => outcome.end.as_str(),
            Err(DelegationError::Cancelled { .. }) => "cancelled",
            Err(_) => "error",
        };
        let chain = self.progress.visited.join(",");
        span.record("sw4rm.redirect_count", self.progress.redirects);
        span.record("sw4rm.redirect_chain", cut(&chain, CHAIN_LIMIT).to_string());
        span.record("sw4rm.redirect_terminal_reason", terminal);
        tracing::debug!(
            parent: span,
            outcome = terminal,
            sends = self.sent_to.len(),
            retries = self.progress.retries,
            redirects = self.progress.redirects,
            "SW4RM delegation ended"
        );
    }
}

fn fields(p: &SwarmDelegationPolicy) -> PolicyFields {
    PolicyFields {
        max_retries_on_overloaded: p.max_retries_on_overloaded,
        initial_backoff_ms: p.initial_backoff_ms,
        backoff_multiplier: p.backoff_multiplier,
        max_backoff_ms: p.max_backoff_ms,
        allow_spillover_routing: p.allow_spillover_routing,
        max_redirects: p.max_redirects,
    }
}
