//! `Display` for [`ProfileSet`]: the effective table with the source of every value,
//! for operators debugging a deployment.

use std::fmt;

use crate::config::Field;

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
                    retry => {
                        let i = Field::RETRY.iter().position(|f| *f == retry).unwrap_or(0);
                        p.retry.fields()[i].to_string()
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
