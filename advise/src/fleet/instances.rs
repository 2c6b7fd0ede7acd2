//! The fleet the query answers describe, one [`Instance`] per agent process: its
//! routes' duration buckets and timeouts over the window, and the table it ran with.
//! Merged into one exposition as a single scrape would show it, so that the advice
//! from Prometheus is the scrape path's own.

use std::collections::BTreeMap;

use super::answer::Sample;

/// `(service, method, profile)`.
pub(super) type RouteKey = (String, String, String);
/// `(profile, bound)` → milliseconds: a table as the configured-timeout gauge tells it.
pub(super) type Table = BTreeMap<(String, String), u64>;

/// One route's histogram on one instance: cumulative counts by bound (`le` as
/// written, its value; `+Inf` as infinity), and the calls that timed out.
#[derive(Clone, Debug, Default)]
pub(super) struct Histogram {
    pub(super) buckets: Vec<(String, f64, u64)>,
    pub(super) timeouts: u64,
}

/// One agent process, as its series over the window tell it.
#[derive(Clone, Debug, Default)]
pub struct Instance {
    pub(super) name: String,
    pub(super) routes: BTreeMap<RouteKey, Histogram>,
    /// `(profile, bound)` → milliseconds: the configured-timeout gauge's last values.
    pub(super) table: Table,
}

impl Instance {
    /// Its name (the value of the instance label).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it reported the table it ran with (the configured-timeout gauge).
    pub fn reported_table(&self) -> bool {
        !self.table.is_empty()
    }

    /// Its calls over the window, on every route.
    pub fn calls(&self) -> u64 {
        self.routes
            .values()
            .filter_map(|h| h.buckets.iter().find(|b| b.1.is_infinite()).map(|b| b.2))
            .sum()
    }
}

/// The instances in three answers (durations, timeouts, tables), by `instance` label.
pub(super) fn gather(
    durations: &[Sample],
    timeouts: &[Sample],
    tables: &[Sample],
    instance: &str,
) -> Vec<Instance> {
    let mut by_name: BTreeMap<String, Instance> = BTreeMap::new();
    fn entry<'m>(
        by_name: &'m mut BTreeMap<String, Instance>,
        s: &Sample,
        instance: &str,
    ) -> &'m mut Instance {
        let name = s.label(instance).to_owned();
        by_name.entry(name.clone()).or_insert_with(|| Instance {
            name,
            ..Instance::default()
        })
    }
    let route = |s: &Sample| {
        (
            s.label("service").to_owned(),
            s.label("method").to_owned(),
            s.label("profile").to_owned(),
        )
    };
    for s in durations {
        let le = s.label("le");
        let bound = match le {
            "+Inf" => f64::INFINITY,
            text => match text.parse::<f64>() {
                Ok(v) if v.is_finite() => v,
                _ => continue,
            },
        };
        let key = route(s);
        let count = s.value.round() as u64;
        let histogram = entry(&mut by_name, s, instance)
            .routes
            .entry(key)
            .or_default();
        histogram.buckets.push((le.to_owned(), bound, count));
    }
    for s in timeouts {
        let key = route(s);
        entry(&mut by_name, s, instance)
            .routes
            .entry(key)
            .or_default()
            .timeouts = s.value.round() as u64;
    }
    for s in tables {
        let (profile, bound) = (s.label("profile").to_owned(), s.label("bound").to_owned());
        entry(&mut by_name, s, instance)
            .table
            .insert((profile, bound), s.value.round() as u64);
    }
    let mut all: Vec<Instance> = by_name.into_values().collect();
    for i in &mut all {
        for h in i.routes.values_mut() {
            h.buckets.sort_by(|a, b| a.1.total_cmp(&b.1));
            // Counts read from `increase` are rounded: cumulative counts never fall.
            let mut most = 0;
            for b in &mut h.buckets {
                most = most.max(b.2);
                b.2 = most;
            }
        }
    }
    all
}

/// The instances' routes as one exposition, as a scrape of one process that made
/// all their calls would show it, with `table` as the configured-timeout gauge.
/// Instances whose buckets differ (another version's histogram) are merged on the
/// union of the bounds, each counting at a bound it lacks what it counted at its
/// nearest bound below (a call is never counted faster than it was).
pub(super) fn exposition<'a>(
    instances: impl IntoIterator<Item = &'a Instance> + Clone,
    table: &Table,
) -> String {
    let mut bounds: BTreeMap<&RouteKey, Vec<(&str, f64)>> = BTreeMap::new();
    for i in instances.clone() {
        for (key, h) in &i.routes {
            let union = bounds.entry(key).or_default();
            for (text, bound, _) in &h.buckets {
                if !union.iter().any(|(_, b)| b == bound) {
                    union.push((text, *bound));
                }
            }
        }
    }
    let mut out = String::new();
    for (key @ (service, method, profile), union) in &mut bounds {
        union.sort_by(|a, b| a.1.total_cmp(&b.1));
        let labels = format!(
            "method=\"{}\",profile=\"{}\",service=\"{}\"",
            escape(method),
            escape(profile),
            escape(service)
        );
        let on_route = || {
            instances
                .clone()
                .into_iter()
                .filter_map(|i| i.routes.get(*key))
        };
        // Every instance with the route must have its +Inf bucket for the sum to have one.
        let whole = on_route().all(|h| h.buckets.iter().any(|b| b.1.is_infinite()));
        for (text, bound) in union.iter() {
            if bound.is_infinite() && !whole {
                continue;
            }
            let count: u64 = on_route().map(|h| at_or_below(h, *bound)).sum();
            out.push_str(&format!(
                "sw4rm_rpc_duration_ms_bucket{{{labels},le=\"{}\"}} {count}\n",
                escape(text)
            ));
        }
        let timeouts: u64 = on_route().map(|h| h.timeouts).sum();
        out.push_str(&format!("sw4rm_rpc_timeout_total{{{labels}}} {timeouts}\n"));
    }
    for ((profile, bound), ms) in table {
        out.push_str(&format!(
            "sw4rm_rpc_configured_timeout_ms{{bound=\"{}\",profile=\"{}\"}} {ms}\n",
            escape(bound),
            escape(profile)
        ));
    }
    out
}

/// The cumulative count at the histogram's highest bound at or below `bound`.
fn at_or_below(h: &Histogram, bound: f64) -> u64 {
    h.buckets
        .iter()
        .take_while(|b| b.1 <= bound)
        .last()
        .map_or(0, |b| b.2)
}

/// A label value as the exposition format writes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(labels: &[(&str, &str)], value: f64) -> Sample {
        let labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Sample { labels, value }
    }

    fn bucket(instance: &str, le: &str, value: f64) -> Sample {
        sample(
            &[
                ("instance", instance),
                ("service", "s"),
                ("method", "M"),
                ("profile", "p"),
                ("le", le),
            ],
            value,
        )
    }

    #[test]
    fn instances_with_other_buckets_merge_on_the_union_never_faster() {
        // a: bounds 10, 100, +Inf; b (another version): 10, 50, +Inf.
        let durations = [
            bucket("a", "10", 5.0),
            bucket("a", "100", 8.0),
            bucket("a", "+Inf", 10.0),
            bucket("b", "10", 1.0),
            bucket("b", "50", 2.4),
            bucket("b", "+Inf", 3.0),
        ];
        let all = gather(&durations, &[], &[], "instance");
        assert_eq!(all.len(), 2);
        let text = exposition(&all, &BTreeMap::new());
        let counts: Vec<&str> = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1)
            .collect();
        // 10: 5+1; 50: a's at 10 (5) + 2; 100: 8 + b's at 50 (2); +Inf: 13.
        assert_eq!(counts, ["6", "7", "10", "13", "0"], "{text}");
        assert!(text.contains("le=\"50\""), "{text}");
    }

    #[test]
    fn a_route_without_inf_on_one_instance_has_none_in_the_sum() {
        let durations = [
            bucket("a", "10", 5.0),
            bucket("a", "+Inf", 6.0),
            bucket("b", "10", 1.0),
        ];
        let text = exposition(&gather(&durations, &[], &[], "instance"), &BTreeMap::new());
        assert!(!text.contains("+Inf"), "{text}");
    }

    #[test]
    fn label_values_are_escaped_and_counts_never_fall() {
        let durations = [
            sample(
                &[
                    ("instance", "a"),
                    ("service", "s\"x"),
                    ("method", "M\\"),
                    ("profile", "p\n"),
                    ("le", "10"),
                ],
                5.2,
            ),
            sample(
                &[
                    ("instance", "a"),
                    ("service", "s\"x"),
                    ("method", "M\\"),
                    ("profile", "p\n"),
                    ("le", "+Inf"),
                ],
                4.9,
            ),
        ];
        let text = exposition(&gather(&durations, &[], &[], "instance"), &BTreeMap::new());
        assert!(
            text.contains("method=\"M\\\\\",profile=\"p\\n\",service=\"s\\\"x\""),
            "{text}"
        );
        assert!(
            text.contains("le=\"+Inf\"} 5\n"),
            "rounded, then held at the bucket below: {text}"
        );
    }
}
