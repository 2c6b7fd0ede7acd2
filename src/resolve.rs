//! Per-call resolution: which value applies to this call (per-call > message >
//! configured default) and what SW4-002 §2.2 makes of it.

use std::time::Duration;

use crate::clamp::{apply_override, Bound};
use crate::message_deadline::MESSAGE_DEADLINE_MARGIN;
use crate::profile::TimeoutProfile;

/// Which level supplied a call's timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The profile's default (whose own source is standard, global or client).
    Profile,
    /// A timeout field inside the request message, plus the margin.
    Message,
    /// A per-call override.
    PerCall,
}

/// The outcome of resolving one call's timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// The deadline; `None` = no deadline.
    pub effective: Option<Duration>,
    /// Which level supplied it.
    pub origin: Origin,
    /// The requested value before clamping (per-call or message + margin).
    pub requested: Option<Duration>,
    /// Set when the request was clamped.
    pub bound: Option<Bound>,
}

/// Resolves one call. `per_call` wins over `message`, which wins over the profile's
/// default; both are clamped into the profile's bounds.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::{resolve, Origin, TimeoutProfile};
/// let vote = TimeoutProfile::standard_named("negotiation_vote").unwrap();
/// let r = resolve(&vote, None, Some(Duration::from_secs(600)));
/// assert_eq!((r.effective, r.origin), (Some(Duration::from_secs(601)), Origin::Message));
/// ```
pub fn resolve(
    profile: &TimeoutProfile,
    per_call: Option<Duration>,
    message: Option<Duration>,
) -> Resolution {
    let (requested, origin) = match (per_call, message) {
        (Some(d), _) => (d, Origin::PerCall),
        (None, Some(m)) if !m.is_zero() => {
            (m.saturating_add(MESSAGE_DEADLINE_MARGIN), Origin::Message)
        }
        _ => {
            return Resolution {
                effective: Some(profile.default_timeout()),
                origin: Origin::Profile,
                requested: None,
                bound: None,
            }
        }
    };
    let c = apply_override(profile, requested);
    Resolution {
        effective: c.effective,
        origin,
        requested: Some(requested),
        bound: c.bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    #[test]
    fn precedence_table() {
        let vote = TimeoutProfile::standard_named("negotiation_vote").unwrap();
        let hb = TimeoutProfile::standard_named("heartbeat").unwrap();
        let table = [
            (&vote, None, None, Some(s(300)), Origin::Profile, None),
            (
                &vote,
                Some(s(60)),
                Some(s(900)),
                Some(s(60)),
                Origin::PerCall,
                None,
            ),
            (
                &vote,
                None,
                Some(s(900)),
                Some(s(901)),
                Origin::Message,
                None,
            ),
            (
                &vote,
                None,
                Some(s(5)),
                Some(s(30)),
                Origin::Message,
                Some(Bound::Min),
            ),
            (
                &vote,
                None,
                Some(s(7_200)),
                Some(s(1_800)),
                Origin::Message,
                Some(Bound::Max),
            ),
            (
                &vote,
                Some(Duration::ZERO),
                None,
                None,
                Origin::PerCall,
                None,
            ),
            (
                &vote,
                None,
                Some(Duration::ZERO),
                Some(s(300)),
                Origin::Profile,
                None,
            ),
            (
                &hb,
                Some(Duration::ZERO),
                None,
                Some(s(5)),
                Origin::PerCall,
                Some(Bound::Default),
            ),
        ];
        for (p, per_call, msg, eff, origin, bound) in table {
            let r = resolve(p, per_call, msg);
            assert_eq!(
                (r.effective, r.origin, r.bound),
                (eff, origin, bound),
                "{} {per_call:?} {msg:?}",
                p.name
            );
        }
    }

    proptest! {
        #[test]
        fn per_call_always_wins(idx in 0usize..12, per in 0u64..5_000_000, msg in proptest::option::of(0u64..5_000_000)) {
            let p = &crate::profile::STANDARD_PROFILES[idx];
            let r = resolve(p, Some(Duration::from_millis(per)), msg.map(Duration::from_millis));
            prop_assert_eq!(r.origin, Origin::PerCall);
            prop_assert_eq!(r.effective, apply_override(p, Duration::from_millis(per)).effective);
        }
    }
}
