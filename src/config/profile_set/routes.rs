//! The routing table a [`ProfileSet`](super::ProfileSet) is built with: SW4-002's
//! standard routes, the configured ones over them (a bad pattern and a missing
//! profile each reported), and the idempotency marks.

use std::collections::{BTreeMap, HashMap};

use crate::config::{ConfigIssue, Overrides};
use crate::policy::route::{Route, RoutePattern, RouteTable, STANDARD_ROUTES};
use crate::policy::source::Source;

pub(super) fn build_routes<Declared>(
    merged: &Overrides,
    by_name: &HashMap<Box<str>, usize>,
    declared: &BTreeMap<String, Declared>,
    issues: &mut Vec<ConfigIssue>,
) -> RouteTable {
    let mut routes = RouteTable::default();
    for std_route in STANDARD_ROUTES.iter() {
        if let Some(&profile) = by_name.get(std_route.profile) {
            routes.insert_exact(
                std_route.path,
                Route {
                    profile,
                    streaming: std_route.streaming,
                    long_lived: std_route.long_lived,
                    message_field: std_route.message_field,
                    idempotent: std_route.idempotent,
                    source: Source::Standard,
                },
            );
        }
    }
    for setting in &merged.routes {
        let issue = |rule: String| ConfigIssue {
            key: format!("routes.\"{}\"", setting.pattern),
            value: setting.profile.clone(),
            rule,
            source: setting.source.clone(),
        };
        // The pattern and the profile are two problems where both are wrong: each is
        // reported, in one pass.
        let pattern = RoutePattern::parse(&setting.pattern);
        if let Err(rule) = &pattern {
            issues.push(issue(format!("route pattern {rule}")));
        }
        let Some(&profile) = by_name.get(setting.profile.as_str()) else {
            if declared.contains_key(&setting.profile) {
                // The profile exists but one of its values is wrong: that is reported
                // (once, where it was set); the route is not a second problem.
                continue;
            }
            let hint = crate::config::hint(&setting.profile, by_name.keys().map(|k| k.as_ref()));
            issues.push(issue(format!(
                "routes to a profile that does not exist{hint}"
            )));
            continue;
        };
        match pattern {
            Ok(RoutePattern::Exact(path)) => {
                let standard = STANDARD_ROUTES.iter().find(|r| r.path == path);
                routes.insert_exact(
                    &path,
                    Route {
                        profile,
                        streaming: setting.streaming || standard.is_some_and(|r| r.streaming),
                        long_lived: setting
                            .long_lived
                            .unwrap_or(standard.is_some_and(|r| r.long_lived)),
                        message_field: standard.and_then(|r| r.message_field),
                        idempotent: setting
                            .idempotent
                            .unwrap_or(standard.is_some_and(|r| r.idempotent)),
                        source: setting.source.clone(),
                    },
                );
            }
            Ok(RoutePattern::Service(service)) => routes.insert_service(
                &service,
                Route {
                    profile,
                    streaming: setting.streaming,
                    long_lived: setting.long_lived.unwrap_or(false),
                    message_field: None,
                    idempotent: setting.idempotent.unwrap_or(false),
                    source: setting.source.clone(),
                },
            ),
            // Reported above.
            Err(_) => {}
        }
    }
    mark_idempotency(merged, &mut routes, issues);
    routes
}

/// Applies the idempotency marks to routes already in the table; a mark on a path that
/// is not routed is reported.
fn mark_idempotency(merged: &Overrides, routes: &mut RouteTable, issues: &mut Vec<ConfigIssue>) {
    for mark in &merged.idempotency {
        let (pattern, idempotent) = &mark.value;
        let found = match RoutePattern::parse(pattern) {
            Ok(RoutePattern::Exact(path)) => routes.route_mut(&path),
            Ok(RoutePattern::Service(service)) => routes.service_mut(&service),
            Err(_) => None,
        };
        match found {
            Some(route) => route.idempotent = *idempotent,
            None => issues.push(ConfigIssue {
                key: format!("routes.\"{pattern}\".idempotent"),
                value: idempotent.to_string(),
                rule: "marks a path that is not routed: route it first (standard RPCs are routed)"
                    .into(),
                source: mark.source.clone(),
            }),
        }
    }
}
