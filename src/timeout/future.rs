//! [`ResponseFuture`]: the call loop. The call's first timer runs from the moment the
//! RPC is called; under it the loop runs attempts (`retry/attempt.rs`) one after
//! another, with a backoff between two, and alone owns the inner service, lending it
//! to the attempt in flight. When the response headers arrive the call record moves
//! into the [`TimeoutBody`]. What each attempt's end means is `ending.rs`.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::Instant;
use tonic::Status;
use tower_service::Service;

use super::body::TimeoutBody;
use super::ending::{judge, End, Verdict};
use super::record::CallRecord;
use super::BoxError;
use crate::policy::deadline::Progress;
use crate::retry::{Attempt, Resend, Retries};
use crate::timer::Timer;
use crate::wire::details::DetectedBy;

type Request = http::Request<tonic::body::Body>;

pin_project! {
    /// Response future of [`super::TimeoutProfileService`].
    #[derive(Debug)]
    pub struct ResponseFuture<S, F> {
        #[pin]
        kind: Kind<S, F>,
    }
}

pin_project! {
    #[project = KindProj]
    #[project_replace = KindReplace]
    #[derive(Debug)]
    enum Kind<S, F> {
        // The call in flight.
        Calling {
            #[pin]
            step: Step<F>,
            // The call's first timer (the earlier of a stream's initial and total
            // timers), armed at the first wait.
            #[pin]
            deadline: Timer,
            svc: S,
            record: CallRecord,
            // Retries inside the deadline; `None` for a call sent once.
            retry: Option<Box<Retries>>,
        },
        // Refused before it was sent (not a gRPC path, a malformed header, nothing
        // left of the deadline, a delegation refused).
        Refused { status: Status },
        // Answered, failed, or refused and reported.
        Over,
    }
}

pin_project! {
    #[project = StepProj]
    #[derive(Debug)]
    enum Step<F> {
        Attempting { #[pin] attempt: Attempt<F> },
        // Between two attempts: the next one is made and waits for the backoff.
        Backoff { #[pin] timer: Timer, resume: Instant, resend: Resend },
    }
}

impl<S, F> ResponseFuture<S, F> {
    /// A call whose first attempt sends `request`; `retry` carries its retries.
    pub(crate) fn new(
        svc: S,
        request: Request,
        record: CallRecord,
        retry: Option<Box<Retries>>,
    ) -> Self {
        let until = retry.as_ref().and_then(|r| r.first_until(record.start()));
        ResponseFuture {
            kind: Kind::Calling {
                step: Step::Attempting {
                    attempt: Attempt::new(request, until),
                },
                deadline: Timer::new(),
                svc,
                record,
                retry,
            },
        }
    }

    /// A call refused before it was sent.
    pub(crate) fn failed(status: Status) -> Self {
        ResponseFuture {
            kind: Kind::Refused { status },
        }
    }
}

impl<S, B> Future for ResponseFuture<S, S::Future>
where
    S: Service<Request, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
    B: http_body::Body,
{
    type Output = Result<http::Response<TimeoutBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut kind = self.project().kind;
        let end = match kind.as_mut().project() {
            KindProj::Calling {
                step,
                deadline,
                svc,
                record,
                retry,
            } => {
                let _span = record.entered();
                ready!(run(step, deadline, svc, record, retry, cx))
            }
            KindProj::Refused { .. } | KindProj::Over => End::Over,
        };
        // The call is over. Dropping the attempt in flight drops the inner call:
        // hyper resets the HTTP/2 stream, and the server sees the cancel.
        Poll::Ready(match (end, kind.project_replace(Kind::Over)) {
            (End::Headers(response), KindReplace::Calling { mut record, .. }) => {
                let (parts, body) = response.into_parts();
                record.answered(&parts.headers);
                Ok(http::Response::from_parts(
                    parts,
                    TimeoutBody::new(body, record),
                ))
            }
            (End::Failed(err), _) => Err(err),
            (End::Over, KindReplace::Refused { status }) => Err(status.into()),
            // Polled again after it completed.
            (End::Headers(_) | End::Over, _) => {
                Err(Status::internal("SW4RM response future polled after completion").into())
            }
        })
    }
}

/// Runs attempts until one ends the call, or the call's deadline does.
fn run<S, B>(
    mut step: Pin<&mut Step<S::Future>>,
    mut deadline: Pin<&mut Timer>,
    svc: &mut S,
    record: &mut CallRecord,
    retry: &mut Option<Box<Retries>>,
    cx: &mut Context<'_>,
) -> Poll<End<B>>
where
    S: Service<Request, Response = http::Response<B>>,
    S::Error: Into<BoxError>,
{
    loop {
        let verdict = match step.as_mut().project() {
            StepProj::Attempting { mut attempt } => match attempt.as_mut().poll(svc, cx) {
                Poll::Ready(ended) => judge(ended, attempt.expired(), record, retry.as_deref_mut()),
                Poll::Pending => Verdict::Wait,
            },
            StepProj::Backoff {
                timer,
                resume,
                resend,
            } => match timer.poll_until(*resume, cx) {
                Poll::Ready(()) => Verdict::Resend(std::mem::take(resend)),
                Poll::Pending => Verdict::Wait,
            },
        };
        match verdict {
            Verdict::End(end) => return Poll::Ready(end),
            Verdict::Retry(retry) => {
                record.retried(retry.attempt, retry.backoff, retry.reason);
                step.set(Step::Backoff {
                    timer: Timer::new(),
                    resume: retry.resume,
                    resend: retry.resend,
                });
            }
            Verdict::Resend(resend) => {
                let started = resend.start(Instant::now());
                record.attempt(started.attempt, started.cap);
                step.set(Step::Attempting {
                    attempt: Attempt::new(started.request, started.until),
                });
            }
            Verdict::Wait => return deadline_passed(deadline.as_mut(), record, cx),
        }
    }
}

/// While an attempt or a backoff waits: the call's first timer.
fn deadline_passed<B>(
    timer: Pin<&mut Timer>,
    record: &mut CallRecord,
    cx: &mut Context<'_>,
) -> Poll<End<B>> {
    let Some(due) = record.next_due(Progress::default()) else {
        return Poll::Pending;
    };
    ready!(timer.poll_until(due.at, cx));
    let status = record.timed_out(due.phase, 0, DetectedBy::Client);
    Poll::Ready(End::Failed(status.into()))
}
