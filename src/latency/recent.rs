//! [`RecentLatency`]: a route's latest answered calls, for a learned hedging delay.
//!
//! The advisor's histogram (`super::LatencyStats`) keeps every call since the layer
//! started; a hedging delay has to follow the route as it is now, so it reads a
//! window: the last [`HedgingPolicy::WINDOW`] latencies in a ring of atomics.
//! Recording is one atomic addition and one store (no lock, no allocation). The
//! percentile is computed from the window (a selection over at most 256 values, on the
//! stack) at most once per [`REFRESH`] recorded calls and kept until then.
//!
//! What a hedged route records is the time from the call's start to its winning
//! answer. Hedging shortens only calls slower than the delay, so the share of calls
//! below the delay, and so the percentile the delay is, stays what it would be
//! without hedging: the estimate does not chase its own effect.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::policy::hedge::HedgingPolicy;

const WINDOW: usize = HedgingPolicy::WINDOW;

/// The kept percentile is recomputed after this many new calls.
pub(crate) const REFRESH: u64 = 16;

/// The latest answered calls of one route, in whole microseconds.
#[derive(Debug)]
pub(crate) struct RecentLatency {
    slots: [AtomicU32; WINDOW],
    recorded: AtomicU64,
    /// `percentile << 32 | micros` of the last computed percentile; 0: none kept.
    kept: AtomicU64,
}

impl RecentLatency {
    pub(crate) fn new() -> Self {
        RecentLatency {
            slots: std::array::from_fn(|_| AtomicU32::new(0)),
            recorded: AtomicU64::new(0),
            kept: AtomicU64::new(0),
        }
    }

    /// Records one answered call's latency.
    #[inline]
    pub(crate) fn record(&self, latency: Duration) {
        let micros = u32::try_from(latency.as_micros()).unwrap_or(u32::MAX);
        let n = self.recorded.fetch_add(1, Ordering::Relaxed);
        self.slots[(n % WINDOW as u64) as usize].store(micros, Ordering::Relaxed);
        if (n + 1).is_multiple_of(REFRESH) {
            self.kept.store(0, Ordering::Relaxed);
        }
    }

    /// Answered calls recorded so far.
    pub(crate) fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    /// The `percentile` (1 to 99) of the window; `None` before
    /// [`HedgingPolicy::MIN_SAMPLES`] calls.
    pub(crate) fn percentile(&self, percentile: u32) -> Option<Duration> {
        let kept = self.kept.load(Ordering::Relaxed);
        if kept != 0 && kept >> 32 == u64::from(percentile) {
            return Some(Duration::from_micros(kept & u64::from(u32::MAX)));
        }
        let recorded = self.recorded();
        if recorded < HedgingPolicy::MIN_SAMPLES {
            return None;
        }
        let n = recorded.min(WINDOW as u64) as usize;
        let mut values = [0u32; WINDOW];
        for (value, slot) in values.iter_mut().zip(&self.slots[..n]) {
            *value = slot.load(Ordering::Relaxed);
        }
        let window = &mut values[..n];
        let (_, at, _) = window.select_nth_unstable(rank(percentile, n));
        let micros = *at;
        self.kept.store(
            u64::from(percentile) << 32 | u64::from(micros),
            Ordering::Relaxed,
        );
        Some(Duration::from_micros(u64::from(micros)))
    }
}

/// The 0-based index of the `percentile` in `n` sorted values (nearest rank:
/// the smallest value with at least that share of values at or below it).
pub(crate) fn rank(percentile: u32, n: usize) -> usize {
    let p = u64::from(percentile.clamp(1, 100));
    let at_or_below = (p * n as u64).div_ceil(100);
    (at_or_below as usize).clamp(1, n.max(1)) - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rank_row_by_row() {
        // (percentile, n, index)
        let rows = [
            (95, 100, 94),
            (95, 20, 18),
            (50, 20, 9),
            (99, 256, 253),
            (95, 1, 0),
            (50, 2, 0),
            (99, 2, 1),
        ];
        for (p, n, want) in rows {
            assert_eq!(rank(p, n), want, "p{p} of {n}");
        }
    }

    #[test]
    fn nothing_before_enough_calls() {
        let recent = RecentLatency::new();
        for _ in 1..HedgingPolicy::MIN_SAMPLES {
            recent.record(Duration::from_millis(3));
        }
        assert_eq!(recent.percentile(95), None);
        recent.record(Duration::from_millis(3));
        assert_eq!(recent.percentile(95), Some(Duration::from_millis(3)));
    }

    #[test]
    fn the_window_forgets_old_calls() {
        let recent = RecentLatency::new();
        // A slow past, then a full window of fast calls.
        for _ in 0..WINDOW {
            recent.record(Duration::from_millis(500));
        }
        assert_eq!(recent.percentile(95), Some(Duration::from_millis(500)));
        for _ in 0..WINDOW {
            recent.record(Duration::from_millis(2));
        }
        assert_eq!(recent.percentile(95), Some(Duration::from_millis(2)));
    }

    #[test]
    fn a_kept_percentile_is_refreshed_after_new_calls() {
        let recent = RecentLatency::new();
        for _ in 0..WINDOW {
            recent.record(Duration::from_millis(1));
        }
        assert_eq!(recent.percentile(90), Some(Duration::from_millis(1)));
        // The tail grows to 50 of 256 (20 %): p90 moves once the kept value is
        // refreshed (every REFRESH calls), not before.
        for _ in 0..50 {
            recent.record(Duration::from_millis(40));
        }
        assert_eq!(recent.recorded() % REFRESH, (WINDOW as u64 + 50) % REFRESH);
        for _ in 0..(REFRESH - (WINDOW as u64 + 50) % REFRESH) {
            recent.record(Duration::from_millis(40));
        }
        assert_eq!(recent.percentile(90), Some(Duration::from_millis(40)));
        // Another percentile is computed on its own.
        assert_eq!(recent.percentile(50), Some(Duration::from_millis(1)));
    }

    proptest! {
        /// The percentile is the nearest-rank value of the last WINDOW calls.
        #[test]
        fn percentile_is_the_nearest_rank_of_the_window(
            values in proptest::collection::vec(0u32..5_000_000, 20..600),
            percentile in 50u32..=99,
        ) {
            let recent = RecentLatency::new();
            for v in &values {
                recent.record(Duration::from_micros(u64::from(*v)));
            }
            let mut last: Vec<u32> = values.iter().rev().take(WINDOW).copied().collect();
            last.sort_unstable();
            let want = last[rank(percentile, last.len())];
            prop_assert_eq!(
                recent.percentile(percentile),
                Some(Duration::from_micros(u64::from(want)))
            );
        }
    }
}
