//! Per-call overrides, carried as request extensions.
//!
//! `tonic::Request::set_timeout` works too (the layer reads the `grpc-timeout` it
//! wrote); these types add what that API cannot say: "no deadline" (0, where the
//! profile allows it) and a per-call streaming policy. An extension wins over a
//! `grpc-timeout` header on the same request.

use std::time::Duration;

use http::HeaderMap;
use tonic::Status;

use crate::policy::hedge::HedgingPolicy;
use crate::policy::progress::ProgressRule;
use crate::policy::retry::RetryPolicy;
use crate::policy::streaming::StreamingTimeoutPolicy;
use crate::wire::grpc_timeout::{self, GRPC_TIMEOUT};

pub use crate::policy::call_timeout::CallTimeout;

impl CallTimeout {
    /// Attaches this override to a request.
    pub fn apply<T>(self, request: &mut tonic::Request<T>) {
        request.extensions_mut().insert(self);
    }
}

/// A per-call streaming policy for a server-streaming RPC. Non-zero fields replace
/// the profile's; zero fields keep it. Attaching it also makes the layer treat the
/// call as streaming, whatever its route says.
///
/// ```
/// use sw4rm_timeouts::{CallStreamingPolicy, StreamingTimeoutPolicy};
/// let mut req = tonic::Request::new(());
/// CallStreamingPolicy(StreamingTimeoutPolicy { message_gap_timeout_ms: 500, ..Default::default() }).apply(&mut req);
/// assert!(req.extensions().get::<CallStreamingPolicy>().is_some());
/// ```
///
/// The same with `Duration`s (values beyond `u32::MAX` ms saturate). The total is the
/// call's timeout and is clamped into the profile's bounds like any per-call value
/// (SW4-002 §2.2); the initial and gap timers are idle limits and are not:
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::CallStreamingPolicy;
/// let p = CallStreamingPolicy::default()
///     .with_message_gap(Duration::from_millis(500))
///     .with_total(Duration::from_secs(600));
/// assert_eq!((p.0.message_gap_timeout_ms, p.0.total_timeout_ms), (500, 600_000));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallStreamingPolicy(pub StreamingTimeoutPolicy);

fn saturating_ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

impl CallStreamingPolicy {
    /// Time to the first complete message (zero: the profile's).
    pub fn with_initial(mut self, d: Duration) -> Self {
        self.0.initial_timeout_ms = saturating_ms(d);
        self
    }

    /// Longest silence between complete messages (zero: the profile's).
    pub fn with_message_gap(mut self, d: Duration) -> Self {
        self.0.message_gap_timeout_ms = saturating_ms(d);
        self
    }

    /// Longest time without progress, the idle limit of long work (zero: the
    /// profile's). Above the total it is clamped to it, with a warning.
    pub fn with_idle(mut self, d: Duration) -> Self {
        self.0.idle_timeout_ms = saturating_ms(d);
        self
    }

    /// Cap on the whole stream, sent as `grpc-timeout` (zero: the profile's).
    pub fn with_total(mut self, d: Duration) -> Self {
        self.0.total_timeout_ms = saturating_ms(d);
        self
    }

    /// Attaches this policy to a request.
    pub fn apply<T>(self, request: &mut tonic::Request<T>) {
        request.extensions_mut().insert(self);
    }
}

/// Which messages of this call's stream are progress, replacing the route's rule
/// (see [`crate::ProgressRule`]).
///
/// ```
/// use sw4rm_timeouts::{CallProgress, CallStreamingPolicy, ProgressRule};
/// use sw4rm_timeouts::proto::sw4rm::tool::{ToolCall, ToolFrame};
/// use std::time::Duration;
/// let mut req = tonic::Request::new(ToolCall::default());
/// CallStreamingPolicy::default()
///     .with_idle(Duration::from_secs(10))
///     .with_total(Duration::from_secs(600))
///     .apply(&mut req);
/// CallProgress(ProgressRule::of::<ToolFrame>()).apply(&mut req);
/// assert!(req.extensions().get::<CallProgress>().is_some());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallProgress(pub ProgressRule);

impl CallProgress {
    /// Attaches this rule to a request.
    pub fn apply<T>(self, request: &mut tonic::Request<T>) {
        request.extensions_mut().insert(self);
    }
}

/// Per-call retry settings (SW4-002 §5.2): a policy replacing the profile's, and
/// whether this call may be sent more than once whatever its route says.
///
/// ```
/// use sw4rm_timeouts::{CallRetry, RetryPolicy};
/// let mut req = tonic::Request::new(());
/// // This SubmitTask carries an idempotency key: safe to send again.
/// CallRetry::idempotent().apply(&mut req);
/// assert_eq!(req.extensions().get::<CallRetry>(), Some(&CallRetry::idempotent()));
/// let once = CallRetry::policy(RetryPolicy::off());
/// assert_eq!(once.retry_policy(), Some(RetryPolicy::off()));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallRetry {
    policy: Option<RetryPolicy>,
    idempotent: Option<bool>,
}

impl CallRetry {
    /// Send this call once.
    pub fn off() -> Self {
        CallRetry::policy(RetryPolicy::off())
    }

    /// Retry this call with its profile's policy after any retryable failure, even
    /// if the route is not marked idempotent.
    pub fn idempotent() -> Self {
        CallRetry {
            policy: None,
            idempotent: Some(true),
        }
    }

    /// Retry this call with this policy instead of the profile's.
    pub fn policy(policy: RetryPolicy) -> Self {
        CallRetry {
            policy: Some(policy),
            idempotent: None,
        }
    }

    /// Says whether this call may be sent more than once.
    pub fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = Some(idempotent);
        self
    }

    /// The policy this call replaces the profile's with, if any.
    pub fn retry_policy(&self) -> Option<RetryPolicy> {
        self.policy
    }

    /// Whether this call overrides its route's idempotency, and how.
    pub fn is_idempotent(&self) -> Option<bool> {
        self.idempotent
    }

    /// Attaches these settings to a request.
    pub fn apply<T>(self, request: &mut tonic::Request<T>) {
        request.extensions_mut().insert(self);
    }
}

/// Per-call hedging: a policy replacing the profile's. Only a call that may be sent
/// twice (its route is idempotent, or [`CallRetry::idempotent`] says so) and that
/// streams in neither direction is hedged.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::{CallHedging, HedgingPolicy};
/// let mut req = tonic::Request::new(());
/// let policy = HedgingPolicy::builder().delay(Duration::from_millis(20)).build()?;
/// CallHedging::policy(policy).apply(&mut req);
/// assert_eq!(req.extensions().get::<CallHedging>().unwrap().hedging_policy(), policy);
/// CallHedging::off().apply(&mut req); // this call is sent once, hedging or not
/// assert!(!req.extensions().get::<CallHedging>().unwrap().hedging_policy().is_on());
/// # Ok::<(), sw4rm_timeouts::HedgingPolicyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallHedging {
    policy: HedgingPolicy,
}

impl CallHedging {
    /// Do not hedge this call.
    pub fn off() -> Self {
        CallHedging::policy(HedgingPolicy::off())
    }

    /// Hedge this call with this policy instead of the profile's.
    pub fn policy(policy: HedgingPolicy) -> Self {
        CallHedging { policy }
    }

    /// The policy this call replaces the profile's with.
    pub fn hedging_policy(&self) -> HedgingPolicy {
        self.policy
    }

    /// Attaches these settings to a request.
    pub fn apply<T>(self, request: &mut tonic::Request<T>) {
        request.extensions_mut().insert(self);
    }
}

/// The per-call overrides a request may carry, read from its extensions. A request
/// whose extensions hold none of them (nothing, tonic's `GrpcMethod` that a generated
/// client sets, or values of the caller's own) carries none: every question about it
/// is answered without a lookup, where each lookup of an extension hashes its type and
/// probes a table, and the call can be planned by its route alone.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallOptions<'a> {
    /// The extensions, when they carry an override.
    overrides: Option<&'a http::Extensions>,
    /// The method tonic's generated client named, when it is the request's one
    /// extension (as a generated call's is): kept for replay without looking it up again.
    method_alone: Option<&'a tonic::GrpcMethod<'static>>,
}

/// A type the layer reads from a request's extensions as a per-call override. Only
/// `overrides!` implements it, so a type read with [`CallOptions::get`] is one that
/// [`CallOptions::of`] looks for.
pub(crate) trait Override: Clone + Send + Sync + 'static {}

/// Every per-call override type, listed once: each is an [`Override`], and
/// `carries_one` says whether extensions hold any of them.
macro_rules! overrides {
    ($($t:ty),+ $(,)?) => {
        $(impl Override for $t {})+

        /// Whether `extensions` hold one of the per-call overrides.
        fn carries_one(extensions: &http::Extensions) -> bool {
            $(extensions.get::<$t>().is_some())||+
        }
    };
}

overrides!(
    CallTimeout,
    CallStreamingPolicy,
    CallProgress,
    CallRetry,
    CallHedging,
    super::refuse::RefuseSending,
);

impl<'a> CallOptions<'a> {
    /// The overrides in `extensions`.
    #[inline]
    pub(crate) fn of(extensions: &'a http::Extensions) -> Self {
        let (none, method_alone) = match extensions.len() {
            0 => (true, None),
            1 => match extensions.get::<tonic::GrpcMethod<'static>>() {
                Some(method) => (true, Some(method)),
                None => (!carries_one(extensions), None),
            },
            _ => (!carries_one(extensions), None),
        };
        CallOptions {
            overrides: (!none).then_some(extensions),
            method_alone,
        }
    }

    /// No overrides at all.
    pub(crate) const NONE: CallOptions<'static> = CallOptions {
        overrides: None,
        method_alone: None,
    };

    /// Whether the request carries no override.
    #[inline]
    pub(crate) fn is_none(self) -> bool {
        self.overrides.is_none()
    }

    /// The override of type `T`, when the request carries one.
    #[inline]
    pub(crate) fn get<T: Override>(self) -> Option<&'a T> {
        self.overrides.and_then(http::Extensions::get::<T>)
    }

    /// tonic's `GrpcMethod`, when it is the request's one extension.
    #[inline]
    pub(crate) fn method_alone(self) -> Option<&'a tonic::GrpcMethod<'static>> {
        self.method_alone
    }
}

/// What the caller asked of one call before any profile is applied: the per-call
/// value (the typed extension first, then the `grpc-timeout` header), and the
/// header's value when it says the deadline (so that it is kept as written).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Asked {
    pub(crate) per_call: Option<Duration>,
    pub(crate) from_header: Option<Duration>,
}

/// Reads what the caller asked of the call from its per-call `options` and `headers`. A
/// malformed `grpc-timeout` is an `INVALID_ARGUMENT` (read before the call is planned,
/// so that planning cannot fail).
#[inline]
pub(crate) fn asked(options: CallOptions<'_>, headers: &HeaderMap) -> Result<Asked, Status> {
    let (per_call, from_header) = per_call_value(options, headers)?;
    Ok(Asked {
        per_call,
        from_header,
    })
}

/// The per-call value: the typed extension first, then the `grpc-timeout` header;
/// and the header's value when it says the deadline (so that it is kept as written).
#[inline]
fn per_call_value(
    options: CallOptions<'_>,
    headers: &HeaderMap,
) -> Result<(Option<Duration>, Option<Duration>), Status> {
    if let Some(t) = options.get::<CallTimeout>() {
        return Ok((Some(requested(*t)), None));
    }
    match caller_grpc_timeout(headers) {
        Some(v) => {
            let d = grpc_timeout::parse(v.as_bytes())
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            let d = not_infinite(d);
            Ok((Some(d), Some(d)))
        }
        None => Ok((None, None)),
    }
}

/// A per-call request in the resolver's terms, where `Duration::ZERO` is SW4-002's
/// "infinite": only [`CallTimeout::Infinite`] says that.
fn requested(t: CallTimeout) -> Duration {
    match t {
        CallTimeout::Infinite => Duration::ZERO,
        CallTimeout::After(d) => not_infinite(d),
    }
}

/// A per-call duration of zero (`set_timeout(ZERO)`, a "time left" that reached
/// zero) is below every minimum, never "infinite": the smallest duration, which the
/// override rules raise to the profile's minimum with their warning.
fn not_infinite(d: Duration) -> Duration {
    d.max(Duration::from_nanos(1))
}

/// The `grpc-timeout` the caller wrote, if any (its names compared, nothing hashed,
/// when it wrote none).
#[inline]
fn caller_grpc_timeout(headers: &HeaderMap) -> Option<&http::HeaderValue> {
    crate::wire::headers::find(headers, &GRPC_TIMEOUT)
}

#[cfg(test)]
mod options_tests {
    use super::*;

    /// Every override is found whatever else the request carries, and a request with
    /// none (nothing, a generated client's `GrpcMethod`, values of the caller's own)
    /// carries none.
    #[test]
    fn overrides_are_found_beside_anything_else() {
        type Add = fn(&mut http::Extensions);
        let rows: [(&str, Add); 4] = [
            ("nothing", |_| {}),
            ("a generated client's method", |e| {
                e.insert(tonic::GrpcMethod::new("s", "m"));
            }),
            ("something of the caller's", |e| {
                e.insert(7u8);
            }),
            ("the method and something else", |e| {
                e.insert(tonic::GrpcMethod::new("s", "m"));
                e.insert(7u8);
            }),
        ];
        for (name, add) in rows {
            let mut extensions = http::Extensions::new();
            add(&mut extensions);
            let none = CallOptions::of(&extensions);
            assert!(none.is_none(), "{name}: no override");
            assert!(none.get::<CallTimeout>().is_none(), "{name}");
            extensions.insert(CallTimeout::Infinite);
            let got = CallOptions::of(&extensions).get::<CallTimeout>().copied();
            assert_eq!(got, Some(CallTimeout::Infinite), "{name}");
        }
    }

    /// The method is handed on (to keep the request for replay without looking it up
    /// again) exactly when it is the request's one extension, and a request kept with
    /// it comes back as one kept without: the same extensions, the same method.
    #[test]
    fn the_method_is_handed_on_only_when_it_is_alone() {
        use crate::attempts::{ReplayRequest, ToKeep};
        type Add = fn(&mut http::Extensions);
        let rows: [(&str, Add, bool); 5] = [
            ("nothing", |_| {}, false),
            (
                "a generated client's method",
                |e| {
                    e.insert(tonic::GrpcMethod::new("s", "m"));
                },
                true,
            ),
            (
                "something of the caller's",
                |e| {
                    e.insert(7u8);
                },
                false,
            ),
            (
                "the method and something else",
                |e| {
                    e.insert(tonic::GrpcMethod::new("s", "m"));
                    e.insert(7u8);
                },
                false,
            ),
            (
                "the method and a timeout",
                |e| {
                    e.insert(tonic::GrpcMethod::new("s", "m"));
                    e.insert(CallTimeout::Infinite);
                },
                false,
            ),
        ];
        let names = |e: &http::Extensions| {
            e.get::<tonic::GrpcMethod<'static>>()
                .map(|m| (m.service().to_owned(), m.method().to_owned()))
        };
        for (name, add, alone) in rows {
            let mut request = http::Request::new(tonic::body::Body::empty());
            add(request.extensions_mut());
            let hint = CallOptions::of(request.extensions()).method_alone();
            assert_eq!(hint.is_some(), alone, "{name}");
            let bytes = bytes::Bytes::from_static(b"\0\0\0\0\0");
            let hinted = ToKeep {
                request: &request,
                method_alone: hint,
            };
            let with = ReplayRequest::new(hinted, &bytes).request(2);
            let without = ReplayRequest::new(ToKeep::new(&request), &bytes).request(2);
            let (with, without) = (with.extensions(), without.extensions());
            assert_eq!(with.len(), request.extensions().len(), "{name}");
            assert_eq!(with.len(), without.len(), "{name}");
            assert_eq!(names(with), names(request.extensions()), "{name}");
            assert_eq!(with.get::<u8>(), without.get::<u8>(), "{name}");
            assert_eq!(
                with.get::<CallTimeout>(),
                without.get::<CallTimeout>(),
                "{name}"
            );
        }
    }

    /// Each kind of override alone, or beside a generated client's method and a value
    /// of the caller's, makes the request carry an override (so it is planned with
    /// it, never by its route alone).
    #[test]
    fn every_kind_of_override_is_seen() {
        use crate::policy::progress::Heard;
        use crate::proto::sw4rm::tool::ToolFrame;
        type Add = fn(&mut http::Extensions);
        let rows: [(&str, Add); 6] = [
            ("timeout", |e| {
                e.insert(CallTimeout::Infinite);
            }),
            ("streaming policy", |e| {
                e.insert(CallStreamingPolicy(StreamingTimeoutPolicy::default()));
            }),
            ("progress rule", |e| {
                let rule = ProgressRule::decoded(|_: &ToolFrame| Heard::progress(None));
                e.insert(CallProgress(rule));
            }),
            ("retry", |e| {
                e.insert(CallRetry::off());
            }),
            ("hedging", |e| {
                e.insert(CallHedging::off());
            }),
            ("refusal", |e| {
                e.insert(super::super::refuse::RefuseSending::Spent);
            }),
        ];
        for (name, add) in rows {
            let mut alone = http::Extensions::new();
            add(&mut alone);
            assert!(!CallOptions::of(&alone).is_none(), "{name} alone");
            let mut beside = http::Extensions::new();
            beside.insert(tonic::GrpcMethod::new("s", "m"));
            beside.insert(7u8);
            add(&mut beside);
            assert!(!CallOptions::of(&beside).is_none(), "{name} beside others");
        }
    }

    #[test]
    fn the_callers_grpc_timeout_is_found_however_many_headers_come_with_it() {
        fn head(others: usize, timeouts: &[&'static str]) -> HeaderMap {
            let mut h = HeaderMap::new();
            h.insert(
                "content-type",
                http::HeaderValue::from_static("application/grpc"),
            );
            for t in timeouts {
                h.append(GRPC_TIMEOUT, http::HeaderValue::from_static(t));
            }
            for i in 0..others {
                let name = http::HeaderName::try_from(format!("x-meta-{i}")).unwrap();
                h.insert(name, http::HeaderValue::from_static("v"));
            }
            h
        }
        let table: [(usize, &[&'static str], Option<&str>); 6] = [
            (0, &[], None),
            (20, &[], None),
            (0, &["5S"], Some("5S")),
            (20, &["5S"], Some("5S")),
            (0, &["5S", "7S"], Some("5S")),
            (20, &["5S", "7S"], Some("5S")),
        ];
        for (others, timeouts, want) in table {
            let h = head(others, timeouts);
            let got = caller_grpc_timeout(&h).map(|v| v.to_str().unwrap());
            assert_eq!(got, want, "{others} other headers, {timeouts:?}");
            assert_eq!(got, h.get(GRPC_TIMEOUT).map(|v| v.to_str().unwrap()));
        }
    }
}
