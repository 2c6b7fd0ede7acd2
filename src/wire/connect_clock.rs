//! How long a call waited for a connection (gRFC A121's "connecting" delay): the
//! connector under a `Sw4rm` marks when the channel went without a connection and when
//! one came up (TCP up: tonic's TLS and HTTP/2 set-up follow it), and a call's wait is
//! the part of its own time the channel spent without one.
//!
//! Written by the connector (two atomic stores per connect), read once when a call
//! ends where a metric family or a timeout asks; nothing on a call's way out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// The channel's connection, as times since the clock began (ns, + 1: 0 is "never").
#[derive(Debug)]
struct Marks {
    base: Instant,
    /// When the channel went without a connection, while it is without one (0: it
    /// has one, or never tried).
    down_since: AtomicU64,
    /// When the last time without a connection began (kept once it is over).
    went_down: AtomicU64,
    /// When a connection last came up.
    up_at: AtomicU64,
}

/// The clock a channel's connector marks and its calls read.
#[derive(Clone, Debug)]
pub(crate) struct ConnectClock(Arc<Marks>);

impl Default for ConnectClock {
    fn default() -> Self {
        ConnectClock(Arc::new(Marks {
            base: Instant::now(),
            down_since: AtomicU64::new(0),
            went_down: AtomicU64::new(0),
            up_at: AtomicU64::new(0),
        }))
    }
}

impl ConnectClock {
    fn at(&self, t: Instant) -> u64 {
        let ns = t.saturating_duration_since(self.0.base).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX - 1) + 1
    }

    /// A connect began: the channel is without a connection from now, unless it
    /// already was (a failed connect tried again keeps the first start).
    pub(crate) fn connecting(&self) {
        let now = self.at(Instant::now());
        let m = &self.0;
        if m.down_since
            .compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            m.went_down.store(now, Ordering::Release);
        }
    }

    /// A connection came up.
    pub(crate) fn connected(&self) {
        let m = &self.0;
        m.up_at.store(self.at(Instant::now()), Ordering::Release);
        m.down_since.store(0, Ordering::Release);
    }

    /// How much of a call's time from `start` to `end` the channel spent without a
    /// connection (`None` when none of it).
    pub(crate) fn waited(&self, start: Instant, end: Instant) -> Option<Duration> {
        let m = &self.0;
        let down = match m.down_since.load(Ordering::Acquire) {
            0 => Down::Was {
                from: m.went_down.load(Ordering::Acquire),
                until: m.up_at.load(Ordering::Acquire),
            },
            since => Down::Since(since),
        };
        let ns = waited_ns((self.at(start), self.at(end)), down);
        (ns > 0).then(|| Duration::from_nanos(ns))
    }
}

/// When the channel was without a connection (times as the clock writes them).
#[derive(Debug, Clone, Copy)]
enum Down {
    /// Since then, and still.
    Since(u64),
    /// The last time, from `from` until `until` (0: never).
    Was { from: u64, until: u64 },
}

/// The overlap of a call's `(start, end)` with the time without a connection.
fn waited_ns((start, end): (u64, u64), down: Down) -> u64 {
    let (from, until) = match down {
        Down::Since(since) => (since, end),
        Down::Was { from: 0, .. } | Down::Was { until: 0, .. } => return 0,
        Down::Was { from, until } => (from, until),
    };
    until.min(end).saturating_sub(from.max(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overlap_rule() {
        let table = [
            // Never without a connection.
            ((10, 20), Down::Was { from: 0, until: 0 }, 0),
            // Connected before the call began.
            ((10, 20), Down::Was { from: 2, until: 5 }, 0),
            // The call waited from its start until the connection came up.
            ((10, 20), Down::Was { from: 8, until: 14 }, 4),
            // A lazy channel's first call: the connect began just after it.
            (
                (10, 20),
                Down::Was {
                    from: 11,
                    until: 14,
                },
                3,
            ),
            // Still without one when the call ended: all of it from the start.
            ((10, 20), Down::Since(3), 10),
            ((10, 20), Down::Since(15), 5),
            // Went down after the call ended.
            ((10, 20), Down::Since(25), 0),
            // Came up after the call ended (it ended waiting).
            ((10, 20), Down::Was { from: 5, until: 40 }, 10),
        ];
        for (call, down, expected) in table {
            assert_eq!(waited_ns(call, down), expected, "{call:?} {down:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_marks_and_reads() {
        let clock = ConnectClock::default();
        let t0 = Instant::now();
        tokio::time::advance(Duration::from_millis(1)).await;
        clock.connecting();
        tokio::time::advance(Duration::from_millis(300)).await;
        // A failed connect tried again keeps the first start.
        clock.connecting();
        tokio::time::advance(Duration::from_millis(100)).await;
        let still = clock.waited(t0, Instant::now());
        assert_eq!(still, Some(Duration::from_millis(400)));
        clock.connected();
        let later = Instant::now() + Duration::from_secs(1);
        assert_eq!(clock.waited(t0, later), Some(Duration::from_millis(400)));
        // A call that began after the connection came up waited for nothing.
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(clock.waited(Instant::now(), later), None);
    }
}
