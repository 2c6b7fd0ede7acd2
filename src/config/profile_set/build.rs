//! Merging the levels into a [`ProfileSet`] and checking every invariant.

use std::collections::{BTreeMap, HashMap};

use crate::config::{ConfigError, ConfigIssue, Field, Overrides, Sourced};
use crate::policy::hedge::HedgingPolicy;
use crate::policy::profile::{
    names, ProfileField, ProfileRule, ProfileViolation, TimeoutProfile, STANDARD_PROFILES,
    UNIVERSAL_PROFILE,
};
use crate::policy::retry::RetryPolicy;
use crate::policy::source::Source;
use crate::policy::streaming::StreamingTimeoutPolicy;
use crate::wire::grpc_timeout;

use super::routes::build_routes;
use super::{ProfileSet, ResolvedProfile};

pub(super) type Fields = [Option<Sourced<u32>>; Field::COUNT];

fn standard_fields(p: &TimeoutProfile) -> Fields {
    let s = |value| {
        Some(Sourced {
            value,
            source: Source::Standard,
        })
    };
    let [attempts, initial, max, multiplier, attempt] = RetryPolicy::standard().fields();
    let [h_attempts, h_delay, h_percentile, h_min, h_max] = HedgingPolicy::off().fields();
    [
        s(p.default_timeout_ms),
        s(p.min_timeout_ms),
        s(p.max_timeout_ms),
        s(u32::from(p.allow_infinite)),
        s(0),
        s(0),
        s(0),
        s(0),
        s(attempts),
        s(initial),
        s(max),
        s(multiplier),
        s(attempt),
        s(h_attempts),
        s(h_delay),
        s(h_percentile),
        s(h_min),
        s(h_max),
    ]
}

fn key(profile: &str, field: Field) -> String {
    format!("profiles.{profile}.{}", field.key())
}

/// Merges `merged` (global ⊕ client) over the standard table.
pub(super) fn build(
    merged: &Overrides,
    mut issues: Vec<ConfigIssue>,
) -> Result<ProfileSet, ConfigError> {
    let mut warnings = Vec::new();
    // Standard profiles first, in spec order, then new ones by name.
    let mut order: Vec<String> = STANDARD_PROFILES
        .iter()
        .chain(std::iter::once(&UNIVERSAL_PROFILE))
        .map(|p| p.name.to_string())
        .collect();
    let mut table: BTreeMap<String, Fields> = STANDARD_PROFILES
        .iter()
        .chain(std::iter::once(&UNIVERSAL_PROFILE))
        .map(|p| (p.name.to_string(), standard_fields(p)))
        .collect();
    for (name, patch) in &merged.profiles {
        let fields = table.entry(name.clone()).or_insert_with(|| {
            order.push(name.clone());
            Default::default()
        });
        for (slot, value) in fields.iter_mut().zip(&patch.fields) {
            if value.is_some() {
                slot.clone_from(value);
            }
        }
    }

    let mut profiles = Vec::with_capacity(order.len());
    for name in &order {
        let fields = &table[name];
        if let Some(p) = resolve_profile(name, fields, &mut issues, &mut warnings) {
            profiles.push(p);
        }
    }
    let by_name: HashMap<Box<str>, usize> = profiles
        .iter()
        .enumerate()
        .map(|(i, p)| (p.profile.name.as_ref().into(), i))
        .collect();

    let routes = build_routes(merged, &by_name, &table, &mut issues);

    let (fallback_name, fallback_source) = match &merged.fallback {
        Some(f) => (f.value.as_str(), f.source.clone()),
        None => (names::UNIVERSAL, Source::Standard),
    };
    let fallback = match by_name.get(fallback_name) {
        Some(&id) => id,
        None => {
            if table.contains_key(fallback_name) {
                0 // the profile exists but is invalid: already reported
            } else {
                issues.push(ConfigIssue {
                    key: "fallback_profile".into(),
                    value: fallback_name.into(),
                    rule: format!("no such profile{}", profile_hint(fallback_name, &table)),
                    source: fallback_source.clone(),
                });
                0
            }
        }
    };

    if !issues.is_empty() {
        return Err(ConfigError::new(issues));
    }
    Ok(ProfileSet {
        profiles,
        by_name,
        routes,
        fallback,
        fallback_source,
        warnings,
    })
}

fn profile_hint(name: &str, table: &BTreeMap<String, Fields>) -> String {
    crate::config::hint(name, table.keys().map(String::as_str))
}

fn resolve_profile(
    name: &str,
    fields: &Fields,
    issues: &mut Vec<ConfigIssue>,
    warnings: &mut Vec<ConfigIssue>,
) -> Option<ResolvedProfile> {
    let before = issues.len();
    let (values, sources) = field_values(name, fields, issues);
    if issues.len() > before {
        return None;
    }
    let profile = TimeoutProfile {
        name: name.to_owned().into(),
        default_timeout_ms: values[Field::Default.index()],
        min_timeout_ms: values[Field::Min.index()],
        max_timeout_ms: values[Field::Max.index()],
        allow_infinite: values[Field::AllowInfinite.index()] != 0,
    };
    for v in profile.violations() {
        issues.push(bound_issue(name, &profile, &v, &sources));
    }
    let mut streaming = StreamingTimeoutPolicy {
        initial_timeout_ms: values[Field::StreamInitial.index()],
        message_gap_timeout_ms: values[Field::StreamGap.index()],
        total_timeout_ms: values[Field::StreamTotal.index()],
        idle_timeout_ms: values[Field::StreamIdle.index()],
    };
    if let Some(asked) = streaming.clamp_idle() {
        let (idle_source, total) = (
            &sources[Field::StreamIdle.index()],
            streaming.total_timeout_ms,
        );
        let warning = ConfigIssue {
            key: key(name, Field::StreamIdle),
            value: asked.to_string(),
            rule: format!(
                "above streaming.total_timeout_ms ({total}, from {}), it could never fire: clamped to {total}",
                sources[Field::StreamTotal.index()]
            ),
            source: idle_source.clone(),
        };
        tracing::warn!(profile = name, "SW4RM configuration: {warning}");
        warnings.push(warning);
    }
    if let Some(v) = streaming.violation() {
        issues.push(ConfigIssue {
            key: key(name, v.field),
            value: v.value.to_string(),
            rule: format!(
                "{} (total_timeout_ms from {})",
                v.rule,
                sources[Field::StreamTotal.index()]
            ),
            source: sources[v.field.index()].clone(),
        });
    }
    let retry = retry_policy(name, &profile, &values, &sources, issues);
    let hedging = hedging_policy(name, &values, &sources, issues);
    if issues.len() > before {
        return None;
    }
    let default_header = grpc_timeout::encode_kept(profile.default_timeout());
    Some(ResolvedProfile {
        profile,
        streaming,
        retry,
        hedging,
        sources,
        default_header,
    })
}

/// A violation of a profile's bounds, led by the key that was set: a default lowered
/// below a standard minimum (or raised above a standard maximum) is the default's
/// problem, not the bound's nobody touched; each says the fix.
fn bound_issue(
    name: &str,
    profile: &TimeoutProfile,
    v: &ProfileViolation,
    sources: &[Source; Field::COUNT],
) -> ConfigIssue {
    let d = Field::Default.index();
    let untouched = |f: Field| sources[f.index()] == Source::Standard;
    let default_set = !untouched(Field::Default);
    let (min, max, default) = (
        profile.min_timeout_ms,
        profile.max_timeout_ms,
        profile.default_timeout_ms,
    );
    // The bound the default broke: its field, its value, which way the default must
    // stay of it, and the words for moving the bound, and for moving the default.
    let broke = match v.rule {
        ProfileRule::MinAboveDefault { .. } => {
            Some((Field::Min, min, ">=", "lower", "below", "raise"))
        }
        ProfileRule::MaxBelowDefault { .. } => {
            Some((Field::Max, max, "<=", "raise", "above", "lower"))
        }
        _ => None,
    };
    match (v.rule, broke) {
        (_, Some((field, bound, keep, moved, _, _))) if default_set && untouched(field) => {
            let bound_key = field.key();
            ConfigIssue {
                key: key(name, Field::Default),
                value: default.to_string(),
                rule: format!(
                    "must be {keep} {bound_key} ({bound}, standard): {moved} {bound_key} \
                     too, or keep the default {keep} {bound}"
                ),
                source: sources[d].clone(),
            }
        }
        (rule, Some((field, bound, _, moved, beyond, other))) => violation(
            name,
            v,
            format!(
                "{rule} (default_timeout_ms from {}): {moved} {} to {default} or {beyond}, \
                 or {other} the default to {bound}",
                sources[d],
                field.key(),
            ),
            sources,
        ),
        (ProfileRule::MinIsZero, _) => violation(name, v, v.rule.to_string(), sources),
        (rule, None) => violation(
            name,
            v,
            format!("{rule} (default_timeout_ms from {})", sources[d]),
            sources,
        ),
    }
}

/// Every field's value and where it came from. A new profile must give its three
/// timeouts (reported when missing); the streaming fields default to 0, the retry
/// fields to the standard policy.
fn field_values(
    name: &str,
    fields: &Fields,
    issues: &mut Vec<ConfigIssue>,
) -> ([u32; Field::COUNT], [Source; Field::COUNT]) {
    let mut values = [0u32; Field::COUNT];
    let mut sources: [Source; Field::COUNT] = std::array::from_fn(|_| Source::Standard);
    let new_profile_source = fields
        .iter()
        .flatten()
        .next()
        .map(|s| s.source.clone())
        .unwrap_or(Source::Standard);
    for &field in Field::ALL {
        match &fields[field.index()] {
            Some(s) => {
                values[field.index()] = s.value;
                sources[field.index()] = s.source.clone();
            }
            None if ProfileField::RETRY.contains(&field) => {
                values[field.index()] = RetryPolicy::standard().fields()[ProfileField::RETRY
                    .iter()
                    .position(|f| *f == field)
                    .unwrap_or(0)];
            }
            None if ProfileField::HEDGING.contains(&field) => {
                values[field.index()] = HedgingPolicy::off().fields()[ProfileField::HEDGING
                    .iter()
                    .position(|f| *f == field)
                    .unwrap_or(0)];
            }
            None if matches!(field, Field::Default | Field::Min | Field::Max) => {
                issues.push(ConfigIssue {
                    key: key(name, field),
                    value: String::new(),
                    rule: format!(
                        "profile `{name}` is not a standard profile, so it must set {}{}",
                        field.key(),
                        crate::config::hint(
                            name,
                            STANDARD_PROFILES
                                .iter()
                                .chain(std::iter::once(&UNIVERSAL_PROFILE))
                                .map(|p| p.name.as_ref())
                        )
                    ),
                    source: new_profile_source.clone(),
                })
            }
            None => {}
        }
    }
    (values, sources)
}

/// The profile's retry policy from its fields, each violation reported with the value
/// it broke against and where that came from.
fn retry_policy(
    name: &str,
    profile: &TimeoutProfile,
    values: &[u32; Field::COUNT],
    sources: &[Source; Field::COUNT],
    issues: &mut Vec<ConfigIssue>,
) -> RetryPolicy {
    let (retry, violations) = RetryPolicy::standard().with_fields(
        ProfileField::RETRY.map(|f| values[f.index()]),
        profile.min_timeout_ms,
    );
    for v in violations {
        let rule = match v.rule {
            ProfileRule::AttemptTimeoutBelowMin => format!(
                "{} (min_timeout_ms {} from {})",
                v.rule,
                profile.min_timeout_ms,
                sources[Field::Min.index()]
            ),
            ProfileRule::MaxBackoffBelowInitial => format!(
                "{} ({} from {})",
                v.rule,
                values[Field::RetryInitialBackoff.index()],
                sources[Field::RetryInitialBackoff.index()]
            ),
            rule => rule.to_string(),
        };
        issues.push(violation(name, &v, rule, sources));
    }
    retry
}

/// The issue for a violation of `name`'s field, saying `rule`, from the field's source.
fn violation(
    name: &str,
    v: &ProfileViolation,
    rule: String,
    sources: &[Source; Field::COUNT],
) -> ConfigIssue {
    ConfigIssue {
        key: key(name, v.field),
        value: v.value.to_string(),
        rule,
        source: sources[v.field.index()].clone(),
    }
}

/// The profile's hedging policy from its fields, each violation reported with where
/// the value came from (a floor above the cap names the cap's source too).
fn hedging_policy(
    name: &str,
    values: &[u32; Field::COUNT],
    sources: &[Source; Field::COUNT],
    issues: &mut Vec<ConfigIssue>,
) -> HedgingPolicy {
    let (hedging, violations) =
        HedgingPolicy::off().with_fields(ProfileField::HEDGING.map(|f| values[f.index()]));
    for v in violations {
        let rule = match v.rule {
            ProfileRule::MinDelayAboveMax => format!(
                "{} ({} from {})",
                v.rule,
                values[Field::HedgeMaxDelay.index()],
                sources[Field::HedgeMaxDelay.index()]
            ),
            rule => rule.to_string(),
        };
        issues.push(violation(name, &v, rule, sources));
    }
    hedging
}
