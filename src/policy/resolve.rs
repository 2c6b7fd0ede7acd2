//! One call's requested timeout: per-call > message field > the profile's default, and
//! the override rules of SW4-002 §2.2 applied to whatever was requested.

use std::time::Duration;

use super::deadline::Cap;
use super::message::MESSAGE_DEADLINE_MARGIN;
use super::profile::{ProfileField, TimeoutProfile};
use super::source::Source;

/// Which bound a requested timeout was moved to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bound {
    /// Below `min_timeout_ms`: raised to it.
    Min,
    /// Above `max_timeout_ms`: lowered to it.
    Max,
    /// 0 (infinite) on a profile that does not allow it: replaced by the default.
    Default,
}

impl Bound {
    /// `"min"`, `"max"` or `"default"`, as logged.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Bound::Min => "min",
            Bound::Max => "max",
            Bound::Default => "default",
        }
    }

    /// Why the request was replaced, in words (logged with the clamp).
    pub(crate) fn rule(self) -> &'static str {
        match self {
            Bound::Min => "below the profile's min_timeout_ms",
            Bound::Max => "above the profile's max_timeout_ms",
            Bound::Default => {
                "0 asks for no deadline, and the profile does not allow infinite \
                 (allow_infinite = false): its default applies"
            }
        }
    }

    /// The profile field whose value replaced the request.
    pub(crate) fn field(self) -> ProfileField {
        match self {
            Bound::Min => ProfileField::Min,
            Bound::Max => ProfileField::Max,
            Bound::Default => ProfileField::Default,
        }
    }
}

/// Applies SW4-002 §2.2 to a requested timeout. `Duration::ZERO` is the spec's
/// "timeout = 0": infinite (`None`) where the profile allows it, the default
/// otherwise. Returns the deadline and the bound it was moved to, if any.
pub(crate) fn apply_override(
    profile: &TimeoutProfile,
    requested: Duration,
) -> (Option<Duration>, Option<Bound>) {
    if requested.is_zero() {
        return if profile.allow_infinite {
            (None, None)
        } else {
            (Some(profile.default_timeout()), Some(Bound::Default))
        };
    }
    if requested < profile.min_timeout() {
        (Some(profile.min_timeout()), Some(Bound::Min))
    } else if requested > profile.max_timeout() {
        (Some(profile.max_timeout()), Some(Bound::Max))
    } else {
        (Some(requested), None)
    }
}

/// A request that §2.2 changed: logged as a warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Clamp {
    /// What was asked for (per-call value, or message value + margin).
    pub(crate) requested: Duration,
    /// What is used instead (`None` = no deadline).
    pub(crate) effective: Option<Duration>,
    pub(crate) bound: Bound,
    /// Who asked: per-call or message.
    pub(crate) requested_by: Source,
}

/// The outcome of resolving one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The deadline and who set it; `None` = no deadline.
    pub(crate) deadline: Option<Cap>,
    /// Set when the request was clamped.
    pub(crate) clamp: Option<Clamp>,
}

/// Resolves one call. `per_call` wins over `message`, which wins over the profile's
/// default (whose source is `default_source`); both requests are clamped into the
/// profile's bounds. A zero message timeout means "unset".
pub(crate) fn resolve(
    profile: &TimeoutProfile,
    default_source: &Source,
    per_call: Option<Duration>,
    message: Option<Duration>,
) -> Resolved {
    let (requested, by) = match (per_call, message) {
        (Some(d), _) => (d, Source::PerCall),
        (None, Some(m)) if !m.is_zero() => {
            (m.saturating_add(MESSAGE_DEADLINE_MARGIN), Source::Message)
        }
        _ => {
            return Resolved {
                deadline: Some(Cap::new(profile.default_timeout(), default_source.clone())),
                clamp: None,
            }
        }
    };
    let (effective, bound) = apply_override(profile, requested);
    Resolved {
        deadline: effective.map(|d| Cap::new(d, by.clone())),
        clamp: bound.map(|bound| Clamp {
            requested,
            effective,
            bound,
            requested_by: by,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::profile::STANDARD_PROFILES;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn s(v: u64) -> Duration {
        Duration::from_secs(v)
    }

    #[test]
    fn override_rules_table() {
        struct Row {
            profile: &'static str,
            requested: Duration,
            effective: Option<Duration>,
            bound: Option<Bound>,
        }
        let rows = [
            Row {
                profile: "heartbeat",
                requested: ms(200),
                effective: Some(ms(1_000)),
                bound: Some(Bound::Min),
            },
            Row {
                profile: "heartbeat",
                requested: ms(1_000),
                effective: Some(ms(1_000)),
                bound: None,
            },
            Row {
                profile: "heartbeat",
                requested: ms(7_000),
                effective: Some(ms(7_000)),
                bound: None,
            },
            Row {
                profile: "heartbeat",
                requested: ms(30_000),
                effective: Some(ms(30_000)),
                bound: None,
            },
            Row {
                profile: "heartbeat",
                requested: ms(30_001),
                effective: Some(ms(30_000)),
                bound: Some(Bound::Max),
            },
            Row {
                profile: "heartbeat",
                requested: Duration::MAX,
                effective: Some(ms(30_000)),
                bound: Some(Bound::Max),
            },
            Row {
                profile: "heartbeat",
                requested: Duration::ZERO,
                effective: Some(ms(5_000)),
                bound: Some(Bound::Default),
            },
            Row {
                profile: "heartbeat",
                requested: Duration::from_nanos(1),
                effective: Some(ms(1_000)),
                bound: Some(Bound::Min),
            },
            Row {
                profile: "tool_call",
                requested: Duration::ZERO,
                effective: None,
                bound: None,
            },
            Row {
                profile: "tool_call",
                requested: ms(3_600_001),
                effective: Some(ms(3_600_000)),
                bound: Some(Bound::Max),
            },
        ];
        for row in rows {
            let p = TimeoutProfile::standard_named(row.profile).unwrap();
            assert_eq!(
                apply_override(&p, row.requested),
                (row.effective, row.bound),
                "{} {:?}",
                row.profile,
                row.requested
            );
        }
    }

    #[test]
    fn precedence_table() {
        struct Row {
            profile: &'static str,
            per_call: Option<Duration>,
            message: Option<Duration>,
            deadline: Option<(Duration, Source)>,
            bound: Option<Bound>,
        }
        let std = Source::Standard;
        let rows = [
            Row {
                profile: "negotiation_vote",
                per_call: None,
                message: None,
                deadline: Some((s(300), std.clone())),
                bound: None,
            },
            Row {
                profile: "negotiation_vote",
                per_call: Some(s(60)),
                message: Some(s(900)),
                deadline: Some((s(60), Source::PerCall)),
                bound: None,
            },
            Row {
                profile: "negotiation_vote",
                per_call: None,
                message: Some(s(900)),
                deadline: Some((s(901), Source::Message)),
                bound: None,
            },
            Row {
                profile: "negotiation_vote",
                per_call: None,
                message: Some(s(5)),
                deadline: Some((s(30), Source::Message)),
                bound: Some(Bound::Min),
            },
            Row {
                profile: "negotiation_vote",
                per_call: None,
                message: Some(s(7_200)),
                deadline: Some((s(1_800), Source::Message)),
                bound: Some(Bound::Max),
            },
            Row {
                profile: "negotiation_vote",
                per_call: Some(Duration::ZERO),
                message: None,
                deadline: None,
                bound: None,
            },
            Row {
                profile: "negotiation_vote",
                per_call: None,
                message: Some(Duration::ZERO),
                deadline: Some((s(300), std.clone())),
                bound: None,
            },
            Row {
                profile: "heartbeat",
                per_call: Some(Duration::ZERO),
                message: None,
                deadline: Some((s(5), Source::PerCall)),
                bound: Some(Bound::Default),
            },
        ];
        for row in rows {
            let p = TimeoutProfile::standard_named(row.profile).unwrap();
            let r = resolve(&p, &Source::Standard, row.per_call, row.message);
            let got = r.deadline.map(|c| (c.limit(), c.source));
            assert_eq!(
                (got, r.clamp.map(|c| c.bound)),
                (row.deadline, row.bound),
                "{} {:?} {:?}",
                row.profile,
                row.per_call,
                row.message
            );
        }
    }

    #[test]
    fn clamp_names_what_was_asked_and_by_whom() {
        let hb = TimeoutProfile::standard_named("heartbeat").unwrap();
        let r = resolve(&hb, &Source::Client, Some(ms(200)), None);
        assert_eq!(
            r.clamp,
            Some(Clamp {
                requested: ms(200),
                effective: Some(ms(1_000)),
                bound: Bound::Min,
                requested_by: Source::PerCall,
            })
        );
        let r = resolve(&hb, &Source::Client, None, None);
        assert_eq!(r.deadline, Some(Cap::new(s(5), Source::Client)));
    }

    proptest! {
        #[test]
        fn effective_is_always_within_bounds(idx in 0usize..12, req_ms in 0u64..10_000_000) {
            let p = &STANDARD_PROFILES[idx];
            let (effective, bound) = apply_override(p, ms(req_ms));
            match effective {
                None => prop_assert!(p.allow_infinite && req_ms == 0),
                Some(e) => {
                    prop_assert!(e >= p.min_timeout() && e <= p.max_timeout());
                    // Unchanged exactly when the request was already inside the bounds.
                    let inside = req_ms != 0 && ms(req_ms) >= p.min_timeout() && ms(req_ms) <= p.max_timeout();
                    prop_assert_eq!(bound.is_none(), inside);
                    if inside { prop_assert_eq!(e, ms(req_ms)); }
                }
            }
        }

        #[test]
        fn per_call_always_wins(idx in 0usize..12, per in 0u64..5_000_000, msg in proptest::option::of(0u64..5_000_000)) {
            let p = &STANDARD_PROFILES[idx];
            let r = resolve(p, &Source::Standard, Some(ms(per)), msg.map(ms));
            prop_assert_eq!(r.deadline.as_ref().map(|c| c.limit()), apply_override(p, ms(per)).0);
            prop_assert!(r.deadline.is_none_or(|c| c.source == Source::PerCall));
        }
    }
}
