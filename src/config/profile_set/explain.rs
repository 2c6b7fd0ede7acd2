//! The effective table for operators: `Display` for [`ProfileSet`] (every value with
//! its source) and [`ProfileSet::explain`] (one line per profile).

use std::fmt;

use crate::config::Field;
use crate::policy::hedge::{HedgingDelay, HedgingPolicy};
use crate::policy::profile::ProfileField;
use crate::policy::source::Source;

use super::ProfileSet;

impl fmt::Display for ProfileSet {
    /// ```
    /// let text = sw4rm_timeouts::ProfileSet::standard().to_string();
    /// assert!(text.contains("heartbeat"));
    /// assert!(text.contains("/sw4rm.registry.RegistryService/Heartbeat"));
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Profiles (value  source):")?;
        for p in &self.profiles {
            writeln!(f, "  {}", p.profile.name)?;
            for &field in Field::ALL {
                let value = match field {
                    Field::Default => p.profile.default_timeout_ms.to_string(),
                    Field::Min => p.profile.min_timeout_ms.to_string(),
                    Field::Max => p.profile.max_timeout_ms.to_string(),
                    Field::AllowInfinite => p.profile.allow_infinite.to_string(),
                    Field::StreamInitial => p.streaming.initial_timeout_ms.to_string(),
                    Field::StreamGap => p.streaming.message_gap_timeout_ms.to_string(),
                    Field::StreamTotal => p.streaming.total_timeout_ms.to_string(),
                    Field::StreamIdle => p.streaming.idle_timeout_ms.to_string(),
                    other => {
                        let at = |fields: &[Field]| fields.iter().position(|f| *f == other);
                        match (at(&Field::RETRY), at(&Field::HEDGING)) {
                            (Some(i), _) => p.retry.fields()[i].to_string(),
                            (None, Some(i)) => p.hedging.fields()[i].to_string(),
                            (None, None) => String::new(),
                        }
                    }
                };
                writeln!(
                    f,
                    "    {:<34} {:>9}  {}",
                    field.key(),
                    value,
                    p.sources[field.index()]
                )?;
            }
        }
        writeln!(f, "Routes:")?;
        for (path, route) in &self.routes.exact {
            let kind = kind(route);
            writeln!(
                f,
                "  {:<66} {}{kind}  {}",
                path, self.profiles[route.profile].profile.name, route.source
            )?;
        }
        let mut services: Vec<_> = self.routes.services().collect();
        services.sort_by_key(|(s, _)| *s);
        for (service, route) in services {
            let kind = kind(route);
            let pattern = format!("/{service}/*");
            writeln!(
                f,
                "  {:<66} {}{kind}  {}",
                pattern, self.profiles[route.profile].profile.name, route.source
            )?;
        }
        write!(
            f,
            "Fallback (any other path): {}  {}",
            self.profiles[self.fallback].profile.name, self.fallback_source
        )
    }
}

/// How a route is listed: its shape and whether it is idempotent.
fn kind(route: &crate::policy::route::Route) -> &'static str {
    match (route.streaming, route.long_lived, route.idempotent) {
        (_, true, true) => " (long-lived stream, idempotent)",
        (_, true, false) => " (long-lived stream)",
        (true, false, true) => " (streaming, idempotent)",
        (true, false, false) => " (streaming)",
        (false, false, true) => " (idempotent)",
        (false, false, false) => "",
    }
}

impl ProfileSet {
    /// The effective table in the compact form `sw4rm-timeouts explain` prints: one
    /// line per profile (default, min, max, infinite, attempts, hedging, a stream's idle
    /// limit and cap as `idle/cap`), naming the source of every field that is not the
    /// standard value. (`Display` gives every field with
    /// its source, for a close look at one deployment.)
    ///
    /// ```
    /// let set = sw4rm_timeouts::ProfileSet::builder()
    ///     .without_global()
    ///     .default_timeout_ms("heartbeat", 2_000)
    ///     .build()?;
    /// let table = set.explain();
    /// assert!(table.starts_with("profile "));
    /// let heartbeat = table.lines().find(|l| l.starts_with("heartbeat")).unwrap();
    /// assert!(heartbeat.contains("2000") && heartbeat.ends_with("default_timeout_ms=client"));
    /// // Long work: a stream's idle limit and cap.
    /// let set = sw4rm_timeouts::ProfileSet::builder()
    ///     .without_global()
    ///     .streaming("tool_call", sw4rm_timeouts::StreamingTimeoutPolicy {
    ///         idle_timeout_ms: 120_000, total_timeout_ms: 1_800_000, ..Default::default()
    ///     })
    ///     .build()?;
    /// let tool = set.explain().lines().find(|l| l.starts_with("tool_call")).unwrap().to_owned();
    /// assert!(tool.contains(" 120000/1800000 "), "{tool}");
    /// # Ok::<(), sw4rm_timeouts::ConfigError>(())
    /// ```
    pub fn explain(&self) -> String {
        let set = self;
        let mut out = format!(
            "{:<22} {:>10} {:>9} {:>10} {:>4} {:>8} {:>9} {:>15}  {}\n",
            "profile",
            "default_ms",
            "min_ms",
            "max_ms",
            "inf",
            "attempts",
            "hedging",
            "idle/cap_ms",
            "set by"
        );
        for p in set.profiles() {
            let t = p.profile();
            let changed: Vec<String> = ProfileField::ALL
                .iter()
                .filter(|f| p.source_of(**f) != &Source::Standard)
                .map(|f| format!("{}={}", f.key(), p.source_of(*f)))
                .collect();
            out.push_str(&format!(
                "{:<22} {:>10} {:>9} {:>10} {:>4} {:>8} {:>9} {:>15}  {}\n",
                t.name,
                t.default_timeout_ms,
                t.min_timeout_ms,
                t.max_timeout_ms,
                if t.allow_infinite { "yes" } else { "no" },
                p.retry().max_attempts(),
                hedging(&p.hedging()),
                idle_cap(&p.streaming()),
                if changed.is_empty() {
                    "standard".to_owned()
                } else {
                    changed.join(", ")
                }
            ));
        }
        out
    }
}

/// A stream's idle limit and cap: `-` when neither is set, else `idle/cap` with `off`
/// for a zero.
fn idle_cap(p: &crate::policy::streaming::StreamingTimeoutPolicy) -> String {
    let word = |v: u32| match v {
        0 => "off".to_owned(),
        v => v.to_string(),
    };
    match (p.idle_timeout_ms, p.total_timeout_ms) {
        (0, 0) => "-".to_owned(),
        (idle, cap) => format!("{}/{}", word(idle), word(cap)),
    }
}

/// A hedging policy in one word: `off`, `2x40ms` (fixed) or `3xp95` (learned).
fn hedging(policy: &HedgingPolicy) -> String {
    match (policy.is_on(), policy.delay()) {
        (false, _) => "off".to_owned(),
        (true, HedgingDelay::Fixed(d)) => format!("{}x{}ms", policy.max_attempts(), d.as_millis()),
        (true, HedgingDelay::Learned { percentile, .. }) => {
            format!("{}xp{percentile}", policy.max_attempts())
        }
    }
}
