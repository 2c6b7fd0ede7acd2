//! What the end of one attempt of a call sent once or retried means for the call: its
//! answer, a retry the rules decided, or the call's failure (a timeout reported as
//! ours, the server's or the transport's, or an error from below the layer). A hedged
//! call's attempts are judged in `hedge_verdict.rs`.

use tokio::time::Instant;

use super::attempt::Ended;
use super::classify::{classify_error, classify_response};
use super::event::{CallEnd, Event, Run, Sink};
use super::retries::{Retries, Retry};
use crate::policy::deadline::Phase;
use crate::policy::retry::{Failure, Pushback};
use crate::wire::details::DetectedBy;
use crate::wire::error::BoxError;
use crate::wire::status::{is_server_timeout, is_transport_timeout};

/// What the call loop does next when an attempt or a timer ended without the call's
/// answer.
#[derive(Debug)]
pub(crate) enum Verdict<S> {
    /// The call failed with this error (its record has ended).
    Fail(BoxError),
    /// Wait the backoff, then send the next attempt.
    Retry(Retry<S>),
}

/// The response headers that answer the call (`Ok`), or what to do instead.
pub(crate) type Judged<B, S> = Result<http::Response<B>, Verdict<S>>;

/// The verdict on an attempt that ended; `expired` says whether the attempt's own
/// timeout had passed when it did.
#[inline]
pub(crate) fn judge<B, S: Clone, R: Sink>(
    ended: Ended<http::Response<B>>,
    expired: bool,
    call: &mut Run<'_, R>,
    retry: Option<&mut Retries<S>>,
) -> Judged<B, S> {
    match ended {
        Ended::Answered(response) => answered(response, expired, call, retry),
        Ended::Failed(err) => failed(err, expired, call, retry),
    }
}

/// The attempt's own timeout passed (the call loop's timer noticed): a retry, or the
/// call's timeout in the attempt phase.
pub(crate) fn attempt_timed_out<S: Clone, R: Sink>(
    call: &mut Run<'_, R>,
    retry: Option<&mut Retries<S>>,
) -> Verdict<S> {
    retry_or(Failure::AttemptTimeout, Pushback::None, call, retry)
        .unwrap_or_else(|| Verdict::Fail(timed_out(call, Phase::Attempt, DetectedBy::Client)))
}

/// The call's timeout in `phase`, noticed by `detected_by`: the error its caller gets.
#[inline]
pub(crate) fn timed_out<R: Sink>(
    call: &mut Run<'_, R>,
    phase: Phase,
    detected_by: DetectedBy,
) -> BoxError {
    call.end(CallEnd::TimedOut { phase, detected_by })
}

/// A trailers-only answer saying the server's deadline (the call's own) fired: the
/// call's timeout, as the server detected it.
pub(crate) fn server_timed_out<R: Sink>(
    headers: &http::HeaderMap,
    call: &mut Run<'_, R>,
) -> Option<BoxError> {
    if !is_server_timeout(headers, || call.first_due().map(|due| due.at)) {
        return None;
    }
    let phase = call.server_phase();
    Some(timed_out(call, phase, DetectedBy::Server))
}

/// tonic's timer ended the call: its own timer on the call's deadline (the call's
/// timeout), or a shorter deadline below the layer.
pub(crate) fn transport_timed_out<R: Sink>(call: &mut Run<'_, R>) -> BoxError {
    match call.first_due() {
        // tonic's own timer on the same deadline won the race.
        Some(due) if Instant::now() >= due.at => timed_out(call, due.phase, DetectedBy::Transport),
        // A shorter deadline below the layer fired first.
        _ => call.end(CallEnd::TransportCapped),
    }
}

/// Response headers arrived: a trailers-only error may be retried; anything else is
/// the call's answer.
#[inline]
fn answered<B, S: Clone, R: Sink>(
    mut response: http::Response<B>,
    expired: bool,
    call: &mut Run<'_, R>,
    retry: Option<&mut Retries<S>>,
) -> Judged<B, S> {
    if let Some(err) = server_timed_out(response.headers(), call) {
        return Err(Verdict::Fail(err));
    }
    let Some(retry) = retry else {
        return Ok(response);
    };
    match classify_response(response.headers(), expired) {
        Some((failure, pushback)) => {
            match retry.after_failure(failure, pushback, call.deadline(), call.retry_budget()) {
                Ok(next) => return Err(Verdict::Retry(next)),
                Err(stop) => call.on(Event::NotRetried {
                    attempt: retry.attempt(),
                    reason: stop.as_str(),
                }),
            }
        }
        None => retry.answered(call.retry_budget()),
    }
    retry.mark(&mut response);
    Ok(response)
}

/// The inner service failed: tonic's own timer on the same deadline, a shorter
/// deadline below the layer, or a transport error the rules may retry.
fn failed<B, S: Clone, R: Sink>(
    err: BoxError,
    expired: bool,
    call: &mut Run<'_, R>,
    retry: Option<&mut Retries<S>>,
) -> Judged<B, S> {
    // tonic's timer on the attempt's own deadline is the attempt's timeout.
    if is_transport_timeout(&*err) {
        if expired {
            return Err(
                retry_or(Failure::AttemptTimeout, Pushback::None, call, retry).unwrap_or_else(
                    || Verdict::Fail(timed_out(call, Phase::Attempt, DetectedBy::Transport)),
                ),
            );
        }
        return Err(Verdict::Fail(transport_timed_out(call)));
    }
    let failure = classify_error(&err);
    Err(retry_or(failure, Pushback::None, call, retry)
        .unwrap_or_else(|| Verdict::Fail(call.end(CallEnd::Failed(err)))))
}

/// A retry when the rules decide one; `None` (logged) when the failure is the call's
/// answer.
fn retry_or<S: Clone, R: Sink>(
    failure: Failure,
    pushback: Pushback,
    call: &mut Run<'_, R>,
    retry: Option<&mut Retries<S>>,
) -> Option<Verdict<S>> {
    let retry = retry?;
    match retry.after_failure(failure, pushback, call.deadline(), call.retry_budget()) {
        Ok(next) => Some(Verdict::Retry(next)),
        Err(stop) => {
            call.on(Event::NotRetried {
                attempt: retry.attempt(),
                reason: stop.as_str(),
            });
            None
        }
    }
}
