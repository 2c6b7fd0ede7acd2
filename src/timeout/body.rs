//! [`TimeoutBody`]: the response body under the call's remaining timers.
//!
//! Unary calls keep their single deadline until the body ends (tonic's own timer
//! stops at the response headers). Streams get SW4-002 §4.1: the initial timer until
//! the first complete message, the gap timer restarted by every data frame, the total
//! cap never reset. When one fires, the inner body is dropped (hyper resets the
//! HTTP/2 stream), the caller receives `DEADLINE_EXCEEDED`, and then the end.
//! Frames that arrived before are delivered first. The end event fires exactly once.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use super::call::{is_server_timeout, CallContext};
use super::BoxError;
use crate::details::{DetectedBy, Phase};

pin_project! {
    /// Response body of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    pub struct TimeoutBody<B> {
        #[pin]
        inner: Option<B>,
        #[pin]
        sleep: Option<Sleep>,
        call: Option<CallContext>,
        messages: MessageCounter,
        last_progress: Option<Instant>,
    }
}

impl<B> TimeoutBody<B> {
    pub(crate) fn new(inner: B, call: Option<CallContext>) -> Self {
        TimeoutBody {
            inner: Some(inner),
            sleep: None,
            call,
            messages: MessageCounter::default(),
            last_progress: None,
        }
    }
}

/// The next timer: when, which phase, and its configured value.
fn next_deadline(
    call: &CallContext,
    messages: u64,
    last_progress: Option<Instant>,
) -> Option<(Instant, Phase, Duration)> {
    let t = &call.timers;
    let mut best: Option<(Instant, Phase, Duration)> = None;
    let mut consider = |at: Instant, phase, configured| {
        if best.is_none_or(|(b, _, _)| at < b) {
            best = Some((at, phase, configured));
        }
    };
    if let Some(total) = t.total {
        consider(call.start + total, Phase::Total, total);
    }
    if messages == 0 {
        if let Some(initial) = t.initial {
            consider(call.start + initial, Phase::Initial, initial);
        }
    } else if let (Some(gap), Some(last)) = (t.gap, last_progress) {
        consider(last + gap, Phase::Gap, gap);
    }
    best
}

impl<B> Body for TimeoutBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, BoxError>>> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return Poll::Ready(None); // ended by a timeout
        };
        let Some(call) = this.call.as_mut() else {
            // Finished (or not tracked): plain pass-through.
            return inner.poll_frame(cx).map_err(Into::into);
        };
        match inner.poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if call.streaming {
                        this.messages.feed(data);
                        *this.last_progress = Some(Instant::now());
                    }
                } else if let Some(trailers) = frame.trailers_ref() {
                    let deadline = next_deadline(call, this.messages.complete, *this.last_progress)
                        .map(|d| d.0);
                    if is_server_timeout(trailers, deadline) {
                        let (phase, configured) = server_phase(call, this.messages.complete);
                        let messages = call.streaming.then_some(this.messages.complete);
                        let status =
                            call.timed_out(phase, configured, messages, DetectedBy::Server);
                        *this.call = None;
                        this.inner.set(None);
                        return Poll::Ready(Some(Err(status.into())));
                    }
                    call.complete();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                call.complete();
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                call.complete();
                *this.call = None;
                Poll::Ready(None)
            }
            Poll::Pending => loop {
                let Some((at, phase, configured)) =
                    next_deadline(call, this.messages.complete, *this.last_progress)
                else {
                    return Poll::Pending;
                };
                // The timer is re-armed lazily: progress only moves `at` later, and a
                // timer that fires early is simply re-armed, so a busy stream costs one
                // clock read per frame and no timer-driver work.
                match this.sleep.as_mut().as_pin_mut() {
                    None => this.sleep.set(Some(tokio::time::sleep_until(at))),
                    Some(sleep) if sleep.deadline() > at => sleep.reset(at),
                    Some(_) => {}
                }
                let Some(mut sleep) = this.sleep.as_mut().as_pin_mut() else {
                    return Poll::Pending;
                };
                ready!(sleep.as_mut().poll(cx));
                if Instant::now() < at {
                    sleep.reset(at);
                    continue;
                }
                let messages = call.streaming.then_some(this.messages.complete);
                let status = call.timed_out(phase, configured, messages, DetectedBy::Client);
                *this.call = None;
                this.sleep.set(None);
                this.inner.set(None); // resets the HTTP/2 stream
                return Poll::Ready(Some(Err(status.into())));
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), |b| b.size_hint())
    }
}

/// Phase and configured value to report when the server said DEADLINE_EXCEEDED.
fn server_phase(call: &CallContext, messages: u64) -> (Phase, Duration) {
    match (call.timers.total, call.timers.initial) {
        (Some(t), _) => (Phase::Total, t),
        (None, Some(i)) if messages == 0 => (Phase::Initial, i),
        _ => (Phase::Gap, call.timers.gap.unwrap_or_default()),
    }
}

/// Counts complete gRPC messages (5-byte prefix + payload) across data frames.
#[derive(Debug, Default)]
pub(crate) struct MessageCounter {
    /// Complete messages seen.
    pub(crate) complete: u64,
    /// Prefix bytes collected for the current message.
    prefix: [u8; 5],
    prefix_len: usize,
    /// Payload bytes still to come for the current message.
    remaining: u64,
}

impl MessageCounter {
    pub(crate) fn feed<D: Buf>(&mut self, data: &D) {
        let mut bytes = data.chunk();
        // `Buf` may be split across chunks; tonic/hyper data is one contiguous chunk.
        let mut left = data.remaining();
        while left > 0 && !bytes.is_empty() {
            if self.prefix_len < 5 {
                let take = (5 - self.prefix_len).min(bytes.len());
                self.prefix[self.prefix_len..self.prefix_len + take]
                    .copy_from_slice(&bytes[..take]);
                self.prefix_len += take;
                bytes = &bytes[take..];
                left -= take;
                if self.prefix_len == 5 {
                    self.remaining = u64::from(u32::from_be_bytes([
                        self.prefix[1],
                        self.prefix[2],
                        self.prefix[3],
                        self.prefix[4],
                    ]));
                    if self.remaining == 0 {
                        self.complete += 1;
                        self.prefix_len = 0;
                    }
                }
            } else {
                let take = (self.remaining as usize).min(bytes.len());
                bytes = &bytes[take..];
                left -= take;
                self.remaining -= take as u64;
                if self.remaining == 0 {
                    self.complete += 1;
                    self.prefix_len = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MessageCounter;
    use bytes::Bytes;
    use proptest::prelude::*;

    fn framed(sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        for &n in sizes {
            out.push(0);
            out.extend_from_slice(&(n as u32).to_be_bytes());
            out.extend(std::iter::repeat_n(7u8, n));
        }
        out
    }

    #[test]
    fn counts_messages_in_one_frame() {
        let mut c = MessageCounter::default();
        c.feed(&Bytes::from(framed(&[3, 0, 10])));
        assert_eq!(c.complete, 3);
    }

    proptest! {
        #[test]
        fn counts_across_any_split(sizes in proptest::collection::vec(0usize..40, 0..8), cuts in proptest::collection::vec(1usize..17, 0..40)) {
            let all = framed(&sizes);
            let mut c = MessageCounter::default();
            let mut at = 0;
            for cut in cuts.iter().chain(std::iter::repeat(&17)) {
                if at >= all.len() { break; }
                let end = (at + cut).min(all.len());
                c.feed(&Bytes::copy_from_slice(&all[at..end]));
                at = end;
            }
            prop_assert_eq!(c.complete, sizes.len() as u64);
        }
    }
}
