//! [`SloRules`]: a timeout SLO per profile as Prometheus recording and alerting
//! rules, in the multiwindow, multi-burn-rate shape of Google's SRE workbook
//! ("Alerting on SLOs"; the shape Sloth generates): the error budget is the share of a
//! profile's calls allowed to time out over 30 days, and an alert fires when both a
//! long and a short window burn it fast enough.
//!
//! | alert | long window | short window | burn rate | budget spent at that rate |
//! |---|---|---|---|---|
//! | page | 1 h | 5 m | 14.4 | 2 % in 1 h |
//! | page | 6 h | 30 m | 6 | 5 % in 6 h |
//! | ticket | 1 d | 2 h | 3 | 10 % in 1 d |
//! | ticket | 3 d | 6 h | 1 | 10 % in 3 d |
//!
//! A quiet profile does not page on one timeout: each alert also needs as many calls in
//! its long window as make one timeout alone stay under its burn rate
//! (`⌈1 / (burn × budget)⌉`: 70 calls an hour for a 99.9 % objective's page). Below
//! that volume the ratio says little, and the ticket's longer windows, or the
//! per-profile alerts of `prometheus-rules.yml`, are the ones that can fire.

use std::fmt::Write;

use sw4rm_timeouts::ProfileSet;

/// One burn-rate alert: its windows, its rate and its severity.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Burn {
    severity: &'static str,
    long: &'static str,
    short: &'static str,
    rate: f64,
}

/// The SRE workbook's four windows for a 30-day objective.
const BURNS: [Burn; 4] = [
    Burn {
        severity: "page",
        long: "1h",
        short: "5m",
        rate: 14.4,
    },
    Burn {
        severity: "page",
        long: "6h",
        short: "30m",
        rate: 6.0,
    },
    Burn {
        severity: "ticket",
        long: "1d",
        short: "2h",
        rate: 3.0,
    },
    Burn {
        severity: "ticket",
        long: "3d",
        short: "6h",
        rate: 1.0,
    },
];

/// Every window a rule reads, shortest first.
const WINDOWS: [&str; 7] = ["5m", "30m", "1h", "2h", "6h", "1d", "3d"];

/// The objective when none is given: 99.9 % of a profile's calls end without a
/// timeout.
pub const DEFAULT_OBJECTIVE: f64 = 99.9;

/// Timeout SLO rules for every profile of a table.
///
/// ```
/// use sw4rm_advise::SloRules;
/// use sw4rm_timeouts::ProfileSet;
/// let rules = SloRules::new(&ProfileSet::standard()).objective("heartbeat", 99.5).unwrap();
/// let yaml = rules.to_yaml();
/// assert!(yaml.contains("alert: Sw4rmTimeoutBudgetBurn"));
/// assert!(yaml.contains(r#"profile="heartbeat""#));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct SloRules {
    /// Each profile's name and objective (percent of calls without a timeout).
    profiles: Vec<(String, f64)>,
}

/// An objective the rules cannot be written with.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ObjectiveError {
    /// Outside (0, 100): an objective is a percentage of calls that must not time out.
    OutOfRange {
        /// The profile it was given for (`None`: every profile).
        profile: Option<String>,
        /// The value given.
        value: f64,
    },
    /// A profile the table does not have.
    UnknownProfile {
        /// The name given.
        profile: String,
        /// The table's profiles.
        known: Vec<String>,
    },
}

impl std::fmt::Display for ObjectiveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjectiveError::OutOfRange { profile, value } => {
                let whose = match profile {
                    Some(p) => format!("profile {p}'s objective"),
                    None => "the objective".into(),
                };
                write!(
                    f,
                    "{whose} {value}: must be a percentage of calls without a timeout, \
                     above 0 and below 100 (such as 99.9)"
                )
            }
            ObjectiveError::UnknownProfile { profile, known } => write!(
                f,
                "an objective for profile {profile}, which the table does not have (its \
                 profiles: {})",
                known.join(", ")
            ),
        }
    }
}

impl std::error::Error for ObjectiveError {}

fn valid(value: f64, profile: Option<&str>) -> Result<f64, ObjectiveError> {
    match value > 0.0 && value < 100.0 {
        true => Ok(value),
        false => Err(ObjectiveError::OutOfRange {
            profile: profile.map(str::to_owned),
            value,
        }),
    }
}

impl SloRules {
    /// Every profile of `profiles`, each with [`DEFAULT_OBJECTIVE`].
    pub fn new(profiles: &ProfileSet) -> Self {
        let mut names: Vec<String> = profiles
            .profiles()
            .map(|p| p.profile().name.to_string())
            .collect();
        names.sort();
        SloRules {
            profiles: names.into_iter().map(|n| (n, DEFAULT_OBJECTIVE)).collect(),
        }
    }

    /// The same objective (a percentage, such as 99.9) for every profile.
    pub fn objective_for_all(mut self, percent: f64) -> Result<Self, ObjectiveError> {
        let percent = valid(percent, None)?;
        for (_, objective) in &mut self.profiles {
            *objective = percent;
        }
        Ok(self)
    }

    /// `profile`'s objective (a percentage, such as 99.9). A profile the table does
    /// not have is an error, naming the table's.
    pub fn objective(mut self, profile: &str, percent: f64) -> Result<Self, ObjectiveError> {
        let percent = valid(percent, Some(profile))?;
        let Some((_, objective)) = self.profiles.iter_mut().find(|(name, _)| name == profile)
        else {
            return Err(ObjectiveError::UnknownProfile {
                profile: profile.to_owned(),
                known: self.profiles.iter().map(|(name, _)| name.clone()).collect(),
            });
        };
        *objective = percent;
        Ok(self)
    }

    /// The rules as a Prometheus rule file (`rule_files:` in `prometheus.yml`).
    pub fn to_yaml(&self) -> String {
        let mut out = String::from(
            "# Timeout SLOs per SW4-002 profile, written by `sw4rm-timeouts slo-rules`:\n\
             # multiwindow, multi-burn-rate alerts on the share of calls that timed out\n\
             # (the SRE workbook's windows for a 30-day objective). A profile pages only\n\
             # with enough calls in the long window that one timeout alone cannot.\n\
             groups:\n  - name: sw4rm_timeout_slo_recording\n    rules:\n",
        );
        for window in WINDOWS {
            let _ = write!(
                out,
                "      - record: sw4rm:slo_timeout_ratio:rate{window}\n        expr: \
                 sum by (profile) (rate(sw4rm_rpc_timeout_total[{window}])) / sum by \
                 (profile) (rate(sw4rm_rpc_duration_ms_count[{window}]))\n"
            );
        }
        for window in BURNS.map(|burn| burn.long) {
            let _ = write!(
                out,
                "      - record: sw4rm:slo_calls:increase{window}\n        expr: \
                 sum by (profile) (increase(sw4rm_rpc_duration_ms_count[{window}]))\n"
            );
        }
        out.push_str("  - name: sw4rm_timeout_slo_alerts\n    rules:\n");
        for (profile, objective) in &self.profiles {
            for burn in BURNS {
                alert(&mut out, profile, *objective, burn);
            }
        }
        out
    }
}

/// The fewest calls in a window for one timeout alone to stay under `rate` times the
/// budget (`budget`: the share allowed to time out).
fn min_calls(rate: f64, budget: f64) -> u64 {
    // Less a hair: 99.9 % leaves a budget of 0.000999…, whose exact quotient is whole.
    (1.0 / (rate * budget) - 1e-9).ceil() as u64
}

/// The share of calls an objective (a percentage) allows to time out, rounded to the
/// precision an objective is written with (99.9 leaves 0.001, not 0.000999…).
fn budget(objective: f64) -> f64 {
    ((100.0 - objective) * 1e10).round() / 1e12
}

/// A number as PromQL and YAML read it back exactly (no exponent, no trailing zeros).
fn number(value: f64) -> String {
    let text = format!("{value:.10}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn alert(out: &mut String, profile: &str, objective: f64, burn: Burn) {
    let budget = budget(objective);
    let threshold = number(burn.rate * budget);
    let calls = min_calls(burn.rate, budget);
    let Burn {
        severity,
        long,
        short,
        rate,
    } = burn;
    let sel = format!("{{profile=\"{profile}\"}}");
    let _ = write!(
        out,
        "      - alert: Sw4rmTimeoutBudgetBurn\n        expr: \
         sw4rm:slo_timeout_ratio:rate{long}{sel} > {threshold} and \
         sw4rm:slo_timeout_ratio:rate{short}{sel} > {threshold} and \
         sw4rm:slo_calls:increase{long}{sel} >= {calls}\n        labels:\n          \
         severity: {severity}\n          profile: {profile}\n          \
         slo_window: {long}\n        annotations:\n          summary: \"Profile \
         {profile} spends its timeout budget {rate}× too fast ({long} and {short})\"\n          \
         description: \"More than {threshold} of profile {profile}'s calls timed out over \
         the last {long} and the last {short}, against an objective of {objective} % \
         without a timeout: at this rate the 30-day budget is gone in {days} days. Look \
         at the peer first (sw4rm_rpc_duration_ms by service and method); raise the \
         timeout only if the peer is healthy and slower than the profile allows.\"\n",
        objective = number(objective),
        days = number(30.0 / rate),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_calls_make_one_timeout_stay_under_the_rate() {
        // (rate, objective %, calls): 1 / (rate × budget), rounded up.
        let rows = [
            (14.4, 99.9, 70),
            (6.0, 99.9, 167),
            (3.0, 99.9, 334),
            (1.0, 99.9, 1000),
            (14.4, 99.0, 7),
            (1.0, 99.0, 100),
        ];
        for (rate, objective, calls) in rows {
            let budget = budget(objective);
            assert_eq!(min_calls(rate, budget), calls, "{rate} at {objective} %");
            // One timeout among that many calls is at most the threshold.
            assert!(
                1.0 / calls as f64 <= rate * budget + 1e-12,
                "{rate} at {objective} %"
            );
            // One call fewer, and one timeout alone would be above it.
            assert!(
                1.0 / (calls - 1) as f64 > rate * budget,
                "{rate} at {objective} %"
            );
        }
    }

    #[test]
    fn numbers_are_written_without_exponents_or_trailing_zeros() {
        let rows = [
            (0.0144, "0.0144"),
            (14.4, "14.4"),
            (0.001, "0.001"),
            (99.0, "99"),
        ];
        for (value, text) in rows {
            assert_eq!(number(value), text);
        }
        assert_eq!(number(14.4 * 0.001), "0.0144");
    }

    #[test]
    fn every_profile_gets_four_alerts_with_its_own_threshold() {
        let rules = SloRules::new(&ProfileSet::standard())
            .objective("heartbeat", 99.0)
            .unwrap();
        let yaml = rules.to_yaml();
        let profiles = ProfileSet::standard().profiles().count();
        assert_eq!(
            yaml.matches("alert: Sw4rmTimeoutBudgetBurn").count(),
            4 * profiles
        );
        assert!(yaml.contains(
            "sw4rm:slo_timeout_ratio:rate1h{profile=\"heartbeat\"} > 0.144 and \
             sw4rm:slo_timeout_ratio:rate5m{profile=\"heartbeat\"} > 0.144 and \
             sw4rm:slo_calls:increase1h{profile=\"heartbeat\"} >= 7"
        ));
        assert!(yaml.contains(
            "sw4rm:slo_timeout_ratio:rate3d{profile=\"tool_call\"} > 0.001 and \
             sw4rm:slo_timeout_ratio:rate6h{profile=\"tool_call\"} > 0.001 and \
             sw4rm:slo_calls:increase3d{profile=\"tool_call\"} >= 1000"
        ));
    }

    #[test]
    fn objectives_outside_zero_to_a_hundred_are_refused_by_name() {
        let set = ProfileSet::standard();
        for bad in [0.0, 100.0, -1.0, 150.0, f64::NAN, f64::INFINITY] {
            let err = SloRules::new(&set).objective("heartbeat", bad).unwrap_err();
            assert!(
                err.to_string().starts_with("profile heartbeat's objective"),
                "{err}"
            );
            assert!(SloRules::new(&set).objective_for_all(bad).is_err(), "{bad}");
        }
        let err = SloRules::new(&set).objective("no_such", 99.0).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("profile no_such, which the table does not have"),
            "{text}"
        );
        assert!(text.contains("heartbeat"), "{text}");
    }
}
