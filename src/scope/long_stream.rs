//! [`LongWork::stream`]: long work behind a server-streaming handler
//! (`ToolService/CallStream`). What the work pushes goes out as stream messages at
//! once; while the work moves without producing, a progress message goes out at least
//! every half of the caller's idle limit, so a working tool is never cut by the
//! caller's gap timer; a stuck one is cut by the guard, and the stream ends with the
//! guard's status after the messages already sent.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};
use tonic::Status;

use super::cancel::CancelSignal;
use super::long_work::{note_if_outside_the_layer, Forward, LongWork, Output, Produced};
use super::outcome::Outcome;
use super::task::{current_caller_quiet, inbound_signal, serving};
use super::work_state::WorkState;
use crate::policy::cancel::CancelReason;

/// One message of a [`ProgressStream`], before the handler's `frame` function turns
/// it into the RPC's message type.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Frame<T> {
    /// An item the work pushed to its [`Output`].
    Item(T),
    /// The work moved but produced nothing to send for a while: a progress message
    /// (for `ToolFrame`: no data, a summary, `frame_no` the marker).
    Progress {
        /// Progress reports so far.
        count: u64,
        /// The last marker reported.
        marker: Option<u64>,
    },
}

/// The response stream of [`LongWork::stream`]: `Ok` messages, then the guard's status
/// as an `Err` if the work did not finish. Dropping it (the caller went away) stops
/// the work.
#[must_use = "streams do nothing unless polled, and dropping this one stops the work"]
pub struct ProgressStream<T, M> {
    rx: mpsc::Receiver<T>,
    /// Set when the work's `push` met a full buffer: the stream ends after what the
    /// buffer holds.
    overflowed: Arc<AtomicBool>,
    buffer: usize,
    end: oneshot::Receiver<Outcome<(), T>>,
    frame: Box<dyn FnMut(Frame<T>) -> M + Send>,
    task: JoinHandle<()>,
    inbound: Arc<CancelSignal>,
    state: Arc<WorkState>,
    heartbeat: Option<Duration>,
    sleep: Pin<Box<Sleep>>,
    /// Progress reports when the last message went out, and when it did.
    reported: u64,
    last_sent: Instant,
    sent: u64,
    done: bool,
}

impl<T, M> std::fmt::Debug for ProgressStream<T, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressStream")
            .field("sent", &self.sent)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

type Tell<T> = Box<dyn FnOnce(Outcome<(), T>) + Send>;

impl LongWork {
    /// Runs `work` in its own task (taking the handler's scope along) under the guard,
    /// and answers a server-streaming call with what it pushes, each item turned into
    /// a message by `frame`. What the work pushes goes out at once; while the work
    /// moves without producing, a progress message ([`Frame::Progress`]) goes out at
    /// least this often: the shortest of the guard's own heartbeat (by default half
    /// its idle limit) and half the quiet limit the caller sent
    /// (`sw4rm-stream-idle-ms`), so a working tool is never cut by the caller's gap
    /// timer; a stuck one is cut by the guard, and the stream ends with the guard's
    /// status after the messages already sent.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use sw4rm_timeouts::scope::{Frame, LongWork};
    /// use sw4rm_timeouts::proto::sw4rm::tool::ToolFrame;
    /// # fn handler() -> sw4rm_timeouts::scope::ProgressStream<Vec<u8>, Result<ToolFrame, tonic::Status>> {
    /// LongWork::new()
    ///     .idle_limit(Duration::from_secs(120))
    ///     .cap(Duration::from_secs(1800))
    ///     .caller_idle_limit(Duration::from_secs(30))
    ///     .for_rpc("/sw4rm.tool.ToolService/CallStream")
    ///     .stream(
    ///         |out| async move { out.push(b"rows 1-100".to_vec()) },
    ///         |frame| Ok(match frame {
    ///             Frame::Item(data) => ToolFrame { data, ..Default::default() },
    ///             Frame::Progress { marker, .. } => ToolFrame {
    ///                 frame_no: marker.unwrap_or(0),
    ///                 summary: b"working".to_vec(),
    ///                 ..Default::default()
    ///             },
    ///             _ => ToolFrame::default(),
    ///         }),
    ///     )
    /// # }
    /// ```
    pub fn stream<T, M, F, Fut>(
        self,
        work: F,
        frame: impl FnMut(Frame<T>) -> Result<M, Status> + Send + 'static,
    ) -> ProgressStream<T, Result<M, Status>>
    where
        F: FnOnce(Output<T>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
        T: Send + 'static,
        M: Send + 'static,
    {
        self.start_stream(work, Box::new(frame), None)
    }

    /// Like [`LongWork::stream`], and tells `tell` how the work ended when the stream
    /// is dropped before it did ([`super::Ending::CallerGone`]: the caller went away).
    pub fn stream_or_tell<T, M, F, Fut>(
        self,
        work: F,
        frame: impl FnMut(Frame<T>) -> Result<M, Status> + Send + 'static,
        tell: impl FnOnce(Outcome<(), T>) + Send + 'static,
    ) -> ProgressStream<T, Result<M, Status>>
    where
        F: FnOnce(Output<T>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
        T: Send + 'static,
        M: Send + 'static,
    {
        self.start_stream(work, Box::new(frame), Some(Box::new(tell)))
    }

    fn start_stream<T, M, F, Fut>(
        self,
        work: F,
        frame: Box<dyn FnMut(Frame<T>) -> Result<M, Status> + Send>,
        tell: Option<Tell<T>>,
    ) -> ProgressStream<T, Result<M, Status>>
    where
        F: FnOnce(Output<T>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
        T: Send + 'static,
        M: Send + 'static,
    {
        note_if_outside_the_layer();
        let buffer = self.buffer_items();
        let (forward, rx, overflowed) = Forward::new(buffer);
        let (end_tx, end) = oneshot::channel();
        let inbound = inbound_signal();
        let state = Arc::new(WorkState::new(Instant::now()));
        // At least every half of the caller's quiet limit when the call says it (our
        // client layer sends it), whatever the guard was given.
        let caller = current_caller_quiet()
            .map(|q| q / 2)
            .filter(|d| !d.is_zero());
        let heartbeat = match (self.heartbeat(), caller) {
            (Some(own), Some(caller)) => Some(own.min(caller)),
            (own, caller) => own.or(caller),
        };
        let run = self.run_with(
            Arc::new(Produced::Forward(forward)),
            state.clone(),
            tell,
            work,
        );
        let task = tokio::spawn(serving(None, inbound.clone(), async move {
            let _ = end_tx.send(run.await);
        }));
        let now = Instant::now();
        ProgressStream {
            rx,
            overflowed,
            buffer,
            end,
            frame,
            task,
            inbound,
            state,
            heartbeat,
            sleep: Box::pin(tokio::time::sleep_until(now)),
            reported: 0,
            last_sent: now,
            sent: 0,
            done: false,
        }
    }
}

impl<T, M> ProgressStream<T, Result<M, Status>> {
    fn send(&mut self, frame: Frame<T>) -> Poll<Option<Result<M, Status>>> {
        self.sent += 1;
        self.last_sent = Instant::now();
        self.reported = self.state.count();
        Poll::Ready(Some((self.frame)(frame)))
    }

    /// A progress message when one is due and the work moved since the last message.
    fn poll_heartbeat(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<M, Status>>> {
        let Some(every) = self.heartbeat else {
            return Poll::Pending;
        };
        loop {
            let now = Instant::now();
            // An interval too large to add to an instant: no message is ever due.
            let Some(due) = self.last_sent.checked_add(every) else {
                return Poll::Pending;
            };
            let moved = self.state.count() > self.reported;
            if moved && now >= due {
                let (count, marker) = (self.state.count(), self.state.marker());
                return self.send(Frame::Progress { count, marker });
            }
            // Not moved: look again soon (a report does not wake the stream).
            let next = match moved {
                true => due,
                false => now.checked_add(every / 4).map_or(due, |soon| due.max(soon)),
            };
            self.sleep.as_mut().reset(next);
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }
}

impl<T, M> Stream for ProgressStream<T, Result<M, Status>> {
    type Item = Result<M, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        match this.rx.poll_recv(cx) {
            Poll::Ready(Some(item)) => return this.send(Frame::Item(item)),
            Poll::Ready(None) => {
                // Every item is out; the work has ended.
                let Poll::Ready(outcome) = Pin::new(&mut this.end).poll(cx) else {
                    return Poll::Pending;
                };
                this.done = true;
                let status = match outcome {
                    Ok(outcome) => outcome.with_messages(this.sent).status(),
                    // The work's task ended without an outcome: it panicked. The stream
                    // must not end as if the work had finished.
                    Err(_) => Some(Status::internal(format!(
                        "the long work panicked after {} message(s): the stream ends here, \
                         unfinished",
                        this.sent
                    ))),
                };
                return Poll::Ready(status.map(Err));
            }
            Poll::Pending if this.overflowed.load(Ordering::Acquire) => {
                // The work produced more than the caller read: what the buffer held
                // is out; the stream ends here and the work is stopped.
                this.stop();
                return Poll::Ready(Some(Err(Status::resource_exhausted(format!(
                    "the caller read more slowly than the work produced: the stream's \
                     buffer of {} item(s) was full, after {} message(s); the stream ends \
                     here, unfinished (the work can wait for room with Output::send)",
                    this.buffer, this.sent
                )))));
            }
            Poll::Pending => {}
        }
        this.poll_heartbeat(cx)
    }
}

impl<T, M> Drop for ProgressStream<T, M> {
    /// Dropped before its end: hyper drops a response body when the caller reset the
    /// call or the connection closed. The work is stopped.
    fn drop(&mut self) {
        if !self.done {
            self.inbound.cancel(CancelReason::CallerGone);
            self.task.abort();
        }
    }
}

impl<T, M> ProgressStream<T, M> {
    /// Ends the stream before its work did: the work is stopped.
    fn stop(&mut self) {
        self.done = true;
        self.inbound.cancel(CancelReason::CallerGone);
        self.task.abort();
    }
}
