//! Reading one configuration tree (a TOML file or the `SW4RM_*` environment, as
//! figment values) into one level's [`Overrides`], collecting every problem.

use figment::value::{Dict, Value};

use super::error::{did_you_mean, hint, ConfigIssue};
use super::overrides::{Field, Overrides, RouteSetting, Sourced};
use crate::policy::source::Source;

pub(super) const TOP_KEYS: [&str; 3] = ["profiles", "routes", "fallback_profile"];
const ROUTE_KEYS: [&str; 4] = ["profile", "streaming", "long_lived", "idempotent"];

/// Where a value at a key path came from (file path, or the variable's name).
pub(super) type SourceFn<'a> = dyn Fn(&[&str]) -> Source + 'a;

fn issue(
    path: &[&str],
    value: &Value,
    rule: impl Into<String>,
    source: &SourceFn<'_>,
) -> ConfigIssue {
    ConfigIssue {
        key: path.join("."),
        value: show(value),
        rule: rule.into(),
        source: source(path),
    }
}

pub(super) fn walk_top(
    dict: &Dict,
    source: &SourceFn<'_>,
    out: &mut Overrides,
    issues: &mut Vec<ConfigIssue>,
) {
    for (key, value) in dict {
        let key = key.as_str();
        match key.to_ascii_lowercase().as_str() {
            "profiles" => match value.as_dict() {
                Some(profiles) => walk_profiles(profiles, source, out, issues),
                None => issues.push(issue(&[key], value, "must be a table of profiles", source)),
            },
            "routes" => match (value.as_dict(), source(&[key])) {
                (_, Source::Env(_)) => issues.push(issue(
                    &[key],
                    value,
                    "routes cannot be set from the environment (paths contain '/' and '.'); set them in the config file",
                    source,
                )),
                (Some(routes), _) => walk_routes(routes, source, out, issues),
                (None, _) => issues.push(issue(&[key], value, "must be a table of \"/pkg.Service/Method\" = \"profile\"", source)),
            },
            "fallback_profile" => match value.as_str() {
                Some(name) => {
                    out.fallback = Some(Sourced { value: name.to_ascii_lowercase(), source: source(&[key]) })
                }
                None => issues.push(issue(&[key], value, "must be a profile name", source)),
            },
            // Other SW4RM tools read their own `SW4RM_*` variables (for example
            // `SW4RM_SECRETS_BACKEND`): in the environment, only a near miss of one
            // of our keys is an error; in a file every unknown key is.
            _ => match (source(&[key]), did_you_mean(key, TOP_KEYS)) {
                (Source::Env(_), None) => {
                    tracing::debug!(key, "SW4RM_* variable ignored: not a timeout setting")
                }
                _ => issues.push(issue(&[key], value, format!("unknown key{}", hint(key, TOP_KEYS)), source)),
            },
        }
    }
}

fn walk_profiles(
    dict: &Dict,
    source: &SourceFn<'_>,
    out: &mut Overrides,
    issues: &mut Vec<ConfigIssue>,
) {
    let mut seen = std::collections::BTreeMap::<String, &str>::new();
    for (name, value) in dict {
        let lower = name.to_ascii_lowercase();
        if let Some(first) = seen.insert(lower.clone(), name) {
            issues.push(issue(
                &["profiles", name],
                value,
                format!("duplicate of profile `{first}` (profile names are case-insensitive)"),
                source,
            ));
            continue;
        }
        if !lower
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            || lower.is_empty()
        {
            issues.push(issue(
                &["profiles", name],
                value,
                "profile names use only letters, digits, '_' and '-'",
                source,
            ));
            continue;
        }
        let Some(fields) = value.as_dict() else {
            issues.push(issue(
                &["profiles", name],
                value,
                "must be a table of profile fields",
                source,
            ));
            continue;
        };
        walk_fields(name, &lower, fields, source, out, issues);
    }
}

/// The fields of profile `name` (`lower`: its name in lower case), with their
/// `streaming`, `retry` and `hedging` sub-tables.
fn walk_fields(
    name: &str,
    lower: &str,
    fields: &Dict,
    source: &SourceFn<'_>,
    out: &mut Overrides,
    issues: &mut Vec<ConfigIssue>,
) {
    for (fkey, fvalue) in fields {
        let path = ["profiles", name, fkey.as_str()];
        let fkey_lower = fkey.to_ascii_lowercase();
        let is_table = Field::ALL
            .iter()
            .any(|f| f.table_key().is_some_and(|(t, _)| t == fkey_lower));
        if is_table {
            let table = fkey_lower.as_str();
            let Some(inner) = fvalue.as_dict() else {
                issues.push(issue(
                    &path,
                    fvalue,
                    format!("must be a table of {table} settings"),
                    source,
                ));
                continue;
            };
            for (skey, svalue) in inner {
                let spath = ["profiles", name, fkey.as_str(), skey.as_str()];
                let key = format!("{table}.{}", skey.to_ascii_lowercase());
                let Some(field) = Field::from_key(&key) else {
                    let keys = Field::ALL
                        .iter()
                        .filter_map(|f| f.table_key())
                        .filter(|(t, _)| *t == table)
                        .map(|(_, k)| k);
                    let rule = format!("unknown key{}", hint(skey, keys));
                    issues.push(issue(&spath, svalue, rule, source));
                    continue;
                };
                set_field(out, lower, field, svalue, &spath, source, issues);
            }
            continue;
        }
        // Keys of a sub-table are only valid inside it.
        let Some(field) = Field::from_key(&fkey_lower).filter(|f| f.table_key().is_none()) else {
            let keys = Field::ALL
                .iter()
                .filter(|f| f.table_key().is_none())
                .map(|f| f.key())
                .chain(["streaming", "retry", "hedging"]);
            let rule = format!("unknown key{}", hint(fkey, keys));
            issues.push(issue(&path, fvalue, rule, source));
            continue;
        };
        set_field(out, lower, field, fvalue, &path, source, issues);
    }
}

fn set_field(
    out: &mut Overrides,
    profile: &str,
    field: Field,
    value: &Value,
    path: &[&str],
    source: &SourceFn<'_>,
    issues: &mut Vec<ConfigIssue>,
) {
    let parsed = if field.is_bool() {
        to_bool(value).map(u32::from)
    } else if field.is_count() {
        to_millis(value).map_err(|rule| rule.replace(" of milliseconds", ""))
    } else {
        to_millis(value)
    };
    match parsed {
        Ok(v) => out.patch(profile).set(field, v, source(path)),
        Err(rule) => issues.push(issue(path, value, rule, source)),
    }
}

fn walk_routes(
    dict: &Dict,
    source: &SourceFn<'_>,
    out: &mut Overrides,
    issues: &mut Vec<ConfigIssue>,
) {
    for (pattern, value) in dict {
        let path = ["routes", pattern.as_str()];
        let mut idempotent = None;
        let mut long_lived = None;
        let (profile, streaming) = match value {
            Value::String(_, p) => (p.clone(), false),
            Value::Dict(_, table) => {
                let mut profile = None;
                let mut streaming = false;
                for (k, v) in table {
                    match (k.as_str(), v) {
                        ("profile", Value::String(_, p)) => profile = Some(p.clone()),
                        ("streaming", Value::Bool(_, b)) => streaming = *b,
                        ("idempotent", v) => match to_bool(v) {
                            Ok(b) => idempotent = Some(b),
                            Err(rule) => {
                                issues.push(issue(&[path[0], path[1], k], v, rule, source))
                            }
                        },
                        ("long_lived", v) => match to_bool(v) {
                            Ok(b) => long_lived = Some(b),
                            Err(rule) => {
                                issues.push(issue(&[path[0], path[1], k], v, rule, source))
                            }
                        },
                        ("profile" | "streaming", _) => issues.push(issue(
                            &[path[0], path[1], k],
                            v,
                            "profile is a name, streaming is true or false",
                            source,
                        )),
                        _ => issues.push(issue(
                            &[path[0], path[1], k],
                            v,
                            format!("unknown key{}", hint(k, ROUTE_KEYS)),
                            source,
                        )),
                    }
                }
                match profile {
                    Some(p) => (p, streaming),
                    None => {
                        issues.push(issue(
                            &path,
                            value,
                            "route table needs `profile = \"name\"`",
                            source,
                        ));
                        continue;
                    }
                }
            }
            _ => {
                issues.push(issue(
                    &path,
                    value,
                    "must be a profile name or { profile = \"name\", streaming = true }",
                    source,
                ));
                continue;
            }
        };
        out.routes.push(RouteSetting {
            pattern: pattern.clone(),
            profile: profile.to_ascii_lowercase(),
            // A long-lived route is a stream.
            streaming: streaming || long_lived == Some(true),
            long_lived,
            idempotent,
            source: source(&path),
        });
    }
}

/// A whole, non-negative number of milliseconds that fits in `u32`.
fn to_millis(value: &Value) -> Result<u32, String> {
    let n: i128 = match value {
        Value::Num(_, n) => match (n.to_u128(), n.to_i128(), n.to_f64()) {
            (Some(u), _, _) => i128::try_from(u).unwrap_or(i128::MAX),
            (_, Some(i), _) => i,
            (_, _, Some(f)) if f.fract() != 0.0 || !f.is_finite() => {
                return Err("must be a whole number of milliseconds".into())
            }
            (_, _, Some(f)) if f < 0.0 => return Err("must not be negative".into()),
            (_, _, Some(f)) if f > f64::from(u32::MAX) => {
                return Err(format!(
                    "exceeds the largest timeout, {} ms (u32)",
                    u32::MAX
                ))
            }
            (_, _, Some(f)) => f as i128,
            _ => return Err("must be a number of milliseconds".into()),
        },
        Value::String(_, s) => match s.trim().parse::<i128>() {
            Ok(i) => i,
            Err(_) if s.trim().parse::<f64>().is_ok() => {
                return Err("must be a whole number of milliseconds".into())
            }
            Err(_) => return Err("must be a whole number of milliseconds, not text".into()),
        },
        Value::Bool(..) => return Err("must be a number of milliseconds, not true/false".into()),
        _ => return Err("must be a number of milliseconds".into()),
    };
    if n < 0 {
        return Err("must not be negative".into());
    }
    u32::try_from(n).map_err(|_| format!("exceeds the largest timeout, {} ms (u32)", u32::MAX))
}

fn to_bool(value: &Value) -> Result<bool, String> {
    match value {
        Value::Bool(_, b) => Ok(*b),
        Value::String(_, s) if s.eq_ignore_ascii_case("true") => Ok(true),
        Value::String(_, s) if s.eq_ignore_ascii_case("false") => Ok(false),
        _ => Err("must be true or false".into()),
    }
}

fn show(value: &Value) -> String {
    match value {
        Value::String(_, s) => s.clone(),
        Value::Char(_, c) => c.to_string(),
        Value::Bool(_, b) => b.to_string(),
        Value::Num(_, n) => match (n.to_u128(), n.to_i128(), n.to_f64()) {
            (Some(u), _, _) => u.to_string(),
            (_, Some(i), _) => i.to_string(),
            (_, _, Some(f)) => f.to_string(),
            _ => String::new(),
        },
        Value::Empty(..) => String::new(),
        // Not the value itself: what kind it is, as TOML elides one.
        Value::Dict(..) => "{…}".into(),
        Value::Array(..) => "[…]".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use figment::value::{Num, Tag};

    #[test]
    fn millis_conversion_table() {
        let num = |n: Num| Value::Num(Tag::Default, n);
        let text = |s: &str| Value::String(Tag::Default, s.into());
        let ok = [
            (num(Num::U64(5_000)), 5_000),
            (num(Num::I64(7)), 7),
            (num(Num::F64(3.0)), 3),
            (text(" 42 "), 42),
            (num(Num::U64(u64::from(u32::MAX))), u32::MAX),
        ];
        for (v, want) in ok {
            assert_eq!(to_millis(&v), Ok(want), "{v:?}");
        }
        let bad = [
            (num(Num::I64(-1)), "must not be negative"),
            (num(Num::F64(-2.0)), "must not be negative"),
            (num(Num::F64(1.5)), "must be a whole number of milliseconds"),
            (
                num(Num::U64(u64::from(u32::MAX) + 1)),
                "exceeds the largest timeout, 4294967295 ms (u32)",
            ),
            (
                num(Num::F64(1e12)),
                "exceeds the largest timeout, 4294967295 ms (u32)",
            ),
            (
                text("abc"),
                "must be a whole number of milliseconds, not text",
            ),
            (text("2.5"), "must be a whole number of milliseconds"),
            (
                Value::Bool(Tag::Default, true),
                "must be a number of milliseconds, not true/false",
            ),
        ];
        for (v, rule) in bad {
            assert_eq!(to_millis(&v).unwrap_err(), rule, "{v:?}");
        }
        assert_eq!(to_bool(&text("TRUE")), Ok(true));
        assert!(to_bool(&num(Num::U8(1))).is_err());
    }
}
