//! [`HedgeRate`]: the hedges a layer sends, held in every window to [`HedgeCap`]'s
//! share of its hedged calls plus a burst (10 % of the calls of any one second plus
//! 10 by default), whatever the latency does: after a step change that makes every
//! call slow, the learned delay takes time to follow, and without a cap every call
//! would hedge until it did. The burst is what lets an agent with few calls hedge as
//! its policy says (a storm of a few calls a second is harmless); the share is what
//! bounds a loaded one.
//!
//! The window slides: it is kept as [`SLICES`] slices of a twentieth of it, and a hedge is
//! allowed only if the hedges of the last `SLICES + 1` slices (more than a window, so
//! every window of time ending at this hedge is inside them) stay within the burst
//! plus the share of the calls of the last `SLICES` slices (at most a window). A window's hedges are thus
//! held to the share of the calls of the window before its last hedge; at a steady
//! call rate that is the share of its own calls. A fixed window would allow twice the
//! share across its edge: the tail of one and the head of the next. Each slice is one
//! atomic word (its number, calls and hedges packed), updated by compare-and-swap: no
//! lock, no allocation. The rule itself is [`within_cap`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// The most hedges a layer sends: in any window of time, `burst` plus `share` of the
/// hedged calls that started in it. A layer with few calls hedges as its policies say
/// (up to `burst` hedges a window); a loaded one hedges about `share` of its calls.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::{HedgeCap, TimeoutProfileLayer};
/// let cap = HedgeCap::share(0.05).per(Duration::from_secs(2)).burst(4);
/// let layer = TimeoutProfileLayer::standard().with_hedge_cap(cap);
/// # drop(layer);
/// assert_eq!(HedgeCap::default(), HedgeCap::share(0.10).per(Duration::from_secs(1)).burst(10));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct HedgeCap {
    /// The largest share of hedged calls (those whose policy hedges) that send a
    /// hedge in one window, from 0 to 1.
    pub share: f64,
    /// The window.
    pub window: Duration,
    /// Hedges allowed in any window on top of the share: what a layer with few calls
    /// may hedge whatever its call count.
    pub burst: u32,
}

impl Default for HedgeCap {
    fn default() -> Self {
        HedgeCap {
            share: 0.10,
            window: Duration::from_secs(1),
            burst: DEFAULT_HEDGE_BURST,
        }
    }
}

impl HedgeCap {
    /// At most this share of hedged calls send a hedge in a window (clamped into 0 to
    /// 1; not a number counts as 0); per second, with a burst of 10, until said
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

    /// Hedges allowed in any window on top of the share (0: the share alone).
    pub fn burst(mut self, burst: u32) -> Self {
        self.burst = burst;
        self
    }
}

/// The default [`HedgeCap::burst`]: ten hedges a window whatever the share.
pub const DEFAULT_HEDGE_BURST: u32 = 10;

/// Whether one more hedge keeps a window's hedges within the cap, with `hedges`
/// already sent of `calls` hedged calls so far in the window: at most the burst plus
/// the share of the calls.
pub(crate) fn within_cap(cap: &HedgeCap, hedges: u64, calls: u64) -> bool {
    let next = hedges.saturating_add(1);
    next as f64 <= f64::from(cap.burst) + cap.share * calls as f64
}

/// How many slices a window is kept in.
pub(crate) const SLICES: u64 = 20;

/// Slots in the ring: the window's slices, the one before them, and one more, so that
/// a thread whose clock just entered the next slice does not clear a slot another
/// thread, a moment behind it, still reads.
const SLOTS: usize = SLICES as usize + 2;

/// A slot's word: the slice's number (low bits) in the high 28 bits, then its calls
/// and its hedges in 18 bits each (they saturate, at 262,143 a slice).
const NUMBER_BITS: u32 = 28;
const COUNT_BITS: u32 = 18;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const NUMBER_MASK: u64 = (1 << NUMBER_BITS) - 1;

/// One slot's word, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slice {
    number: u64,
    calls: u64,
    hedges: u64,
}

impl Slice {
    fn pack(self) -> u64 {
        ((self.number & NUMBER_MASK) << (2 * COUNT_BITS))
            | (self.calls.min(COUNT_MAX) << COUNT_BITS)
            | self.hedges.min(COUNT_MAX)
    }

    fn unpack(word: u64) -> Self {
        Slice {
            number: word >> (2 * COUNT_BITS),
            calls: (word >> COUNT_BITS) & COUNT_MAX,
            hedges: word & COUNT_MAX,
        }
    }

    /// Whether this word holds slice `number` (compared in the bits a word keeps; a
    /// slot untouched for 2^28 slices, 155 days at 50 ms, could be misread once).
    fn is(self, number: u64) -> bool {
        self.number == number & NUMBER_MASK
    }

    /// Whether this word holds a slice later than `number` (a thread a moment behind
    /// counts nothing into it rather than clearing it).
    fn is_after(self, number: u64) -> bool {
        let ahead = self.number.wrapping_sub(number) & NUMBER_MASK;
        ahead != 0 && ahead < NUMBER_MASK / 2
    }
}

/// One layer's count of hedged calls and hedges over its sliding window.
#[derive(Debug)]
pub(crate) struct HedgeRate {
    cap: HedgeCap,
    born: Instant,
    /// The slice width in nanoseconds (a twentieth of the window, at least 1).
    slice: u128,
    slots: [AtomicU64; SLOTS],
}

impl HedgeRate {
    pub(crate) fn new(cap: HedgeCap) -> Self {
        HedgeRate {
            cap,
            born: Instant::now(),
            slice: (cap.window.as_nanos() / u128::from(SLICES)).max(1),
            // Slice 0 of every slot, empty: slots 1.. are only read for slices they
            // do not hold, so they count nothing until written.
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// The number of the slice `now` is in.
    fn number(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.born).as_nanos();
        u64::try_from(elapsed / self.slice).unwrap_or(u64::MAX)
    }

    fn slot(&self, number: u64) -> &AtomicU64 {
        &self.slots[(number % SLOTS as u64) as usize]
    }

    /// Adds a call or a hedge to slice `number`, starting the slice afresh if its slot
    /// still holds an older one. Whether it was counted (not when the slot already
    /// holds a later slice: this thread's clock is behind another's).
    fn add(&self, number: u64, calls: u64, hedges: u64) -> bool {
        let slot = self.slot(number);
        let mut word = slot.load(Ordering::Acquire);
        loop {
            let held = Slice::unpack(word);
            if held.is_after(number) {
                return false;
            }
            let base = if held.is(number) {
                held
            } else {
                Slice {
                    number,
                    calls: 0,
                    hedges: 0,
                }
            };
            let next = Slice {
                number,
                calls: base.calls.saturating_add(calls),
                hedges: base.hedges.saturating_add(hedges),
            }
            .pack();
            match slot.compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now_held) => word = now_held,
            }
        }
    }

    /// Calls of the last [`SLICES`] slices and hedges of the last `SLICES + 1`, up to
    /// slice `number`.
    fn window(&self, number: u64) -> (u64, u64) {
        let (mut calls, mut hedges) = (0, 0);
        for back in 0..=SLICES {
            let Some(at) = number.checked_sub(back) else {
                break;
            };
            let held = Slice::unpack(self.slot(at).load(Ordering::Acquire));
            if held.is(at) {
                hedges += held.hedges;
                if back < SLICES {
                    calls += held.calls;
                }
            }
        }
        (calls, hedges)
    }

    /// A hedged call started at `now`.
    #[inline]
    pub(crate) fn call(&self, now: Instant) {
        let _ = self.add(self.number(now), 1, 0);
    }

    /// Takes one hedge at `now`, if the cap allows it. The hedge is counted first and
    /// taken back if it does not fit, so that hedges decided at the same moment on
    /// other threads see each other: together they never pass the cap (at worst one
    /// is refused that would have fitted).
    pub(crate) fn try_hedge(&self, now: Instant) -> bool {
        let number = self.number(now);
        if !self.add(number, 0, 1) {
            return false;
        }
        let (calls, hedges) = self.window(number);
        if within_cap(&self.cap, hedges.saturating_sub(1), calls) {
            return true;
        }
        self.take_back(number);
        false
    }

    /// Takes back a hedge counted in slice `number`, unless the slot moved on.
    fn take_back(&self, number: u64) {
        let slot = self.slot(number);
        let mut word = slot.load(Ordering::Acquire);
        loop {
            let held = Slice::unpack(word);
            if !held.is(number) {
                return;
            }
            let next = Slice {
                hedges: held.hedges.saturating_sub(1),
                ..held
            }
            .pack();
            match slot.compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(now_held) => word = now_held,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_rule_row_by_row() {
        let ten = HedgeCap::default().burst(1);
        // (hedges sent, calls so far, one more allowed)
        let rows = [
            (0, 0, true), // the burst
            (1, 5, false),
            (1, 9, false),
            (1, 10, true), // 1 + 10 % of 10
            (10, 100, true),
            (11, 100, false),
        ];
        for (hedges, calls, want) in rows {
            assert_eq!(within_cap(&ten, hedges, calls), want, "{hedges} of {calls}");
        }
        // The default: ten a window before any share, then 10 % on top.
        let default = HedgeCap::default();
        // (hedges sent, calls so far, one more allowed)
        let rows = [
            (9, 0, true),
            (10, 0, false),
            (10, 10, true),
            (109, 1_000, true),
            (110, 1_000, false),
        ];
        for (hedges, calls, want) in rows {
            assert_eq!(
                within_cap(&default, hedges, calls),
                want,
                "{hedges} of {calls}"
            );
        }
        let none = HedgeCap::share(0.0).burst(0);
        assert!(!within_cap(&none, 0, 1_000));
        assert_eq!(HedgeCap::share(f64::NAN).share, 0.0);
        assert_eq!(HedgeCap::share(7.0).share, 1.0);
    }

    /// Calls and hedges, each at a time from the rate's birth.
    #[derive(Default)]
    struct Log {
        calls: Vec<Duration>,
        hedges: Vec<Duration>,
    }

    impl Log {
        fn count(times: &[Duration], from: Duration, to: Duration) -> usize {
            times.iter().filter(|t| **t >= from && **t < to).count()
        }

        /// The largest share of calls that hedged in any window `[t, t + 1 s)`
        /// starting at a call and ending before the last one, by when the hedges were
        /// sent and the calls started.
        fn worst_share(&self) -> f64 {
            let second = Duration::from_secs(1);
            let last = self.calls.last().copied().unwrap_or_default();
            self.calls
                .iter()
                .filter(|from| **from + second <= last)
                .map(|from| {
                    let to = *from + second;
                    let hedges = Log::count(&self.hedges, *from, to) as f64;
                    hedges / Log::count(&self.calls, *from, to) as f64
                })
                .fold(0.0, f64::max)
        }
    }

    /// `fast` calls that do not hedge, then `slow` calls that all want to, one every
    /// 5 ms.
    fn step(fast: usize, slow: usize) -> Log {
        // The share alone (the burst is tested on its own).
        let rate = HedgeRate::new(HedgeCap::default().burst(0));
        let mut log = Log::default();
        for i in 0..fast + slow {
            let at = Duration::from_millis(5 * i as u64);
            rate.call(rate.born + at);
            log.calls.push(at);
            // A slow call wants its hedge after the 5 ms delay.
            let hedge_at = at + Duration::from_millis(5);
            if i >= fast && rate.try_hedge(rate.born + hedge_at) {
                log.hedges.push(hedge_at);
            }
        }
        log
    }

    #[test]
    fn every_call_slow_hedges_a_tenth_of_any_second() {
        let log = step(0, 1_000);
        assert!(log.worst_share() <= 0.10, "{}", log.worst_share());
        // The cap does not starve: each whole second after the first still hedges
        // close to its tenth: 18 of 200, as a window's hedges are counted over 21
        // slices and its calls over at most 20.
        for second in 1..5 {
            let from = Duration::from_secs(second);
            let hedges = Log::count(&log.hedges, from, from + Duration::from_secs(1));
            assert!(hedges >= 18, "second {second}: {hedges}");
        }
    }

    #[test]
    fn a_step_change_mid_window_stays_within_a_tenth() {
        // Fast calls for 1.5 s, then every call slow: a fixed window would allow the
        // tenth of the fast half-second and again the tenth of the next, 15 % across
        // the edge.
        for fast in [100, 150, 170, 199] {
            let log = step(fast, 600);
            assert!(log.worst_share() <= 0.10, "{fast}: {}", log.worst_share());
        }
    }

    #[test]
    fn hedges_decided_at_once_on_many_threads_stay_within_the_cap() {
        let rate = HedgeRate::new(HedgeCap::default().burst(0));
        let now = rate.born + Duration::from_millis(10);
        for _ in 0..1_000 {
            rate.call(now);
        }
        let taken: u32 = std::thread::scope(|threads| {
            let racing: Vec<_> = (0..8)
                .map(|_| {
                    threads.spawn(|| {
                        (0..100)
                            .map(|_| u32::from(rate.try_hedge(now)))
                            .sum::<u32>()
                    })
                })
                .collect();
            racing.into_iter().map(|t| t.join().unwrap_or(0)).sum()
        });
        assert!(taken <= 100, "{taken} hedges of 1,000 calls");
        // Every refused hedge was taken back: the rest of the tenth is still there.
        let mut rest = 0;
        while rate.try_hedge(now) {
            rest += 1;
        }
        assert_eq!(taken + rest, 100);
    }

    #[test]
    fn a_thread_behind_the_ring_counts_nothing_and_clears_nothing() {
        let rate = HedgeRate::new(HedgeCap::default().burst(0));
        let slice = Duration::from_millis(50);
        let late = rate.born + slice * SLOTS as u32;
        rate.call(late);
        // Slice 0 shares the slot with the slice `late` is in.
        rate.call(rate.born);
        assert!(!rate.try_hedge(rate.born));
        let held = Slice::unpack(rate.slots[0].load(Ordering::Acquire));
        assert_eq!((held.number, held.calls, held.hedges), (SLOTS as u64, 1, 0));
        assert!(!held.is_after(SLOTS as u64) && held.is_after(0));
        let wrapped = Slice {
            number: 2,
            calls: 0,
            hedges: 0,
        };
        assert!(
            wrapped.is_after(NUMBER_MASK),
            "2 follows the last number a word keeps"
        );
    }

    #[test]
    fn counts_saturate_in_their_bits() {
        let full = Slice {
            number: 3,
            calls: u64::MAX,
            hedges: COUNT_MAX + 5,
        };
        let back = Slice::unpack(full.pack());
        assert_eq!(
            (back.number, back.calls, back.hedges),
            (3, COUNT_MAX, COUNT_MAX)
        );
        assert!(Slice::unpack(
            Slice {
                number: NUMBER_MASK + 4,
                calls: 0,
                hedges: 0
            }
            .pack()
        )
        .is(NUMBER_MASK + 4));
    }

    #[test]
    fn a_quiet_layer_hedges_its_burst_every_window_and_no_more() {
        let rate = HedgeRate::new(HedgeCap::default());
        // Three slow calls a second, each wanting its hedge: all hedge, for a minute.
        for i in 0..180u64 {
            let at = rate.born + Duration::from_millis(333 * i);
            rate.call(at);
            assert!(rate.try_hedge(at + Duration::from_millis(50)), "call {i}");
        }
        // Twenty calls at once with no share to speak of: the burst, then no more.
        let at = rate.born + Duration::from_secs(120);
        let taken = (0..20)
            .filter(|_| {
                rate.call(at);
                rate.try_hedge(at)
            })
            .count();
        assert_eq!(taken, 12, "10 of the burst and 10 % of 20 calls");
    }

    proptest! {
        /// Counted together, hedges never pass burst + share × calls.
        #[test]
        fn no_count_passes_the_cap(
            share in 0.0f64..=1.0,
            burst in 0u32..12,
            events in proptest::collection::vec((any::<bool>(), 0u64..400), 1..400),
        ) {
            let cap = HedgeCap::share(share).burst(burst);
            let (mut calls, mut hedges) = (0u64, 0u64);
            for (is_call, _) in events {
                if is_call {
                    calls += 1;
                } else if within_cap(&cap, hedges, calls) {
                    hedges += 1;
                }
                let bound = (share * calls as f64).floor() as u64 + u64::from(burst);
                prop_assert!(hedges <= bound);
            }
        }

        /// At every hedge the rate allows, the hedges of the window of time ending
        /// there stay within burst + share × the calls of that window.
        #[test]
        fn no_sliding_window_passes_the_cap(
            share in 0.0f64..=1.0,
            burst in 0u32..12,
            events in proptest::collection::vec((any::<bool>(), 0u64..60_000), 1..600),
        ) {
            let window = Duration::from_secs(1);
            let rate = HedgeRate::new(HedgeCap::share(share).burst(burst));
            let mut log = Log::default();
            let mut at = Duration::ZERO;
            for (is_call, gap_us) in events {
                at += Duration::from_micros(gap_us);
                if is_call {
                    rate.call(rate.born + at);
                    log.calls.push(at);
                } else if rate.try_hedge(rate.born + at) {
                    log.hedges.push(at);
                    // The window of time ending now; before a whole window has
                    // passed, all of it since the rate was made (events at 0 too).
                    let from = at.checked_sub(window);
                    let in_window = |t: &&Duration| from.is_none_or(|f| **t > f) && **t <= at;
                    let hedges = log.hedges.iter().filter(in_window).count() as u64;
                    let calls = log.calls.iter().filter(in_window).count() as f64;
                    let bound = (share * calls).floor() as u64 + u64::from(burst);
                    prop_assert!(hedges <= bound, "{hedges} hedges, {calls} calls at {at:?}");
                }
            }
        }
    }
}
