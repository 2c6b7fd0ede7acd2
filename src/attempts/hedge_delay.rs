//! [`RecentLatency`]: a route's latest answered calls, for a learned hedging delay.
//!
//! The advisor's histogram (`observe/latency/`) keeps every call since the layer
//! started; a hedging delay has to follow the route as it is now, so it reads a
//! window: the last [`HedgingPolicy::WINDOW`] latencies in a ring of atomics, and
//! the percentile interpolated between its two closest ranks.
//! The window also forgets with time: a call older than [`FORGET_AFTER`] (30 s) no
//! longer counts, so after a step change the delay reaches the new percentile within
//! 30 s or 256 calls, whichever comes first, however few calls the route has.
//! Recording is one atomic addition and two stores (no lock, no allocation). The
//! percentile is computed from the window (a selection over at most 256 values, on the
//! stack) at most once per [`REFRESH`] recorded calls or [`REFRESH_AFTER`], and kept
//! until then.
//!
//! What a hedged route records is the time from the call's start to its answer, or
//! the delay for a call a hedge answered (its first attempt took at least that long).
//! Hedging changes only calls slower than the delay, so the share of calls below the
//! delay, and so the percentile the delay is, stays what it would be without hedging:
//! the estimate does not chase its own effect.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::policy::hedge::HedgingPolicy;

const WINDOW: usize = HedgingPolicy::WINDOW;

/// The kept percentile is recomputed after this many new calls.
pub(crate) const REFRESH: u64 = 16;

/// A call older than this no longer counts.
pub(crate) const FORGET_AFTER: Duration = Duration::from_secs(30);

/// The kept percentile is recomputed when it is older than this (old calls leave
/// the window with time, not only with new calls).
pub(crate) const REFRESH_AFTER: Duration = Duration::from_secs(1);

/// The latest answered calls of one route, in whole microseconds.
#[derive(Debug)]
pub(crate) struct RecentLatency {
    slots: [AtomicU32; WINDOW],
    /// When each slot was written, in ms from `born`.
    stamps: [AtomicU64; WINDOW],
    born: Instant,
    recorded: AtomicU64,
    /// `percentile << 32 | micros` of the last computed percentile; 0: none kept.
    kept: AtomicU64,
    /// When it was computed, in ms from `born`.
    kept_at: AtomicU64,
}

impl RecentLatency {
    pub(crate) fn new() -> Self {
        RecentLatency {
            slots: std::array::from_fn(|_| AtomicU32::new(0)),
            stamps: std::array::from_fn(|_| AtomicU64::new(0)),
            born: Instant::now(),
            recorded: AtomicU64::new(0),
            kept: AtomicU64::new(0),
            kept_at: AtomicU64::new(0),
        }
    }

    /// `at` in ms from `born`.
    fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.born).as_millis()).unwrap_or(u64::MAX)
    }

    /// Records one answered call's latency, answered at `now`.
    #[inline]
    pub(crate) fn record(&self, latency: Duration, now: Instant) {
        let micros = u32::try_from(latency.as_micros()).unwrap_or(u32::MAX);
        let n = self.recorded.fetch_add(1, Ordering::Relaxed);
        let at = (n % WINDOW as u64) as usize;
        self.slots[at].store(micros, Ordering::Relaxed);
        self.stamps[at].store(self.ms(now), Ordering::Relaxed);
        if (n + 1).is_multiple_of(REFRESH) {
            self.kept.store(0, Ordering::Relaxed);
        }
    }

    /// Answered calls recorded so far.
    pub(crate) fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    /// The `percentile` (1 to 99) of the window at `now` (the calls of the last
    /// [`FORGET_AFTER`]); `None` with fewer than [`HedgingPolicy::MIN_SAMPLES`] of
    /// them.
    pub(crate) fn percentile(&self, percentile: u32, now: Instant) -> Option<Duration> {
        let now = self.ms(now);
        let kept = self.kept.load(Ordering::Relaxed);
        let fresh = now.saturating_sub(self.kept_at.load(Ordering::Relaxed))
            < REFRESH_AFTER.as_millis() as u64;
        if kept != 0 && fresh && kept >> 32 == u64::from(percentile) {
            return Some(Duration::from_micros(kept & u64::from(u32::MAX)));
        }
        let n = self.recorded().min(WINDOW as u64) as usize;
        let oldest = now.saturating_sub(FORGET_AFTER.as_millis() as u64);
        let mut values = [0u32; WINDOW];
        let mut len = 0;
        for (slot, stamp) in self.slots[..n].iter().zip(&self.stamps[..n]) {
            if stamp.load(Ordering::Relaxed) >= oldest {
                values[len] = slot.load(Ordering::Relaxed);
                len += 1;
            }
        }
        if (len as u64) < HedgingPolicy::MIN_SAMPLES {
            self.kept.store(0, Ordering::Relaxed);
            return None;
        }
        let micros = interpolated(&mut values[..len], percentile);
        self.kept.store(
            u64::from(percentile) << 32 | u64::from(micros),
            Ordering::Relaxed,
        );
        self.kept_at.store(now, Ordering::Relaxed);
        Some(Duration::from_micros(u64::from(micros)))
    }
}

/// Where the `percentile` lies among `n` sorted values: the lower index and how far
/// towards the next (linear interpolation between the closest ranks, numpy's default).
pub(crate) fn position(percentile: u32, n: usize) -> (usize, f64) {
    let at = f64::from(percentile.min(100)) / 100.0 * n.saturating_sub(1) as f64;
    (at.floor() as usize, at.fract())
}

/// The `percentile` of `values` (reordered), interpolated between its two closest
/// ranks. Interpolating keeps a delay learned from a route with a tail of exactly the
/// percentile's share (5 % slow calls at p95) between the two clusters instead of on
/// the slow one, where it would stay: a slow call not hedged in time is recorded
/// slow again.
pub(crate) fn interpolated(values: &mut [u32], percentile: u32) -> u32 {
    let (lo, frac) = position(percentile, values.len());
    let Some(lo) = values.get(lo).map(|_| lo) else {
        return 0;
    };
    let (_, low, above) = values.select_nth_unstable(lo);
    let low = *low;
    let high = above.iter().copied().min().unwrap_or(low);
    (f64::from(low) + frac * f64::from(high - low)).round() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Records `n` calls of `latency` each, now.
    fn record(recent: &RecentLatency, n: usize, latency: Duration) {
        for _ in 0..n {
            recent.record(latency, Instant::now());
        }
    }

    /// The window's `percentile` now.
    fn p(recent: &RecentLatency, percentile: u32) -> Option<Duration> {
        recent.percentile(percentile, Instant::now())
    }

    #[test]
    fn interpolated_row_by_row() {
        // (values, percentile, want)
        let rows: [(&[u32], u32, u32); 7] = [
            (&[10, 20, 30, 40, 50], 50, 30),
            (&[50, 40, 30, 20, 10], 75, 40),
            (&[10, 20], 50, 15),
            (&[10, 20], 99, 20),
            (&[7], 95, 7),
            (&[], 95, 0),
            // 20 values, one slow: p95 lies 5 % of the way from the fast to the slow.
            (
                &[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 402],
                95,
                22,
            ),
        ];
        for (values, p, want) in rows {
            let mut v = values.to_vec();
            assert_eq!(interpolated(&mut v, p), want, "p{p} of {values:?}");
        }
    }

    #[test]
    fn nothing_before_enough_calls() {
        let recent = RecentLatency::new();
        record(&recent, HedgingPolicy::MIN_SAMPLES as usize - 1, ms(3));
        assert_eq!(p(&recent, 95), None);
        record(&recent, 1, ms(3));
        assert_eq!(p(&recent, 95), Some(ms(3)));
    }

    #[test]
    fn the_window_forgets_old_calls() {
        let recent = RecentLatency::new();
        // A slow past, then a full window of fast calls.
        record(&recent, WINDOW, ms(500));
        assert_eq!(p(&recent, 95), Some(ms(500)));
        record(&recent, WINDOW, ms(2));
        assert_eq!(p(&recent, 95), Some(ms(2)));
    }

    #[test]
    fn a_kept_percentile_is_refreshed_after_new_calls() {
        let recent = RecentLatency::new();
        record(&recent, WINDOW, ms(1));
        assert_eq!(p(&recent, 90), Some(ms(1)));
        // The tail grows to 50 of 256 (20 %): p90 moves once the kept value is
        // refreshed (every REFRESH calls), not before.
        record(&recent, 50, ms(40));
        assert_eq!(recent.recorded() % REFRESH, (WINDOW as u64 + 50) % REFRESH);
        let to_refresh = REFRESH - (WINDOW as u64 + 50) % REFRESH;
        record(&recent, to_refresh as usize, ms(40));
        assert_eq!(p(&recent, 90), Some(ms(40)));
        // Another percentile is computed on its own.
        assert_eq!(p(&recent, 50), Some(ms(1)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_percentile_stays_until_the_refresh() {
        let recent = RecentLatency::new();
        record(&recent, WINDOW, ms(1));
        assert_eq!(p(&recent, 99), Some(ms(1)));
        // 10 slow calls put p99 (rank 252.45 of 255) among them, but fewer than
        // REFRESH calls have come since the last refresh: the kept value stands.
        record(&recent, 10, ms(40));
        assert_eq!(p(&recent, 99), Some(ms(1)));
        // The call that completes REFRESH new calls refreshes it.
        record(&recent, (REFRESH - 10 - 1) as usize, ms(40));
        assert_eq!(p(&recent, 99), Some(ms(1)));
        record(&recent, 1, ms(40));
        assert_eq!(p(&recent, 99), Some(ms(40)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_change_is_followed_within_thirty_seconds_however_few_calls() {
        let recent = RecentLatency::new();
        // A full window of fast calls, then the route turns slow at 1 call/s.
        record(&recent, WINDOW, ms(2));
        let step = Instant::now();
        let mut followed = None;
        for s in 1..=40u64 {
            tokio::time::advance(Duration::from_secs(1)).await;
            recent.record(ms(300), Instant::now());
            if followed.is_none() && p(&recent, 95) == Some(ms(300)) {
                followed = Some(s);
            }
        }
        let after = followed.expect("the new percentile is reached");
        assert!(after <= 30, "after {after} s");
        assert_eq!(step.elapsed(), Duration::from_secs(40));
        // And with many calls, 256 of them are enough, well before 30 s.
        let recent = RecentLatency::new();
        record(&recent, WINDOW, ms(2));
        record(&recent, WINDOW, ms(300));
        tokio::time::advance(REFRESH_AFTER).await;
        assert_eq!(p(&recent, 95), Some(ms(300)));
    }

    proptest! {
        /// The percentile is the interpolated percentile of the last WINDOW calls,
        /// between the values of its two closest ranks.
        #[test]
        fn percentile_is_interpolated_over_the_window(
            values in proptest::collection::vec(0u32..5_000_000, 20..600),
            percentile in 50u32..=99,
        ) {
            let recent = RecentLatency::new();
            for v in &values {
                recent.record(Duration::from_micros(u64::from(*v)), Instant::now());
            }
            let mut last: Vec<u32> = values.iter().rev().take(WINDOW).copied().collect();
            last.sort_unstable();
            let (lo, frac) = position(percentile, last.len());
            let hi = (lo + 1).min(last.len() - 1);
            let want = f64::from(last[lo]) + frac * f64::from(last[hi] - last[lo]);
            let got = recent.percentile(percentile, Instant::now()).unwrap().as_micros() as f64;
            prop_assert!((got - want).abs() <= 0.5, "{got} vs {want}");
            prop_assert!(got >= f64::from(last[lo]) && got <= f64::from(last[hi]));
        }
    }
}
