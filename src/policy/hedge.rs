//! Hedging (gRPC A6 `hedgingPolicy`) as pure rules: the policy and its bounds, the
//! delay before each hedge (fixed, or a percentile of the route's recent latency held
//! between a floor and a cap), and whether one more hedge may be sent.
//!
//! `src/attempts/hedges.rs` carries the decisions out (the concurrent attempts of one
//! call); `src/attempts/hedge_delay.rs` is the route's recent latency.

use std::fmt;
use std::time::Duration;

use super::profile::{ProfileField, ProfileRule, ProfileViolation};
use super::profile_error::write_violations;

/// gRPC status code `UNAVAILABLE`.
const UNAVAILABLE: i32 = 14;

/// When the next hedge of a call is sent, if the attempts before it have not answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HedgingDelay {
    /// Always this long (gRPC's `hedgingDelay`).
    Fixed(Duration),
    /// The route's own recent latency: this percentile of its last
    /// [`HedgingPolicy::WINDOW`] answered calls on this layer, held between `min` and
    /// `max`. Until the route has [`HedgingPolicy::MIN_SAMPLES`] answered calls, `max`.
    Learned {
        /// The percentile, 50 to 99.
        percentile: u32,
        /// The floor: no hedge is sent sooner.
        min: Duration,
        /// The cap: no hedge waits longer.
        max: Duration,
    },
}

impl HedgingDelay {
    /// The standard learned delay: p95, between 1 ms and 1 s.
    const STANDARD: HedgingDelay = HedgingDelay::Learned {
        percentile: HedgingPolicy::PERCENTILE,
        min: Duration::from_millis(1),
        max: Duration::from_secs(1),
    };

    /// The learned delay's percentile, floor and cap; the standard ones for a fixed
    /// delay.
    fn learned_parts(self) -> (u32, Duration, Duration) {
        match self {
            HedgingDelay::Learned {
                percentile,
                min,
                max,
            } => (percentile, min, max),
            HedgingDelay::Fixed(_) => HedgingDelay::STANDARD.learned_parts(),
        }
    }
}

/// How a call is hedged: up to `max_attempts` copies of an idempotent unary request,
/// each sent when the ones before it have not answered after the hedging delay; the
/// first final answer wins and the others are cancelled. All of them run inside the
/// call's one deadline.
///
/// A hedged call is not also retried: an answer with a non-fatal status (by default
/// `UNAVAILABLE`) sends the next hedge at once, as gRPC A6 does.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::{HedgingDelay, HedgingPolicy};
/// // Hedge once, after the route's own p95 (between 5 ms and 1 s).
/// let learned = HedgingPolicy::builder()
///     .max_attempts(2)
///     .learned_delay(95)
///     .min_delay(Duration::from_millis(5))
///     .build()?;
/// assert!(learned.is_on());
/// assert_eq!(
///     learned.delay(),
///     HedgingDelay::Learned { percentile: 95, min: Duration::from_millis(5), max: Duration::from_secs(1) }
/// );
/// // Or after a fixed 50 ms, as other gRPC clients do.
/// let fixed = HedgingPolicy::builder().max_attempts(3).delay(Duration::from_millis(50)).build()?;
/// assert_eq!(fixed.delay(), HedgingDelay::Fixed(Duration::from_millis(50)));
/// assert!(HedgingPolicy::builder().max_attempts(6).build().is_err());
/// assert!(!HedgingPolicy::off().is_on());
/// # Ok::<(), sw4rm_timeouts::HedgingPolicyError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HedgingPolicy {
    max_attempts: u32,
    delay: HedgingDelay,
    /// Bit `n` set: gRPC status code `n` is not fatal.
    non_fatal: u32,
}

impl HedgingPolicy {
    /// The largest `max_attempts` (gRPC A6 caps it at 5).
    pub const MAX_ATTEMPTS: u32 = 5;
    /// How many of a route's latest answered calls a learned delay is taken from.
    pub const WINDOW: usize = 256;
    /// How many answered calls a route needs before its delay is learned.
    pub const MIN_SAMPLES: u64 = 20;
    /// The standard learned percentile.
    pub const PERCENTILE: u32 = 95;

    /// No hedging: every profile's standard policy. When turned on (more than one
    /// attempt), the delay is learned: the route's p95, between 1 ms and 1 s.
    pub const fn off() -> Self {
        HedgingPolicy {
            max_attempts: 1,
            delay: HedgingDelay::STANDARD,
            non_fatal: 1 << UNAVAILABLE,
        }
    }

    /// A builder starting from [`HedgingPolicy::off`] with two attempts.
    pub fn builder() -> HedgingPolicyBuilder {
        HedgingPolicyBuilder {
            policy: HedgingPolicy {
                max_attempts: 2,
                ..HedgingPolicy::off()
            },
        }
    }

    /// Attempts in all, the first included (1 = no hedging).
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// When each hedge is sent.
    pub fn delay(&self) -> HedgingDelay {
        self.delay
    }

    /// Whether an answer with this status code (its gRPC number) lets the other
    /// attempts go on and sends the next hedge at once, instead of being the call's
    /// answer.
    ///
    /// ```
    /// use sw4rm_timeouts::HedgingPolicy;
    /// let policy = HedgingPolicy::builder().build().unwrap();
    /// assert!(policy.is_non_fatal(tonic::Code::Unavailable));
    /// assert!(!policy.is_non_fatal(tonic::Code::NotFound));
    /// ```
    pub fn is_non_fatal(&self, code: impl Into<i32>) -> bool {
        let code: i32 = code.into();
        (0..32).contains(&code) && self.non_fatal & (1 << code) != 0
    }

    /// The non-fatal status codes, by number.
    pub(crate) fn non_fatal_codes(&self) -> impl Iterator<Item = i32> + '_ {
        (0..32).filter(|c| self.is_non_fatal(*c))
    }

    /// Whether hedging is on at all.
    pub fn is_on(&self) -> bool {
        self.max_attempts > 1
    }

    /// The policy as configuration values (`hedging.*` keys of a profile), in
    /// [`ProfileField::HEDGING`] order: max attempts, fixed delay (ms, 0 = learned),
    /// percentile, min delay (ms), max delay (ms). A fixed delay keeps the standard
    /// learned fields.
    pub(crate) fn fields(&self) -> [u32; 5] {
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        let (percentile, min, max) = self.delay.learned_parts();
        let fixed = match self.delay {
            HedgingDelay::Fixed(d) => ms(d),
            HedgingDelay::Learned { .. } => 0,
        };
        [self.max_attempts, fixed, percentile, ms(min), ms(max)]
    }

    /// The policy from configuration values (see [`HedgingPolicy::fields`]), keeping
    /// this policy's non-fatal codes; every rule broken, each naming its field.
    pub(crate) fn with_fields(
        self,
        [attempts, fixed, percentile, min, max]: [u32; 5],
    ) -> (HedgingPolicy, Vec<ProfileViolation>) {
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        let delay = match fixed {
            0 => HedgingDelay::Learned {
                percentile,
                min: ms(min),
                max: ms(max),
            },
            fixed => HedgingDelay::Fixed(ms(fixed)),
        };
        let policy = HedgingPolicy {
            max_attempts: attempts,
            delay,
            non_fatal: self.non_fatal,
        };
        (policy, policy.violations())
    }

    /// Every bound this policy breaks, each naming its field.
    pub(crate) fn violations(&self) -> Vec<ProfileViolation> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut v = |field, value: u64, rule| {
            out.push(ProfileViolation { field, value, rule });
        };
        if !(1..=Self::MAX_ATTEMPTS).contains(&self.max_attempts) {
            v(
                ProfileField::HedgeMaxAttempts,
                u64::from(self.max_attempts),
                ProfileRule::HedgeAttemptsOutOfRange,
            );
        }
        let too_long = |d: Duration| d.as_millis() > u128::from(u32::MAX);
        match self.delay {
            HedgingDelay::Fixed(d) if too_long(d) => {
                v(ProfileField::HedgeDelay, ms(d), ProfileRule::NotWholeMillis)
            }
            HedgingDelay::Fixed(_) => {}
            HedgingDelay::Learned {
                percentile,
                min,
                max,
            } => {
                if !(50..=99).contains(&percentile) {
                    v(
                        ProfileField::HedgePercentile,
                        u64::from(percentile),
                        ProfileRule::PercentileOutOfRange,
                    );
                }
                for (field, d) in [
                    (ProfileField::HedgeMinDelay, min),
                    (ProfileField::HedgeMaxDelay, max),
                ] {
                    if too_long(d) {
                        v(field, ms(d), ProfileRule::NotWholeMillis);
                    }
                }
                if min > max {
                    v(
                        ProfileField::HedgeMinDelay,
                        ms(min),
                        ProfileRule::MinDelayAboveMax,
                    );
                }
            }
        }
        out
    }
}

impl Default for HedgingPolicy {
    fn default() -> Self {
        HedgingPolicy::off()
    }
}

/// Builds a [`HedgingPolicy`]; [`build`](HedgingPolicyBuilder::build) checks the
/// bounds.
#[derive(Clone, Debug)]
pub struct HedgingPolicyBuilder {
    policy: HedgingPolicy,
}

impl HedgingPolicyBuilder {
    /// Attempts in all, 1 to 5 (1 = no hedging; the builder starts at 2).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.policy.max_attempts = attempts;
        self
    }

    /// A fixed delay before each hedge (0: all attempts at once).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.policy.delay = HedgingDelay::Fixed(delay);
        self
    }

    /// A learned delay: this percentile (50 to 99) of the route's recent latency
    /// (the builder's default: 95, between 1 ms and 1 s).
    pub fn learned_delay(self, percentile: u32) -> Self {
        let (_, min, max) = self.policy.delay.learned_parts();
        self.learned(percentile, min, max)
    }

    /// The learned delay's floor (makes the delay learned if it was fixed).
    pub fn min_delay(self, min: Duration) -> Self {
        let (percentile, _, max) = self.policy.delay.learned_parts();
        self.learned(percentile, min, max)
    }

    /// The learned delay's cap (makes the delay learned if it was fixed).
    pub fn max_delay(self, max: Duration) -> Self {
        let (percentile, min, _) = self.policy.delay.learned_parts();
        self.learned(percentile, min, max)
    }

    fn learned(mut self, percentile: u32, min: Duration, max: Duration) -> Self {
        self.policy.delay = HedgingDelay::Learned {
            percentile,
            min,
            max,
        };
        self
    }

    /// Also treat this status code as non-fatal (`UNAVAILABLE` is by default).
    pub fn non_fatal_on(mut self, code: impl Into<i32>) -> Self {
        let code: i32 = code.into();
        if (0..32).contains(&code) {
            self.policy.non_fatal |= 1 << code;
        }
        self
    }

    /// Only these status codes are non-fatal (none: every answer is final).
    pub fn non_fatal_only_on<C: Into<i32>>(mut self, codes: impl IntoIterator<Item = C>) -> Self {
        self.policy.non_fatal = 0;
        for code in codes {
            self = self.non_fatal_on(code);
        }
        self
    }

    /// Checks every bound and returns the policy, or every rule it breaks.
    pub fn build(self) -> Result<HedgingPolicy, HedgingPolicyError> {
        let violations = self.policy.violations();
        if violations.is_empty() {
            Ok(self.policy)
        } else {
            Err(HedgingPolicyError { violations })
        }
    }
}

/// A [`HedgingPolicy`] that breaks its bounds: every rule broken, each with its field.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HedgingPolicyError {
    /// What is wrong, field by field.
    pub violations: Vec<ProfileViolation>,
}

impl fmt::Display for HedgingPolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid hedging policy (builder):")?;
        write_violations(f, " ", &self.violations)
    }
}

impl std::error::Error for HedgingPolicyError {}

/// The delay before each hedge of a call: the fixed delay, or the route's learned
/// percentile (`None`: too few answered calls yet) held between the floor and the cap.
pub(crate) fn hedge_delay(policy: &HedgingPolicy, learned: Option<Duration>) -> Duration {
    match policy.delay {
        HedgingDelay::Fixed(d) => d,
        HedgingDelay::Learned { min, max, .. } => {
            learned.map_or(max, |d| d.clamp(min, max.max(min)))
        }
    }
}

/// Why no further hedge of a call is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoHedge {
    /// `max_attempts` were sent.
    Attempts,
    /// The server's pushback said not to.
    Pushback,
    /// The retry budget is at or below half: hedging would add load to a sick server.
    Budget,
    /// Less than the profile's minimum remains of the call's deadline.
    NoTimeLeft,
    /// The layer's share of calls that hedge is used up for the window
    /// (`TimeoutProfileLayer::with_hedge_cap`).
    Cap,
}

impl NoHedge {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NoHedge::Attempts => "max_attempts",
            NoHedge::Pushback => "pushback",
            NoHedge::Budget => "budget",
            NoHedge::NoTimeLeft => "no_time_left",
            NoHedge::Cap => "hedge_cap",
        }
    }
}

/// Everything the decision to send one more hedge depends on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HedgeFacts {
    /// Attempts sent so far, the first included.
    pub(crate) sent: u32,
    /// A server answered with a pushback.
    pub(crate) pushed_back: bool,
    /// The retry budget allows one more attempt.
    pub(crate) budget_allows: bool,
    /// What remains of the call's deadline (`None`: no deadline).
    pub(crate) remaining: Option<Duration>,
    /// No attempt is sent with less than this.
    pub(crate) floor: Duration,
}

/// Whether one more hedge may be sent now; the first reason not to, in the order
/// listed in [`NoHedge`]. The layer's cap on the share of calls that hedge is asked
/// last, and only for a call's first hedge (the cap counts calls that hedge, not
/// hedges): `take_from_cap` takes the call's share from it, and answers whether there
/// was one, so a hedge another rule stops never takes from the cap.
pub(crate) fn may_hedge(
    policy: &HedgingPolicy,
    f: HedgeFacts,
    take_from_cap: impl FnOnce() -> bool,
) -> Result<(), NoHedge> {
    if f.sent >= policy.max_attempts {
        return Err(NoHedge::Attempts);
    }
    if f.pushed_back {
        return Err(NoHedge::Pushback);
    }
    if !f.budget_allows {
        return Err(NoHedge::Budget);
    }
    if f.remaining.is_some_and(|r| r < f.floor || r.is_zero()) {
        return Err(NoHedge::NoTimeLeft);
    }
    if f.sent == 1 && !take_from_cap() {
        return Err(NoHedge::Cap);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn learned(percentile: u32, min: u64, max: u64) -> HedgingPolicy {
        HedgingPolicy::builder()
            .learned_delay(percentile)
            .min_delay(ms(min))
            .max_delay(ms(max))
            .build()
            .expect("valid")
    }

    #[test]
    fn the_delay_row_by_row() {
        let fixed = HedgingPolicy::builder().delay(ms(40)).build().unwrap();
        let rows: [(HedgingPolicy, Option<Duration>, Duration); 6] = [
            // A fixed delay ignores what was learned.
            (fixed, Some(ms(3)), ms(40)),
            (fixed, None, ms(40)),
            // Learned: the percentile itself inside the bounds.
            (learned(95, 5, 500), Some(ms(42)), ms(42)),
            // Held at the floor and at the cap.
            (learned(95, 5, 500), Some(ms(1)), ms(5)),
            (learned(95, 5, 500), Some(ms(9_000)), ms(500)),
            // Nothing learned yet: the cap.
            (learned(95, 5, 500), None, ms(500)),
        ];
        for (i, (policy, learned, want)) in rows.into_iter().enumerate() {
            assert_eq!(hedge_delay(&policy, learned), want, "row {i}");
        }
    }

    /// Facts under which a call's first hedge may go out.
    fn first_hedge_allowed() -> HedgeFacts {
        HedgeFacts {
            sent: 1,
            pushed_back: false,
            budget_allows: true,
            remaining: Some(ms(900)),
            floor: ms(100),
        }
    }

    #[test]
    fn may_hedge_row_by_row() {
        let policy = HedgingPolicy::builder().max_attempts(3).build().unwrap();
        let ok = first_hedge_allowed();
        let rows: [(HedgeFacts, Result<(), NoHedge>); 8] = [
            (ok, Ok(())),
            (HedgeFacts { sent: 2, ..ok }, Ok(())),
            (HedgeFacts { sent: 3, ..ok }, Err(NoHedge::Attempts)),
            (
                HedgeFacts {
                    pushed_back: true,
                    ..ok
                },
                Err(NoHedge::Pushback),
            ),
            (
                HedgeFacts {
                    budget_allows: false,
                    ..ok
                },
                Err(NoHedge::Budget),
            ),
            (
                HedgeFacts {
                    remaining: Some(ms(99)),
                    ..ok
                },
                Err(NoHedge::NoTimeLeft),
            ),
            (
                HedgeFacts {
                    remaining: None,
                    ..ok
                },
                Ok(()),
            ),
            // The first reason in order: attempts before pushback before budget.
            (
                HedgeFacts {
                    sent: 3,
                    pushed_back: true,
                    budget_allows: false,
                    ..ok
                },
                Err(NoHedge::Attempts),
            ),
        ];
        for (i, (facts, want)) in rows.into_iter().enumerate() {
            assert_eq!(may_hedge(&policy, facts, || true), want, "row {i}");
        }
    }

    /// The cap is asked last, and only for a call's first hedge: a call stopped by
    /// another rule never takes from it, and a call's later hedges do not count.
    #[test]
    fn the_cap_is_asked_last_and_only_for_a_calls_first_hedge() {
        let policy = HedgingPolicy::builder().max_attempts(3).build().unwrap();
        let ok = first_hedge_allowed();
        // (facts, the cap's answer, the decision, whether the cap was asked)
        let rows: [(HedgeFacts, bool, Result<(), NoHedge>, bool); 6] = [
            (ok, true, Ok(()), true),
            (ok, false, Err(NoHedge::Cap), true),
            (HedgeFacts { sent: 2, ..ok }, false, Ok(()), false),
            (
                HedgeFacts { sent: 3, ..ok },
                true,
                Err(NoHedge::Attempts),
                false,
            ),
            (
                HedgeFacts {
                    budget_allows: false,
                    ..ok
                },
                true,
                Err(NoHedge::Budget),
                false,
            ),
            (
                HedgeFacts {
                    remaining: Some(ms(10)),
                    ..ok
                },
                false,
                Err(NoHedge::NoTimeLeft),
                false,
            ),
        ];
        for (i, (facts, cap, want, asked)) in rows.into_iter().enumerate() {
            let mut was_asked = false;
            let got = may_hedge(&policy, facts, || {
                was_asked = true;
                cap
            });
            assert_eq!((got, was_asked), (want, asked), "row {i}");
        }
    }

    #[test]
    fn bounds_name_their_fields() {
        let err = HedgingPolicy::builder()
            .max_attempts(0)
            .learned_delay(40)
            .min_delay(ms(600))
            .max_delay(ms(500))
            .build()
            .unwrap_err();
        let fields: Vec<_> = err.violations.iter().map(|v| (v.field, v.rule)).collect();
        assert_eq!(
            fields,
            [
                (
                    ProfileField::HedgeMaxAttempts,
                    ProfileRule::HedgeAttemptsOutOfRange
                ),
                (
                    ProfileField::HedgePercentile,
                    ProfileRule::PercentileOutOfRange
                ),
                (ProfileField::HedgeMinDelay, ProfileRule::MinDelayAboveMax),
            ]
        );
        assert_eq!(
            err.to_string(),
            "invalid hedging policy (builder): hedging.max_attempts = 0: must be 1 to 5 \
             (1 = no hedging); hedging.percentile = 40: must be 50 to 99; \
             hedging.min_delay_ms = 600: must be <= hedging.max_delay_ms"
        );
        let long = HedgingPolicy::builder()
            .delay(Duration::from_secs(5_000_000))
            .build();
        assert_eq!(
            long.unwrap_err().violations[0].rule,
            ProfileRule::NotWholeMillis
        );
    }

    #[test]
    fn the_standard_policy_is_off_and_unavailable_is_non_fatal() {
        let off = HedgingPolicy::off();
        assert!(!off.is_on());
        assert_eq!(off.fields(), [1, 0, 95, 1, 1_000]);
        assert_eq!(off.non_fatal_codes().collect::<Vec<_>>(), [14]);
        let none = HedgingPolicy::builder()
            .non_fatal_only_on::<i32>([])
            .build()
            .unwrap();
        assert_eq!(none.non_fatal_codes().count(), 0);
        assert!(!none.is_non_fatal(99), "out of range is never non-fatal");
    }

    proptest! {
        /// Configuration values round-trip through a policy, and a learned delay stays
        /// within its floor and cap whatever was learned.
        #[test]
        fn fields_round_trip_and_delays_stay_in_bounds(
            attempts in 1u32..=5,
            fixed in prop_oneof![Just(0u32), 1u32..100_000],
            percentile in 50u32..=99,
            min in 0u32..1_000,
            extra in 0u32..10_000,
            seen in proptest::option::of(0u64..10_000_000),
        ) {
            let values = [attempts, fixed, percentile, min, min + extra];
            let (policy, violations) = HedgingPolicy::off().with_fields(values);
            prop_assert!(violations.is_empty());
            let back = policy.fields();
            prop_assert_eq!(back[0], attempts);
            prop_assert_eq!(back[1], fixed);
            if fixed == 0 {
                prop_assert_eq!(back, values);
                let d = hedge_delay(&policy, seen.map(Duration::from_micros));
                prop_assert!(d >= ms(u64::from(min)) && d <= ms(u64::from(min + extra)));
            }
        }
    }
}
