//! Advice from the whole fleet: what every agent's calls took over a window, read
//! through Prometheus's HTTP query API (Prometheus, Thanos Query and Mimir serve the
//! same one), merged into the input one scrape gives the advisor.
//!
//! * [`Prometheus`] asks the server ([`queries`] are the PromQL it sends: an operator
//!   can paste them into Prometheus's own UI);
//! * [`Fleet`] is what came back, one [`Instance`] per agent process: counter resets
//!   across restarts and instances that started mid-window are `increase`'s to count;
//!   instances whose histograms have other buckets are merged on the union of the
//!   bounds; instances that ran **another table** than most are named
//!   ([`Fleet::disagreeing`]) and left out of the advice rather than averaged in; an
//!   instance whose p99 is [`OUTLIER_FACTOR`] times the typical instance's is named
//!   ([`Fleet::outliers`]);
//! * [`Fleet::exposition`] is the fleet as one scrape would show it, which
//!   [`crate::from_exposition`] and [`crate::ScrapedTable`] read as they read a scrape:
//!   on the same data the advice is the scrape path's.
//!
//! Reading order: `promql.rs` (the queries) → `client.rs` (one query over HTTP) →
//! `answer.rs` (its JSON, checked) → `instances.rs` (instances, and their merge) →
//! this file (the table most ran, who disagrees, who stands out) → `error.rs`.

mod answer;
mod client;
mod error;
mod instances;
mod promql;

use std::collections::BTreeMap;
use std::time::Duration;

pub use answer::Sample;
pub use client::{Prometheus, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_QUERY_TIMEOUT};
pub use error::FleetError;
pub use instances::Instance;
pub use promql::{queries, Queries, QueryError};

use crate::exposition::{from_exposition, ExpositionError};
use crate::rules::MIN_CALLS;
use instances::Table;
use sw4rm_timeouts::observations::RouteLatency;

/// An instance is named an outlier on a route when its p99 there is at least this many
/// times the typical instance's (the median of the instances with enough calls).
pub const OUTLIER_FACTOR: u32 = 10;

/// The fleet as Prometheus told it over one window.
#[derive(Clone, Debug)]
pub struct Fleet {
    queries: Queries,
    instances: Vec<Instance>,
    /// The table most instances ran, `(profile, bound)` → ms.
    table: Table,
}

/// An instance that ran another table than the fleet's, left out of the advice.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Disagreement {
    /// The instance.
    pub instance: String,
    /// Each value where its table differs, as a sentence.
    pub differences: Vec<String>,
}

/// An instance whose tail on a route stands out from the fleet's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outlier {
    /// The instance.
    pub instance: String,
    /// The route, `/service/method`.
    pub path: String,
    /// Its p99 there.
    pub p99: Duration,
    /// The typical instance's p99 there.
    pub typical_p99: Duration,
}

impl Prometheus {
    /// The fleet's series matched by `selector` (`""` for all) over `window` (`7d`),
    /// one instance per value of the label `instance` (`instance`, `pod`, ...): three
    /// queries.
    pub fn read_fleet(
        &self,
        selector: &str,
        window: &str,
        instance: &str,
    ) -> Result<Fleet, FleetError> {
        let queries = queries(selector, window, instance)?;
        let durations = self.query(&queries.durations)?;
        if durations.is_empty() {
            return Err(FleetError::NoSeries {
                url: self.url(),
                query: queries.durations,
            });
        }
        let timeouts = self.query(&queries.timeouts)?;
        let tables = self.query(&queries.tables)?;
        let instances = instances::gather(&durations, &timeouts, &tables, instance);
        Ok(Fleet::new(queries, instances))
    }
}

impl Fleet {
    fn new(queries: Queries, instances: Vec<Instance>) -> Self {
        // The table most instances ran (ties: the one the first instance by name ran).
        let mut counts: Vec<(&Table, usize)> = Vec::new();
        for i in instances.iter().filter(|i| i.reported_table()) {
            match counts.iter_mut().find(|(t, _)| **t == i.table) {
                Some((_, n)) => *n += 1,
                None => counts.push((&i.table, 1)),
            }
        }
        let most = counts.iter().map(|(_, n)| *n).max().unwrap_or(0);
        let table = counts
            .iter()
            .find(|(_, n)| *n == most)
            .map(|(t, _)| (*t).clone())
            .unwrap_or_default();
        Fleet {
            queries,
            instances,
            table,
        }
    }

    /// The queries that read it.
    pub fn queries(&self) -> &Queries {
        &self.queries
    }

    /// Every instance seen, by name.
    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// Whether `i` counts in the advice: it ran the fleet's table, or reported none.
    fn counts(&self, i: &Instance) -> bool {
        !i.reported_table() || i.table == self.table
    }

    /// The fleet's calls as one scrape would show them: every instance on the fleet's
    /// table, merged, with that table as the configured-timeout gauge.
    pub fn exposition(&self) -> String {
        instances::exposition(
            self.instances.iter().filter(|i| self.counts(i)),
            &self.table,
        )
    }

    /// The routes' latencies the advice reads ([`Fleet::exposition`], read as a scrape).
    pub fn routes(&self) -> Result<Vec<RouteLatency>, ExpositionError> {
        from_exposition(&self.exposition())
    }

    /// The instances that ran another table than most, each value named; they are
    /// left out of [`Fleet::exposition`].
    pub fn disagreeing(&self) -> Vec<Disagreement> {
        let ms = |t: &Table, k: &(String, String)| {
            t.get(k).map_or("none".to_owned(), |v| format!("{v} ms"))
        };
        self.instances
            .iter()
            .filter(|i| !self.counts(i))
            .map(|i| {
                let mut keys: Vec<&(String, String)> =
                    i.table.keys().chain(self.table.keys()).collect();
                keys.sort();
                keys.dedup();
                let differences = keys
                    .into_iter()
                    .filter(|k| i.table.get(*k) != self.table.get(*k))
                    .map(|k| {
                        format!(
                            "{} {}: {} (the fleet's table: {})",
                            k.0,
                            k.1,
                            ms(&i.table, k),
                            ms(&self.table, k)
                        )
                    })
                    .collect();
                Disagreement {
                    instance: i.name.clone(),
                    differences,
                }
            })
            .collect()
    }

    /// The instances whose p99 on a route is [`OUTLIER_FACTOR`] times the typical
    /// instance's there (among instances with enough calls, three at least).
    pub fn outliers(&self) -> Vec<Outlier> {
        let mut by_route: BTreeMap<String, Vec<(&str, Duration)>> = BTreeMap::new();
        for i in self.instances.iter().filter(|i| self.counts(i)) {
            let text = instances::exposition([i], &BTreeMap::new());
            for route in from_exposition(&text).unwrap_or_default() {
                let enough = route.latency.successes() >= MIN_CALLS;
                if let Some(p99) = route.latency.quantile(0.99).filter(|_| enough) {
                    by_route
                        .entry(route.path())
                        .or_default()
                        .push((&i.name, p99));
                }
            }
        }
        let mut out = Vec::new();
        for (path, mut seen) in by_route {
            if seen.len() < 3 {
                continue;
            }
            seen.sort_by_key(|(_, p99)| *p99);
            let typical = seen[(seen.len() - 1) / 2].1;
            for (name, p99) in &seen {
                if *p99 >= typical.saturating_mul(OUTLIER_FACTOR) && !typical.is_zero() {
                    out.push(Outlier {
                        instance: (*name).to_owned(),
                        path: path.clone(),
                        p99: *p99,
                        typical_p99: typical,
                    });
                }
            }
        }
        out
    }

    /// What the advice should say of where its data came from: the instances read,
    /// those left out and why, and the outliers, one line each.
    pub fn notes(&self) -> Vec<String> {
        let counted = self.instances.iter().filter(|i| self.counts(i)).count();
        let mut notes = vec![format!(
            "{counted} of {} instances in the advice",
            self.instances.len()
        )];
        for i in self.instances.iter().filter(|i| !i.reported_table()) {
            notes.push(format!(
                "{} reports no table (sw4rm_rpc_configured_timeout_ms): counted as running \
                 the fleet's",
                i.name
            ));
        }
        for d in self.disagreeing() {
            notes.push(format!(
                "{} ran another table, left out of the advice: {}",
                d.instance,
                d.differences.join("; ")
            ));
        }
        for o in self.outliers() {
            notes.push(format!(
                "{} stands out on {}: p99 {} ms, the typical instance's {} ms",
                o.instance,
                o.path,
                o.p99.as_millis(),
                o.typical_p99.as_millis()
            ));
        }
        notes
    }
}
