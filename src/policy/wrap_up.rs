//! The wrap-up notice of long work and budgets as a pure rule: how long before its
//! end work is told that time is nearly up, from a reserve (a duration, or a share of
//! the cap) clamped to between 10 % and half of the cap.

use std::time::Duration;

/// How long before its end long work (or an operation budget) is told that time is
/// nearly up, so it can return what it has instead of being stopped: a fixed reserve
/// or a share of the cap, clamped to at least 10 % and at most half of the cap.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::WrapUp;
/// let cap = Duration::from_secs(100);
/// assert_eq!(WrapUp::before_end(Duration::from_secs(20)).reserve(cap), Duration::from_secs(20));
/// assert_eq!(WrapUp::share(5).reserve(cap), Duration::from_secs(10)); // at least 10 %
/// assert_eq!(WrapUp::before_end(Duration::from_secs(90)).reserve(cap), Duration::from_secs(50)); // at most half
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrapUp(Reserve);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reserve {
    Time(Duration),
    Percent(u8),
}

/// The least reserve, in percent of the cap.
const MIN_PERCENT: u32 = 10;
/// The most reserve, in percent of the cap.
const MAX_PERCENT: u32 = 50;

impl WrapUp {
    /// Tell the work `reserve` before its end.
    pub fn before_end(reserve: Duration) -> Self {
        WrapUp(Reserve::Time(reserve))
    }

    /// Tell the work when `percent` of its cap is left.
    pub fn share(percent: u8) -> Self {
        WrapUp(Reserve::Percent(percent))
    }

    /// The reserve for a cap of `cap`: as set, clamped to [10 %, 50 %] of the cap.
    pub fn reserve(&self, cap: Duration) -> Duration {
        let wanted = match self.0 {
            Reserve::Time(d) => d,
            Reserve::Percent(p) => percent_of(cap, u32::from(p)),
        };
        wanted.clamp(percent_of(cap, MIN_PERCENT), percent_of(cap, MAX_PERCENT))
    }

    /// When, from the start, work capped at `cap` is told: `cap − reserve`.
    pub fn notice_after(&self, cap: Duration) -> Duration {
        cap.saturating_sub(self.reserve(cap))
    }
}

fn percent_of(d: Duration, percent: u32) -> Duration {
    // Whole milliseconds are plenty, and never overflow for any Duration.
    let ms = d.as_millis().saturating_mul(u128::from(percent)) / 100;
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_reserve_is_clamped_into_a_tenth_to_a_half_of_the_cap() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // (wrap-up, cap, reserve, notice after)
        let table = [
            (WrapUp::before_end(s(20)), s(100), s(20), s(80)),
            (WrapUp::before_end(s(1)), s(100), s(10), s(90)),
            (WrapUp::before_end(s(80)), s(100), s(50), s(50)),
            (WrapUp::share(25), s(100), s(25), s(75)),
            (WrapUp::share(0), s(100), s(10), s(90)),
            (WrapUp::share(255), s(100), s(50), s(50)),
            (WrapUp::share(20), ms(1_500), ms(300), ms(1_200)),
            (
                WrapUp::before_end(s(5)),
                Duration::ZERO,
                Duration::ZERO,
                Duration::ZERO,
            ),
        ];
        for (wrap, cap, reserve, after) in table {
            assert_eq!(wrap.reserve(cap), reserve, "{wrap:?} {cap:?}");
            assert_eq!(wrap.notice_after(cap), after, "{wrap:?} {cap:?}");
        }
        // A Duration::MAX is user input: no panic, and the notice is within the cap.
        let huge = WrapUp::before_end(Duration::MAX);
        assert!(huge.notice_after(Duration::MAX) <= Duration::MAX);
        assert!(huge.reserve(Duration::MAX) > Duration::ZERO);
    }

    proptest! {
        #[test]
        fn the_notice_comes_in_the_second_half_before_the_last_tenth(cap_ms in 0u64..10_000_000, reserve_ms in 0u64..20_000_000, p in 0u8..=255) {
            let cap = Duration::from_millis(cap_ms);
            for wrap in [WrapUp::before_end(Duration::from_millis(reserve_ms)), WrapUp::share(p)] {
                let after = wrap.notice_after(cap);
                prop_assert!(after <= cap);
                prop_assert!(after.as_millis() * 100 >= cap.as_millis() * 50);
                prop_assert!(after.as_millis() * 100 <= cap.as_millis() * 90 + 100);
            }
        }
    }
}
