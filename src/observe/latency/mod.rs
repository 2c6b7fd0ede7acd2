//! Per-route latency: a log-linear histogram of whole microseconds since the layer
//! started, which the advisor reads. (The route's latest answered calls, from which
//! hedging learns its delay, are the engine's: `attempts/hedge_delay.rs`.)
//!
//! Values below 64 µs have a bucket each (exact). Above, every power of two is split
//! into 32 equal buckets, so a bucket is at most 1/32 of its lower bound wide, and a
//! quantile reported at its bucket's midpoint is within **1/64 (1.6 %)** of the value
//! of that rank. Values up to 2^36 µs (19 h) are kept; larger ones count in the last
//! bucket. 1,024 buckets: 8 KiB per observed route, allocated once, on the route's
//! first observed call.
//!
//! Recording is three relaxed atomic additions (no lock, no allocation); a
//! [`LatencySnapshot`] reads the counters, and snapshots merge by adding them (parts
//! kept per thread, per layer or per process combine exactly). A route's snapshot
//! with its path and profile is a [`RouteLatency`] (`route.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod route;

pub use route::RouteLatency;

/// Buckets per power of two, as a power of two.
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this have a bucket each.
const EXACT: u64 = 2 * SUB;
/// The largest kept value is below `2^MAX_EXP` µs.
const MAX_EXP: u32 = 36;
/// How many buckets.
pub(crate) const BUCKETS: usize = (EXACT + (MAX_EXP as u64 - SUB_BITS as u64 - 1) * SUB) as usize;

/// The bucket of `micros`.
pub(crate) fn bucket(micros: u64) -> usize {
    if micros < EXACT {
        return micros as usize;
    }
    let exp = 63 - micros.leading_zeros();
    if exp >= MAX_EXP {
        return BUCKETS - 1;
    }
    let shift = exp - SUB_BITS;
    let sub = (micros >> shift) - SUB;
    (EXACT + u64::from(exp - SUB_BITS - 1) * SUB + sub) as usize
}

/// The bucket's lower bound and width, in µs.
pub(crate) fn bounds(index: usize) -> (u64, u64) {
    let i = index as u64;
    if i < EXACT {
        return (i, 1);
    }
    let above = i - EXACT;
    let shift = (above / SUB) as u32 + 1;
    let sub = above % SUB;
    ((SUB + sub) << shift, 1 << shift)
}

/// The value a bucket stands for: its midpoint (exact below 64 µs).
fn midpoint(index: usize) -> u64 {
    let (low, width) = bounds(index);
    low + width / 2
}

/// The live estimate of one route: successful calls' latencies, and how many calls
/// timed out.
#[derive(Debug)]
pub(crate) struct LatencyStats {
    buckets: Box<[AtomicU64]>,
    timeouts: AtomicU64,
}

impl LatencyStats {
    pub(crate) fn new() -> Self {
        LatencyStats {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            timeouts: AtomicU64::new(0),
        }
    }

    /// A successful call that took `elapsed`.
    #[inline]
    pub(crate) fn record(&self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        if let Some(b) = self.buckets.get(bucket(micros)) {
            b.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A call that timed out.
    #[inline]
    pub(crate) fn timed_out(&self) {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LatencySnapshot {
        LatencySnapshot {
            counts: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            timeouts: self.timeouts.load(Ordering::Relaxed),
            resolution: Resolution::Estimate,
            bounds: Vec::new(),
        }
    }
}

/// How precise a snapshot's quantiles are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resolution {
    /// The in-process estimate: within 1.6 % of the value of that rank.
    Estimate,
    /// Read from a Prometheus exposition of `sw4rm_rpc_duration_ms`: a quantile is
    /// known only to lie in its histogram bucket (steps of 1, 1.5, 2, 3, 5 and 7), and
    /// is reported as the bucket's upper bound (within 1/32 below it), up to 1.7 times
    /// the value.
    Buckets,
}

/// Successful calls above a limit, as far as a snapshot can tell
/// ([`LatencySnapshot::above`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Above {
    /// Calls known to have taken longer.
    pub at_least: u64,
    /// Calls that may have taken longer.
    pub at_most: u64,
}

/// The latencies of one route at one moment: successful calls per bucket, and calls
/// that timed out.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::observations::LatencySnapshot;
///
/// let mut s = LatencySnapshot::default();
/// for ms in 1..=1_000 {
///     s.record(Duration::from_millis(ms));
/// }
/// let p99 = s.quantile(0.99).unwrap();
/// // 990 ms, within 1.6 %.
/// assert!(p99.abs_diff(Duration::from_millis(990)) <= Duration::from_millis(990) / 64);
/// assert_eq!(s.successes(), 1_000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencySnapshot {
    counts: Vec<u64>,
    timeouts: u64,
    resolution: Resolution,
    /// The exposition's bucket bounds in µs, ascending (`Resolution::Buckets` only):
    /// a quantile is reported as the bound of the bucket it lies in.
    bounds: Vec<u64>,
}

impl Default for LatencySnapshot {
    fn default() -> Self {
        LatencySnapshot {
            counts: vec![0; BUCKETS],
            timeouts: 0,
            resolution: Resolution::Estimate,
            bounds: Vec::new(),
        }
    }
}

impl LatencySnapshot {
    /// Adds one successful call (for building a snapshot by hand, in tests and tools).
    pub fn record(&mut self, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        if let Some(c) = self.counts.get_mut(bucket(micros)) {
            *c += 1;
        }
    }

    /// Adds `n` calls that timed out.
    pub fn record_timeouts(&mut self, n: u64) {
        self.timeouts = self.timeouts.saturating_add(n);
    }

    /// Successful calls.
    pub fn successes(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Calls that timed out.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }

    /// How precise the quantiles are.
    pub fn resolution(&self) -> Resolution {
        self.resolution
    }

    /// Both parts together: counts add (exact, in any order or grouping).
    pub fn merge(&mut self, other: &LatencySnapshot) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(*b);
        }
        self.timeouts = self.timeouts.saturating_add(other.timeouts);
        if other.resolution == Resolution::Buckets {
            self.resolution = Resolution::Buckets;
        }
        self.bounds.extend_from_slice(&other.bounds);
        self.bounds.sort_unstable();
        self.bounds.dedup();
    }

    /// The successful calls' latency at quantile `q` (0 to 1, the value of rank
    /// ⌈q·n⌉); `None` without successful calls.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.successes();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let micros = match self.resolution {
                    Resolution::Estimate => midpoint(i),
                    // The exposition's bound lies in this bucket: report that bound
                    // (the bucket's lower end, within 1/32 below it, without one).
                    Resolution::Buckets => {
                        let (low, width) = bounds(i);
                        let high = low.saturating_add(width);
                        self.bounds
                            .iter()
                            .copied()
                            .find(|b| (low..high).contains(b))
                            .unwrap_or(low)
                    }
                };
                return Some(Duration::from_micros(micros));
            }
        }
        None
    }

    /// How many successful calls took longer than `limit`: at least (those known to)
    /// and at most (those that may have), as the buckets tell it. From a scrape a
    /// call is known only to lie between its bucket's bounds.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::observations::LatencySnapshot;
    /// let ms = Duration::from_millis;
    /// // A scrape: 3 calls up to 100 ms, 2 between 100 and 500 ms.
    /// let s = LatencySnapshot::from_buckets(&[(ms(100), 3), (ms(500), 2)], 0);
    /// let above = s.above(ms(200));
    /// assert_eq!((above.at_least, above.at_most), (0, 2), "the 2 may, none is known to");
    /// assert_eq!(s.above(ms(50)).at_least, 2);
    /// ```
    pub fn above(&self, limit: Duration) -> Above {
        let limit = u64::try_from(limit.as_micros()).unwrap_or(u64::MAX);
        let mut above = Above::default();
        for (low, high, n) in self.spans() {
            if low > limit {
                above.at_least += n;
            }
            if high > limit {
                above.at_most += n;
            }
        }
        above
    }

    /// Each bucket that holds calls, ascending: the values its calls may have had, in
    /// whole µs (`low..=high`), and how many there were. From a scrape, the range of
    /// the exposition's bucket.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::observations::LatencySnapshot;
    /// let s = LatencySnapshot::from_buckets(&[(Duration::from_millis(5), 7)], 0);
    /// assert_eq!(s.spans().collect::<Vec<_>>(), vec![(0, 5_000, 7)]);
    /// ```
    pub fn spans(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(move |(i, &n)| {
                let (low, width) = bounds(i);
                let (low, high) = match self.resolution {
                    Resolution::Estimate => (low, low.saturating_add(width) - 1),
                    Resolution::Buckets => {
                        let bound = self
                            .bounds
                            .iter()
                            .copied()
                            .find(|b| (low..low.saturating_add(width)).contains(b))
                            .unwrap_or(low);
                        let below = self.bounds.iter().copied().filter(|b| *b < bound).max();
                        (below.map_or(0, |b| b.saturating_add(1)), bound)
                    }
                };
                (low, high, n)
            })
    }

    /// A snapshot from histogram buckets as a Prometheus exposition gives them:
    /// `(upper bound, calls in the bucket)` pairs (not cumulative); each bucket's calls
    /// are placed at its upper bound; `timeouts` calls timed out.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::observations::{LatencySnapshot, Resolution};
    /// let s = LatencySnapshot::from_buckets(&[(Duration::from_millis(5), 7)], 1);
    /// assert_eq!(s.resolution(), Resolution::Buckets);
    /// ```
    pub fn from_buckets(buckets: &[(Duration, u64)], timeouts: u64) -> Self {
        let mut s = LatencySnapshot {
            resolution: Resolution::Buckets,
            ..LatencySnapshot::default()
        };
        for (upper, n) in buckets {
            let micros = u64::try_from(upper.as_micros()).unwrap_or(u64::MAX);
            if let Some(c) = s.counts.get_mut(bucket(micros)) {
                *c = c.saturating_add(*n);
            }
            s.bounds.push(micros);
        }
        s.bounds.sort_unstable();
        s.bounds.dedup();
        s.timeouts = timeouts;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for i in 0..BUCKETS {
            let (low, width) = bounds(i);
            assert_eq!(low, last, "bucket {i} starts where the previous ended");
            assert_eq!(bucket(low), i);
            assert_eq!(bucket(low + width - 1), i);
            last = low + width;
        }
        assert_eq!(last, 1 << MAX_EXP);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(BUCKETS, 1_024);
    }

    proptest! {
        /// Every quantile is within 1/64 of the exact value of that rank.
        #[test]
        fn quantiles_are_within_one_sixty_fourth(
            values in prop::collection::vec(0u64..(1 << 35), 1..400),
            q in 0.0f64..=1.0,
        ) {
            let mut s = LatencySnapshot::default();
            for v in &values {
                s.record(Duration::from_micros(*v));
            }
            let mut sorted = values.clone();
            sorted.sort_unstable();
            let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            let exact = sorted[rank - 1];
            let got = s.quantile(q).unwrap().as_micros() as u64;
            prop_assert!(got.abs_diff(exact) <= exact / 64, "{got} vs {exact}");
        }

        /// Merging parts is recording everything into one.
        #[test]
        fn merged_parts_equal_the_whole(
            a in prop::collection::vec(0u64..(1 << 36), 0..200),
            b in prop::collection::vec(0u64..(1 << 36), 0..200),
            ta in 0u64..50,
            tb in 0u64..50,
        ) {
            let part = |values: &[u64], t: u64| {
                let live = LatencyStats::new();
                for v in values {
                    live.record(Duration::from_micros(*v));
                }
                for _ in 0..t {
                    live.timed_out();
                }
                live.snapshot()
            };
            let mut merged = part(&a, ta);
            merged.merge(&part(&b, tb));
            let whole: Vec<u64> = a.iter().chain(&b).copied().collect();
            prop_assert_eq!(merged, part(&whole, ta + tb));
        }
    }

    #[test]
    fn exposition_buckets_report_their_upper_bound() {
        let ms = Duration::from_millis;
        let s = LatencySnapshot::from_buckets(&[(ms(5), 90), (ms(10), 9), (ms(25), 1)], 3);
        assert_eq!(s.resolution(), Resolution::Buckets);
        assert_eq!((s.successes(), s.timeouts()), (100, 3));
        // p50 is in the 5 ms bucket: reported as its upper bound, within 1/32 below.
        let p50 = s.quantile(0.5).unwrap();
        assert!(p50 <= ms(5) && p50 >= ms(5) - ms(5) / 32, "{p50:?}");
        let p999 = s.quantile(0.999).unwrap();
        assert!(p999 <= ms(25) && p999 >= ms(25) - ms(25) / 32, "{p999:?}");
    }
}
