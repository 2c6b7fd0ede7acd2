//! [`Reassembled`]: a request body put back together after the layer read some of it
//! (to peek at a message's timeout field): the frames already read, then the rest of
//! the original body; [`Whole`], a body that is all there (a request kept for
//! retries, sent again); and [`take_whole`], which reads a request that is already
//! all there.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

type Item = Result<Frame<Bytes>, tonic::Status>;

/// `body` as tonic's request body, boxed as tonic boxes its own: a body whose error is
/// already a `Status` is not wrapped in a second body that maps its errors (which
/// `tonic::body::Body::new` adds to any other), so each poll is one call through the
/// box, not two. A body that has ended is tonic's empty body, as `Body::new` makes it:
/// nothing boxed.
pub(crate) fn boxed<B>(body: B) -> tonic::body::Body
where
    B: Body<Data = Bytes, Error = tonic::Status> + Send + 'static,
{
    use http_body_util::BodyExt as _;
    if body.is_end_stream() {
        return tonic::body::Body::empty();
    }
    tonic::body::Body::new(body.boxed_unsync())
}

/// Frames already read (the first inline, so one frame allocates no queue), then the
/// rest.
pub(crate) struct Reassembled {
    first: Option<Item>,
    more: VecDeque<Item>,
    rest: tonic::body::Body,
}

impl Reassembled {
    /// One frame already read, then the rest of the body.
    pub(crate) fn prefixed(first: Item, rest: tonic::body::Body) -> Self {
        Reassembled {
            first: Some(first),
            more: VecDeque::new(),
            rest,
        }
    }

    /// Several frames already read, then the rest of the body.
    pub(crate) fn frames(mut read: VecDeque<Item>, rest: tonic::body::Body) -> Self {
        Reassembled {
            first: read.pop_front(),
            more: read,
            rest,
        }
    }
}

/// A body that is all there: one data frame, then the end. Every retried call's first
/// attempt sends one, so it is as small as a body can be (32 bytes; a [`Reassembled`] takes
/// several times that).
#[derive(Debug)]
pub(crate) struct Whole(Option<Bytes>);

impl Whole {
    /// A body of `bytes` (none at all when they are empty).
    #[inline]
    pub(crate) fn new(bytes: Bytes) -> Self {
        Whole((!bytes.is_empty()).then_some(bytes))
    }
}

impl Body for Whole {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Item>> {
        Poll::Ready(self.0.take().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }

    /// Never exact, as [`Reassembled`]'s.
    fn size_hint(&self) -> SizeHint {
        let mut hint = SizeHint::new();
        hint.set_lower(self.0.as_ref().map_or(0, |b| b.len() as u64));
        hint
    }
}

impl Body for Reassembled {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        if let Some(frame) = self.first.take().or_else(|| self.more.pop_front()) {
            return Poll::Ready(Some(frame));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.more.is_empty() && self.rest.is_end_stream()
    }

    /// Never exact: hyper would add a `content-length` header to the request, which
    /// a gRPC request as tonic sends it does not carry.
    fn size_hint(&self) -> SizeHint {
        let read: u64 = self
            .first
            .iter()
            .chain(&self.more)
            .filter_map(|f| f.as_ref().ok()?.data_ref().map(|d| d.len() as u64))
            .sum();
        let rest = self.rest.size_hint().lower();
        let mut hint = SizeHint::new();
        hint.set_lower(read.saturating_add(rest));
        hint
    }
}

/// Reads the body's first frame if it is ready now, hands it to `f` (which may
/// replace it) and puts the result back in front of the rest of the body. `None`,
/// and the body untouched, when no frame is ready (the next poll registers a waker)
/// or the body is empty.
pub fn with_first_frame<R>(
    body: &mut tonic::body::Body,
    f: impl FnOnce(Item) -> (Item, R),
) -> Option<R> {
    let mut taken = std::mem::take(body);
    let mut cx = Context::from_waker(Waker::noop());
    match Pin::new(&mut taken).poll_frame(&mut cx) {
        Poll::Ready(Some(first)) => {
            let (first, out) = f(first);
            *body = boxed(Reassembled::prefixed(first, taken));
            Some(out)
        }
        Poll::Ready(None) | Poll::Pending => {
            *body = taken;
            None
        }
    }
}

/// Takes the whole request body if it is already there (a unary request from a
/// generated client is) and at most `limit` bytes: `keep` sees its bytes, and the body
/// is replaced by one sending the same bytes. Otherwise the body is put back untouched
/// (what was read is replayed first) and `None` says the call is sent once.
///
/// A body taken whole that does not say it has ended goes to `watch`, when there is
/// one: tonic's request body (with a `Request::cancellation_handle()`) fails when the
/// caller cancels, and only whoever polls it learns that. Without a watch it is
/// dropped, as hyper drops a request body once sent.
pub(crate) fn take_whole<K>(
    body: &mut tonic::body::Body,
    limit: usize,
    keep: impl FnOnce(&Bytes) -> K,
    watch: Option<&mut tonic::body::Body>,
) -> Option<K> {
    let mut taken = std::mem::take(body);
    let mut cx = Context::from_waker(Waker::noop());
    // The common case, one data frame then the end, queues nothing.
    let mut single: Option<Bytes> = None;
    // A `Vec` until it is handed on: an empty one's drop is a check of its capacity.
    let mut frames: Vec<Result<Frame<Bytes>, tonic::Status>> = Vec::new();
    let mut size = 0usize;
    let whole = loop {
        match Pin::new(&mut taken).poll_frame(&mut cx) {
            Poll::Ready(None) => break true,
            Poll::Ready(Some(Ok(frame))) => {
                let data_len = frame.data_ref().map(Bytes::len);
                let fits = data_len.is_some_and(|n| size + n <= limit);
                size += data_len.unwrap_or(0);
                match (single.take(), frames.is_empty(), fits) {
                    (None, true, true) => single = frame.into_data().ok(),
                    (first, _, _) => {
                        if let Some(b) = first {
                            frames.push(Ok(Frame::data(b)));
                        }
                        frames.push(Ok(frame));
                    }
                }
                // Trailers, or too large: sent once.
                if !fits {
                    break false;
                }
            }
            Poll::Ready(Some(Err(e))) => {
                if let Some(b) = single.take() {
                    frames.push(Ok(Frame::data(b)));
                }
                frames.push(Err(e));
                break false;
            }
            Poll::Pending => {
                if let Some(b) = single.take() {
                    frames.push(Ok(Frame::data(b)));
                }
                break false;
            }
        }
    };
    // Kept to watch for tonic's cancel only when asked: it holds tonic's encode
    // buffer (8 KiB) for as long as the call lasts.
    if let Some(watch) = watch.filter(|_| whole && !taken.is_end_stream()) {
        *watch = std::mem::take(&mut taken);
    }
    if whole && frames.is_empty() {
        let frame = single.unwrap_or_default();
        // The first attempt sends the frame as it came (freed once written): it is
        // not cloned, as a clone may allocate a shared counter.
        let kept = keep(&frame);
        *body = boxed(Whole::new(frame));
        return Some(kept);
    }
    if whole {
        let mut all = BytesMut::with_capacity(size);
        for f in frames.into_iter().flatten() {
            if let Some(d) = f.data_ref() {
                all.extend_from_slice(d);
            }
        }
        let bytes = all.freeze();
        let kept = keep(&bytes);
        *body = boxed(Whole::new(bytes));
        Some(kept)
    } else if frames.is_empty() {
        *body = taken;
        None
    } else {
        *body = boxed(Reassembled::frames(frames.into(), taken));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn frames_come_back_in_order_then_the_rest() {
        let rest = tonic::body::Body::new(Whole::new(Bytes::from_static(b"c")));
        let mut read = VecDeque::new();
        read.push_back(Ok(Frame::data(Bytes::from_static(b"a"))));
        read.push_back(Ok(Frame::data(Bytes::from_static(b"b"))));
        let body = Reassembled::frames(read, rest);
        assert_eq!(body.size_hint().exact(), None, "never exact");
        assert_eq!(
            body.size_hint().lower(),
            3,
            "read frames and what the rest holds"
        );
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(all, Bytes::from_static(b"abc"));
        assert!(Whole::new(Bytes::new()).is_end_stream());
    }

    /// A body boxed for tonic sends what it holds and the error it ends with, as tonic's
    /// own boxing does; one that has ended is tonic's empty body.
    #[tokio::test]
    async fn a_boxed_body_sends_its_frames_and_its_error_as_it_was() {
        let ended = boxed(Whole::new(Bytes::new()));
        assert!(ended.is_end_stream());
        assert_eq!(ended.size_hint().exact(), Some(0), "tonic's empty body");
        let bytes = Bytes::from_static(b"\x00\x00\x00\x00\x01a");
        let whole = boxed(Whole::new(bytes.clone()));
        assert!(!whole.is_end_stream());
        assert_eq!(whole.collect().await.unwrap().to_bytes(), bytes);
        let failed = tonic::Status::cancelled("the caller let go");
        let mut read = VecDeque::new();
        read.push_back(Ok(Frame::data(bytes.clone())));
        read.push_back(Err(failed));
        let mut body = boxed(Reassembled::frames(read, tonic::body::Body::empty()));
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), bytes);
        let error = body.frame().await.unwrap().unwrap_err();
        assert_eq!(
            (error.code(), error.message()),
            (tonic::Code::Cancelled, "the caller let go")
        );
    }

    #[tokio::test]
    async fn a_unary_body_is_taken_whole_and_replayed_byte_identical() {
        let bytes = Bytes::from_static(b"\x00\x00\x00\x00\x03abc");
        let mut body = tonic::body::Body::new(Whole::new(bytes.clone()));
        let taken = take_whole(&mut body, 1024, Bytes::clone, Some(&mut Default::default()))
            .expect("whole");
        assert_eq!(taken, bytes);
        let again = http_body_util::BodyExt::collect(body)
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(again, bytes);
        // Too large: sent once, and still whole.
        let mut body = tonic::body::Body::new(Whole::new(bytes.clone()));
        assert_eq!(
            take_whole(&mut body, 4, Bytes::clone, Some(&mut Default::default())),
            None
        );
        let again = http_body_util::BodyExt::collect(body)
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(again, bytes);
    }
}
