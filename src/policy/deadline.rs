//! The one rule for every cap on a call's deadline — *the smallest cap wins, and the
//! details name it* — and the description of a call's timers that the response future
//! and the response body share.
//!
//! Times here are offsets from the call's start, so the rules stay pure: the tower
//! parts turn them into instants.

use std::time::Duration;

use super::progress::ProgressRule;
use super::source::Source;

/// One limit on a call: how long after the start, and who set it.
///
/// The limit is kept as whole nanoseconds (8 bytes instead of a `Duration`'s 16: caps
/// travel in every call's plan and record, and each copy costs), saturating at
/// `u64::MAX` ns, about 584 years.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cap {
    nanos: u64,
    pub(crate) source: Source,
}

impl Cap {
    pub(crate) fn new(limit: Duration, source: Source) -> Self {
        Cap {
            nanos: u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX),
            source,
        }
    }

    /// How long after the call's start.
    pub(crate) fn limit(&self) -> Duration {
        Duration::from_nanos(self.nanos)
    }

    /// Whether someone set this value (not SW4-002's standard table): a change made
    /// to it is said; a standard value is adjusted in silence.
    pub(crate) fn was_set(&self) -> bool {
        self.source != Source::Standard
    }
}

/// Lowers `best` to each of `caps` that is smaller, so that it ends as the smallest
/// cap that applies; on a tie the earlier one (the more specific level comes first)
/// keeps the name. With no further caps nothing is touched.
pub(crate) fn tighten(best: &mut Option<Cap>, caps: impl IntoIterator<Item = Cap>) {
    for cap in caps {
        if best.as_ref().is_none_or(|b| cap.nanos < b.nanos) {
            *best = Some(cap);
        }
    }
}

/// Which timer fired (SW4-002 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// No message arrived within `initial_timeout_ms`.
    Initial,
    /// No message arrived within `message_gap_timeout_ms` of the previous one.
    Gap,
    /// The whole call exceeded its deadline (unary calls, or a stream's total: the
    /// wall-clock cap of long work).
    Total,
    /// No *progress* within `idle_timeout_ms` (the idle limit of long work): since the
    /// last message that was progress, or since the start when none was.
    Idle,
    /// A retried call's attempt reached its attempt timeout and no further attempt
    /// fitted (SW4-002 §5.2).
    Attempt,
}

impl Phase {
    /// `initial`, `gap`, `total`, `idle` or `attempt`.
    ///
    /// ```
    /// use sw4rm_timeouts::Phase;
    /// assert_eq!(Phase::Idle.as_str(), "idle");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Initial => "initial",
            Phase::Gap => "gap",
            Phase::Total => "total",
            Phase::Idle => "idle",
            Phase::Attempt => "attempt",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Phase> {
        match s {
            "initial" => Some(Phase::Initial),
            "gap" => Some(Phase::Gap),
            "total" => Some(Phase::Total),
            "idle" => Some(Phase::Idle),
            "attempt" => Some(Phase::Attempt),
            _ => None,
        }
    }
}

/// The timers one call runs under. A unary call has only `total`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Timers {
    /// The whole call: the unary deadline, or a stream's total cap.
    pub(crate) total: Option<Cap>,
    /// A stream's watch timers, boxed: every call's record holds its timers, and only
    /// a stream that has one pays for their size.
    idle: Option<Box<Watch>>,
}

/// A stream's timers that watch what arrives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Watch {
    /// From the start until the first complete message.
    initial: Option<Cap>,
    /// Longest silence between complete messages.
    gap: Option<Cap>,
    /// Longest time without progress (the idle limit of long work).
    progress: Option<Cap>,
    /// Which messages are progress (`None`: every message).
    rule: Option<ProgressRule>,
}

/// What a call has received so far, for choosing its next timer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Received {
    /// Complete messages received.
    pub(crate) messages: u64,
    /// When the last complete message arrived (offset from the start).
    pub(crate) last_message: Option<Duration>,
    /// When the last message that was progress arrived (offset from the start).
    pub(crate) last_progress: Option<Duration>,
    /// Messages that were progress.
    pub(crate) progress: u64,
    /// The last progress marker, where the messages have one.
    pub(crate) marker: Option<u64>,
}

/// When a timer fires and why: `at` is an offset from the call's start where the pure
/// rules compute it (`Due<Duration>`), and an instant once a running call places it
/// on the clock (`Due<Instant>`, in the tower parts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Due<T = Duration> {
    pub(crate) at: T,
    pub(crate) phase: Phase,
}

impl<T> Due<T> {
    /// The same reason at another point in time (an offset placed on the clock).
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Due<U> {
        Due {
            at: f(self.at),
            phase: self.phase,
        }
    }
}

impl Timers {
    /// A unary call: one deadline (or none).
    pub(crate) fn unary(deadline: Option<Cap>) -> Self {
        Timers {
            total: deadline,
            idle: None,
        }
    }

    /// A stream's timers: `initial` from the start until the first complete message,
    /// `gap` the longest silence between complete messages, `total` the whole call.
    pub(crate) fn stream(initial: Option<Cap>, gap: Option<Cap>, total: Option<Cap>) -> Self {
        let idle = (initial.is_some() || gap.is_some()).then(|| {
            Box::new(Watch {
                initial,
                gap,
                ..Watch::default()
            })
        });
        Timers { total, idle }
    }

    /// The same timers with the idle limit of long work: the longest time without
    /// progress (from the start until the first progress).
    pub(crate) fn with_idle(mut self, limit: Option<Cap>) -> Self {
        if let Some(limit) = limit {
            self.idle.get_or_insert_with(Box::default).progress = Some(limit);
        }
        self
    }

    /// The same timers reading progress with `rule` (a stream only).
    pub(crate) fn with_progress_rule(mut self, rule: Option<ProgressRule>) -> Self {
        if let Some(rule) = rule {
            self.idle.get_or_insert_with(Box::default).rule = Some(rule);
        }
        self
    }

    /// Which messages are progress (`None`: every message).
    pub(crate) fn progress_rule(&self) -> Option<&ProgressRule> {
        self.idle.as_ref()?.rule.as_ref()
    }

    /// The stream's idle limit (progress).
    pub(crate) fn idle_limit(&self) -> Option<&Cap> {
        self.idle.as_ref()?.progress.as_ref()
    }

    /// The stream's idle limit, to lower it.
    pub(crate) fn idle_limit_mut(&mut self) -> Option<&mut Cap> {
        self.idle.as_mut()?.progress.as_mut()
    }

    /// How long the caller accepts a stream going quiet: the shorter of its gap timer
    /// and its idle limit (`None` for a unary call or a stream with neither). Sent to
    /// the server so that long work's progress messages come often enough.
    #[inline]
    pub(crate) fn quiet_limit(&self) -> Option<Duration> {
        let watch = self.idle.as_ref()?;
        [watch.gap.as_ref(), watch.progress.as_ref()]
            .into_iter()
            .flatten()
            .map(Cap::limit)
            .min()
    }

    /// The stream's initial timer.
    pub(crate) fn initial(&self) -> Option<&Cap> {
        self.idle.as_ref()?.initial.as_ref()
    }

    /// The stream's gap timer.
    pub(crate) fn gap(&self) -> Option<&Cap> {
        self.idle.as_ref()?.gap.as_ref()
    }

    /// The stream's gap timer, to lower it.
    pub(crate) fn gap_mut(&mut self) -> Option<&mut Cap> {
        self.idle.as_mut()?.gap.as_mut()
    }

    /// The timer that fires first given the progress so far: the total cap, the
    /// initial timer before the first message or the gap timer after it, and the idle
    /// limit from the last progress (or the start). On a tie the earlier in that list
    /// names the timeout.
    #[inline]
    pub(crate) fn next(&self, progress: Received) -> Option<Due> {
        let total = self.total.as_ref().map(|cap| Due {
            at: cap.limit(),
            phase: Phase::Total,
        });
        match self.idle {
            // A unary call, or a stream without watch timers: the total alone.
            None => total,
            Some(_) => self.next_watched(total, progress),
        }
    }

    /// The phase to report when the server says its deadline passed, after `messages`
    /// messages: the total when there is one (that is what went on the wire), else the
    /// timer that was running.
    pub(crate) fn server_phase(&self, messages: u64) -> Phase {
        match (&self.total, self.initial()) {
            (Some(_), _) => Phase::Total,
            (None, Some(_)) if messages == 0 => Phase::Initial,
            _ => Phase::Gap,
        }
    }

    /// [`Timers::next`] for a stream with watch timers.
    fn next_watched(&self, total: Option<Due>, progress: Received) -> Option<Due> {
        let watch = match (progress.messages, progress.last_message) {
            (0, _) => self.initial().map(|cap| Due {
                at: cap.limit(),
                phase: Phase::Initial,
            }),
            (_, last) => self.gap().map(|cap| Due {
                at: last.unwrap_or_default().saturating_add(cap.limit()),
                phase: Phase::Gap,
            }),
        };
        let idle = self.idle_limit().map(|cap| Due {
            at: progress
                .last_progress
                .unwrap_or_default()
                .saturating_add(cap.limit()),
            phase: Phase::Idle,
        });
        [total, watch, idle]
            .into_iter()
            .flatten()
            .reduce(|first, next| if next.at < first.at { next } else { first })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(ms: u64, source: Source) -> Option<Cap> {
        Some(Cap::new(Duration::from_millis(ms), source))
    }

    #[test]
    fn smallest_cap_wins_and_ties_keep_the_first() {
        struct Row {
            caps: Vec<Option<Cap>>,
            want: Option<Cap>,
        }
        let rows = [
            Row {
                caps: vec![],
                want: None,
            },
            Row {
                caps: vec![None, None],
                want: None,
            },
            Row {
                caps: vec![cap(500, Source::PerCall), None],
                want: cap(500, Source::PerCall),
            },
            Row {
                caps: vec![None, cap(500, Source::Client)],
                want: cap(500, Source::Client),
            },
            Row {
                caps: vec![cap(500, Source::PerCall), cap(300, Source::Client)],
                want: cap(300, Source::Client),
            },
            Row {
                caps: vec![cap(300, Source::PerCall), cap(300, Source::Client)],
                want: cap(300, Source::PerCall),
            },
        ];
        for row in rows {
            let caps = format!("{:?}", row.caps);
            let mut caps_in = row.caps.into_iter();
            let mut best = caps_in.next().flatten();
            tighten(&mut best, caps_in.flatten());
            assert_eq!(best, row.want, "{caps}");
        }
    }

    #[test]
    fn next_timer_table() {
        let t = Timers::stream(
            cap(1_000, Source::Standard),
            cap(300, Source::Client),
            cap(2_000, Source::PerCall),
        );
        struct Row {
            messages: u64,
            last_ms: Option<u64>,
            want: Option<(u64, Phase)>,
        }
        let rows = [
            Row {
                messages: 0,
                last_ms: None,
                want: Some((1_000, Phase::Initial)),
            },
            Row {
                messages: 1,
                last_ms: Some(500),
                want: Some((800, Phase::Gap)),
            },
            Row {
                messages: 4,
                last_ms: Some(1_800),
                want: Some((2_000, Phase::Total)),
            },
        ];
        for row in rows {
            let progress = Received {
                messages: row.messages,
                last_message: row.last_ms.map(Duration::from_millis),
                ..Received::default()
            };
            let got = t.next(progress).map(|d| (d.at.as_millis() as u64, d.phase));
            assert_eq!(got, row.want, "{progress:?}");
        }
        assert_eq!(Timers::default().next(Received::default()), None);
        let unary = Timers::unary(cap(5_000, Source::Standard));
        let due = unary.next(Received::default()).unwrap();
        assert_eq!((due.at, due.phase), (Duration::from_secs(5), Phase::Total));
        // Only a gap timer: it runs from the last message.
        let gap_only = Timers::stream(None, cap(100, Source::Client), None);
        let progress = Received {
            messages: 2,
            last_message: Some(Duration::from_millis(40)),
            ..Received::default()
        };
        assert_eq!(
            gap_only.next(progress).unwrap().at,
            Duration::from_millis(140)
        );
        assert_eq!(gap_only.next(Received::default()), None);
    }

    /// The idle limit of long work: keep-alive messages (messages that are not
    /// progress) move the gap timer but not the idle limit; progress moves it; the
    /// cap never moves; an idle limit and no progress at all runs from the start.
    #[test]
    fn idle_limit_table() {
        let ms = Duration::from_millis;
        let t = Timers::stream(None, cap(400, Source::Client), cap(10_000, Source::PerCall))
            .with_idle(cap(1_000, Source::Client));
        struct Row {
            name: &'static str,
            messages: u64,
            last_message: Option<u64>,
            last_progress: Option<u64>,
            want: (u64, Phase),
        }
        let rows = [
            Row {
                name: "nothing yet: the idle limit runs from the start",
                messages: 0,
                last_message: None,
                last_progress: None,
                want: (1_000, Phase::Idle),
            },
            Row {
                name: "keep-alives only: the gap timer moves, the idle limit does not",
                messages: 5,
                last_message: Some(900),
                last_progress: None,
                want: (1_000, Phase::Idle),
            },
            Row {
                name: "progress at 800 ms moves the idle limit to 1800 ms",
                messages: 5,
                last_message: Some(1_300),
                last_progress: Some(800),
                want: (1_700, Phase::Gap),
            },
            Row {
                name: "progress then keep-alives: idle from the progress",
                messages: 9,
                last_message: Some(2_700),
                last_progress: Some(2_000),
                want: (3_000, Phase::Idle),
            },
            Row {
                name: "progress late in the stream: the cap never moves",
                messages: 90,
                last_message: Some(9_700),
                last_progress: Some(9_700),
                want: (10_000, Phase::Total),
            },
        ];
        for row in rows {
            let progress = Received {
                messages: row.messages,
                last_message: row.last_message.map(ms),
                last_progress: row.last_progress.map(ms),
                ..Received::default()
            };
            let got = t.next(progress).map(|d| (d.at.as_millis() as u64, d.phase));
            assert_eq!(got, Some(row.want), "{}", row.name);
        }
        assert_eq!(t.idle_limit().map(Cap::limit), Some(ms(1_000)));
        // An idle limit alone makes a stream's watch; none leaves a unary call bare.
        assert!(Timers::unary(None).with_idle(None).idle_limit().is_none());
        let only = Timers::unary(None).with_idle(cap(50, Source::PerCall));
        let due = only.next(Received::default()).unwrap();
        assert_eq!((due.at, due.phase), (ms(50), Phase::Idle));
    }
}
