//! What a hedged call's attempts mean for the call (gRPC A6 hedging over
//! `retry/hedges.rs`): a hedge sent is counted and logged; the first final answer (a
//! success, or a status the policy does not call non-fatal) is the call's, and the
//! call loop then drops the others (their streams are reset); a non-fatal answer sends
//! the next hedge at once; the call's deadline, seen by the server or by tonic, ends
//! every attempt with the call's timeout.

use std::pin::Pin;
use std::task::{Context, Poll};

use tower_service::Service;

use super::ending::{server_timed_out, transport_timed_out};
use super::record::CallRecord;
use crate::policy::retry::{Failure, Pushback};
use crate::retry::{classify_error, classify_response, Ended, Event, Hedges};
use crate::wire::error::BoxError;
use crate::wire::status::is_transport_timeout;

type Request = http::Request<tonic::body::Body>;

/// Polls the hedges until the call has its answer or its error (`Some`), or nothing
/// is ready.
pub(crate) fn poll_hedges<S, B>(
    mut hedges: Pin<&mut Hedges<S, S::Future>>,
    record: &mut CallRecord,
    cx: &mut Context<'_>,
) -> Poll<Result<http::Response<B>, Option<BoxError>>>
where
    S: Service<Request, Response = http::Response<B>> + Clone,
    S::Error: Into<BoxError>,
{
    loop {
        match std::task::ready!(hedges.as_mut().poll(cx, record.retry_budget())) {
            Event::Sent { attempt, delay } => record.hedged(attempt, Some(delay)),
            Event::NotSent(why) => record.not_hedged(hedges.sent(), why.as_str()),
            Event::Ended { attempt, ended } => {
                if let Some(answer) = ended_attempt(ended, attempt, hedges.as_mut(), record) {
                    return Poll::Ready(answer);
                }
            }
        }
    }
}

/// One attempt ended: the call's answer or error, or `None` when the others go on.
fn ended_attempt<S: Clone, F, B>(
    ended: Ended<http::Response<B>>,
    attempt: u32,
    hedges: Pin<&mut Hedges<S, F>>,
    record: &mut CallRecord,
) -> Option<Result<http::Response<B>, Option<BoxError>>> {
    match ended {
        Ended::Answered(response) => answered(response, attempt, hedges, record),
        Ended::Failed(err) => failed(err, hedges, record),
    }
}

fn answered<S: Clone, F, B>(
    mut response: http::Response<B>,
    attempt: u32,
    mut hedges: Pin<&mut Hedges<S, F>>,
    record: &mut CallRecord,
) -> Option<Result<http::Response<B>, Option<BoxError>>> {
    if let Some(status) = server_timed_out(response.headers(), record) {
        // Every attempt runs under the call's one deadline: the server saw it pass.
        return Some(Err(Some(status.into())));
    }
    let failure = classify_response(response.headers(), false);
    if let Some((Failure::Code(code), pushback)) = failure {
        if hedges.policy().is_non_fatal(code) {
            if non_fatal(pushback, hedges.as_mut(), record) {
                return None;
            }
            // The last attempt's non-fatal answer is the call's.
            hedges.mark(&mut response);
            return Some(Ok(response));
        }
    }
    if attempt > 1 {
        record.hedge_won(attempt);
    }
    hedges.answered(
        &mut response,
        attempt,
        failure.is_none(),
        record.retry_budget(),
    );
    Some(Ok(response))
}

/// The inner service failed: tonic's timer on the call's deadline, or a transport
/// error; one that never reached the server or is `UNAVAILABLE` lets the others go on
/// when the policy calls it non-fatal.
fn failed<S: Clone, F, B>(
    err: BoxError,
    mut hedges: Pin<&mut Hedges<S, F>>,
    record: &mut CallRecord,
) -> Option<Result<http::Response<B>, Option<BoxError>>> {
    if is_transport_timeout(&*err) {
        return Some(Err(Some(transport_timed_out(record).into())));
    }
    let non_fatal_failure = match classify_error(&err) {
        Failure::NotSent => true,
        Failure::Code(code) => hedges.policy().is_non_fatal(code),
        Failure::AttemptTimeout => false,
    };
    if non_fatal_failure && non_fatal(Pushback::None, hedges.as_mut(), record) {
        return None;
    }
    Some(Err(Some(record.failed(err))))
}

/// A non-fatal ending: the next hedge goes out at once if allowed. Whether the call
/// goes on (another attempt runs or was just sent).
fn non_fatal<S: Clone, F>(
    pushback: Pushback,
    mut hedges: Pin<&mut Hedges<S, F>>,
    record: &mut CallRecord,
) -> bool {
    match hedges
        .as_mut()
        .after_non_fatal(pushback, record.retry_budget())
    {
        Ok(attempt) => record.hedged(attempt, None),
        Err(why) => record.not_hedged(hedges.sent(), why.as_str()),
    }
    !hedges.is_idle()
}
