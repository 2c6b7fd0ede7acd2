//! What the end of one attempt means for the call: its answer, a retry the rules
//! decided, or the call's failure (a timeout reported as ours, the server's or the
//! transport's, or an error from below the layer).

use tokio::time::Instant;

use super::record::CallRecord;
use super::BoxError;
use crate::policy::deadline::{Phase, Progress};
use crate::policy::retry::{Failure, Pushback};
use crate::retry::{classify_error, classify_response, Ended, Resend, Retries, Retry};
use crate::wire::details::DetectedBy;
use crate::wire::status::{is_server_timeout, is_transport_timeout};

/// How the call ends.
#[derive(Debug)]
pub(crate) enum End<B> {
    /// The response headers: the call record moves into the body.
    Headers(http::Response<B>),
    /// The call failed with this error (its record has ended).
    Failed(BoxError),
    /// Nothing in flight: the future answers from what it holds.
    Over,
}

/// What the call loop does next, once an attempt, a backoff or a timer has ended.
#[derive(Debug)]
pub(crate) enum Verdict<B> {
    /// The call ends.
    End(End<B>),
    /// Wait the backoff, then send the next attempt.
    Retry(Retry),
    /// The backoff is over: send this attempt.
    Resend(Resend),
}

/// The verdict on an attempt that ended; `expired` says whether the attempt's own
/// timeout had passed when it did.
#[inline]
pub(crate) fn judge<B>(
    ended: Ended<http::Response<B>>,
    expired: bool,
    record: &mut CallRecord,
    retry: Option<&mut Retries>,
) -> Verdict<B> {
    match ended {
        Ended::Answered(response) => answered(response, expired, record, retry),
        Ended::Failed(err) => failed(err, expired, record, retry),
        Ended::TimedOut => retry_or(Failure::AttemptTimeout, Pushback::None, record, retry)
            .unwrap_or_else(|| {
                failed_with(
                    record
                        .timed_out(Phase::Attempt, 0, DetectedBy::Client)
                        .into(),
                )
            }),
    }
}

#[inline]
fn failed_with<B>(err: BoxError) -> Verdict<B> {
    Verdict::End(End::Failed(err))
}

/// The first timer's instant, asked for only where an ending needs it.
#[inline]
fn first_due(record: &CallRecord) -> Option<Instant> {
    record.next_due(Progress::default()).map(|due| due.at)
}

/// Response headers arrived: a trailers-only error may be retried; anything else is
/// the call's answer.
#[inline]
fn answered<B>(
    mut response: http::Response<B>,
    expired: bool,
    record: &mut CallRecord,
    retry: Option<&mut Retries>,
) -> Verdict<B> {
    if is_server_timeout(response.headers(), || first_due(record)) {
        // A trailers-only answer: the server's deadline (the call's own) fired.
        let phase = record.server_phase(0);
        return failed_with(record.timed_out(phase, 0, DetectedBy::Server).into());
    }
    let Some(retry) = retry else {
        return Verdict::End(End::Headers(response));
    };
    match classify_response(response.headers(), expired) {
        Some((failure, pushback)) => match retry.after_failure(failure, pushback) {
            Ok(next) => return Verdict::Retry(next),
            Err(stop) => record.not_retried(retry.attempt(), stop.as_str()),
        },
        None => retry.answered(),
    }
    retry.mark(&mut response);
    Verdict::End(End::Headers(response))
}

/// The inner service failed: tonic's own timer on the same deadline, a shorter
/// deadline below the layer, or a transport error the rules may retry.
fn failed<B>(
    err: BoxError,
    expired: bool,
    record: &mut CallRecord,
    retry: Option<&mut Retries>,
) -> Verdict<B> {
    // tonic's timer on the attempt's own deadline is the attempt's timeout.
    if is_transport_timeout(&*err) {
        if expired {
            return retry_or(Failure::AttemptTimeout, Pushback::None, record, retry)
                .unwrap_or_else(|| {
                    let status = record.timed_out(Phase::Attempt, 0, DetectedBy::Transport);
                    failed_with(status.into())
                });
        }
        let status = match record.next_due(Progress::default()) {
            // tonic's own timer on the same deadline won the race.
            Some(due) if Instant::now() >= due.at => {
                record.timed_out(due.phase, 0, DetectedBy::Transport)
            }
            // A shorter deadline below the layer fired first.
            _ => record.transport_capped(),
        };
        return failed_with(status.into());
    }
    let failure = classify_error(&err);
    retry_or(failure, Pushback::None, record, retry)
        .unwrap_or_else(|| failed_with(record.failed(err)))
}

/// A retry when the rules decide one; `None` (logged) when the failure is the call's
/// answer.
fn retry_or<B>(
    failure: Failure,
    pushback: Pushback,
    record: &mut CallRecord,
    retry: Option<&mut Retries>,
) -> Option<Verdict<B>> {
    let retry = retry?;
    match retry.after_failure(failure, pushback) {
        Ok(next) => Some(Verdict::Retry(next)),
        Err(stop) => {
            record.not_retried(retry.attempt(), stop.as_str());
            None
        }
    }
}
