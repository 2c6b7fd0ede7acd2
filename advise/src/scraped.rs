//! The profile table an agent had in use, read back from its scrape: the gauge
//! `sw4rm_rpc_configured_timeout_ms{profile, bound}` (`default`, `min`, `max`; the
//! layer's `MetricFamily::ConfiguredTimeouts`). The advisor judges a scrape against
//! the table that produced it, and names every value where another table (a
//! `--config` file) disagrees with it.

use std::collections::BTreeMap;

use super::exposition::split;
use sw4rm_timeouts::metrics::CONFIGURED_TIMEOUT_MS;
use sw4rm_timeouts::ProfileField;
use sw4rm_timeouts::Source;
use sw4rm_timeouts::TimeoutProfile;
use sw4rm_timeouts::{ProfileSet, ProfileSetBuilder};

/// One profile's bounds as scraped (milliseconds; `None`: not in the scrape).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScrapedBounds {
    /// `bound="default"`.
    pub default_ms: Option<u32>,
    /// `bound="min"`.
    pub min_ms: Option<u32>,
    /// `bound="max"`.
    pub max_ms: Option<u32>,
}

/// The table in use as a scrape tells it, by profile.
///
/// ```
/// use sw4rm_advise::ScrapedTable;
/// use sw4rm_timeouts::ProfileSet;
/// let scrape = "sw4rm_rpc_configured_timeout_ms{bound=\"default\",profile=\"heartbeat\"} 1000\n";
/// let table = ScrapedTable::from_exposition(scrape);
/// assert_eq!(table.profile("heartbeat").unwrap().default_ms, Some(1_000));
/// let standard = ProfileSet::standard();
/// assert_eq!(
///     table.differences(&standard, "--config sw4rm.toml"),
///     ["heartbeat default_timeout_ms: 1000 ms in the scrape, 5000 ms in SW4-002's \
///       standard table (--config sw4rm.toml does not set it)"]
/// );
/// let in_use = table.apply(ProfileSet::builder().without_global(), &standard).build()?;
/// assert_eq!(in_use.profile("heartbeat").unwrap().default_timeout_ms, 1_000);
/// # Ok::<(), sw4rm_timeouts::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrapedTable {
    profiles: BTreeMap<String, ScrapedBounds>,
}

impl ScrapedTable {
    /// The gauge's values in a Prometheus text exposition (lines that are not the
    /// gauge's, or do not parse, are passed over; a value that is not a whole number
    /// of milliseconds in `u32` is left out).
    pub fn from_exposition(text: &str) -> Self {
        let mut table = ScrapedTable::default();
        for line in text.lines().map(str::trim) {
            if !line.starts_with(CONFIGURED_TIMEOUT_MS) {
                continue;
            }
            let Some((CONFIGURED_TIMEOUT_MS, labels, value)) = split(line) else {
                continue;
            };
            let label = |key: &str| labels.iter().find(|(k, _)| k == key).map(|(_, v)| v);
            let (Some(profile), Some(bound)) = (label("profile"), label("bound")) else {
                continue;
            };
            let ms = value.trim().parse::<f64>().ok().filter(|v| {
                v.is_finite() && *v >= 0.0 && v.fract() == 0.0 && *v <= f64::from(u32::MAX)
            });
            let Some(ms) = ms.map(|v| v as u32) else {
                continue;
            };
            let bounds = table.profiles.entry(profile.clone()).or_default();
            match bound.as_str() {
                "default" => bounds.default_ms = Some(ms),
                "min" => bounds.min_ms = Some(ms),
                "max" => bounds.max_ms = Some(ms),
                _ => {}
            }
        }
        table
    }

    /// Whether the scrape had the gauge at all.
    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// One profile's bounds, if the scrape had them.
    pub fn profile(&self, name: &str) -> Option<&ScrapedBounds> {
        self.profiles.get(name)
    }

    /// Every value where `other` (named `other_name` in the lines) disagrees with the
    /// scrape: `heartbeat default_timeout_ms: 1000 ms in the scrape, 5000 ms in …`.
    pub fn differences(&self, other: &ProfileSet, other_name: &str) -> Vec<String> {
        let mut lines = Vec::new();
        for (name, bounds) in &self.profiles {
            let theirs = other.resolved(name);
            let value = |field: ProfileField, ms: fn(&TimeoutProfile) -> u32| {
                theirs.map(|p| (ms(p.profile()), p.source_of(field)))
            };
            let rows = [
                (
                    "default_timeout_ms",
                    bounds.default_ms,
                    value(ProfileField::Default, |p| p.default_timeout_ms),
                ),
                (
                    "min_timeout_ms",
                    bounds.min_ms,
                    value(ProfileField::Min, |p| p.min_timeout_ms),
                ),
                (
                    "max_timeout_ms",
                    bounds.max_ms,
                    value(ProfileField::Max, |p| p.max_timeout_ms),
                ),
            ];
            for (key, scraped, theirs) in rows {
                let Some(scraped) = scraped else { continue };
                match theirs {
                    Some((t, _)) if t == scraped => {}
                    // Where the value came from: the file only where it set it.
                    Some((t, Source::Standard)) => lines.push(format!(
                        "{name} {key}: {scraped} ms in the scrape, {t} ms in SW4-002's \
                         standard table ({other_name} does not set it)"
                    )),
                    Some((t, source)) => lines.push(format!(
                        "{name} {key}: {scraped} ms in the scrape, {t} ms in {other_name} \
                         ({source})"
                    )),
                    None => lines.push(format!(
                        "{name} {key}: {scraped} ms in the scrape, no such profile in {other_name}"
                    )),
                }
            }
        }
        lines
    }

    /// `builder` with the scraped values laid over it (client level): a profile
    /// `base` knows gets each bound the scrape has; one it does not know is defined
    /// whole when the scrape has all three bounds (not allowing infinite).
    pub fn apply(&self, mut builder: ProfileSetBuilder, base: &ProfileSet) -> ProfileSetBuilder {
        for (name, b) in &self.profiles {
            if base.profile(name).is_some() {
                if let Some(ms) = b.min_ms {
                    builder = builder.min_timeout_ms(name, ms);
                }
                if let Some(ms) = b.max_ms {
                    builder = builder.max_timeout_ms(name, ms);
                }
                if let Some(ms) = b.default_ms {
                    builder = builder.default_timeout_ms(name, ms);
                }
                continue;
            }
            let (Some(default_ms), Some(min_ms), Some(max_ms)) = (b.default_ms, b.min_ms, b.max_ms)
            else {
                continue;
            };
            let ms = |v: u32| std::time::Duration::from_millis(u64::from(v));
            if let Ok(profile) = TimeoutProfile::builder(name.clone())
                .default_timeout(ms(default_ms))
                .min_timeout(ms(min_ms))
                .max_timeout(ms(max_ms))
                .build()
            {
                builder = builder.profile(&profile);
            }
        }
        builder
    }
}
