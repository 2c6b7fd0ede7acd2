//! The `SW4RM_*` environment as one configuration tree, remembering the exact name of
//! every variable so that errors name it as it was set.
//!
//! `SW4RM_` + key path joined by `__`, case-insensitive (`SW4RM_PROFILES__HEARTBEAT__
//! MAX_TIMEOUT_MS`, or lowercase). `SW4RM_CONFIG` names the file and is not a key.
//! A name with an empty segment under one of our keys (`SW4RM_PROFILES__HEARTBEAT__`,
//! `..____MAX_TIMEOUT_MS`) is an error; variables of other SW4RM tools are left alone.

use std::collections::BTreeMap;
use std::ffi::OsString;

use figment::value::{Dict, Value};

use super::error::{did_you_mean, ConfigIssue};
use crate::policy::profile::ProfileField;
use crate::policy::source::Source;

const PREFIX: &str = "SW4RM_";

/// The tree and where each key path came from.
#[derive(Debug, Default)]
pub(super) struct EnvTree {
    pub(super) dict: Dict,
    /// Lowercase key path joined by `__` → the variable's name exactly as set.
    names: BTreeMap<String, String>,
}

impl EnvTree {
    /// The variable behind a key path (or the first one below it, for a table).
    pub(super) fn source(&self, path: &[&str]) -> Source {
        let key = path.join("__").to_ascii_lowercase();
        let below = format!("{key}__");
        let name = self.names.get(&key).or_else(|| {
            self.names
                .range(below.clone()..)
                .next()
                .filter(|(k, _)| k.starts_with(&below))
                .map(|(_, v)| v)
        });
        match name {
            Some(n) => Source::Env(n.as_str().into()),
            None => Source::Env(format!("{PREFIX}{}", path.join("__")).into()),
        }
    }
}

fn issue(name: &str, value: &str, rule: impl Into<String>) -> ConfigIssue {
    ConfigIssue {
        key: String::new(),
        value: value.to_owned(),
        rule: rule.into(),
        source: Source::Env(name.into()),
    }
}

/// The rule a name breaks when it is clearly meant for us but joins its keys with
/// single underscores (`SW4RM_PROFILES_HEARTBEAT_DEFAULT_TIMEOUT_MS`), with the name it
/// should have where the key path can be told; `None` for any other name.
fn single_underscores(rest: &str, top_keys: &[&str]) -> Option<String> {
    let lower = rest.to_ascii_lowercase();
    if lower.contains("__") || top_keys.contains(&lower.as_str()) {
        return None;
    }
    let top = top_keys
        .iter()
        .find(|t| lower.strip_prefix(**t).is_some_and(|r| r.starts_with('_')))?;
    let after = &lower[top.len() + 1..];
    let suggestion = (*top == "profiles")
        .then(|| {
            ProfileField::ALL.iter().find_map(|f| {
                let flat = f.key().replace('.', "_");
                let profile = after.strip_suffix(&flat)?.strip_suffix('_')?;
                (!profile.is_empty())
                    .then(|| format!("profiles__{profile}__{}", f.key().replace('.', "__")))
            })
        })
        .flatten()
        .map(|path| match rest.bytes().any(|b| b.is_ascii_lowercase()) {
            true => format!(" (did you mean {}{path}?)", PREFIX.to_ascii_lowercase()),
            false => format!(
                " (did you mean {PREFIX}{})",
                path.to_ascii_uppercase() + "?"
            ),
        })
        .unwrap_or_default();
    Some(format!(
        "malformed name: keys are joined by two underscores (`__`), so it sets nothing{suggestion}"
    ))
}

/// Reads the variables (the process environment, or a map a test or app gives).
pub(super) fn read(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    top_keys: &[&str],
    issues: &mut Vec<ConfigIssue>,
) -> EnvTree {
    let mut tree = EnvTree::default();
    for (name, value) in vars {
        let Some(name) = name.to_str() else {
            continue; // not one of ours: our names are ASCII
        };
        let Some(rest) = name
            .get(..PREFIX.len())
            .filter(|p| p.eq_ignore_ascii_case(PREFIX))
            .map(|_| &name[PREFIX.len()..])
        else {
            continue;
        };
        if rest.eq_ignore_ascii_case("config") {
            continue;
        }
        let segments: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
        let ours = segments.first().is_some_and(|s| {
            top_keys.contains(&s.as_str()) || did_you_mean(s, top_keys.iter().copied()).is_some()
        });
        let Some(value) = value.to_str() else {
            if ours {
                issues.push(issue(name, "", "the value is not valid UTF-8"));
            }
            continue;
        };
        if let Some(rule) = single_underscores(rest, top_keys) {
            issues.push(issue(name, value, rule));
            continue;
        }
        if segments.iter().any(String::is_empty) {
            if ours {
                issues.push(issue(
                    name,
                    value,
                    "malformed name: an empty key between `__` separators (keys are joined by exactly two underscores)",
                ));
            }
            continue;
        }
        let key = segments.join("__");
        if let Some(first) = tree.names.get(&key) {
            issues.push(issue(
                name,
                value,
                format!("sets the same key as {first} (names are case-insensitive)"),
            ));
            continue;
        }
        let parsed = match value.parse::<Value>() {
            Ok(v) => v,
            Err(never) => match never {},
        };
        if insert(&mut tree.dict, &segments, parsed).is_err() {
            issues.push(issue(
                name,
                value,
                "conflicts with another SW4RM_ variable: a key cannot be both a value and a table",
            ));
            continue;
        }
        tree.names.insert(key, name.to_owned());
    }
    tree
}

/// Puts `value` at `path` in the tree; `Err` when the path crosses a value.
fn insert(dict: &mut Dict, path: &[String], value: Value) -> Result<(), ()> {
    let Some((last, parents)) = path.split_last() else {
        return Err(());
    };
    let mut cur = dict;
    for key in parents {
        let entry = cur
            .entry(key.clone())
            .or_insert_with(|| Value::from(Dict::new()));
        cur = match entry {
            Value::Dict(_, d) => d,
            _ => return Err(()),
        };
    }
    match cur.get(last) {
        Some(_) => Err(()),
        None => {
            cur.insert(last.clone(), value);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOP: [&str; 3] = ["profiles", "routes", "fallback_profile"];

    fn vars(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn names_table() {
        struct Row {
            var: &'static str,
            /// The issue's rule text fragment, or None when accepted or ignored.
            rule: Option<&'static str>,
            /// Whether the value lands in the tree.
            read: bool,
        }
        let rows = [
            Row {
                var: "SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS",
                rule: None,
                read: true,
            },
            Row {
                var: "sw4rm_profiles__heartbeat__max_timeout_ms",
                rule: None,
                read: true,
            },
            Row {
                var: "SW4RM_PROFILES__HEARTBEAT____MAX_TIMEOUT_MS",
                rule: Some("empty key"),
                read: false,
            },
            Row {
                var: "SW4RM_PROFILES__HEARTBEAT__",
                rule: Some("empty key"),
                read: false,
            },
            Row {
                var: "SW4RM_PROFILS__HEARTBEAT__",
                rule: Some("empty key"),
                read: false,
            },
            Row {
                var: "SW4RM_SECRETS__BACKEND__",
                rule: None,
                read: false,
            },
            // Single underscores: clearly ours, and malformed.
            Row {
                var: "SW4RM_PROFILES_HEARTBEAT_DEFAULT_TIMEOUT_MS",
                rule: Some(
                    "keys are joined by two underscores (`__`), so it sets nothing (did you \
                     mean SW4RM_PROFILES__HEARTBEAT__DEFAULT_TIMEOUT_MS?)",
                ),
                read: false,
            },
            Row {
                var: "sw4rm_profiles_task_submit_retry_max_attempts",
                rule: Some("(did you mean sw4rm_profiles__task_submit__retry__max_attempts?)"),
                read: false,
            },
            Row {
                var: "SW4RM_ROUTES_X",
                rule: Some("keys are joined by two underscores (`__`), so it sets nothing"),
                read: false,
            },
            // Not ours: another tool's variable, and our own top-level key.
            Row {
                var: "SW4RM_LOG_LEVEL",
                rule: None,
                read: true, // into the tree, where no key of ours reads it
            },
            Row {
                var: "SW4RM_FALLBACK_PROFILE",
                rule: None,
                read: true,
            },
            Row {
                var: "SW4RM_CONFIG",
                rule: None,
                read: false,
            },
            Row {
                var: "OTHER_PROFILES__X",
                rule: None,
                read: false,
            },
        ];
        for row in rows {
            let mut issues = Vec::new();
            let tree = read(vars(&[(row.var, "5")]), &TOP, &mut issues);
            match row.rule {
                None => assert!(issues.is_empty(), "{}: {issues:?}", row.var),
                Some(rule) => {
                    assert_eq!(issues.len(), 1, "{}", row.var);
                    assert!(
                        issues[0].rule.contains(rule),
                        "{}: {}",
                        row.var,
                        issues[0].rule
                    );
                    assert_eq!(
                        issues[0].source,
                        Source::Env(row.var.into()),
                        "named as set"
                    );
                }
            }
            assert_eq!(!tree.dict.is_empty(), row.read, "{}", row.var);
        }
    }

    #[test]
    fn sources_name_the_variable_as_set() {
        let mut issues = Vec::new();
        let tree = read(
            vars(&[("sw4rm_profiles__heartbeat__default_timeout_ms", "abc")]),
            &TOP,
            &mut issues,
        );
        assert!(issues.is_empty());
        assert_eq!(
            tree.source(&["profiles", "heartbeat", "default_timeout_ms"]),
            Source::Env("sw4rm_profiles__heartbeat__default_timeout_ms".into())
        );
        assert_eq!(
            tree.source(&["profiles", "heartbeat"]),
            Source::Env("sw4rm_profiles__heartbeat__default_timeout_ms".into())
        );
    }

    #[test]
    fn the_same_key_twice_and_value_table_conflicts_are_errors() {
        let mut issues = Vec::new();
        read(
            vars(&[
                ("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "1"),
                ("sw4rm_profiles__heartbeat__max_timeout_ms", "2"),
                ("SW4RM_PROFILES__TOOL_CALL", "3"),
                ("SW4RM_PROFILES__TOOL_CALL__MAX_TIMEOUT_MS", "4"),
            ]),
            &TOP,
            &mut issues,
        );
        let rules: Vec<_> = issues.iter().map(|i| i.rule.as_str()).collect();
        assert_eq!(rules.len(), 2, "{rules:?}");
        assert!(rules[0].contains("same key as SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS"));
        assert!(rules[1].contains("both a value and a table"));
    }
}
