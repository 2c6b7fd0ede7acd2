//! SW4-002 §4.1 streaming timeouts: the policy type and how a call's three timers are
//! derived from it.

use std::time::Duration;

use crate::details::Phase;
use crate::proto::sw4rm::timeouts as pb;

/// Timeouts of a server-streaming RPC (SW4-002 §4.1), in milliseconds.
///
/// * `initial_timeout_ms`: time from the call's start to the first complete message;
///   0 = the profile's effective timeout.
/// * `message_gap_timeout_ms`: longest silence between two messages, reset by every
///   message (an idle timeout); 0 = the profile's effective timeout.
/// * `total_timeout_ms`: cap on the whole stream, never reset; 0 = unlimited. Only this
///   value is sent as `grpc-timeout`, so a healthy long stream is not cut by the server.
///
/// ```
/// use sw4rm_timeouts::StreamingTimeoutPolicy;
/// let p = StreamingTimeoutPolicy { initial_timeout_ms: 2_000, message_gap_timeout_ms: 500, total_timeout_ms: 0 };
/// assert!(p.violation().is_none());
/// let bad = StreamingTimeoutPolicy { message_gap_timeout_ms: 5_000, total_timeout_ms: 1_000, ..p };
/// assert!(bad.violation().is_some());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamingTimeoutPolicy {
    /// Time to the first message (0 = profile timeout).
    pub initial_timeout_ms: u32,
    /// Max gap between messages (0 = profile timeout).
    pub message_gap_timeout_ms: u32,
    /// Total stream duration (0 = unlimited).
    pub total_timeout_ms: u32,
}

impl StreamingTimeoutPolicy {
    /// The broken invariant, if any: the gap must not exceed the total when both are set.
    pub fn violation(&self) -> Option<String> {
        (self.total_timeout_ms > 0 && self.message_gap_timeout_ms > self.total_timeout_ms).then(
            || {
                format!(
                "message_gap_timeout_ms ({}) must be <= total_timeout_ms ({}) when both are set",
                self.message_gap_timeout_ms, self.total_timeout_ms
            )
            },
        )
    }
}

impl From<pb::StreamingTimeoutPolicy> for StreamingTimeoutPolicy {
    fn from(m: pb::StreamingTimeoutPolicy) -> Self {
        StreamingTimeoutPolicy {
            initial_timeout_ms: m.initial_timeout_ms,
            message_gap_timeout_ms: m.message_gap_timeout_ms,
            total_timeout_ms: m.total_timeout_ms,
        }
    }
}

impl From<StreamingTimeoutPolicy> for pb::StreamingTimeoutPolicy {
    fn from(p: StreamingTimeoutPolicy) -> Self {
        pb::StreamingTimeoutPolicy {
            initial_timeout_ms: p.initial_timeout_ms,
            message_gap_timeout_ms: p.message_gap_timeout_ms,
            total_timeout_ms: p.total_timeout_ms,
        }
    }
}

/// The timers one call runs under. A unary call has only `total`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timers {
    /// Until the first complete message (streams only).
    pub initial: Option<Duration>,
    /// Longest silence between messages (streams only).
    pub gap: Option<Duration>,
    /// The whole call; for unary calls the effective timeout.
    pub total: Option<Duration>,
    /// Set when `gap` was lowered to `total`.
    pub gap_clamped: bool,
}

impl Timers {
    /// A unary call: one deadline (or none).
    pub fn unary(effective: Option<Duration>) -> Self {
        Timers {
            total: effective,
            ..Timers::default()
        }
    }

    /// A streaming call: `policy` fields of 0 fall back to `effective` (initial, gap)
    /// or mean unlimited (total); the gap is clamped to the total.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::{StreamingTimeoutPolicy, Timers};
    /// let t = Timers::streaming(Some(Duration::from_secs(30)), StreamingTimeoutPolicy::default());
    /// assert_eq!((t.initial, t.gap, t.total), (Some(Duration::from_secs(30)), Some(Duration::from_secs(30)), None));
    /// ```
    pub fn streaming(effective: Option<Duration>, policy: StreamingTimeoutPolicy) -> Self {
        let or_effective = |ms: u32| {
            if ms == 0 {
                effective
            } else {
                Some(ms_to_duration(ms))
            }
        };
        let initial = or_effective(policy.initial_timeout_ms);
        let mut gap = or_effective(policy.message_gap_timeout_ms);
        let total = (policy.total_timeout_ms > 0).then(|| ms_to_duration(policy.total_timeout_ms));
        let mut gap_clamped = false;
        if let (Some(g), Some(t)) = (gap, total) {
            if g > t {
                gap = Some(t);
                gap_clamped = true;
            }
        }
        Timers {
            initial,
            gap,
            total,
            gap_clamped,
        }
    }
}

impl Timers {
    /// The timer that runs until the response headers arrive: the earlier of the
    /// initial and total timers.
    pub(crate) fn first(&self) -> Option<(Duration, Phase)> {
        match (self.initial, self.total) {
            (Some(i), Some(t)) if i < t => Some((i, Phase::Initial)),
            (_, Some(t)) => Some((t, Phase::Total)),
            (Some(i), None) => Some((i, Phase::Initial)),
            (None, None) => None,
        }
    }
}

/// Where a streaming timer's value came from (for the `source` of timeout details).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimerOrigin {
    /// The call's effective timeout (the policy field was 0).
    Effective,
    /// The profile's streaming field (index into the profile's sources).
    Field(usize),
    /// A per-call streaming policy.
    PerCall,
}

/// The timers of a streaming call: the per-call policy's non-zero fields over the
/// profile's policy, and where each of the three values came from.
pub(crate) fn stream_timers(
    effective: Option<Duration>,
    profile: StreamingTimeoutPolicy,
    per_call: Option<StreamingTimeoutPolicy>,
) -> (Timers, [TimerOrigin; 3]) {
    use crate::config::Field;
    let pick = |mine: u32, theirs: u32| if mine == 0 { theirs } else { mine };
    let call = per_call.unwrap_or_default();
    let policy = StreamingTimeoutPolicy {
        initial_timeout_ms: pick(call.initial_timeout_ms, profile.initial_timeout_ms),
        message_gap_timeout_ms: pick(call.message_gap_timeout_ms, profile.message_gap_timeout_ms),
        total_timeout_ms: pick(call.total_timeout_ms, profile.total_timeout_ms),
    };
    let origin = |mine: u32, theirs: u32, field: Field| match (mine, theirs) {
        (m, _) if m != 0 => TimerOrigin::PerCall,
        (_, 0) if field != Field::Total => TimerOrigin::Effective,
        _ => TimerOrigin::Field(field.index()),
    };
    let origins = [
        origin(
            call.initial_timeout_ms,
            profile.initial_timeout_ms,
            Field::Initial,
        ),
        origin(
            call.message_gap_timeout_ms,
            profile.message_gap_timeout_ms,
            Field::Gap,
        ),
        origin(
            call.total_timeout_ms,
            profile.total_timeout_ms,
            Field::Total,
        ),
    ];
    (Timers::streaming(effective, policy), origins)
}

/// Whole milliseconds, saturating (for logs and details).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn ms_to_duration(ms: u32) -> Duration {
    Duration::from_millis(u64::from(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Option<Duration> {
        Some(Duration::from_millis(v))
    }

    #[test]
    fn streaming_timers_table() {
        let p = |i, g, t| StreamingTimeoutPolicy {
            initial_timeout_ms: i,
            message_gap_timeout_ms: g,
            total_timeout_ms: t,
        };
        let table = [
            (
                ms(30_000),
                p(0, 0, 0),
                (ms(30_000), ms(30_000), None, false),
            ),
            (None, p(0, 0, 0), (None, None, None, false)),
            (
                ms(30_000),
                p(1_000, 200, 0),
                (ms(1_000), ms(200), None, false),
            ),
            (
                ms(30_000),
                p(1_000, 200, 10_000),
                (ms(1_000), ms(200), ms(10_000), false),
            ),
            (
                ms(30_000),
                p(0, 0, 10_000),
                (ms(30_000), ms(10_000), ms(10_000), true),
            ),
            (
                ms(30_000),
                p(0, 20_000, 10_000),
                (ms(30_000), ms(10_000), ms(10_000), true),
            ),
            (None, p(0, 0, 10_000), (None, None, ms(10_000), false)),
        ];
        for (eff, policy, (i, g, t, c)) in table {
            let got = Timers::streaming(eff, policy);
            assert_eq!(
                (got.initial, got.gap, got.total, got.gap_clamped),
                (i, g, t, c),
                "{eff:?} {policy:?}"
            );
        }
    }

    #[test]
    fn per_call_fields_override_and_name_their_origin() {
        let profile = StreamingTimeoutPolicy {
            initial_timeout_ms: 0,
            message_gap_timeout_ms: 500,
            total_timeout_ms: 0,
        };
        let call = StreamingTimeoutPolicy {
            initial_timeout_ms: 0,
            message_gap_timeout_ms: 0,
            total_timeout_ms: 9_000,
        };
        let (t, o) = stream_timers(ms(30_000), profile, Some(call));
        assert_eq!(
            (t.initial, t.gap, t.total),
            (ms(30_000), ms(500), ms(9_000))
        );
        assert_eq!(
            o,
            [
                TimerOrigin::Effective,
                TimerOrigin::Field(5),
                TimerOrigin::PerCall
            ]
        );
        let (_, o) = stream_timers(ms(30_000), StreamingTimeoutPolicy::default(), None);
        assert_eq!(
            o,
            [
                TimerOrigin::Effective,
                TimerOrigin::Effective,
                TimerOrigin::Field(6)
            ]
        );
        assert_eq!(t.first(), Some((Duration::from_secs(9), Phase::Total)));
        assert_eq!(Timers::unary(None).first(), None);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }

    #[test]
    fn policy_proto_round_trip() {
        let p = StreamingTimeoutPolicy {
            initial_timeout_ms: 1,
            message_gap_timeout_ms: 2,
            total_timeout_ms: 3,
        };
        assert_eq!(
            StreamingTimeoutPolicy::from(pb::StreamingTimeoutPolicy::from(p)),
            p
        );
    }
}
