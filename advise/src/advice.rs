//! [`Advice`]: the verdicts on every observed route and profile, and the proposal as
//! a TOML overlay for the global configuration.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::rules::{judge, Facts, Verdict, MIN_CALLS};
use super::trial::{Evaluation, NotDominant};
use sw4rm_timeouts::observations::{LatencySnapshot, Observations, Resolution, RouteLatency};
use sw4rm_timeouts::ProfileSet;
use sw4rm_timeouts::TimeoutProfile;

/// The figures observed of a route or a profile, and the verdict on them.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Finding {
    /// Calls observed (successful and timed out).
    pub calls: u64,
    /// The share of them that timed out (0 to 1).
    pub timed_out: f64,
    /// Successful calls' median latency.
    pub p50: Option<Duration>,
    /// Successful calls' 99th percentile.
    pub p99: Option<Duration>,
    /// Successful calls' 99.9th percentile.
    pub p999: Option<Duration>,
    /// How precise the quantiles are: from a scrape (`Resolution::Buckets`) each is
    /// the upper bound of the histogram bucket it lies in.
    pub resolution: Resolution,
    /// What the figures say, with the proposal if any.
    pub verdict: Verdict,
    /// The proposal replayed against these calls beside the profile's default in use
    /// (`None` without a proposal).
    pub evaluation: Option<Evaluation>,
    latency: LatencySnapshot,
}

impl Finding {
    fn of(
        latency: &LatencySnapshot,
        profile: &TimeoutProfile,
        peers_p99: Option<Duration>,
    ) -> Self {
        let (successes, timeouts) = (latency.successes(), latency.timeouts());
        let calls = successes.saturating_add(timeouts);
        let (p50, p99, p999) = (
            latency.quantile(0.5),
            latency.quantile(0.99),
            latency.quantile(0.999),
        );
        let verdict = judge(&Facts {
            successes,
            timeouts,
            p99,
            p999,
            default: profile.default_timeout(),
            min: profile.min_timeout(),
            max: profile.max_timeout(),
            peers_p99,
        });
        let proposed = match verdict {
            Verdict::DetectionSlow { proposed, .. }
            | Verdict::FalseFailures { proposed, .. }
            | Verdict::DoesNotFit { proposed } => Some(proposed),
            _ => None,
        };
        let evaluation = proposed.map(|p| Evaluation::of(latency, profile.default_timeout(), p));
        Finding {
            calls,
            timed_out: if calls == 0 {
                0.0
            } else {
                timeouts as f64 / calls as f64
            },
            p50,
            p99,
            p999,
            resolution: latency.resolution(),
            verdict,
            evaluation,
            latency: latency.clone(),
        }
    }

    /// The calls the figures come from (for a profile, its routes that fit it).
    pub fn latency(&self) -> &LatencySnapshot {
        &self.latency
    }

    /// What the replay says of the proposal, if there is one: a route's own profile
    /// that does not dominate but is no worse on either count holds the route where
    /// it is (and is written).
    pub(super) fn replayed(&self) -> Option<Replayed> {
        let e = self.evaluation.as_ref()?;
        let split = matches!(self.verdict, Verdict::DoesNotFit { .. });
        Some(match e.dominance() {
            Ok(sooner) => Replayed::Dominates(sooner),
            Err(_) if split && e.holds() => Replayed::Holds,
            Err(why) => Replayed::Not(why),
        })
    }

    /// Whether the overlay writes the proposal as values.
    pub(super) fn is_written(&self) -> bool {
        matches!(
            self.replayed(),
            Some(Replayed::Dominates(_) | Replayed::Holds)
        )
    }

    /// `; proposed 1000 ms dominates (5.0x sooner)`, or what else the replay says;
    /// nothing without a proposal.
    pub(super) fn dominance_text(&self) -> String {
        let (Some(e), Some(replayed)) = (&self.evaluation, self.replayed()) else {
            return String::new();
        };
        format!("; proposed {}: {replayed}", ms(e.proposed.timeout))
    }

    /// `p50 12 ms, p99 80 ms, p99.9 122 ms over 4000 calls, 0.00 % timed out`; from a
    /// scrape, each quantile as its bucket (`p50 ≤ 10 ms, …`), and once when all three
    /// lie in one bucket (`p50, p99 and p99.9 all ≤ 1000 ms`).
    pub(super) fn figures(&self) -> String {
        let bucketed = self.resolution == Resolution::Buckets;
        let q = |d: Option<Duration>| match d {
            None => "-".to_owned(),
            Some(d) if bucketed => format!("≤ {}", ms(d)),
            Some(d) => ms(d),
        };
        let quantiles = if bucketed && self.p50.is_some() && self.p50 == self.p999 {
            format!("p50, p99 and p99.9 all {}", q(self.p50))
        } else {
            format!(
                "p50 {}, p99 {}, p99.9 {}",
                q(self.p50),
                q(self.p99),
                q(self.p999)
            )
        };
        format!(
            "{quantiles} over {} calls, {:.2} % timed out",
            self.calls,
            self.timed_out * 100.0
        )
    }
}

/// What the replay says of a proposal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Replayed {
    /// It dominates the value in use, detecting a dead peer this many times sooner.
    Dominates(f64),
    /// A route's own profile no worse on either count: it holds the route where it is.
    Holds,
    /// It does not dominate, for this reason.
    Not(NotDominant),
}

impl fmt::Display for Replayed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Replayed::Dominates(sooner) => write!(f, "dominates ({sooner:.1}x sooner)"),
            Replayed::Holds => f.write_str(
                "holds the route where it is (no worse on either count) while its profile moves",
            ),
            Replayed::Not(why) => write!(f, "does not dominate: {}", why.text()),
        }
    }
}

/// One profile: the verdict on its routes together (those that fit it), and on each.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ProfileAdvice {
    /// The profile's name.
    pub name: String,
    /// The profile's default now.
    pub default: Duration,
    /// The profile's minimum now.
    pub min: Duration,
    /// The profile's maximum now.
    pub max: Duration,
    /// The verdict on its routes together (those that fit it).
    pub finding: Finding,
    /// Each observed route: its path and finding.
    pub routes: Vec<(String, Finding)>,
}

/// The advisor's verdicts on a deployment's observed calls, and its proposal.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_advise::{Advice, LatencySnapshot, RouteLatency, Verdict};
/// use sw4rm_timeouts::ProfileSet;
///
/// // Heartbeats answer in about 20 ms; the standard default is 5 s.
/// let mut latency = LatencySnapshot::default();
/// for i in 0..1_000u64 {
///     latency.record(Duration::from_millis(15 + i % 10));
/// }
/// let route = RouteLatency::new("sw4rm.registry.RegistryService", "Heartbeat", "heartbeat", latency);
/// let advice = Advice::new(&ProfileSet::standard(), &[route]);
/// let heartbeat = &advice.profiles()[0];
/// assert!(matches!(heartbeat.finding.verdict, Verdict::DetectionSlow { .. }));
/// // Held at the profile's 1 s minimum: SW4-002's bounds always stand.
/// assert!(advice.overlay().contains("[profiles.heartbeat]\ndefault_timeout_ms = 1000\n"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Advice {
    profiles: Vec<ProfileAdvice>,
    resolution: Resolution,
    /// Where the data came from, one line each (the overlay's header, the page's top).
    notes: Vec<String>,
}

impl Advice {
    /// Judges what a layer built `with_observations()` has observed so far, against
    /// the layer's own table in use (read together with the routes).
    ///
    /// ```
    /// use sw4rm_advise::Advice;
    /// use sw4rm_timeouts::TimeoutProfileLayer;
    /// let layer = TimeoutProfileLayer::standard().with_observations();
    /// let advice = Advice::observed(&layer.observations().expect("observed"));
    /// assert!(advice.overlay().lines().all(|l| l.is_empty() || l.starts_with('#')), "no call yet");
    /// ```
    pub fn observed(observations: &Observations) -> Self {
        let (profiles, routes) = observations.read();
        Advice::new(&profiles, &routes)
    }

    /// Judges every observed route against `profiles` (the configuration the calls
    /// ran under). Routes of a profile the set does not know are left out.
    pub fn new(profiles: &ProfileSet, routes: &[RouteLatency]) -> Self {
        let mut by_profile: BTreeMap<&str, Vec<&RouteLatency>> = BTreeMap::new();
        let mut resolution = Resolution::Estimate;
        for r in routes {
            if r.latency.resolution() == Resolution::Buckets {
                resolution = Resolution::Buckets;
            }
            by_profile.entry(r.profile.as_str()).or_default().push(r);
        }
        let profiles = by_profile
            .into_iter()
            .filter_map(|(name, routes)| Some(profile_advice(profiles.profile(name)?, &routes)))
            .collect();
        Advice {
            profiles,
            resolution,
            notes: Vec::new(),
        }
    }

    /// The advice with `notes` on where its data came from (the queries that read it,
    /// the instances left out and why), written at the top of the overlay (as
    /// comments) and of the page.
    ///
    /// ```
    /// use sw4rm_advise::Advice;
    /// use sw4rm_timeouts::ProfileSet;
    /// let advice = Advice::new(&ProfileSet::standard(), &[])
    ///     .with_notes(["agent-4 ran another table, left out of the advice".to_owned()]);
    /// assert!(advice.overlay().contains("\n# agent-4 ran another table, left out of the advice\n"));
    /// ```
    #[must_use]
    pub fn with_notes(mut self, notes: impl IntoIterator<Item = String>) -> Self {
        self.notes.extend(notes);
        self
    }

    /// The notes on where its data came from ([`Advice::with_notes`]).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Every observed profile, by name.
    pub fn profiles(&self) -> &[ProfileAdvice] {
        &self.profiles
    }

    /// Proposals the overlay leaves as suggestions: they do not dominate the value in
    /// use (and, for a route's own profile, do not hold the route where it is).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_advise::{Advice, LatencySnapshot, RouteLatency};
    /// use sw4rm_timeouts::ProfileSet;
    ///
    /// // Heartbeats near their 5 s default, and 5 % timing out: raising the default
    /// // cannot be shown better by a replay (the timed-out calls have no latency).
    /// let mut latency = LatencySnapshot::default();
    /// for i in 0..950u64 {
    ///     latency.record(Duration::from_millis(3_000 + i));
    /// }
    /// latency.record_timeouts(50);
    /// let route = RouteLatency::new("sw4rm.registry.RegistryService", "Heartbeat", "heartbeat", latency);
    /// let advice = Advice::new(&ProfileSet::standard(), &[route]);
    /// assert_eq!(advice.suggestions(), 1);
    /// assert!(advice.overlay().contains("#? [profiles.heartbeat]"));
    /// ```
    pub fn suggestions(&self) -> usize {
        self.proposals().filter(|f| !f.is_written()).count()
    }

    /// The findings whose proposal the overlay writes, as values or as a suggestion:
    /// each profile's new default, each route's own profile.
    pub(super) fn proposals(&self) -> impl Iterator<Item = &Finding> {
        self.profiles.iter().flat_map(|p| {
            let own = p.finding.evaluation.as_ref().and(Some(&p.finding));
            let splits = p
                .routes
                .iter()
                .map(|(_, f)| f)
                .filter(|f| matches!(f.verdict, Verdict::DoesNotFit { .. }));
            own.into_iter().chain(splits)
        })
    }

    /// How precise the figures are (the least precise of the routes').
    pub fn resolution(&self) -> Resolution {
        self.resolution
    }
}

fn profile_advice(profile: &TimeoutProfile, routes: &[&RouteLatency]) -> ProfileAdvice {
    // What the profile's routes typically take: the (lower) median of the p99s of its
    // routes with enough calls, when there are at least two.
    let mut p99s: Vec<Duration> = routes
        .iter()
        .filter(|r| r.latency.successes() >= MIN_CALLS)
        .filter_map(|r| r.latency.quantile(0.99))
        .collect();
    p99s.sort_unstable();
    let typical = (p99s.len() >= 2).then(|| p99s[(p99s.len() - 1) / 2]);
    let findings: Vec<(String, Finding)> = routes
        .iter()
        .map(|r| (r.path(), Finding::of(&r.latency, profile, typical)))
        .collect();
    // The profile's own verdict: its routes that fit it, together. Its proposal is
    // replayed on every route that would run under it: those, and each route that
    // does not fit but whose own profile the overlay does not write.
    let mut fitting = LatencySnapshot::default();
    let mut staying = LatencySnapshot::default();
    for (r, (_, f)) in routes.iter().zip(&findings) {
        let split = matches!(f.verdict, Verdict::DoesNotFit { .. });
        if !split {
            fitting.merge(&r.latency);
        }
        if !split || !f.evaluation.as_ref().is_some_and(Evaluation::holds) {
            staying.merge(&r.latency);
        }
    }
    let mut finding = Finding::of(&fitting, profile, None);
    if let Some(e) = &mut finding.evaluation {
        *e = Evaluation::of(&staying, e.current.timeout, e.proposed.timeout);
    }
    ProfileAdvice {
        name: profile.name.to_string(),
        default: profile.default_timeout(),
        min: profile.min_timeout(),
        max: profile.max_timeout(),
        finding,
        routes: findings,
    }
}

pub(super) fn ms(d: Duration) -> String {
    let micros = d.as_micros();
    if micros < 10_000 {
        format!("{:.1} ms", micros as f64 / 1_000.0)
    } else {
        format!("{} ms", d.as_millis())
    }
}

pub(super) fn resolution_text(r: Resolution) -> &'static str {
    match r {
        Resolution::Estimate => "the in-process estimate, within 1.6 % of the observed values",
        _ => {
            "from Prometheus histogram buckets (1, 1.5, 2, 3, 5, 7 steps): each value is its \
             bucket's upper bound, up to 1.7x the observed value"
        }
    }
}

impl fmt::Display for Advice {
    /// The report: one line per profile and per route, with the verdict.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "quantiles: {}", resolution_text(self.resolution))?;
        for p in &self.profiles {
            writeln!(
                f,
                "{:<22} default {:>10}  {}: {}{}",
                p.name,
                ms(p.default),
                p.finding.verdict.name(),
                p.finding.figures(),
                p.finding.dominance_text()
            )?;
            for (path, finding) in &p.routes {
                writeln!(
                    f,
                    "  {path}: {}: {}{}",
                    finding.verdict.name(),
                    finding.figures(),
                    finding.dominance_text()
                )?;
            }
        }
        Ok(())
    }
}
