//! [`OperationBudget`]: one time budget for a whole operation of many calls, which
//! pauses while a human decides.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::cancel::CancelSignal;
use super::caps::BudgetNow;
use crate::policy::cancel::CancelReason;
use crate::policy::envelope::{incoming, Basis, Envelope};
use crate::policy::inherit::budget_remaining;
use crate::policy::wrap_up::WrapUp;
use crate::proto::sw4rm::handoff::BudgetEnvelope;

/// A time budget for an operation that spans many calls. Calls made inside
/// [`run`](OperationBudget::run) are capped by what remains (the smallest cap wins,
/// and a timeout's details name `budget` and carry the paused time). While a human
/// decides, [`pause`](OperationBudget::pause) stops the clock.
///
/// A call made while the budget is paused is **not capped by the budget**: the HITL
/// call itself keeps its own profile deadline (`hitl_escalate`, minutes), and the
/// time it takes is not charged. Caps are taken when a call starts: pausing later
/// does not lengthen a call already in flight.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::OperationBudget;
/// let budget = OperationBudget::new(Duration::from_secs(60));
/// tokio::time::sleep(Duration::from_secs(5)).await;          // work: charged
/// {
///     let _human = budget.pause();
///     tokio::time::sleep(Duration::from_secs(600)).await;    // a person decides: not charged
/// }
/// assert_eq!(budget.remaining(), Duration::from_secs(55));
/// assert_eq!(budget.paused(), Duration::from_secs(600));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct OperationBudget {
    inner: Arc<Mutex<State>>,
    /// The envelope this budget was read from (its depth, maximum depth and tokens),
    /// when it continues a delegation: handoffs made under it go one hop deeper.
    delegation: Option<Envelope>,
    /// Cancelled on purpose ([`OperationBudget::cancel`]), or with the delegation it
    /// continues (SW4-004 `CancelDelegation`); every scope it runs is cancelled with it.
    signal: Arc<CancelSignal>,
}

#[derive(Debug)]
struct State {
    /// `None`: no time limit (an envelope that sets none).
    total: Option<Duration>,
    started: Instant,
    max_pause: Option<Duration>,
    /// Paused time of the pauses that ended.
    paused: Duration,
    /// Guards alive, and since when the first of them.
    depth: u32,
    since: Option<Instant>,
    /// When the work under the budget is told to wrap up.
    wrap_up: Option<WrapUp>,
}

impl State {
    fn paused_at(&self, now: Instant) -> Duration {
        self.paused + self.since.map_or(Duration::ZERO, |s| now - s)
    }

    fn remaining_at(&self, now: Instant) -> Option<Duration> {
        Some(budget_remaining(
            self.total?,
            now.saturating_duration_since(self.started),
            self.paused_at(now),
            self.max_pause,
        ))
    }
}

impl OperationBudget {
    /// A budget of `total`, starting now.
    pub fn new(total: Duration) -> Self {
        OperationBudget::starting_now(Some(total), None)
    }

    fn starting_now(total: Option<Duration>, delegation: Option<Envelope>) -> Self {
        OperationBudget {
            inner: Arc::new(Mutex::new(State {
                total,
                started: Instant::now(),
                max_pause: None,
                paused: Duration::ZERO,
                depth: 0,
                since: None,
                wrap_up: None,
            })),
            delegation,
            signal: CancelSignal::new(),
        }
    }

    /// The budget a delegated piece of work runs under: the time a handoff's SW4-004
    /// `BudgetEnvelope` grants from now (its arrival), as a pausable budget like any
    /// other. Handoffs made under it ([`run`](OperationBudget::run)) carry an envelope
    /// one hop deeper, never with more time than remains.
    ///
    /// The time granted is the smaller of `wall_time_remaining_ms` (from now) and the
    /// time left to `deadline_epoch_ms` on this host's clock. Clocks differ between
    /// hosts: when the two disagree by more than [`DEFAULT_MAX_CLOCK_SKEW`] (an epoch
    /// deadline far in the future or the past of what the wall time says), the epoch
    /// deadline is not trusted, the wall time wins, and a `warn!` says so (see
    /// [`from_envelope_with_max_skew`](OperationBudget::from_envelope_with_max_skew)).
    /// An envelope with neither sets no time limit. Fails fast — before any work — when
    /// nothing is left, or when the envelope's `current_depth` is already beyond its
    /// `max_delegation_depth`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use sw4rm_timeouts::proto::sw4rm::handoff::BudgetEnvelope;
    /// use sw4rm_timeouts::{EnvelopeError, OperationBudget};
    ///
    /// let handed = BudgetEnvelope { wall_time_remaining_ms: 45_000, current_depth: 1, max_delegation_depth: 3, ..Default::default() };
    /// let budget = OperationBudget::from_envelope(&handed).unwrap();
    /// assert_eq!(budget.remaining(), Duration::from_secs(45));
    /// // budget.run(delegated_work).await: every call inside is capped by it.
    ///
    /// let spent = BudgetEnvelope { deadline_epoch_ms: 1, ..Default::default() }; // 1970
    /// assert!(matches!(OperationBudget::from_envelope(&spent), Err(EnvelopeError::Spent { .. })));
    /// # }
    /// ```
    pub fn from_envelope(envelope: &BudgetEnvelope) -> Result<Self, EnvelopeError> {
        OperationBudget::from_envelope_with_max_skew(envelope, DEFAULT_MAX_CLOCK_SKEW)
    }

    /// [`from_envelope`](OperationBudget::from_envelope), trusting the epoch deadline
    /// only while it is within `max_skew` of what the wall time says. Hosts with
    /// synchronized clocks whose handoffs may wait in a queue for long (the wall time
    /// does not know about the wait; the epoch deadline does) can allow more.
    pub fn from_envelope_with_max_skew(
        envelope: &BudgetEnvelope,
        max_skew: Duration,
    ) -> Result<Self, EnvelopeError> {
        let read = Envelope::from(envelope);
        if read.max_depth > 0 && read.depth > read.max_depth {
            return Err(EnvelopeError::TooDeep {
                depth: read.depth,
                max: read.max_depth,
            });
        }
        let (left, basis) = incoming(&read, epoch_ms_now(), max_skew);
        if let Basis::Skewed { epoch_left_ms } = basis {
            tracing::warn!(
                wall_time_remaining_ms = read.wall_ms,
                epoch_left_ms,
                max_skew_ms = u64::try_from(max_skew.as_millis()).unwrap_or(u64::MAX),
                "the BudgetEnvelope's deadline_epoch_ms disagrees with its wall time by \
                 more than the clock skew allowed: the wall time wins"
            );
        }
        if left.is_some_and(|l| l.is_zero()) {
            return Err(EnvelopeError::Spent {
                wall_time_remaining_ms: read.wall_ms,
                deadline_epoch_ms: read.epoch_ms,
            });
        }
        let delegation = Envelope {
            wall_ms: 0,
            epoch_ms: 0,
            ..read
        };
        Ok(OperationBudget::starting_now(left, Some(delegation)))
    }

    /// Pause time beyond `max` is charged after all (a decision that never comes
    /// cannot hold the operation open forever).
    pub fn with_max_pause(self, max: Duration) -> Self {
        self.lock().max_pause = Some(max);
        self
    }

    /// Tells the work under the budget when `wrap_up` of its total is left
    /// ([`should_wrap_up`](Self::should_wrap_up), [`wrap_up_notice`](Self::wrap_up_notice),
    /// and [`super::should_wrap_up`] inside [`run`](Self::run)): time to stop starting
    /// new sub-calls and summarize. Off by default.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use std::time::Duration;
    /// use sw4rm_timeouts::{OperationBudget, WrapUp};
    /// let budget = OperationBudget::new(Duration::from_secs(10)).with_wrap_up(WrapUp::share(20));
    /// assert!(!budget.should_wrap_up());
    /// budget.wrap_up_notice().await; // 8 s in
    /// assert!(budget.should_wrap_up());
    /// assert_eq!(budget.remaining(), Duration::from_secs(2));
    /// # }
    /// ```
    pub fn with_wrap_up(self, wrap_up: WrapUp) -> Self {
        self.lock().wrap_up = Some(wrap_up);
        self
    }

    /// Time until the work under the budget is told to wrap up (zero once it has
    /// been); `None` without a wrap-up or a time limit. A pause holds it.
    pub(crate) fn until_wrap_up(&self) -> Option<Duration> {
        let state = self.lock();
        let (wrap_up, total) = (state.wrap_up?, state.total?);
        let remaining = state.remaining_at(Instant::now())?;
        Some(remaining.saturating_sub(wrap_up.reserve(total)))
    }

    /// Whether the work under the budget has been told to wrap up.
    pub fn should_wrap_up(&self) -> bool {
        self.until_wrap_up().is_some_and(|d| d.is_zero())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic in a caller: every update is
        // a single assignment.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Time left now (`Duration::MAX` for a budget without a time limit).
    pub fn remaining(&self) -> Duration {
        self.lock()
            .remaining_at(Instant::now())
            .unwrap_or(Duration::MAX)
    }

    /// Time spent paused so far (including a pause in progress).
    pub fn paused(&self) -> Duration {
        self.lock().paused_at(Instant::now())
    }

    /// Whether a pause is in progress.
    pub fn is_paused(&self) -> bool {
        self.lock().depth > 0
    }

    /// Stops the clock until the guard is dropped. Nested or overlapping pauses count
    /// once; dropping the guard — or the future holding it, when it is cancelled —
    /// resumes the clock.
    pub fn pause(&self) -> PauseGuard {
        let mut state = self.lock();
        if state.depth == 0 {
            state.since = Some(Instant::now());
        }
        state.depth += 1;
        PauseGuard {
            budget: self.clone(),
        }
    }

    /// Cancels the operation on purpose: every scope the budget runs (and what was
    /// carried from them) is cancelled with [`CancelReason::BudgetCancelled`]. Their
    /// calls in flight end with `CANCELLED` (the server sees the stream reset), calls
    /// started after fail at once, and [`crate::scope::cancelled()`] wakes. `false` when
    /// the budget was cancelled already.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use sw4rm_timeouts::{CancelReason, OperationBudget};
    /// let budget = OperationBudget::new(Duration::from_secs(60));
    /// assert!(budget.cancel());
    /// assert!(!budget.cancel());
    /// assert_eq!(budget.cancel_reason(), Some(CancelReason::BudgetCancelled));
    /// # }
    /// ```
    pub fn cancel(&self) -> bool {
        self.signal.cancel(CancelReason::BudgetCancelled)
    }

    /// Why the budget was cancelled, if it was.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        self.signal.reason()
    }

    /// Cancels with `reason` (a delegation cancelled by its delegator), the work's
    /// grace ending at `grace_until`.
    pub(crate) fn cancel_within(&self, reason: CancelReason, grace_until: Instant) -> bool {
        self.signal.cancel_within(reason, Some(grace_until))
    }

    pub(crate) fn signal(&self) -> &Arc<CancelSignal> {
        &self.signal
    }

    /// The cap for a call starting at `now`: what remains and the paused time, or
    /// `None` while paused (or without a time limit).
    pub(crate) fn cap_at(&self, now: Instant) -> Option<BudgetNow> {
        let state = self.lock();
        if state.depth > 0 {
            return None;
        }
        Some(BudgetNow {
            remaining: state.remaining_at(now)?,
            paused: state.paused_at(now),
            ran: now.saturating_duration_since(state.started),
        })
    }

    /// The envelope this budget continues, if it was read from one.
    pub(crate) fn delegation(&self) -> Option<Envelope> {
        self.delegation
    }
}

/// How long [`OperationBudget::from_envelope`] lets an envelope's epoch deadline
/// disagree with its wall time before it trusts the wall time alone.
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(30);

/// Now, in milliseconds since the Unix epoch, on this host's clock.
pub fn epoch_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Why a handoff's envelope grants no work ([`OperationBudget::from_envelope`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// Nothing is left: the wall time is zero or the epoch deadline has passed.
    Spent {
        /// The envelope's `wall_time_remaining_ms` (0: not set).
        wall_time_remaining_ms: u64,
        /// The envelope's `deadline_epoch_ms` (0: not set).
        deadline_epoch_ms: u64,
    },
    /// The envelope's `current_depth` is beyond its `max_delegation_depth`.
    TooDeep {
        /// `current_depth`.
        depth: u32,
        /// `max_delegation_depth`.
        max: u32,
    },
}

impl std::fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnvelopeError::Spent {
                wall_time_remaining_ms,
                deadline_epoch_ms,
            } => write!(
                f,
                "the handoff's BudgetEnvelope is spent (wall_time_remaining_ms = \
                 {wall_time_remaining_ms}, deadline_epoch_ms = {deadline_epoch_ms}): \
                 no work may start"
            ),
            EnvelopeError::TooDeep { depth, max } => write!(
                f,
                "the handoff's BudgetEnvelope is at current_depth {depth}, beyond its \
                 max_delegation_depth {max}: no work may start"
            ),
        }
    }
}

impl std::error::Error for EnvelopeError {}

/// Keeps an [`OperationBudget`] paused while it lives.
#[derive(Debug)]
#[must_use = "the budget resumes as soon as the guard is dropped"]
pub struct PauseGuard {
    budget: OperationBudget,
}

impl Drop for PauseGuard {
    fn drop(&mut self) {
        let mut state = self.budget.lock();
        state.depth = state.depth.saturating_sub(1);
        if state.depth == 0 {
            if let Some(since) = state.since.take() {
                state.paused += Instant::now() - since;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    #[tokio::test(start_paused = true)]
    async fn nested_pauses_count_once_and_the_max_pause_is_charged() {
        let b = OperationBudget::new(s(100));
        tokio::time::sleep(s(10)).await;
        let outer = b.pause();
        tokio::time::sleep(s(5)).await;
        let inner = b.pause();
        tokio::time::sleep(s(5)).await;
        drop(outer);
        assert!(b.is_paused(), "the inner guard still holds it");
        tokio::time::sleep(s(5)).await;
        drop(inner);
        assert_eq!((b.remaining(), b.paused()), (s(90), s(15)));
        tokio::time::sleep(s(20)).await;
        assert_eq!(b.remaining(), s(70));

        let capped = OperationBudget::new(s(100)).with_max_pause(s(30));
        {
            let _g = capped.pause();
            tokio::time::sleep(s(50)).await;
            assert_eq!(capped.remaining(), s(80), "20 s beyond the maximum charged");
        }
        assert_eq!(capped.paused(), s(50));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_dropped_by_cancellation_resumes_the_clock() {
        let b = OperationBudget::new(s(60));
        let waiting = {
            let b = b.clone();
            async move {
                let _g = b.pause();
                std::future::pending::<()>().await;
            }
        };
        // The human wait is cancelled after 10 s (the caller gave up on it).
        assert!(tokio::time::timeout(s(10), waiting).await.is_err());
        assert!(!b.is_paused());
        tokio::time::sleep(s(5)).await;
        assert_eq!((b.remaining(), b.paused()), (s(55), s(10)));
    }

    #[tokio::test(start_paused = true)]
    async fn an_envelope_grants_time_from_arrival_and_pauses_like_any_budget() {
        let handed = BudgetEnvelope {
            wall_time_remaining_ms: 10_000,
            current_depth: 1,
            max_delegation_depth: 2,
            token_budget_remaining: 300,
            ..Default::default()
        };
        let b = OperationBudget::from_envelope(&handed).unwrap();
        assert_eq!(b.remaining(), s(10));
        tokio::time::sleep(s(4)).await;
        {
            let _human = b.pause();
            tokio::time::sleep(s(60)).await;
        }
        assert_eq!(b.remaining(), s(6));
        // Its depth, limit and tokens travel on; its times are the budget's now.
        let carried = b.delegation().unwrap();
        assert_eq!(
            (
                carried.depth,
                carried.max_depth,
                carried.tokens,
                carried.wall_ms,
                carried.epoch_ms
            ),
            (1, 2, 300, 0, 0)
        );
        assert_eq!(OperationBudget::new(s(1)).delegation(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_epoch_deadline_counts_while_it_agrees_with_the_wall_time() {
        let now = epoch_ms_now();
        let agreeing = BudgetEnvelope {
            wall_time_remaining_ms: 10_000,
            deadline_epoch_ms: now + 8_000, // 2 s spent on the way
            ..Default::default()
        };
        let left = OperationBudget::from_envelope(&agreeing)
            .unwrap()
            .remaining();
        assert!(left <= s(8) && left > s(7), "{left:?}");
        // An hour ahead, or an hour behind, of what the wall time says: the wall time.
        for epoch in [now + 3_600_000, now - 3_600_000] {
            let skewed = BudgetEnvelope {
                deadline_epoch_ms: epoch,
                ..agreeing
            };
            assert_eq!(
                OperationBudget::from_envelope(&skewed).unwrap().remaining(),
                s(10)
            );
        }
        // Waited 40 s in a queue: beyond the default 30 s allowance the wall time wins;
        // a wider allowance trusts the epoch deadline.
        let queued = BudgetEnvelope {
            wall_time_remaining_ms: 60_000,
            deadline_epoch_ms: now + 20_000,
            ..Default::default()
        };
        assert_eq!(
            OperationBudget::from_envelope(&queued).unwrap().remaining(),
            s(60)
        );
        let trusted = OperationBudget::from_envelope_with_max_skew(&queued, s(60)).unwrap();
        let left = trusted.remaining();
        assert!(left <= s(20) && left > s(19), "{left:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_envelope_without_time_sets_no_time_cap() {
        let b = OperationBudget::from_envelope(&BudgetEnvelope {
            max_delegation_depth: 3,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(b.remaining(), Duration::MAX);
        assert_eq!(b.cap_at(Instant::now()), None);
        assert!(b.delegation().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn calls_see_no_cap_while_paused() {
        let b = OperationBudget::new(s(60));
        let now = Instant::now();
        assert_eq!(
            b.cap_at(now),
            Some(BudgetNow {
                remaining: s(60),
                paused: s(0),
                ran: s(0)
            })
        );
        let g = b.pause();
        assert_eq!(b.cap_at(now), None);
        drop(g);
    }
}
