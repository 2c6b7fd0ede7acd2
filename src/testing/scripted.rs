//! [`Scripted`]: an inner service without a socket that plays each attempt as the test
//! scripted it ([`Play`]: when it answers, with which status and pushback, whether its
//! body is fed by the test or it never answers) and records what it saw ([`Seen`]).
//! For tests on paused time of what the layer does with attempts, deadlines, bodies
//! and drops, where a socket would only add real time.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use tokio::sync::{mpsc, Notify};
use tokio::time::Instant;
use tower_service::Service;

type Request = http::Request<tonic::body::Body>;
type Response = http::Response<tonic::body::Body>;

/// The response header in which [`Scripted`] numbers the attempt that answered (from 1,
/// in the order attempts arrived): which of a call's attempts won.
pub const ATTEMPT_HEADER: &str = "x-attempt";

/// One attempt as [`Scripted`] plays it: it answers (after [`Play::after`], with a
/// [`status`](Play::status), [`message`](Play::message) and
/// [`pushback`](Play::pushback) if set, a body fed by the
/// test if [`fed`](Play::fed)), or it never answers ([`Play::hang`]).
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::testing::Play;
/// let overloaded = Play::answer().after(Duration::from_millis(10)).status(tonic::Code::Unavailable).pushback("250");
/// assert_eq!(overloaded.answers_after(), Some(Duration::from_millis(10)));
/// assert_eq!(Play::hang().answers_after(), None);
/// ```
#[derive(Clone, Copy, Debug)]
#[must_use]
pub struct Play {
    after: Option<Duration>,
    status: Option<tonic::Code>,
    message: Option<&'static str>,
    pushback: Option<&'static str>,
    fed: bool,
}

impl Play {
    /// Answers at once: response headers with `content-type: application/grpc` and no
    /// status (the status comes with the body's end: here an empty body, no trailers).
    pub const fn answer() -> Self {
        Play {
            after: Some(Duration::ZERO),
            status: None,
            message: None,
            pushback: None,
            fed: false,
        }
    }

    /// Never answers: the attempt stays pending until the layer drops it (as a peer
    /// that never replies), and [`Seen::dropped`] says when.
    pub const fn hang() -> Self {
        Play {
            after: None,
            status: None,
            message: None,
            pushback: None,
            fed: false,
        }
    }

    /// Answers after `delay` (on tokio's clock: paused time moves it at once); a
    /// [`Play::hang`] still never answers.
    pub const fn after(mut self, delay: Duration) -> Self {
        if self.after.is_some() {
            self.after = Some(delay);
        }
        self
    }

    /// Answers trailers-only with this status (`grpc-status` in the response headers);
    /// `OK` sends no `grpc-status` at all, as [`Play::answer`].
    pub const fn status(mut self, code: tonic::Code) -> Self {
        self.status = match code {
            tonic::Code::Ok => None,
            code => Some(code),
        };
        self
    }

    /// Sends `grpc-message` with this text, as written (with [`Play::status`]: the
    /// status's message; text that cannot be a header value is not sent).
    pub const fn message(mut self, text: &'static str) -> Self {
        self.message = Some(text);
        self
    }

    /// Sends `grpc-retry-pushback-ms` with this value, as written (a peer's value, not
    /// checked: `"-1"` and `"soon"` are peers' values too; text that cannot be a header
    /// value is not sent).
    pub const fn pushback(mut self, value: &'static str) -> Self {
        self.pushback = Some(value);
        self
    }

    /// The response body is fed by the test: [`Scripted::next_feed`] hands over the
    /// body's [`Feed`] once the headers are sent; the body ends when the feed is dropped
    /// (a feed never taken keeps its body open, silent).
    pub const fn fed(mut self) -> Self {
        self.fed = true;
        self
    }

    /// Whether the response body is fed by the test ([`Play::fed`]).
    #[cfg(test)]
    pub(crate) const fn is_fed(&self) -> bool {
        self.fed
    }

    /// When the attempt answers, from its arrival (`None`: never).
    pub const fn answers_after(&self) -> Option<Duration> {
        self.after
    }
}

/// What [`Scripted`] saw of one attempt.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Seen {
    /// When the attempt arrived (tokio's clock).
    pub at: Instant,
    /// The request's headers, as the inner service got them.
    pub headers: http::HeaderMap,
    /// When the attempt was dropped before it answered (cancelled by the layer), if it
    /// was.
    pub dropped: Option<Instant>,
}

impl Seen {
    /// The request's header `name` as text (`None` if absent or not text).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The request's `grpc-timeout`, read (`None` if absent or malformed).
    pub fn grpc_timeout(&self) -> Option<Duration> {
        let value = self.headers.get("grpc-timeout")?;
        crate::wire::grpc_timeout::parse(value.as_bytes()).ok()
    }
}

/// The sending side of a [`Play::fed`] response body: each frame sent is the body's
/// next; the body ends when this is dropped.
#[derive(Debug)]
#[must_use = "dropping the feed ends the response body"]
pub struct Feed(mpsc::UnboundedSender<Frame<Bytes>>);

impl Feed {
    /// Sends the body's next frame; `false` if the body was dropped (the call ended).
    pub fn send(&self, frame: Frame<Bytes>) -> bool {
        self.0.send(frame).is_ok()
    }

    /// Whether the body was dropped (the call ended or was cut).
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// An inner service that plays attempts as scripted and records what it saw: attempts
/// play the [`Play`]s in the order they arrive, later ones repeat the last. Clones
/// share the script and the record.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::testing::{generated_request, Play, Scripted, ATTEMPT_HEADER};
/// use sw4rm_timeouts::{ProfileSet, RetryPolicy, TimeoutProfileLayer};
/// use tower::{Layer, Service, ServiceExt};
///
/// let inner = Scripted::new([Play::answer().status(tonic::Code::Unavailable), Play::answer()]);
/// let retries = RetryPolicy::builder().initial_backoff(Duration::from_millis(1)).build().unwrap();
/// let profiles = ProfileSet::builder().retry("heartbeat", retries).build().unwrap();
/// let mut svc = TimeoutProfileLayer::new(profiles).without_metrics().layer(inner.clone());
/// let request = generated_request("/sw4rm.registry.RegistryService/Heartbeat");
/// let response = svc.ready().await.unwrap().call(request).await.unwrap();
/// assert_eq!(response.headers()[ATTEMPT_HEADER], "2");
/// let seen = inner.seen();
/// assert_eq!(seen[1].header("grpc-previous-rpc-attempts"), Some("1"));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Scripted {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    plays: Vec<Play>,
    seen: Mutex<Vec<Seen>>,
    feeds: Mutex<VecDeque<Feed>>,
    fed: Notify,
}

impl Scripted {
    /// Plays `plays` in the order attempts arrive, the last one for every later
    /// attempt (none: every attempt answers as [`Play::answer`]).
    pub fn new(plays: impl IntoIterator<Item = Play>) -> Self {
        Scripted {
            shared: Arc::new(Shared {
                plays: plays.into_iter().collect(),
                seen: Mutex::default(),
                feeds: Mutex::default(),
                fed: Notify::new(),
            }),
        }
    }

    /// What was seen of each attempt so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.shared.seen).clone()
    }

    /// The [`Feed`] of the next [`Play::fed`] body, in the order the headers were sent;
    /// waits until one is.
    pub async fn next_feed(&self) -> Feed {
        loop {
            let notified = self.shared.fed.notified();
            if let Some(feed) = lock(&self.shared.feeds).pop_front() {
                return feed;
            }
            notified.await;
        }
    }
}

/// What attempt `index` (from 0) plays: its own play, else the last, else an answer.
fn play_for(plays: &[Play], index: usize) -> Play {
    plays
        .get(index)
        .or(plays.last())
        .copied()
        .unwrap_or(Play::answer())
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Service<Request> for Scripted {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let index = {
            let mut seen = lock(&self.shared.seen);
            seen.push(Seen {
                at: Instant::now(),
                headers: request.headers().clone(),
                dropped: None,
            });
            seen.len() - 1
        };
        let play = play_for(&self.shared.plays, index);
        let mut pending = Pending {
            shared: self.shared.clone(),
            index,
            answered: false,
        };
        Box::pin(async move {
            match play.after {
                Some(delay) => tokio::time::sleep(delay).await,
                None => std::future::pending::<()>().await,
            }
            pending.answered = true;
            Ok(pending.answer(&play))
        })
    }
}

/// An attempt not yet answered: records its drop unless it answered.
struct Pending {
    shared: Arc<Shared>,
    index: usize,
    answered: bool,
}

impl Pending {
    fn answer(&self, play: &Play) -> Response {
        let body = match play.fed {
            true => {
                let (tx, rx) = mpsc::unbounded_channel();
                lock(&self.shared.feeds).push_back(Feed(tx));
                self.shared.fed.notify_one();
                tonic::body::Body::new(FedBody(rx))
            }
            false => tonic::body::Body::empty(),
        };
        let mut response = http::Response::new(body);
        let headers = response.headers_mut();
        headers.insert(
            "content-type",
            http::HeaderValue::from_static("application/grpc"),
        );
        if let Some(code) = play.status {
            headers.insert("grpc-status", http::HeaderValue::from(i32::from(code)));
        }
        if let Some(Ok(value)) = play.message.map(http::HeaderValue::from_str) {
            headers.insert("grpc-message", value);
        }
        if let Some(Ok(value)) = play.pushback.map(http::HeaderValue::from_str) {
            headers.insert("grpc-retry-pushback-ms", value);
        }
        headers.insert(ATTEMPT_HEADER, http::HeaderValue::from(self.index + 1));
        response
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.answered {
            if let Some(seen) = lock(&self.shared.seen).get_mut(self.index) {
                seen.dropped = Some(Instant::now());
            }
        }
    }
}

/// A response body fed from a [`Feed`].
struct FedBody(mpsc::UnboundedReceiver<Frame<Bytes>>);

impl http_body::Body for FedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|frame| frame.map(Ok))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn after(play: &Play) -> Option<Duration> {
        play.answers_after()
    }

    #[test]
    fn each_attempt_plays_its_own_then_the_last_and_an_empty_script_answers() {
        let ms = Duration::from_millis;
        let plays = [
            Play::answer().after(ms(1)),
            Play::hang(),
            Play::answer().after(ms(3)),
        ];
        // (script length, attempt index, when it answers)
        let rows = [
            (3, 0, Some(ms(1))),
            (3, 1, None),
            (3, 2, Some(ms(3))),
            (3, 9, Some(ms(3))),
            (2, 5, None),
            (1, 0, Some(ms(1))),
            (0, 0, Some(Duration::ZERO)),
            (0, 7, Some(Duration::ZERO)),
        ];
        for (len, index, want) in rows {
            assert_eq!(
                after(&play_for(&plays[..len], index)),
                want,
                "{len} plays, attempt {index}"
            );
        }
    }

    #[test]
    fn a_hang_stays_a_hang_and_ok_sends_no_status() {
        assert_eq!(
            Play::hang().after(Duration::from_secs(1)).answers_after(),
            None
        );
        assert_eq!(Play::answer().status(tonic::Code::Ok).status, None);
        assert_eq!(
            Play::answer().status(tonic::Code::Unavailable).status,
            Some(tonic::Code::Unavailable)
        );
    }

    #[test]
    fn an_answer_says_what_was_scripted_and_skips_what_cannot_be_a_header() {
        let shared = Arc::new(Shared {
            plays: Vec::new(),
            seen: Mutex::default(),
            feeds: Mutex::default(),
            fed: Notify::new(),
        });
        let pending = Pending {
            shared,
            index: 4,
            answered: true,
        };
        let play = Play::answer()
            .status(tonic::Code::NotFound)
            .message("no such task")
            .pushback("bad\nvalue");
        let response = pending.answer(&play);
        let h = response.headers();
        assert_eq!(h["grpc-status"], "5");
        assert_eq!(h["grpc-message"], "no such task");
        assert_eq!(h[ATTEMPT_HEADER], "5");
        assert!(h.get("grpc-retry-pushback-ms").is_none());
    }
}
