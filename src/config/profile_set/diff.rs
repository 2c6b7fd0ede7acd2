//! What differs between two profile tables, one line per value, for the log line of a
//! reload and for a preview before one.

use std::collections::BTreeMap;
use std::fmt::Debug;

use super::ProfileSet;

impl ProfileSet {
    /// What changes from `old` to this table, one line per value
    /// (`heartbeat.default_timeout_ms 5000 -> 2000`, `route /acme.Batch/* added
    /// (profile workflow_submit)`); empty when the two tables time every call alike.
    ///
    /// ```
    /// use sw4rm_timeouts::ProfileSet;
    /// let old = ProfileSet::standard();
    /// let new = ProfileSet::builder()
    ///     .without_global()
    ///     .default_timeout_ms("heartbeat", 2_000)
    ///     .route("/acme.Batch/*", "workflow_submit")
    ///     .build()?;
    /// assert_eq!(
    ///     new.changes_since(&old),
    ///     [
    ///         "heartbeat.default_timeout_ms 5000 -> 2000",
    ///         "route /acme.Batch/* added (profile workflow_submit)",
    ///     ]
    /// );
    /// assert!(old.changes_since(&ProfileSet::standard()).is_empty());
    /// # Ok::<(), sw4rm_timeouts::ConfigError>(())
    /// ```
    pub fn changes_since(&self, old: &ProfileSet) -> Vec<String> {
        let mut out = Vec::new();
        for p in self.profiles() {
            let name = &p.profile.name;
            let Some(was) = old.resolved(name) else {
                out.push(format!("profile {name} added"));
                continue;
            };
            let (a, b) = (&was.profile, &p.profile);
            let mut field = |key: &str, before: &dyn Debug, after: &dyn Debug| {
                let (before, after) = (format!("{before:?}"), format!("{after:?}"));
                if before != after {
                    out.push(format!("{name}.{key} {before} -> {after}"));
                }
            };
            field(
                "default_timeout_ms",
                &a.default_timeout_ms,
                &b.default_timeout_ms,
            );
            field("min_timeout_ms", &a.min_timeout_ms, &b.min_timeout_ms);
            field("max_timeout_ms", &a.max_timeout_ms, &b.max_timeout_ms);
            field("allow_infinite", &a.allow_infinite, &b.allow_infinite);
            let (s, t) = (was.streaming(), p.streaming());
            field(
                "streaming.initial_timeout_ms",
                &s.initial_timeout_ms,
                &t.initial_timeout_ms,
            );
            field(
                "streaming.message_gap_timeout_ms",
                &s.message_gap_timeout_ms,
                &t.message_gap_timeout_ms,
            );
            field(
                "streaming.total_timeout_ms",
                &s.total_timeout_ms,
                &t.total_timeout_ms,
            );
            field(
                "streaming.idle_timeout_ms",
                &s.idle_timeout_ms,
                &t.idle_timeout_ms,
            );
            field("retry", &was.retry(), &p.retry());
            field("hedging", &was.hedging(), &p.hedging());
        }
        for p in old.profiles() {
            if self.resolved(&p.profile.name).is_none() {
                out.push(format!("profile {} removed", p.profile.name));
            }
        }
        routes(old, self, &mut out);
        if self.fallback().name != old.fallback().name {
            out.push(format!(
                "fallback {} -> {}",
                old.fallback().name,
                self.fallback().name
            ));
        }
        out
    }
}

/// The routes added, removed or changed from `old` to `new`.
fn routes(old: &ProfileSet, new: &ProfileSet, out: &mut Vec<String>) {
    let key = |r: &super::RouteEntry<'_>| {
        let mut flags = vec![format!("profile {}", r.profile)];
        for (on, flag) in [
            (r.streaming, "streaming"),
            (r.long_lived, "long-lived"),
            (r.idempotent, "idempotent"),
        ] {
            if on {
                flags.push(flag.to_owned());
            }
        }
        flags.join(", ")
    };
    let before: BTreeMap<String, String> =
        old.routes().map(|r| (r.pattern.clone(), key(&r))).collect();
    let after: BTreeMap<String, String> =
        new.routes().map(|r| (r.pattern.clone(), key(&r))).collect();
    for (pattern, now) in &after {
        match before.get(pattern) {
            None => out.push(format!("route {pattern} added ({now})")),
            Some(was) if was != now => out.push(format!("route {pattern} ({was}) -> ({now})")),
            Some(_) => {}
        }
    }
    for pattern in before.keys().filter(|p| !after.contains_key(*p)) {
        out.push(format!("route {pattern} removed"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::streaming::StreamingTimeoutPolicy;

    #[test]
    fn each_kind_of_change_is_named() {
        let old = ProfileSet::standard();
        let cases: Vec<(ProfileSet, &[&str])> = vec![
            (ProfileSet::standard(), &[]),
            (
                ProfileSet::builder()
                    .without_global()
                    .max_timeout_ms("tool_call", 1_200_000)
                    .build()
                    .unwrap(),
                &["tool_call.max_timeout_ms 3600000 -> 1200000"],
            ),
            (
                ProfileSet::builder()
                    .without_global()
                    .streaming(
                        "tool_call",
                        StreamingTimeoutPolicy {
                            idle_timeout_ms: 10_000,
                            ..ProfileSet::standard()
                                .resolved("tool_call")
                                .unwrap()
                                .streaming()
                        },
                    )
                    .build()
                    .unwrap(),
                &["tool_call.streaming.idle_timeout_ms 0 -> 10000"],
            ),
            (
                ProfileSet::builder()
                    .without_global()
                    .fallback_profile("heartbeat")
                    .build()
                    .unwrap(),
                &["fallback universal -> heartbeat"],
            ),
        ];
        for (new, want) in cases {
            assert_eq!(new.changes_since(&old), want);
        }
        // Backwards: the route added is removed.
        let with_route = ProfileSet::builder()
            .without_global()
            .route("/acme.Batch/Run", "tool_call")
            .build()
            .unwrap();
        assert_eq!(
            old.changes_since(&with_route),
            ["route /acme.Batch/Run removed"]
        );
    }
}
