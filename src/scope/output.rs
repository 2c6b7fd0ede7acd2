//! The work's side of a [`super::LongWork`] guard: what it produced ([`Output`]), kept
//! until the outcome (a unary answer) or forwarded to the response stream through a
//! bounded buffer, so that a caller who stops reading costs at most that buffer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::{self, error::TrySendError};

use super::work_state::WorkState;

/// How many items a streaming [`super::LongWork`] holds for a caller that reads more
/// slowly than the work produces, unless [`super::LongWork::buffer`] says otherwise.
/// Past it, [`Output::send`] waits, [`Output::try_push`] gives the item back, and
/// [`Output::push`] ends the stream (`RESOURCE_EXHAUSTED`) and the work.
pub const DEFAULT_STREAM_BUFFER: usize = 64;

/// The work's side of the guard: what it produced so far, and progress reports.
/// Cloned freely; pushing an item is a progress report.
///
/// On a stream ([`super::LongWork::stream`]) items wait in a bounded buffer
/// ([`DEFAULT_STREAM_BUFFER`]) until the caller reads them: a caller that stops
/// reading (its HTTP/2 window closed) holds at most that many items in memory. Use
/// [`send`](Self::send) to wait for room (back-pressure on the work), or
/// [`try_push`](Self::try_push) to be told the buffer is full; [`push`](Self::push),
/// which cannot wait, ends the stream with `RESOURCE_EXHAUSTED` and stops the work when
/// the buffer is full.
#[derive(Debug)]
pub struct Output<T> {
    produced: Arc<Produced<T>>,
    state: Arc<WorkState>,
}

impl<T> Clone for Output<T> {
    fn clone(&self) -> Self {
        Output {
            produced: self.produced.clone(),
            state: self.state.clone(),
        }
    }
}

/// Where the work's items go.
#[derive(Debug)]
pub(crate) enum Produced<T> {
    /// Kept until the outcome.
    Collect(Mutex<Vec<T>>),
    /// Sent on as it comes (a stream's messages), counted.
    Forward(Forward<T>),
}

/// A stream's items on their way to the caller.
#[derive(Debug)]
pub(crate) struct Forward<T> {
    tx: mpsc::Sender<T>,
    sent: AtomicU64,
    /// Set when [`Output::push`] met a full buffer: the stream ends.
    overflowed: Arc<AtomicBool>,
}

impl<T> Forward<T> {
    /// A forward through a buffer of `capacity` items (at least one), the receiver,
    /// and the flag the stream reads for an overflow.
    pub(crate) fn new(capacity: usize) -> (Self, mpsc::Receiver<T>, Arc<AtomicBool>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let overflowed = Arc::new(AtomicBool::new(false));
        let forward = Forward {
            tx,
            sent: AtomicU64::new(0),
            overflowed: overflowed.clone(),
        };
        (forward, rx, overflowed)
    }

    fn counted(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }
}

impl<T> Produced<T> {
    /// What was kept so far, taken out (nothing for a forwarding produced: it was sent).
    pub(crate) fn take(&self) -> Vec<T> {
        match self {
            Produced::Collect(kept) => kept
                .lock()
                .map(|mut k| std::mem::take(&mut *k))
                .unwrap_or_default(),
            Produced::Forward(..) => Vec::new(),
        }
    }

    /// Items sent on so far (none for a collecting produced: its items are kept).
    pub(crate) fn sent(&self) -> u64 {
        match self {
            Produced::Collect(_) => 0,
            Produced::Forward(f) => f.sent.load(Ordering::Relaxed),
        }
    }
}

impl<T> Output<T> {
    pub(crate) fn new(produced: Arc<Produced<T>>, state: Arc<WorkState>) -> Self {
        Output { produced, state }
    }

    /// Adds one item of output; counts as progress. On a stream whose buffer is full
    /// (the caller reads more slowly than the work produces) the item is dropped, as
    /// is every later one (no progress either), and the stream ends with
    /// `RESOURCE_EXHAUSTED` after what it holds, which stops the work; use
    /// [`send`](Self::send) to wait for room instead.
    pub fn push(&self, item: T) {
        match &*self.produced {
            Produced::Collect(kept) => {
                if let Ok(mut kept) = kept.lock() {
                    kept.push(item);
                }
            }
            Produced::Forward(f) => {
                if f.overflowed.load(Ordering::Acquire) {
                    // The stream is ending: what comes after is dropped, and is no
                    // progress the caller will see.
                    return;
                }
                match f.tx.try_send(item) {
                    Ok(()) => f.counted(),
                    Err(TrySendError::Full(_)) => {
                        f.overflowed.store(true, Ordering::Release);
                        return;
                    }
                    Err(TrySendError::Closed(_)) => {}
                }
            }
        }
        self.state.report(None);
    }

    /// Adds one item of output, waiting while a stream's buffer is full (the caller's
    /// reading paces the work); counts as progress once the item is in. On a unary
    /// guard it never waits.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use sw4rm_timeouts::scope::{Frame, LongWork, Output};
    /// use tokio_stream::StreamExt;
    /// let mut stream = LongWork::new().buffer(2).stream(
    ///     |out: Output<u32>| async move {
    ///         for n in 0..5 {
    ///             out.send(n).await; // waits while two are unread
    ///         }
    ///     },
    ///     |frame| Ok(match frame { Frame::Item(n) => n, _ => u32::MAX }),
    /// );
    /// let mut got = Vec::new();
    /// while let Some(Ok(n)) = stream.next().await {
    ///     got.push(n);
    /// }
    /// assert_eq!(got, [0, 1, 2, 3, 4]);
    /// # }
    /// ```
    pub async fn send(&self, item: T) {
        match &*self.produced {
            Produced::Collect(_) => self.push(item),
            Produced::Forward(f) => {
                if f.tx.send(item).await.is_ok() {
                    f.counted();
                }
                self.state.report(None);
            }
        }
    }

    /// Adds one item of output unless a stream's buffer is full, in which case the
    /// item comes back (`Err`) and nothing else happens; counts as progress when it
    /// was added. On a unary guard it is always added.
    pub fn try_push(&self, item: T) -> Result<(), T> {
        match &*self.produced {
            Produced::Collect(_) => self.push(item),
            Produced::Forward(f) => match f.tx.try_send(item) {
                Ok(()) => {
                    f.counted();
                    self.state.report(None);
                }
                Err(TrySendError::Full(item)) => return Err(item),
                Err(TrySendError::Closed(_)) => {}
            },
        }
        Ok(())
    }

    /// A progress report without output (as [`super::progress()`]).
    pub fn progress(&self) {
        self.state.report(None);
    }

    /// A progress report with a marker (as [`super::progress_at`]).
    pub fn progress_at(&self, marker: u64) {
        self.state.report(Some(marker));
    }

    /// Whether the work has been told to wrap up ([`super::LongWork::wrap_up`]): one
    /// atomic load and a clock read.
    pub fn should_wrap_up(&self) -> bool {
        self.state.wrapping_up()
    }

    /// Ready once the work is told to wrap up (never without
    /// [`super::LongWork::wrap_up`] and a cap): select on it beside the work, and
    /// return what there is.
    pub fn wrap_up_notice(&self) -> super::WrapUpNotice {
        match self.state.notice() {
            Some(at) => super::WrapUpNotice::at(at),
            None => super::WrapUpNotice::never(),
        }
    }
}
