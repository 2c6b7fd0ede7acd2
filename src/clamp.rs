//! The override rules of SW4-002 §2.2 as one pure function.

use std::time::Duration;

use crate::profile::TimeoutProfile;

/// Which bound a requested timeout was moved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// Below `min_timeout_ms`: raised to it.
    Min,
    /// Above `max_timeout_ms`: lowered to it.
    Max,
    /// 0 (infinite) on a profile that does not allow it: replaced by the default.
    Default,
}

impl Bound {
    /// `"min"`, `"max"` or `"default"`, as logged.
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Min => "min",
            Bound::Max => "max",
            Bound::Default => "default",
        }
    }
}

/// The outcome of applying a requested timeout to a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clamped {
    /// The deadline to use; `None` = no deadline (infinite).
    pub effective: Option<Duration>,
    /// Set when the request was changed.
    pub bound: Option<Bound>,
}

/// Applies SW4-002 §2.2 to a requested timeout. `Duration::ZERO` is the spec's
/// "timeout = 0": infinite where the profile allows it, the default otherwise.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::{apply_override, Bound, TimeoutProfile};
/// let hb = TimeoutProfile::standard_named("heartbeat").unwrap();
/// let c = apply_override(&hb, Duration::from_millis(200));
/// assert_eq!(c.effective, Some(Duration::from_secs(1)));
/// assert_eq!(c.bound, Some(Bound::Min));
/// ```
pub fn apply_override(profile: &TimeoutProfile, requested: Duration) -> Clamped {
    if requested.is_zero() {
        return if profile.allow_infinite {
            Clamped {
                effective: None,
                bound: None,
            }
        } else {
            Clamped {
                effective: Some(profile.default_timeout()),
                bound: Some(Bound::Default),
            }
        };
    }
    if requested < profile.min_timeout() {
        Clamped {
            effective: Some(profile.min_timeout()),
            bound: Some(Bound::Min),
        }
    } else if requested > profile.max_timeout() {
        Clamped {
            effective: Some(profile.max_timeout()),
            bound: Some(Bound::Max),
        }
    } else {
        Clamped {
            effective: Some(requested),
            bound: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::STANDARD_PROFILES;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn rules_table() {
        let hb = TimeoutProfile::standard_named("heartbeat").unwrap();
        let tool = TimeoutProfile::standard_named("tool_call").unwrap();
        let table = [
            (&hb, ms(200), Some(ms(1_000)), Some(Bound::Min)),
            (&hb, ms(1_000), Some(ms(1_000)), None),
            (&hb, ms(7_000), Some(ms(7_000)), None),
            (&hb, ms(30_000), Some(ms(30_000)), None),
            (&hb, ms(30_001), Some(ms(30_000)), Some(Bound::Max)),
            (&hb, Duration::MAX, Some(ms(30_000)), Some(Bound::Max)),
            (&hb, Duration::ZERO, Some(ms(5_000)), Some(Bound::Default)),
            (
                &hb,
                Duration::from_nanos(1),
                Some(ms(1_000)),
                Some(Bound::Min),
            ),
            (&tool, Duration::ZERO, None, None),
            (&tool, ms(3_600_001), Some(ms(3_600_000)), Some(Bound::Max)),
        ];
        for (p, req, eff, bound) in table {
            assert_eq!(
                apply_override(p, req),
                Clamped {
                    effective: eff,
                    bound
                },
                "{} {req:?}",
                p.name
            );
        }
    }

    proptest! {
        #[test]
        fn effective_is_always_within_bounds(idx in 0usize..12, req_ms in 0u64..10_000_000) {
            let p = &STANDARD_PROFILES[idx];
            let c = apply_override(p, ms(req_ms));
            match c.effective {
                None => prop_assert!(p.allow_infinite && req_ms == 0),
                Some(e) => {
                    prop_assert!(e >= p.min_timeout() && e <= p.max_timeout());
                    // Unchanged exactly when the request was already inside the bounds.
                    let inside = req_ms != 0 && ms(req_ms) >= p.min_timeout() && ms(req_ms) <= p.max_timeout();
                    prop_assert_eq!(c.bound.is_none(), inside);
                    if inside { prop_assert_eq!(e, ms(req_ms)); }
                }
            }
        }
    }
}
