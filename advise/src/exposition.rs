//! Routes' latencies read back from a Prometheus text exposition of this SDK's
//! metrics: `sw4rm_rpc_duration_ms` (a histogram with `service`, `method` and
//! `profile` labels) and `sw4rm_rpc_timeout_total`.
//!
//! Bucket resolution costs precision: a quantile is only known to lie in its bucket
//! (boundaries in steps of 1, 1.5, 2, 3, 5 and 7), and is reported as the bucket's
//! upper bound. The
//! duration histogram counts every call; calls that timed out (the timeout counter)
//! are taken off its highest buckets, where they were recorded, and the rest count as
//! successful calls (failures other than timeouts among them).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use sw4rm_timeouts::observations::LatencySnapshot;
use sw4rm_timeouts::observations::RouteLatency;

const DURATION: &str = "sw4rm_rpc_duration_ms_bucket";
const TIMEOUTS: &str = "sw4rm_rpc_timeout_total";

/// Why an exposition could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExpositionError {
    /// A line of one of our series that does not parse.
    Malformed {
        /// The line's number, from 1.
        line: usize,
        /// The line as read.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// No `sw4rm_rpc_duration_ms` series at all: not an exposition of this SDK's
    /// metrics (or no call was made).
    Foreign,
    /// A route's histogram without its `le="+Inf"` bucket: calls above its highest
    /// bound would silently drop out of the advice.
    NoInfBucket {
        /// The route, `/service/method`.
        path: String,
        /// Its profile label.
        profile: String,
        /// The highest bound the histogram has, in milliseconds, as written.
        highest_ms: String,
    },
}

impl fmt::Display for ExpositionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpositionError::Malformed { line, text, why } => {
                write!(f, "line {line}: {why}: {text}")
            }
            ExpositionError::NoInfBucket {
                path,
                profile,
                highest_ms,
            } => write!(
                f,
                "sw4rm_rpc_duration_ms for {path} (profile {profile}) has no le=\"+Inf\" \
                 bucket, only buckets up to {highest_ms} ms: calls slower than that would \
                 drop out of the advice; give the whole histogram (a scrape or the \
                 exporter's output as it is, not filtered by `le`)"
            ),
            ExpositionError::Foreign => write!(
                f,
                "no sw4rm_rpc_duration_ms_bucket series: not a Prometheus exposition of the \
                 SW4RM SDK's metrics (sw4rm_rpc_duration_ms, sw4rm_rpc_timeout_total)"
            ),
        }
    }
}

impl std::error::Error for ExpositionError {}

type Key = (String, String, String);

#[derive(Default)]
struct Series {
    /// Cumulative counts by upper bound in ms (`None`: +Inf).
    cumulative: Vec<(Option<f64>, u64)>,
    timeouts: u64,
}

/// Every route's latencies in a Prometheus text exposition.
///
/// ```
/// use sw4rm_advise::from_exposition;
/// let text = "\
/// sw4rm_rpc_duration_ms_bucket{method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\",le=\"10\"} 95
/// sw4rm_rpc_duration_ms_bucket{method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\",le=\"+Inf\"} 100
/// sw4rm_rpc_timeout_total{method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\"} 2
/// ";
/// let routes = from_exposition(text)?;
/// assert_eq!(routes[0].path(), "/sw4rm.registry.RegistryService/Heartbeat");
/// assert_eq!((routes[0].latency.successes(), routes[0].latency.timeouts()), (98, 2));
/// # Ok::<(), sw4rm_advise::ExpositionError>(())
/// ```
pub fn from_exposition(text: &str) -> Result<Vec<RouteLatency>, ExpositionError> {
    let mut series: BTreeMap<Key, Series> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let is_ours = line.starts_with(DURATION) || line.starts_with(TIMEOUTS);
        if line.starts_with('#') || !is_ours {
            continue;
        }
        let bad = |why| ExpositionError::Malformed {
            line: n + 1,
            text: line.to_owned(),
            why,
        };
        let (name, labels, value) = split(line).ok_or_else(|| bad("not `name{labels} value`"))?;
        let label = |k: &str| {
            labels
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        let (Some(service), Some(method), Some(profile)) =
            (label("service"), label("method"), label("profile"))
        else {
            return Err(bad("a series without service, method and profile labels"));
        };
        let count = value
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad("a count that is not a number"))?;
        if count < 0.0 {
            return Err(bad("a negative count"));
        }
        let count = count as u64;
        let entry = series.entry((service, method, profile)).or_default();
        if name == TIMEOUTS {
            entry.timeouts = entry.timeouts.saturating_add(count);
            continue;
        }
        let le = match label("le").as_deref() {
            Some("+Inf") => None,
            Some(v) => Some(
                v.parse::<f64>()
                    .map_err(|_| bad("an `le` that is not a number"))?,
            ),
            None => return Err(bad("a bucket without `le`")),
        };
        entry.cumulative.push((le, count));
    }
    if series.values().all(|s| s.cumulative.is_empty()) {
        return Err(ExpositionError::Foreign);
    }
    for ((service, method, profile), s) in &series {
        if !s.cumulative.is_empty() && s.cumulative.iter().all(|(le, _)| le.is_some()) {
            let highest_ms = s
                .cumulative
                .iter()
                .filter_map(|(le, _)| *le)
                .fold(f64::MIN, f64::max);
            return Err(ExpositionError::NoInfBucket {
                path: format!("/{service}/{method}"),
                profile: profile.clone(),
                highest_ms: highest_ms.to_string(),
            });
        }
    }
    Ok(series
        .into_iter()
        .filter(|(_, s)| !s.cumulative.is_empty())
        .map(|((service, method, profile), s)| {
            RouteLatency::new(service, method, profile, snapshot(s))
        })
        .collect())
}

/// Cumulative buckets to a snapshot, the timed-out calls taken off the top.
fn snapshot(mut s: Series) -> LatencySnapshot {
    s.cumulative.sort_by(|a, b| {
        a.0.unwrap_or(f64::INFINITY)
            .total_cmp(&b.0.unwrap_or(f64::INFINITY))
    });
    let mut buckets: Vec<(Duration, u64)> = Vec::with_capacity(s.cumulative.len());
    let mut below = 0u64;
    for (le, cumulative) in &s.cumulative {
        // A bound past any duration (or not a number) is as good as +Inf: peer input
        // never panics.
        let upper = le.map_or(Duration::MAX, |ms| {
            Duration::try_from_secs_f64(ms.max(0.0) / 1_000.0).unwrap_or(Duration::MAX)
        });
        buckets.push((upper, cumulative.saturating_sub(below)));
        below = below.max(*cumulative);
    }
    let mut left = s.timeouts;
    for (_, n) in buckets.iter_mut().rev() {
        let taken = left.min(*n);
        *n -= taken;
        left -= taken;
    }
    LatencySnapshot::from_buckets(&buckets, s.timeouts)
}

/// A series' labels, as `(key, value)` pairs.
type Labels = Vec<(String, String)>;

/// `name{k="v",…} value` (labels optional).
pub(super) fn split(line: &str) -> Option<(&str, Labels, &str)> {
    let (head, value) = line.rsplit_once(' ')?;
    let Some((name, rest)) = head.split_once('{') else {
        return Some((head, Vec::new(), value));
    };
    let body = rest.strip_suffix('}')?;
    Some((name, labels(body)?, value))
}

/// `k="v",k2="v2"` with `\"`, `\\` and `\n` escapes in values.
fn labels(body: &str) -> Option<Labels> {
    let mut out = Vec::new();
    let mut chars = body.chars().peekable();
    loop {
        while chars.peek() == Some(&',') || chars.peek() == Some(&' ') {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if chars.next() != Some('"') {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                c => value.push(c),
            }
        }
        out.push((key.trim().to_owned(), value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str =
        "method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\"";

    #[test]
    fn buckets_become_a_snapshot_with_timeouts_off_the_top() {
        let text = format!(
            "# HELP sw4rm_rpc_duration_ms x\n# TYPE sw4rm_rpc_duration_ms histogram\n\
             sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"5\"}} 50\n\
             sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"10\"}} 90\n\
             sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"5000\"}} 95\n\
             sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"+Inf\"}} 100\n\
             sw4rm_rpc_duration_ms_sum{{{ROUTE}}} 1234\n\
             sw4rm_rpc_timeout_total{{{ROUTE}}} 10\n\
             other_metric{{a=\"b\"}} 3\n"
        );
        let routes = from_exposition(&text).unwrap();
        assert_eq!(routes.len(), 1);
        let l = &routes[0].latency;
        // 100 calls, 10 timed out: the 5 above +Inf's bound and 5 of the 5000 ms bucket.
        assert_eq!((l.successes(), l.timeouts()), (90, 10));
        let p99 = l.quantile(0.99).unwrap();
        assert!(p99 <= Duration::from_millis(10), "{p99:?}");
        assert!(p99 > Duration::from_micros(9_600), "{p99:?}");
    }

    #[test]
    fn foreign_and_malformed_input() {
        assert_eq!(from_exposition("up 1\n"), Err(ExpositionError::Foreign));
        assert_eq!(from_exposition(""), Err(ExpositionError::Foreign));
        let err = from_exposition(&format!(
            "sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"x\"}} 1"
        ))
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("line 1: an `le` that is not a number"),
            "{err}"
        );
        let err = from_exposition("sw4rm_rpc_duration_ms_bucket{le=\"5\"} 1").unwrap_err();
        assert!(err.to_string().contains("without service"), "{err}");
        // Negative counts say so; counts that are not numbers say that.
        for (count, why) in [
            ("-3", "a negative count"),
            ("NaN", "a count that is not a number"),
        ] {
            let err = from_exposition(&format!(
                "sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"+Inf\"}} {count}"
            ))
            .unwrap_err();
            assert!(
                err.to_string().starts_with(&format!("line 1: {why}: ")),
                "{err}"
            );
        }
    }

    /// All calls in one bucket: the advice says the bucket, not a figure the scrape
    /// never gave (the bucket's lower end).
    #[test]
    fn quantiles_from_a_scrape_name_their_bucket() {
        let routes = from_exposition(&format!(
            "sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"500\"}} 0\n\
             sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"1000\"}} 4000\n\
             sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"+Inf\"}} 4000\n"
        ))
        .unwrap();
        assert_eq!(
            routes[0].latency.quantile(0.99),
            Some(Duration::from_millis(1_000))
        );
        let advice = crate::Advice::new(&sw4rm_timeouts::ProfileSet::standard(), &routes);
        let text = advice.to_string();
        assert!(
            text.contains("p50, p99 and p99.9 all ≤ 1000 ms over 4000 calls"),
            "{text}"
        );
        assert!(!text.contains("999 ms"), "{text}");
    }

    /// A histogram without its `+Inf` bucket is refused: the calls above its highest
    /// bound would otherwise drop out of the advice unseen.
    #[test]
    fn a_histogram_without_its_inf_bucket_is_refused() {
        let err = from_exposition(&format!(
            "sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"100\"}} 90\n\
             sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"250\"}} 95\n"
        ))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "sw4rm_rpc_duration_ms for /sw4rm.registry.RegistryService/Heartbeat (profile \
             heartbeat) has no le=\"+Inf\" bucket, only buckets up to 250 ms: calls slower \
             than that would drop out of the advice; give the whole histogram (a scrape or \
             the exporter's output as it is, not filtered by `le`)"
        );
    }

    #[test]
    fn absurd_bounds_and_counts_do_not_panic() {
        for le in ["1e300", "NaN", "-5", "inf"] {
            let text = format!(
                "sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"{le}\"}} 1e30\n\
                 sw4rm_rpc_duration_ms_bucket{{{ROUTE},le=\"+Inf\"}} 1e30\n"
            );
            let routes = from_exposition(&text).unwrap();
            assert_eq!(routes.len(), 1, "{le}");
            assert!(routes[0].latency.quantile(0.5).is_some(), "{le}");
        }
    }

    #[test]
    fn escaped_label_values() {
        let got = labels(r#"a="x\"y",b="c\\d""#).unwrap();
        assert_eq!(
            got,
            vec![("a".into(), "x\"y".into()), ("b".into(), "c\\d".into())]
        );
    }
}
