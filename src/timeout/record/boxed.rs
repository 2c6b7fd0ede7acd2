//! [`CallRecord`]: the box a call's [`Record`] lives in while the call is in flight,
//! with the call's one timer, reused from call to call on each thread. The record
//! moves from the call's future into the response body, and every move of either
//! copies what they hold inline: held in a box, the record and the timer move as one
//! pointer (the future went from 392 bytes to 72, a unary response body from 360 to
//! 40). A call takes a box from its thread's free list and gives it back when the
//! record ends, so after a thread's first calls a call allocates nothing for it, as
//! with the retry state's boxes (`attempts/retries.rs`).
//!
//! A box is emptied when it is given back: the record is dropped there (its end event
//! fires once, as before), and what it held (the layer's state, the span, the request
//! body kept to watch for tonic's cancel) is let go of with it; the timer is disarmed,
//! so a box reused under another runtime arms its timer anew there. Each thread keeps
//! at most [`KEPT_PER_THREAD`] boxes; the list is freed with the thread.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::Arc;

use pin_project_lite::pin_project;
use tokio::time::Instant;

use super::{BudgetSpent, CallTimers, Opening, Record};
use crate::attempts::Timer;
use crate::attempts::{pop, push};
use crate::policy::route::ProfileId;
use crate::timeout::plan::{CallPlan, RoutePlan};
use crate::timeout::state::shared::Shared;
use crate::timeout::state::LabelsRef;

pin_project! {
    /// What a box holds: the record of a call in flight (empty in the free list), and
    /// the call's one timer — the engine's while the call waits for its answer, the
    /// body's after — kept here so that neither the future nor the body carries its
    /// 112 bytes through every move.
    #[project = HeldProj]
    #[derive(Debug)]
    struct Held {
        #[pin]
        timer: Timer,
        record: Option<Record>,
    }
}

/// A box as the free list keeps it (pinned: the timer's registration with the driver
/// must not move; it is disarmed before the box is given back).
type Slot = Pin<Box<Held>>;

/// The most boxes one thread keeps for later calls: enough for calls that overlap a
/// few dozen at a time, 11 KiB at most.
pub(crate) const KEPT_PER_THREAD: usize = 32;

thread_local! {
    #[allow(clippy::vec_box)]
    static FREE: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
}

/// The record of one call in flight, in its box. It derefs to the [`Record`]; dropping
/// it ends the record (the end event, once) and gives the box back.
#[derive(Debug)]
pub(crate) struct CallRecord {
    /// Holds a record from [`CallRecord::open`] until the drop (never empty before).
    slot: Option<Slot>,
}

impl CallRecord {
    /// Opens the record of a planned call that started at `start`, in a box from this
    /// thread's free list.
    #[inline]
    pub(crate) fn open(
        shared: Arc<Shared>,
        labels: LabelsRef,
        plan: &mut CallPlan<'_>,
        start: Instant,
        span: tracing::Span,
    ) -> Self {
        // The plan's timers are taken (the plan is borrowed, not moved: it is large).
        let opening = Opening {
            profile: plan.route.profile,
            timers: CallTimers::Own(std::mem::take(&mut plan.decided.timers)),
            streaming: plan.decided.streaming,
            budget: plan.budget.map(BudgetSpent::from),
        };
        Self::open_with(shared, labels, opening, start, span)
    }

    /// Opens the record of a unary call on the path at `labels` that its route's
    /// `plan` alone plans: its timers are read from that plan, not copied.
    #[inline]
    pub(crate) fn routed(
        shared: Arc<Shared>,
        (labels, profile): (LabelsRef, ProfileId),
        plan: Arc<RoutePlan>,
        start: Instant,
        span: tracing::Span,
    ) -> Self {
        let opening = Opening {
            profile,
            timers: CallTimers::Route(plan),
            streaming: false,
            budget: None,
        };
        Self::open_with(shared, labels, opening, start, span)
    }

    #[inline(always)]
    fn open_with(
        shared: Arc<Shared>,
        labels: LabelsRef,
        opening: Opening,
        start: Instant,
        span: tracing::Span,
    ) -> Self {
        let mut slot = take();
        // Written where it is kept.
        *slot.as_mut().project().record = Some(Record::new(shared, labels, opening, start, span));
        CallRecord { slot: Some(slot) }
    }

    /// The call's timer and its record, borrowed together.
    #[inline(always)]
    pub(crate) fn parts(&mut self) -> (Pin<&mut Timer>, &mut Record) {
        match self.slot.as_mut().map(|slot| slot.as_mut().project()) {
            Some(HeldProj {
                timer,
                record: Some(record),
            }) => (timer, record),
            _ => unreachable!("a call record is read after its drop"),
        }
    }
}

impl Deref for CallRecord {
    type Target = Record;

    #[inline(always)]
    fn deref(&self) -> &Record {
        match self.slot.as_deref().map(|held| &held.record) {
            Some(Some(record)) => record,
            // Only the drop below empties a slot, and nothing reads it after.
            _ => unreachable!("a call record is read after its drop"),
        }
    }
}

impl DerefMut for CallRecord {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Record {
        self.parts().1
    }
}

impl Drop for CallRecord {
    /// Ends the record (its own drop emits the end event) and gives the box back.
    fn drop(&mut self) {
        if let Some(mut slot) = self.slot.take() {
            // Dropped where it lies (taking it out of the box would copy it first).
            *slot.as_mut().project().record = None;
            give_back(slot);
        }
    }
}

/// An empty box from this thread's free list, or a new one.
#[inline]
fn take() -> Slot {
    pop(&FREE).unwrap_or_else(|| {
        Box::pin(Held {
            timer: Timer::new(),
            record: None,
        })
    })
}

/// Keeps an emptied box for a later call on this thread if the list has room; frees
/// it otherwise. Its timer is disarmed first: its registration belongs to the runtime
/// it was armed under, which may be gone by the next call.
#[inline]
fn give_back(mut slot: Slot) {
    slot.as_mut().project().timer.clear();
    push(&FREE, slot, KEPT_PER_THREAD);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many boxes this thread keeps now.
    fn kept_here() -> usize {
        FREE.with(|free| free.borrow().len())
    }

    /// A box given back is empty and kept for the next call; past the bound, boxes are
    /// freed.
    #[test]
    fn boxes_are_kept_empty_and_bounded() {
        let slots: Vec<Slot> = (0..KEPT_PER_THREAD + 5).map(|_| take()).collect();
        assert!(slots.iter().all(|s| s.record.is_none()));
        for slot in slots {
            give_back(slot);
        }
        assert_eq!(kept_here(), KEPT_PER_THREAD);
        let again = take();
        assert!(again.record.is_none());
        assert_eq!(kept_here(), KEPT_PER_THREAD - 1);
        give_back(again);
        assert_eq!(kept_here(), KEPT_PER_THREAD);
    }

    /// A box's timer armed under one runtime is disarmed when the box is given back:
    /// the next call on the thread, under another runtime, arms it anew there (a timer
    /// still registered with a runtime that is gone could never fire).
    #[test]
    fn a_box_reused_under_another_runtime_arms_its_timer_there() {
        use std::time::Duration;

        fn runtime() -> tokio::runtime::Runtime {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap()
        }
        let first = runtime();
        first.block_on(async {
            let mut slot = take();
            let at = Instant::now() + Duration::from_secs(60);
            std::future::poll_fn(|cx| {
                let timer = slot.as_mut().project().timer;
                assert!(timer.poll_until(at, cx).is_pending());
                std::task::Poll::Ready(())
            })
            .await;
            give_back(slot);
        });
        drop(first);
        runtime().block_on(async {
            let mut slot = take();
            let at = Instant::now() + Duration::from_millis(5);
            std::future::poll_fn(|cx| slot.as_mut().project().timer.poll_until(at, cx)).await;
            assert!(Instant::now() >= at);
            give_back(slot);
        });
    }
}
