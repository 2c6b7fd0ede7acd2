//! [`CallRecord`]: the box a call's [`Record`] lives in while the call is in flight,
//! reused from call to call on each thread. The record moves from the call's future
//! into the response body, and every move of either copies what they hold inline: held
//! in a box, the record moves as one pointer (the future went from 392 bytes to 184,
//! a unary response body from 360 to 144). A call takes a box from its thread's free list and gives
//! it back when the record ends, so after a thread's first calls a call allocates
//! nothing for it, as with the retry state's boxes (`attempts/replay/boxes.rs`).
//!
//! A box is emptied when it is given back: the record is dropped there (its end event
//! fires once, as before), and what it held (the layer's state, the span, the request
//! body kept to watch for tonic's cancel) is let go of with it. Each thread keeps at
//! most [`KEPT_PER_THREAD`] boxes; the list is freed with the thread.

use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use tokio::time::Instant;

use super::Record;
use crate::timeout::plan::CallPlan;
use crate::timeout::routes::LabelsRef;
use crate::timeout::state::shared::Shared;

/// A box as the free list keeps it: empty, or holding the record of a call in flight.
type Slot = Box<Option<Record>>;

/// The most boxes one thread keeps for later calls: enough for calls that overlap a
/// few dozen at a time, 7.5 KiB at most.
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
    /// Opens the record of a planned call that started at `start`, taking the plan's
    /// timers, in a box from this thread's free list.
    #[inline]
    pub(crate) fn open(
        shared: Arc<Shared>,
        labels: LabelsRef,
        plan: &mut CallPlan<'_>,
        start: Instant,
        span: tracing::Span,
    ) -> Self {
        let mut slot = take();
        *slot = Some(Record::new(shared, labels, plan, start, span));
        CallRecord { slot: Some(slot) }
    }
}

impl Deref for CallRecord {
    type Target = Record;

    #[inline(always)]
    fn deref(&self) -> &Record {
        match self.slot.as_deref() {
            Some(Some(record)) => record,
            // Only the drop below empties a slot, and nothing reads it after.
            _ => unreachable!("a call record is read after its drop"),
        }
    }
}

impl DerefMut for CallRecord {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Record {
        match self.slot.as_deref_mut() {
            Some(Some(record)) => record,
            _ => unreachable!("a call record is read after its drop"),
        }
    }
}

impl Drop for CallRecord {
    /// Ends the record (its own drop emits the end event) and gives the box back.
    fn drop(&mut self) {
        if let Some(mut slot) = self.slot.take() {
            // Dropped where it lies (taking it out of the box would copy it first).
            *slot = None;
            give_back(slot);
        }
    }
}

/// An empty box from this thread's free list, or a new one.
#[inline]
fn take() -> Slot {
    FREE.try_with(|free| free.try_borrow_mut().ok().and_then(|mut f| f.pop()))
        .ok()
        .flatten()
        .unwrap_or_else(|| Box::new(None))
}

/// Keeps an emptied box for a later call on this thread if the list has room; frees
/// it otherwise.
#[inline]
fn give_back(slot: Slot) {
    let refused = FREE
        .try_with(|free| match free.try_borrow_mut() {
            Ok(mut free) if free.len() < KEPT_PER_THREAD => {
                if free.capacity() == 0 {
                    free.reserve_exact(KEPT_PER_THREAD);
                }
                free.push(slot);
                None
            }
            _ => Some(slot),
        })
        .ok()
        .flatten();
    // Freed outside the list's borrow.
    drop(refused);
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
        let before = kept_here();
        let slots: Vec<Slot> = (0..KEPT_PER_THREAD + 5).map(|_| take()).collect();
        assert!(slots.iter().all(|s| s.is_none()));
        for slot in slots {
            give_back(slot);
        }
        assert_eq!(kept_here(), KEPT_PER_THREAD);
        let again = take();
        assert!(again.is_none());
        assert_eq!(kept_here(), KEPT_PER_THREAD - 1);
        give_back(again);
        assert!(before <= KEPT_PER_THREAD);
    }
}
