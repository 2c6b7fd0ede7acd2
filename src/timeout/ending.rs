//! What the end of one attempt means for the call: its answer, a retry the rules
//! decided, or the call's failure (a timeout reported as ours, the server's or the
//! transport's, or an error from below the layer).

use tokio::time::Instant;
use tonic::Status;

use super::record::CallRecord;
use crate::policy::deadline::{Phase, Progress};
use crate::policy::retry::{Failure, Pushback};
use crate::retry::{classify_error, classify_response, Ended, Retries, Retry};
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
pub(crate) fn judge<B, S: Clone>(
    ended: Ended<http::Response<B>>,
    expired: bool,
    record: &mut CallRecord,
    retry: Option<&mut Retries<S>>,
) -> Judged<B, S> {
    match ended {
        Ended::Answered(response) => answered(response, expired, record, retry),
        Ended::Failed(err) => failed(err, expired, record, retry),
    }
}

/// The first timer's instant, asked for only where an ending needs it.
/// The attempt's own timeout passed (the call loop's timer noticed): a retry, or the
/// call's timeout in the attempt phase.
pub(crate) fn attempt_timed_out<S: Clone>(
    record: &mut CallRecord,
    retry: Option<&mut Retries<S>>,
) -> Verdict<S> {
    retry_or(Failure::AttemptTimeout, Pushback::None, record, retry).unwrap_or_else(|| {
        Verdict::Fail(
            record
                .timed_out(Phase::Attempt, 0, DetectedBy::Client)
                .into(),
        )
    })
}

#[inline]
fn first_due(record: &CallRecord) -> Option<Instant> {
    record.next_due(Progress::default()).map(|due| due.at)
}

/// A trailers-only answer saying the server's deadline (the call's own) fired: the
/// call's timeout, as the server detected it.
pub(crate) fn server_timed_out(
    headers: &http::HeaderMap,
    record: &mut CallRecord,
) -> Option<Status> {
    if !is_server_timeout(headers, || first_due(record)) {
        return None;
    }
    let phase = record.server_phase(0);
    Some(record.timed_out(phase, 0, DetectedBy::Server))
}

/// tonic's timer ended the call: its own timer on the call's deadline (the call's
/// timeout), or a shorter deadline below the layer.
pub(crate) fn transport_timed_out(record: &mut CallRecord) -> Status {
    match record.next_due(Progress::default()) {
        // tonic's own timer on the same deadline won the race.
        Some(due) if Instant::now() >= due.at => {
            record.timed_out(due.phase, 0, DetectedBy::Transport)
        }
        // A shorter deadline below the layer fired first.
        _ => record.transport_capped(),
    }
}

/// Response headers arrived: a trailers-only error may be retried; anything else is
/// the call's answer.
#[inline]
fn answered<B, S: Clone>(
    mut response: http::Response<B>,
    expired: bool,
    record: &mut CallRecord,
    retry: Option<&mut Retries<S>>,
) -> Judged<B, S> {
    if let Some(status) = server_timed_out(response.headers(), record) {
        return Err(Verdict::Fail(status.into()));
    }
    let Some(retry) = retry else {
        return Ok(response);
    };
    match classify_response(response.headers(), expired) {
        Some((failure, pushback)) => {
            match retry.after_failure(failure, pushback, record.deadline(), record.retry_budget()) {
                Ok(next) => return Err(Verdict::Retry(next)),
                Err(stop) => record.not_retried(retry.attempt(), stop.as_str()),
            }
        }
        None => retry.answered(record.retry_budget()),
    }
    retry.mark(&mut response);
    Ok(response)
}

/// The inner service failed: tonic's own timer on the same deadline, a shorter
/// deadline below the layer, or a transport error the rules may retry.
fn failed<B, S: Clone>(
    err: BoxError,
    expired: bool,
    record: &mut CallRecord,
    retry: Option<&mut Retries<S>>,
) -> Judged<B, S> {
    // tonic's timer on the attempt's own deadline is the attempt's timeout.
    if is_transport_timeout(&*err) {
        if expired {
            return Err(
                retry_or(Failure::AttemptTimeout, Pushback::None, record, retry).unwrap_or_else(
                    || {
                        let status = record.timed_out(Phase::Attempt, 0, DetectedBy::Transport);
                        Verdict::Fail(status.into())
                    },
                ),
            );
        }
        return Err(Verdict::Fail(transport_timed_out(record).into()));
    }
    let failure = classify_error(&err);
    Err(retry_or(failure, Pushback::None, record, retry)
        .unwrap_or_else(|| Verdict::Fail(record.failed(err))))
}

/// A retry when the rules decide one; `None` (logged) when the failure is the call's
/// answer.
fn retry_or<S: Clone>(
    failure: Failure,
    pushback: Pushback,
    record: &mut CallRecord,
    retry: Option<&mut Retries<S>>,
) -> Option<Verdict<S>> {
    let retry = retry?;
    match retry.after_failure(failure, pushback, record.deadline(), record.retry_budget()) {
        Ok(next) => Some(Verdict::Retry(next)),
        Err(stop) => {
            record.not_retried(retry.attempt(), stop.as_str());
            None
        }
    }
}
