//! The state of one piece of long work, shared by its guard and the work: when it
//! last moved, how often, its last marker, and when it is told to wrap up. A report
//! ([`super::progress()`]) is two relaxed atomic stores and a clock read: cheap enough
//! for a tight loop, and no lock.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

/// No marker reported yet.
const NO_MARKER: u64 = u64::MAX;

/// The progress of one piece of long work, shared by the guard and the work.
#[derive(Debug)]
pub(crate) struct WorkState {
    /// When the guard started the work.
    start: Instant,
    /// Time from the start to the last report, in ns.
    last_ns: AtomicU64,
    /// Reports so far.
    count: AtomicU64,
    /// The last marker reported ([`NO_MARKER`]: none).
    marker: AtomicU64,
    /// When the work is told to wrap up, in ns from the start (`u64::MAX`: never).
    notice_ns: AtomicU64,
}

impl WorkState {
    pub(crate) fn new(start: Instant) -> Self {
        WorkState {
            start,
            last_ns: AtomicU64::new(0),
            count: AtomicU64::new(0),
            marker: AtomicU64::new(NO_MARKER),
            notice_ns: AtomicU64::new(u64::MAX),
        }
    }

    /// The work is told to wrap up `after` its start.
    pub(crate) fn set_notice(&self, after: std::time::Duration) {
        let ns = u64::try_from(after.as_nanos()).unwrap_or(u64::MAX);
        self.notice_ns.store(ns, Ordering::Relaxed);
    }

    /// When the work is told to wrap up, if it is.
    pub(crate) fn notice(&self) -> Option<Instant> {
        match self.notice_ns.load(Ordering::Relaxed) {
            u64::MAX => None,
            ns => self.start.checked_add(std::time::Duration::from_nanos(ns)),
        }
    }

    /// Whether the work has been told to wrap up (one atomic load and a clock read).
    pub(crate) fn wrapping_up(&self) -> bool {
        self.notice().is_some_and(|at| Instant::now() >= at)
    }

    /// One report, now.
    pub(crate) fn report(&self, marker: Option<u64>) {
        let ns = Instant::now()
            .saturating_duration_since(self.start)
            .as_nanos();
        self.last_ns
            .store(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = marker.filter(|m| *m != NO_MARKER) {
            self.marker.store(m, Ordering::Relaxed);
        }
    }

    /// When the work last moved: the last report, or the start.
    pub(crate) fn last(&self) -> Instant {
        self.start + std::time::Duration::from_nanos(self.last_ns.load(Ordering::Relaxed))
    }

    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub(crate) fn marker(&self) -> Option<u64> {
        Some(self.marker.load(Ordering::Relaxed)).filter(|m| *m != NO_MARKER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn reports_move_the_last_instant_and_keep_the_marker() {
        let start = Instant::now();
        let w = WorkState::new(start);
        assert_eq!((w.last(), w.count(), w.marker()), (start, 0, None));
        tokio::time::advance(Duration::from_millis(250)).await;
        w.report(Some(4));
        tokio::time::advance(Duration::from_millis(100)).await;
        w.report(None);
        assert_eq!(w.last(), start + Duration::from_millis(350));
        assert_eq!((w.count(), w.marker()), (2, Some(4)));
    }
}
