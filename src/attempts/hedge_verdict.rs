//! What a hedged call's attempts mean for the call (gRPC A6 hedging over
//! `hedges.rs`): a hedge sent is reported; the first final answer (a success, or a
//! status the policy does not call non-fatal) is the call's, and the call loop then
//! drops the others (their streams are reset); a non-fatal answer sends the next hedge
//! at once; the call's deadline, seen by the server or by tonic, ends every attempt
//! with the call's timeout.

use std::pin::Pin;
use std::task::{Context, Poll};

use tower_service::Service;

use super::attempt::Ended;
use super::event::{CallEnd, Event, Run, Sink};
use super::hedges::{Hedges, Polled};
use super::verdict::{classify_error, classify_response, server_timed_out, transport_timed_out};
use crate::policy::retry::{Failure, Pushback};
use crate::wire::error::BoxError;
use crate::wire::status::{is_transport_timeout, AnswerHead};

type Request = http::Request<tonic::body::Body>;

/// Polls the hedges until the call has its answer or its error, or nothing is ready.
pub(crate) fn poll_hedges<S, B, R: Sink>(
    mut hedges: Pin<&mut Hedges<S, S::Future>>,
    call: &mut Run<'_, R>,
    cx: &mut Context<'_>,
) -> Poll<Result<http::Response<B>, BoxError>>
where
    S: Service<Request, Response = http::Response<B>> + Clone,
    S::Error: Into<BoxError>,
{
    loop {
        match std::task::ready!(hedges.as_mut().poll(cx, call.retry_budget())) {
            Polled::Sent { attempt, delay } => call.on(Event::Hedged {
                attempt,
                delay: Some(delay),
            }),
            Polled::NotSent(why) => call.on(Event::NotHedged {
                attempts: hedges.sent(),
                reason: why.as_str(),
            }),
            Polled::Ended { attempt, ended } => {
                if let Some(answer) = ended_attempt(ended, attempt, hedges.as_mut(), call) {
                    return Poll::Ready(answer);
                }
            }
        }
    }
}

/// One attempt ended: the call's answer or error, or `None` when the others go on.
fn ended_attempt<S: Clone, F, B, R: Sink>(
    ended: Ended<http::Response<B>>,
    attempt: u32,
    hedges: Pin<&mut Hedges<S, F>>,
    call: &mut Run<'_, R>,
) -> Option<Result<http::Response<B>, BoxError>> {
    match ended {
        Ended::Answered(response) => answered(response, attempt, hedges, call),
        Ended::Failed(err) => failed(err, attempt, hedges, call),
    }
}

fn answered<S: Clone, F, B, R: Sink>(
    mut response: http::Response<B>,
    attempt: u32,
    mut hedges: Pin<&mut Hedges<S, F>>,
    call: &mut Run<'_, R>,
) -> Option<Result<http::Response<B>, BoxError>> {
    let head = AnswerHead::of(response.headers());
    if let Some(err) = server_timed_out(head, call) {
        // Every attempt runs under the call's one deadline: the server saw it pass.
        return Some(Err(err));
    }
    let failure = classify_response(head, || false);
    if let Some((Failure::Code(code), pushback)) = failure {
        if hedges.policy().is_non_fatal(code) {
            if non_fatal(pushback, hedges.as_mut(), call) {
                call.on(Event::HedgeEnded {
                    attempt,
                    status: tonic::Code::from(code),
                });
                return None;
            }
            // The last attempt's non-fatal answer is the call's.
            hedges.mark(&mut response);
            return Some(Ok(response));
        }
    }
    if attempt > 1 {
        call.on(Event::HedgeWon { attempt });
    }
    hedges.answered(
        &mut response,
        attempt,
        failure.is_none(),
        call.retry_budget(),
    );
    Some(Ok(response))
}

/// The inner service failed: tonic's timer on the call's deadline, or a transport
/// error; one that never reached the server or is `UNAVAILABLE` lets the others go on
/// when the policy calls it non-fatal.
fn failed<S: Clone, F, B, R: Sink>(
    err: BoxError,
    attempt: u32,
    mut hedges: Pin<&mut Hedges<S, F>>,
    call: &mut Run<'_, R>,
) -> Option<Result<http::Response<B>, BoxError>> {
    if is_transport_timeout(&*err) {
        return Some(Err(transport_timed_out(call)));
    }
    // The status a non-fatal failure ended its attempt with (one never sent counts as
    // `UNAVAILABLE`, as gRPC reports a failed connection).
    let non_fatal_status = match classify_error(&err) {
        Failure::NotSent => Some(tonic::Code::Unavailable),
        Failure::Code(code) => Some(code)
            .filter(|c| hedges.policy().is_non_fatal(*c))
            .map(tonic::Code::from),
        Failure::AttemptTimeout => None,
    };
    if let Some(status) = non_fatal_status {
        if non_fatal(Pushback::None, hedges.as_mut(), call) {
            call.on(Event::HedgeEnded { attempt, status });
            return None;
        }
    }
    Some(Err(call.end(CallEnd::Failed(err))))
}

/// A non-fatal ending: the next hedge goes out at once if allowed. Whether the call
/// goes on (another attempt runs or was just sent).
fn non_fatal<S: Clone, F, R: Sink>(
    pushback: Pushback,
    mut hedges: Pin<&mut Hedges<S, F>>,
    call: &mut Run<'_, R>,
) -> bool {
    match hedges
        .as_mut()
        .after_non_fatal(pushback, call.retry_budget())
    {
        Ok(attempt) => call.on(Event::Hedged {
            attempt,
            delay: None,
        }),
        Err(why) => call.on(Event::NotHedged {
            attempts: hedges.sent(),
            reason: why.as_str(),
        }),
    }
    !hedges.is_idle()
}
