//! The boxes calls keep their retry state in ([`RetryState`]), reused from call to call
//! on each thread: a call that may be retried takes one from its thread's free list
//! and gives it back when it ends; the next call writes its state there. After a thread's first calls, keeping a request
//! for replay allocates nothing (the body that sends it is tonic's own box).
//!
//! A box is emptied when it is given back, not when it is next used: the request's
//! headers (a caller's credentials among them), extensions and bytes, and where the
//! attempt timeout came from are let go of then, and bytes kept inline are
//! overwritten. What stays is the request's path, which names a method, and plain
//! figures (the retry policy). A call dropped before it ends (its caller gave up on
//! it) frees its box instead. Each thread keeps at most [`KEPT_PER_THREAD`] boxes;
//! the list is freed with the thread.

use std::cell::RefCell;
use std::thread::LocalKey;
use std::time::Duration;

use super::request::Kept;
use crate::policy::retry::RetryPolicy;
use crate::policy::source::Source;

/// What a call's retries keep besides the spare, in the box.
#[derive(Debug)]
pub(crate) struct RetryState {
    pub(crate) kept: Kept,
    pub(crate) policy: RetryPolicy,
    pub(crate) idempotent: bool,
    pub(crate) min_timeout: Duration,
    /// Where the policy's attempt timeout came from; `None`: it has none.
    pub(crate) source: Option<Source>,
    /// The attempt in flight (or the last one), from 1, as the rules numbered it.
    pub(crate) attempt: u32,
    /// The attempt timeout the rules gave the attempt in flight.
    pub(crate) timeout: Option<Duration>,
}

impl RetryState {
    /// A state that holds nothing of any call: what a new box starts from.
    pub(crate) fn vacant() -> Self {
        RetryState {
            kept: Kept::vacant(),
            policy: RetryPolicy::off(),
            idempotent: false,
            min_timeout: Duration::ZERO,
            source: None,
            attempt: 1,
            timeout: None,
        }
    }

    /// Lets go of what the call gave it: a box given back keeps the request's path and
    /// plain figures (below).
    pub(crate) fn clear(&mut self) {
        self.kept.clear();
        self.source = None;
    }
}

/// The most boxes one thread keeps for later calls: enough for calls that overlap a
/// few dozen at a time, 15 KiB at most (a box is 456 bytes).
pub(crate) const KEPT_PER_THREAD: usize = 32;

thread_local! {
    // Boxes, not states: a box is what a call takes and gives back.
    #[allow(clippy::vec_box)]
    static FREE: RefCell<Vec<Box<RetryState>>> = const { RefCell::new(Vec::new()) };
}

/// A box from this thread's free list, emptied when it was given back, or a new one
/// holding a vacant state.
pub(crate) fn take() -> Box<RetryState> {
    pop(&FREE).unwrap_or_else(|| Box::new(RetryState::vacant()))
}

/// Gives a call's box back when the call has ended: emptied at once, kept for a later
/// call on this thread if the list has room, freed otherwise.
pub(crate) fn give_back(mut state: Box<RetryState>) {
    state.clear();
    push(&FREE, state, KEPT_PER_THREAD);
}

/// The last item of a thread's free list (`None`: the list is empty, or the thread is
/// going away). Shared with the call record's boxes (`timeout/record/boxed.rs`).
#[inline]
pub(crate) fn pop<T: 'static>(list: &'static LocalKey<RefCell<Vec<T>>>) -> Option<T> {
    list.try_with(|free| free.try_borrow_mut().ok().and_then(|mut f| f.pop()))
        .ok()
        .flatten()
}

/// Keeps `item` on a thread's free list if the list holds fewer than `max`; drops it
/// otherwise (outside the list's borrow), and when the thread is going away.
#[inline]
pub(crate) fn push<T: 'static>(list: &'static LocalKey<RefCell<Vec<T>>>, item: T, max: usize) {
    let refused = list
        .try_with(|free| match free.try_borrow_mut() {
            Ok(mut free) if free.len() < max => {
                if free.capacity() == 0 {
                    free.reserve_exact(max);
                }
                free.push(item);
                None
            }
            _ => Some(item),
        })
        .ok()
        .flatten();
    drop(refused);
}

/// How many boxes this thread keeps now.
#[cfg(test)]
pub(crate) fn kept_here() -> usize {
    FREE.with(|free| free.borrow().len())
}
