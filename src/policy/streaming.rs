//! SW4-002 §4.1 streaming timeouts: the policy type and how a call's timers are
//! derived from it, each naming where its value came from.

use std::time::Duration;

use super::deadline::{Cap, Timers};
use super::profile::{ProfileField, ProfileRule, ProfileViolation};
use super::source::Source;

/// Timeouts of a server-streaming RPC (SW4-002 §4.1), in milliseconds.
///
/// * `initial_timeout_ms`: time from the call's start to the first complete message;
///   0 = the profile's effective timeout, except on a long-lived route (below).
/// * `message_gap_timeout_ms`: longest silence between two complete messages, reset by
///   every message (an idle timeout); 0 = the profile's effective timeout, except on a
///   long-lived route.
/// * `total_timeout_ms`: cap on the whole stream, never reset; 0 = unlimited. Only this
///   value is sent as `grpc-timeout`, so a healthy long stream is not cut by the server.
/// * `idle_timeout_ms`: the **idle limit** of long work: longest time without
///   *progress*, reset only by messages that are progress (every message, unless a
///   [`crate::ProgressRule`] says which are); keep-alive messages reset the gap timer
///   but not this one. 0 = off (it never falls back to the profile's timeout). Above a
///   non-zero total it is clamped to the total, with a warning (an idle limit above the
///   cap could never fire).
///
/// On a **long-lived** route (`RouterService/StreamIncoming`, an agent's inbox, and any
/// route configured `long_lived`), a stream that may stay idle for hours, 0 means **no
/// timer**: neither the initial nor the gap timer falls back to the profile's timeout,
/// so only what is set here or per call runs (`sw4rm-timeouts explain` marks these
/// routes `(long-lived stream)`).
///
/// ```
/// use sw4rm_timeouts::StreamingTimeoutPolicy;
/// let p = StreamingTimeoutPolicy { initial_timeout_ms: 2_000, message_gap_timeout_ms: 500, ..Default::default() };
/// assert!(p.violation().is_none());
/// let bad = StreamingTimeoutPolicy { message_gap_timeout_ms: 5_000, total_timeout_ms: 1_000, ..p };
/// assert_eq!(bad.violation().unwrap().value, 5_000);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamingTimeoutPolicy {
    /// Time to the first message (0 = profile timeout; none on a long-lived route).
    pub initial_timeout_ms: u32,
    /// Max gap between messages (0 = profile timeout; none on a long-lived route).
    pub message_gap_timeout_ms: u32,
    /// Total stream duration (0 = unlimited): the hard cap.
    pub total_timeout_ms: u32,
    /// Longest time without progress (0 = no idle limit).
    pub idle_timeout_ms: u32,
}

impl StreamingTimeoutPolicy {
    /// The broken invariant, if any: the gap must not exceed the total when both are set.
    pub fn violation(&self) -> Option<ProfileViolation> {
        (self.total_timeout_ms > 0 && self.message_gap_timeout_ms > self.total_timeout_ms).then(
            || ProfileViolation {
                field: ProfileField::StreamGap,
                value: u64::from(self.message_gap_timeout_ms),
                rule: ProfileRule::GapAboveTotal {
                    gap_ms: self.message_gap_timeout_ms,
                    total_ms: self.total_timeout_ms,
                },
            },
        )
    }

    /// The idle limit lowered to the total when both are set and the idle limit is
    /// larger (it could never fire): `Some(original idle)` when it was lowered.
    ///
    /// ```
    /// use sw4rm_timeouts::StreamingTimeoutPolicy;
    /// let mut p = StreamingTimeoutPolicy { idle_timeout_ms: 5_000, total_timeout_ms: 1_000, ..Default::default() };
    /// assert_eq!(p.clamp_idle(), Some(5_000));
    /// assert_eq!(p.idle_timeout_ms, 1_000);
    /// assert_eq!(p.clamp_idle(), None);
    /// ```
    pub fn clamp_idle(&mut self) -> Option<u32> {
        let (idle, total) = (self.idle_timeout_ms, self.total_timeout_ms);
        (total > 0 && idle > total).then(|| {
            self.idle_timeout_ms = total;
            idle
        })
    }
}

/// A profile's streaming policy with the source of each of its three fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SourcedPolicy<'a> {
    pub(crate) policy: StreamingTimeoutPolicy,
    /// Sources of the initial, gap, total and idle fields.
    pub(crate) sources: [&'a Source; 4],
}

/// The timers of a streaming call and what had to be lowered to the total.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StreamTimers {
    pub(crate) timers: Timers,
    /// The gap as asked, when it was lowered to the total (logged as a warning naming
    /// both values and their sources).
    pub(crate) gap_clamped: Option<Cap>,
    /// The idle limit as asked, when it was lowered to the total (logged as a
    /// warning naming both values and their sources).
    pub(crate) idle_clamped: Option<Cap>,
}

/// The timers of a streaming call. Non-zero fields of the per-call policy replace the
/// profile's; a zero initial or gap falls back to the call's `effective` deadline
/// (except on a `long_lived` route: none then), a zero total means unlimited, a zero
/// idle limit means none; the gap and the idle limit are clamped to the total.
pub(crate) fn stream_timers(
    effective: Option<&Cap>,
    profile: SourcedPolicy<'_>,
    per_call: Option<StreamingTimeoutPolicy>,
    long_lived: bool,
) -> StreamTimers {
    let effective = effective.filter(|_| !long_lived);
    let call = per_call.unwrap_or_default();
    let pick = |mine: u32, theirs: u32, source: &Source| -> Option<Cap> {
        match (mine, theirs) {
            (0, 0) => None,
            (0, v) => Some(Cap::new(ms(v), source.clone())),
            (v, _) => Some(Cap::new(ms(v), Source::PerCall)),
        }
    };
    let [initial_src, gap_src, total_src, idle_src] = profile.sources;
    let p = profile.policy;
    let initial = pick(call.initial_timeout_ms, p.initial_timeout_ms, initial_src)
        .or_else(|| effective.cloned());
    let mut gap = pick(
        call.message_gap_timeout_ms,
        p.message_gap_timeout_ms,
        gap_src,
    )
    .or_else(|| effective.cloned());
    let total = pick(call.total_timeout_ms, p.total_timeout_ms, total_src);
    let mut idle = pick(call.idle_timeout_ms, p.idle_timeout_ms, idle_src);
    let mut gap_clamped = None;
    if let (Some(g), Some(t)) = (&gap, &total) {
        if g.limit() > t.limit() {
            gap_clamped = g.was_set().then(|| g.clone());
            gap = Some(t.clone());
        }
    }
    let idle_clamped = lower_to(idle.as_mut(), total.as_ref());
    StreamTimers {
        timers: Timers::stream(initial, gap, total).with_idle(idle),
        gap_clamped,
        idle_clamped,
    }
}

/// Lowers `idle` to `total` when both are set and it is larger; the cap as it was
/// asked when it was lowered. The lowered cap keeps its own source: the value is the
/// total's, the setting the idle limit's.
pub(crate) fn lower_to(idle: Option<&mut Cap>, total: Option<&Cap>) -> Option<Cap> {
    let (Some(i), Some(t)) = (idle, total) else {
        return None;
    };
    (i.limit() > t.limit()).then(|| {
        let asked = i.clone();
        *i = Cap::new(t.limit(), i.source.clone());
        asked
    })
}

/// Whole milliseconds, saturating (for logs and details).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn ms(v: u32) -> Duration {
    Duration::from_millis(u64::from(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(v: u64, source: Source) -> Option<Cap> {
        Some(Cap::new(Duration::from_millis(v), source))
    }

    fn policy(i: u32, g: u32, t: u32) -> StreamingTimeoutPolicy {
        StreamingTimeoutPolicy {
            initial_timeout_ms: i,
            message_gap_timeout_ms: g,
            total_timeout_ms: t,
            idle_timeout_ms: 0,
        }
    }

    /// A long-lived route never falls back to the call's timeout for its idle timers:
    /// only what the profile's policy or the call sets runs.
    #[test]
    fn long_lived_streams_only_run_the_timers_set_for_them() {
        let file = Source::Env("SW4RM_X".into());
        let sources = [&file, &file, &file, &file];
        let effective = cap(10_000, Source::Standard);
        struct Row {
            profile: StreamingTimeoutPolicy,
            per_call: Option<StreamingTimeoutPolicy>,
            want: Timers,
        }
        let rows = [
            Row {
                profile: policy(0, 0, 0),
                per_call: None,
                want: Timers::default(),
            },
            Row {
                profile: policy(0, 30_000, 0),
                per_call: None,
                want: Timers::stream(None, cap(30_000, file.clone()), None),
            },
            Row {
                profile: policy(0, 0, 0),
                per_call: Some(policy(2_000, 0, 600_000)),
                want: Timers::stream(
                    cap(2_000, Source::PerCall),
                    None,
                    cap(600_000, Source::PerCall),
                ),
            },
        ];
        for row in rows {
            let got = stream_timers(
                effective.as_ref(),
                SourcedPolicy {
                    policy: row.profile,
                    sources,
                },
                row.per_call,
                true,
            );
            assert_eq!(got.timers, row.want, "{:?} {:?}", row.profile, row.per_call);
        }
    }

    #[test]
    fn streaming_timers_table() {
        let file = Source::Env("SW4RM_X".into());
        let sources = [&file, &file, &file, &file];
        struct Row {
            effective: Option<Cap>,
            profile: StreamingTimeoutPolicy,
            per_call: Option<StreamingTimeoutPolicy>,
            want: Timers,
            gap_clamped: Option<Cap>,
        }
        let eff = || cap(30_000, Source::Standard);
        let rows = [
            Row {
                effective: eff(),
                profile: policy(0, 0, 0),
                per_call: None,
                want: Timers::stream(eff(), eff(), None),
                gap_clamped: None,
            },
            Row {
                effective: None,
                profile: policy(0, 0, 0),
                per_call: None,
                want: Timers::default(),
                gap_clamped: None,
            },
            Row {
                effective: eff(),
                profile: policy(1_000, 200, 0),
                per_call: None,
                want: Timers::stream(cap(1_000, file.clone()), cap(200, file.clone()), None),
                gap_clamped: None,
            },
            // The gap falls back to the standard deadline: nobody set it, so lowering
            // it to the total is not said.
            Row {
                effective: eff(),
                profile: policy(0, 0, 10_000),
                per_call: None,
                want: Timers::stream(eff(), cap(10_000, file.clone()), cap(10_000, file.clone())),
                gap_clamped: None,
            },
            Row {
                effective: eff(),
                profile: policy(0, 500, 0),
                per_call: Some(policy(0, 0, 9_000)),
                want: Timers::stream(eff(), cap(500, file.clone()), cap(9_000, Source::PerCall)),
                gap_clamped: None,
            },
            Row {
                effective: eff(),
                profile: policy(0, 500, 1_000),
                per_call: Some(policy(0, 2_000, 0)),
                want: Timers::stream(eff(), cap(1_000, file.clone()), cap(1_000, file.clone())),
                gap_clamped: cap(2_000, Source::PerCall),
            },
            Row {
                effective: None,
                profile: policy(0, 0, 10_000),
                per_call: None,
                want: Timers::stream(None, None, cap(10_000, file.clone())),
                gap_clamped: None,
            },
        ];
        for row in rows {
            let got = stream_timers(
                row.effective.as_ref(),
                SourcedPolicy {
                    policy: row.profile,
                    sources,
                },
                row.per_call,
                false,
            );
            assert_eq!(
                got,
                StreamTimers {
                    timers: row.want,
                    gap_clamped: row.gap_clamped,
                    idle_clamped: None,
                },
                "{:?} {:?}",
                row.profile,
                row.per_call
            );
        }
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
