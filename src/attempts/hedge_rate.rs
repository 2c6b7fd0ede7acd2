//! [`HedgeRate`]: the share of a layer's hedged calls that send a hedge, held at or
//! below [`HedgeCap`]'s share in every window of its clock (10 % per second by
//! default), whatever the latency does: after a step change that makes every call
//! slow, the learned delay takes time to follow, and without a cap every call would
//! hedge until it did. Counting is three relaxed atomics (no lock, no allocation);
//! the rule itself is [`within_cap`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// The most hedges a layer sends: a share of its hedged calls in each window, and a
/// floor that lets a route with few calls hedge at all.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::{HedgeCap, TimeoutProfileLayer};
/// let cap = HedgeCap::share(0.05).per(Duration::from_secs(2)).at_least(2);
/// let layer = TimeoutProfileLayer::standard().with_hedge_cap(cap);
/// # drop(layer);
/// assert_eq!(HedgeCap::default(), HedgeCap::share(0.10).per(Duration::from_secs(1)).at_least(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct HedgeCap {
    /// The largest share of hedged calls (those whose policy hedges) that send a
    /// hedge in one window, from 0 to 1.
    pub share: f64,
    /// The window.
    pub window: Duration,
    /// Hedges allowed in a window whatever the share (so that a route with fewer
    /// than 1 / `share` calls a window may hedge at all).
    pub floor: u32,
}

impl Default for HedgeCap {
    fn default() -> Self {
        HedgeCap {
            share: 0.10,
            window: Duration::from_secs(1),
            floor: 1,
        }
    }
}

impl HedgeCap {
    /// At most this share of hedged calls send a hedge in a window (clamped into 0 to
    /// 1; not a number counts as 0); per second, with a floor of 1, until said
    /// otherwise.
    pub fn share(share: f64) -> Self {
        let share = if share.is_nan() {
            0.0
        } else {
            share.clamp(0.0, 1.0)
        };
        HedgeCap {
            share,
            ..HedgeCap::default()
        }
    }

    /// The window the share is counted in (at least 1 ms).
    pub fn per(mut self, window: Duration) -> Self {
        self.window = window.max(Duration::from_millis(1));
        self
    }

    /// Hedges allowed in any window whatever the share.
    pub fn at_least(mut self, floor: u32) -> Self {
        self.floor = floor;
        self
    }
}

/// Whether one more hedge keeps a window's hedges within the cap, with `hedges`
/// already sent of `calls` hedged calls so far in the window.
pub(crate) fn within_cap(cap: &HedgeCap, hedges: u64, calls: u64) -> bool {
    let next = hedges.saturating_add(1);
    next <= u64::from(cap.floor) || next as f64 <= cap.share * calls as f64
}

/// One layer's count of hedged calls and hedges in the current window.
#[derive(Debug)]
pub(crate) struct HedgeRate {
    cap: HedgeCap,
    born: Instant,
    /// The window counted now, by index from `born`.
    window: AtomicU64,
    calls: AtomicU64,
    hedges: AtomicU64,
}

impl HedgeRate {
    pub(crate) fn new(cap: HedgeCap) -> Self {
        HedgeRate {
            cap,
            born: Instant::now(),
            window: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            hedges: AtomicU64::new(0),
        }
    }

    /// Starts counting the window `now` is in, if it is a new one.
    fn roll(&self, now: Instant) {
        let window = self.cap.window.as_nanos().max(1);
        let at = (now.saturating_duration_since(self.born).as_nanos() / window) as u64;
        let current = self.window.load(Ordering::Acquire);
        if at > current
            && self
                .window
                .compare_exchange(current, at, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.calls.store(0, Ordering::Release);
            self.hedges.store(0, Ordering::Release);
        }
    }

    /// A hedged call started at `now`.
    #[inline]
    pub(crate) fn call(&self, now: Instant) {
        self.roll(now);
        self.calls.fetch_add(1, Ordering::AcqRel);
    }

    /// Takes one hedge of the window `now` is in, if the cap allows it.
    pub(crate) fn try_hedge(&self, now: Instant) -> bool {
        self.roll(now);
        let calls = self.calls.load(Ordering::Acquire);
        let hedges = self.hedges.fetch_add(1, Ordering::AcqRel);
        if within_cap(&self.cap, hedges, calls) {
            return true;
        }
        self.hedges.fetch_sub(1, Ordering::AcqRel);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_rule_row_by_row() {
        let ten = HedgeCap::default();
        // (hedges sent, calls so far, one more allowed)
        let rows = [
            (0, 0, true), // the floor
            (1, 5, false),
            (1, 19, false),
            (1, 20, true),
            (9, 100, true),
            (10, 100, false),
        ];
        for (hedges, calls, want) in rows {
            assert_eq!(within_cap(&ten, hedges, calls), want, "{hedges} of {calls}");
        }
        let none = HedgeCap::share(0.0).at_least(0);
        assert!(!within_cap(&none, 0, 1_000));
        assert_eq!(HedgeCap::share(f64::NAN).share, 0.0);
        assert_eq!(HedgeCap::share(7.0).share, 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn every_call_slow_hedges_a_tenth_per_window() {
        let rate = HedgeRate::new(HedgeCap::default());
        let mut per_window = Vec::new();
        for _ in 0..5 {
            let mut hedged = 0;
            for _ in 0..200 {
                rate.call(Instant::now());
                // Every call would hedge (a step change made all slow).
                hedged += u32::from(rate.try_hedge(Instant::now()));
                tokio::time::advance(Duration::from_millis(5)).await;
            }
            per_window.push(hedged);
        }
        assert_eq!(per_window, [20, 20, 20, 20, 20]);
    }

    proptest! {
        /// In any window, hedges never pass max(floor, share × calls).
        #[test]
        fn no_window_passes_the_cap(
            share in 0.0f64..=1.0,
            floor in 0u32..4,
            events in proptest::collection::vec((any::<bool>(), 0u64..400), 1..400),
        ) {
            let cap = HedgeCap::share(share).at_least(floor);
            let (mut calls, mut hedges) = (0u64, 0u64);
            for (is_call, _) in events {
                if is_call {
                    calls += 1;
                } else if within_cap(&cap, hedges, calls) {
                    hedges += 1;
                }
                let bound = (share * calls as f64).floor() as u64;
                prop_assert!(hedges <= bound.max(u64::from(floor)));
            }
        }
    }
}
