//! What the end of one attempt of a call sent once or retried means for the call: its
//! answer, a retry the rules decided, or the call's failure (a timeout reported as
//! ours, the server's or the transport's, or an error from below the layer); and how
//! a status or a transport error reads to the retry rules, for retries and hedges
//! alike. A hedged call's attempts are judged in `hedge_verdict.rs`.

use http::HeaderValue;
use tokio::time::Instant;
use tonic::Code;

use super::attempt::Ended;
use super::event::{CallEnd, Event, Run, Sink};
use super::retries::{Retries, Retry};
use crate::policy::deadline::{Phase, Received};
use crate::policy::retry::{Failure, Pushback};
use crate::wire::details::DetectedBy;
use crate::wire::error::BoxError;
use crate::wire::status::{causes, code_of_reset, status_number, AnswerHead};
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

/// The verdict on an attempt that ended; `until` is when the attempt's own timeout
/// ends it (read against the clock only where an ending's meaning depends on it: a
/// call answered by its first attempt reads no clock here).
#[inline(always)]
pub(crate) fn judge<B, S: Clone, R: Sink>(
    ended: Ended<http::Response<B>>,
    until: Option<Instant>,
    call: &mut Run<'_, R>,
    retry: Option<&mut Retries<S>>,
) -> Judged<B, S> {
    match ended {
        Ended::Answered(response) => answered(response, until, call, retry),
        Ended::Failed(err) => failed(err, passed(until), call, retry),
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
    call.end(CallEnd::TimedOut {
        phase,
        detected_by,
        seen: Received::default(),
    })
}

/// A trailers-only answer saying the server's deadline (the call's own) fired: the
/// call's timeout, as the server detected it.
pub(crate) fn server_timed_out<R: Sink>(
    head: AnswerHead<'_>,
    call: &mut Run<'_, R>,
) -> Option<BoxError> {
    if !is_server_timeout(head, || call.first_due().map(|due| due.at)) {
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
#[inline(always)]
fn answered<B, S: Clone, R: Sink>(
    mut response: http::Response<B>,
    until: Option<Instant>,
    call: &mut Run<'_, R>,
    retry: Option<&mut Retries<S>>,
) -> Judged<B, S> {
    let head = AnswerHead::of(response.headers());
    if let Some(err) = server_timed_out(head, call) {
        return Err(Verdict::Fail(err));
    }
    let Some(retry) = retry else {
        return Ok(response);
    };
    match classify_response(head, || passed(until)) {
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

// What an attempt's end means to the retry rules (`policy/retry.rs`, which knows no
// tonic and numbers status codes as the wire does): a trailers-only gRPC error, a
// transport error that provably never reached the server, or one that may have.
/// gRPC's server pushback header.
const RETRY_PUSHBACK: http::HeaderName = http::HeaderName::from_static("grpc-retry-pushback-ms");

/// Whether an attempt's own timeout, ending it at `until`, has passed: an ending that
/// arrives now (the server's or tonic's timer on the same instant) is that timeout.
fn passed(until: Option<Instant>) -> bool {
    until.is_some_and(|until| Instant::now() >= until)
}

/// The failure a status code is, to the rules.
pub(crate) fn code_failure(code: Code) -> Failure {
    Failure::Code(code as i32)
}

/// A response head's retry meaning: `Some` for a trailers-only gRPC error. When the
/// attempt's own timeout has passed (`attempt_expired`), the server's
/// `DEADLINE_EXCEEDED` or `CANCELLED` is that timeout.
pub(crate) fn classify_response(
    head: AnswerHead<'_>,
    attempt_expired: impl Fn() -> bool,
) -> Option<(Failure, Pushback)> {
    // The number as sent: one outside gRPC's codes stays itself, not `UNKNOWN`.
    let number = head.status.and_then(status_number)?;
    let failure = match Code::from_i32(number) {
        Code::Ok => return None,
        Code::DeadlineExceeded | Code::Cancelled if attempt_expired() => Failure::AttemptTimeout,
        _ => Failure::Code(number),
    };
    let pushback = Pushback::parse(head.headers.get(RETRY_PUSHBACK).map(HeaderValue::as_bytes));
    Some((failure, pushback))
}

/// A transport error's retry meaning (gRPC A6 with gRPC's HTTP/2 mapping): the request
/// provably never reached the server (connection refused, or the stream reset with
/// `REFUSED_STREAM`); a stream reset with any other reason, which is the status gRPC
/// maps it to (`CANCEL` is `CANCELLED`, `ENHANCE_YOUR_CALM` `RESOURCE_EXHAUSTED`,
/// `INADEQUATE_SECURITY` `PERMISSION_DENIED`, `STREAM_CLOSED` and `HTTP_1_1_REQUIRED`
/// `UNKNOWN`, the rest `INTERNAL`), so that status's
/// rule applies; or an `UNAVAILABLE` that may have reached the server.
///
/// h2 says a stream was never processed only with `REFUSED_STREAM` (RFC 9113 §8.7).
/// A request that raced onto a connection the peer was closing with `GOAWAY` comes
/// back from hyper as a canceled request or a connection error that does not say
/// whether its stream was past the `GOAWAY`'s last stream id, so it is treated as
/// possibly delivered: retried only when the RPC is idempotent.
pub(crate) fn classify_error(err: &BoxError) -> Failure {
    causes(&**err)
        .find_map(|e| {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                return (io.kind() == std::io::ErrorKind::ConnectionRefused)
                    .then_some(Failure::NotSent);
            }
            let h2 = e
                .downcast_ref::<h2::Error>()
                .filter(|h2| !h2.is_go_away())?;
            h2.reason().map(reset_failure)
        })
        .unwrap_or(code_failure(Code::Unavailable))
}

/// What a stream reset with `reason` is to the rules.
fn reset_failure(reason: h2::Reason) -> Failure {
    if reason == h2::Reason::REFUSED_STREAM {
        Failure::NotSent
    } else {
        code_failure(code_of_reset(reason))
    }
}

#[cfg(test)]
mod classify_tests {
    use super::*;

    #[test]
    fn responses() {
        struct Row {
            status: Option<&'static str>,
            pushback: Option<&'static str>,
            expired: bool,
            want: Option<(Failure, Pushback)>,
        }
        let unavailable = code_failure(Code::Unavailable);
        let rows = [
            Row {
                status: None,
                pushback: None,
                expired: false,
                want: None,
            },
            Row {
                status: Some("0"),
                pushback: None,
                expired: true,
                want: None,
            },
            Row {
                status: Some("14"),
                pushback: None,
                expired: false,
                want: Some((unavailable, Pushback::None)),
            },
            Row {
                status: Some("14"),
                pushback: Some("-1"),
                expired: false,
                want: Some((unavailable, Pushback::Stop)),
            },
            Row {
                status: Some("4"),
                pushback: None,
                expired: false,
                want: Some((code_failure(Code::DeadlineExceeded), Pushback::None)),
            },
            // The attempt's own timeout passed: the server's deadline was the attempt's.
            Row {
                status: Some("4"),
                pushback: None,
                expired: true,
                want: Some((Failure::AttemptTimeout, Pushback::None)),
            },
            Row {
                status: Some("1"),
                pushback: None,
                expired: true,
                want: Some((Failure::AttemptTimeout, Pushback::None)),
            },
            Row {
                status: Some("14"),
                pushback: None,
                expired: true,
                want: Some((unavailable, Pushback::None)),
            },
        ];
        for row in rows {
            let mut h = http::HeaderMap::new();
            if let Some(s) = row.status {
                h.insert("grpc-status", HeaderValue::from_static(s));
            }
            if let Some(p) = row.pushback {
                h.insert("grpc-retry-pushback-ms", HeaderValue::from_static(p));
            }
            assert_eq!(
                classify_response(AnswerHead::of(&h), || row.expired),
                row.want,
                "{:?}",
                row.status
            );
        }
    }

    #[test]
    fn errors() {
        let refused: BoxError =
            Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify_error(&refused), Failure::NotSent);
        let stream: BoxError = Box::new(h2::Error::from(h2::Reason::REFUSED_STREAM));
        assert_eq!(classify_error(&stream), Failure::NotSent);
        let reset: BoxError = Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(classify_error(&reset), code_failure(Code::Unavailable));
    }

    /// Every HTTP/2 reset reason: only `REFUSED_STREAM` says the request never
    /// reached the application; every other reason is the status gRPC's HTTP/2
    /// mapping gives it (the table the guide's `retries` chapter prints).
    #[test]
    fn reset_reasons() {
        use h2::Reason;
        let table = [
            (Reason::NO_ERROR, Some(Code::Internal)),
            (Reason::PROTOCOL_ERROR, Some(Code::Internal)),
            (Reason::INTERNAL_ERROR, Some(Code::Internal)),
            (Reason::FLOW_CONTROL_ERROR, Some(Code::Internal)),
            (Reason::SETTINGS_TIMEOUT, Some(Code::Internal)),
            (Reason::STREAM_CLOSED, Some(Code::Unknown)),
            (Reason::FRAME_SIZE_ERROR, Some(Code::Internal)),
            (Reason::REFUSED_STREAM, None),
            (Reason::CANCEL, Some(Code::Cancelled)),
            (Reason::COMPRESSION_ERROR, Some(Code::Internal)),
            (Reason::CONNECT_ERROR, Some(Code::Internal)),
            (Reason::ENHANCE_YOUR_CALM, Some(Code::ResourceExhausted)),
            (Reason::INADEQUATE_SECURITY, Some(Code::PermissionDenied)),
            (Reason::HTTP_1_1_REQUIRED, Some(Code::Unknown)),
        ];
        for (reason, code) in table {
            let want = code.map_or(Failure::NotSent, code_failure);
            let err: BoxError = Box::new(h2::Error::from(reason));
            assert_eq!(classify_error(&err), want, "{reason:?}");
        }
    }
}
