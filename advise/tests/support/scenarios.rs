//! Latency shapes for replaying the advisor (`benches/replay.rs`, and the claims
//! `tests/advise_scenarios.rs` holds it to): two hours of calls at 10 a second, the
//! first hour observed (what `advise` reads), the second the one a proposal is judged
//! on. Deterministic: a fixed seed, no clock.

#![allow(dead_code)]

use std::time::Duration;

use sw4rm_advise::{Advice, LatencySnapshot, RouteLatency};
use sw4rm_timeouts::ProfileSet;

/// Calls a second.
pub const RATE: u32 = 10;
/// One hour, in seconds.
pub const HOUR: f64 = 3_600.0;
/// Share of calls the goal allows a proposal to cut.
pub const FALSE_TIMEOUT_GOAL: f64 = 0.001;

/// splitmix64: small, fast and good enough for latency shapes.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Lognormal with this median (ms) and log-σ.
    pub fn lognormal(&mut self, median_ms: f64, sigma: f64) -> f64 {
        median_ms * (sigma * self.normal()).exp()
    }
}

/// What one call did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// It answered after this long.
    Answered(Duration),
    /// It never answered (a black-holed peer): it ends only at a timeout.
    Hangs,
}

fn answered(ms: f64) -> Outcome {
    Outcome::Answered(Duration::from_micros((ms * 1_000.0).max(1.0) as u64))
}

/// One latency shape on one route.
pub struct Scenario {
    /// Short name, as the tables give it.
    pub name: &'static str,
    /// What the calls do, in a line.
    pub shape: &'static str,
    /// The route's service and method.
    pub service: &'static str,
    pub method: &'static str,
    /// The SW4-002 profile the route runs under.
    pub profile: &'static str,
    /// One call started `t` seconds into the two hours.
    pub call: fn(&mut Rng, f64) -> Outcome,
}

/// Minutes `from..to` of the second hour.
fn in_second_hour(t: f64, from: f64, to: f64) -> bool {
    (HOUR + from * 60.0..HOUR + to * 60.0).contains(&t)
}

/// The scenarios, each on a route of a standard profile.
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "lognormal + 1 % tail",
            shape: "99 %: median 12 ms, σ 0.4; 1 %: median 150 ms, σ 0.5",
            service: "sw4rm.registry.RegistryService",
            method: "Heartbeat",
            profile: "heartbeat",
            call: |rng, _| {
                if rng.unit() <= 0.01 {
                    answered(rng.lognormal(150.0, 0.5))
                } else {
                    answered(rng.lognormal(12.0, 0.4))
                }
            },
        },
        Scenario {
            name: "bimodal (cache hit / miss)",
            shape: "85 % hits: median 4 ms, σ 0.3; 15 % misses: median 90 ms, σ 0.35",
            service: "sw4rm.scheduler.SchedulerService",
            method: "GetTaskStatus",
            profile: "workflow_status",
            call: |rng, _| {
                if rng.unit() <= 0.15 {
                    answered(rng.lognormal(90.0, 0.35))
                } else {
                    answered(rng.lognormal(4.0, 0.3))
                }
            },
        },
        Scenario {
            name: "drifting median",
            shape: "median 200 ms at the start, +200 ms an hour (600 ms at the end), σ 0.5",
            service: "sw4rm.tool.ToolService",
            method: "Call",
            profile: "tool_call",
            call: |rng, t| answered(rng.lognormal(200.0 * (1.0 + t / HOUR), 0.5)),
        },
        Scenario {
            name: "overload burst",
            shape: "median 25 ms, σ 0.4; minutes 75–80: 25× slower (queueing)",
            service: "sw4rm.router.RouterService",
            method: "SendMessage",
            profile: "message_route",
            call: |rng, t| {
                let slow = if in_second_hour(t, 15.0, 20.0) {
                    25.0
                } else {
                    1.0
                };
                answered(slow * rng.lognormal(25.0, 0.4))
            },
        },
        Scenario {
            name: "black-holed peer",
            shape: "median 30 ms, σ 0.5; minutes 90–100: 1 backend of 10 never answers",
            service: "sw4rm.scheduler.SchedulerService",
            method: "SubmitTask",
            profile: "task_submit",
            call: |rng, t| {
                if in_second_hour(t, 30.0, 40.0) && rng.unit() <= 0.1 {
                    Outcome::Hangs
                } else {
                    answered(rng.lognormal(30.0, 0.5))
                }
            },
        },
        Scenario {
            name: "black-holed peer, seen",
            shape: "as above, and the same outage in the observed hour (minutes 30–40)",
            service: "sw4rm.scheduler.SchedulerService",
            method: "SubmitTask",
            profile: "task_submit",
            call: |rng, t| {
                let out = (30.0 * 60.0..40.0 * 60.0).contains(&t) || in_second_hour(t, 30.0, 40.0);
                if out && rng.unit() <= 0.1 {
                    Outcome::Hangs
                } else {
                    answered(rng.lognormal(30.0, 0.5))
                }
            },
        },
    ]
}

/// Two hours of calls: `(seconds since the start, outcome)`.
pub fn calls(s: &Scenario, seed: u64) -> Vec<(f64, Outcome)> {
    let mut rng = Rng::new(seed);
    let n = (2.0 * HOUR) as u32 * RATE;
    (0..n)
        .map(|i| {
            let t = f64::from(i) / f64::from(RATE);
            (t, (s.call)(&mut rng, t))
        })
        .collect()
}

/// The observed hour, as the layer records it under `timeout`: a call that took
/// longer, or never answered, is a timeout.
pub fn observe(calls: &[(f64, Outcome)], timeout: Duration) -> LatencySnapshot {
    let mut s = LatencySnapshot::default();
    for (_, o) in calls.iter().filter(|(t, _)| *t < HOUR) {
        match o {
            Outcome::Answered(d) if *d <= timeout => s.record(*d),
            _ => s.record_timeouts(1),
        }
    }
    s
}

/// The value the advisor's overlay writes for the scenario's profile after the
/// observed hour (its proposal where the replay shows it dominates), or `None`.
pub fn advised(s: &Scenario, calls: &[(f64, Outcome)]) -> Option<Duration> {
    let table = ProfileSet::standard();
    let default = table.profile(s.profile)?.default_timeout();
    let route = RouteLatency::new(s.service, s.method, s.profile, observe(calls, default));
    let advice = Advice::new(&table, &[route]);
    let finding = &advice.profiles().first()?.finding;
    let e = finding.evaluation.as_ref()?;
    e.dominates().then_some(e.proposed.timeout)
}

/// What a timeout does to the calls of the judged hour.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Judged {
    /// Calls in the hour.
    pub calls: u64,
    /// Calls that would have answered, cut.
    pub false_timeouts: u64,
    /// Calls that never answer (timeouts under any value).
    pub hangs: u64,
    /// The mean timeout a call ran under: how long a caller waits on a dead peer.
    pub detection: Duration,
    /// The longest timeout any call ran under.
    pub worst_detection: Duration,
    /// Time spent in calls that ended in a timeout.
    pub time_in_timeouts: Duration,
}

impl Judged {
    /// `false_timeouts` as a share of the calls.
    pub fn false_timeout_rate(&self) -> f64 {
        self.false_timeouts as f64 / self.calls.max(1) as f64
    }
}

/// The judged hour under a timeout chosen per call (`timeout_at(t)`).
pub fn judge(calls: &[(f64, Outcome)], mut timeout_at: impl FnMut(f64) -> Duration) -> Judged {
    let mut j = Judged::default();
    let mut sum = Duration::ZERO;
    for (t, o) in calls.iter().filter(|(t, _)| *t >= HOUR) {
        let timeout = timeout_at(*t);
        j.calls += 1;
        sum += timeout;
        j.worst_detection = j.worst_detection.max(timeout);
        match o {
            Outcome::Answered(d) if *d > timeout => {
                j.false_timeouts += 1;
                j.time_in_timeouts += timeout;
            }
            Outcome::Answered(_) => {}
            Outcome::Hangs => {
                j.hangs += 1;
                j.time_in_timeouts += timeout;
            }
        }
    }
    j.detection = sum / u32::try_from(j.calls.max(1)).unwrap_or(u32::MAX);
    j
}

/// The successful calls' exact p99.9 in the observed hour.
pub fn observed_p999(calls: &[(f64, Outcome)]) -> Duration {
    let mut v: Vec<Duration> = calls
        .iter()
        .filter(|(t, _)| *t < HOUR)
        .filter_map(|(_, o)| match o {
            Outcome::Answered(d) => Some(*d),
            Outcome::Hangs => None,
        })
        .collect();
    v.sort_unstable();
    let rank = ((v.len() as f64 * 0.999).ceil() as usize).clamp(1, v.len().max(1));
    v.get(rank - 1).copied().unwrap_or_default()
}

/// An online rule, for comparison (not shipped): every 10 s, `k` × the p99.9 of the
/// last 10 minutes' answered calls, held within the profile's bounds; frozen while
/// more than 1 % of those minutes' calls timed out, or before 100 calls. Starts at
/// the profile's default; runs over both hours, judged on the second.
pub fn adaptive(
    calls: &[(f64, Outcome)],
    default: Duration,
    min: Duration,
    max: Duration,
    k: f64,
) -> Judged {
    const WINDOW: f64 = 600.0;
    const EVERY: f64 = 10.0;
    // (start, Some(latency) if it answered within the timeout, None if it timed out)
    let mut window: std::collections::VecDeque<(f64, Option<Duration>)> = Default::default();
    let mut timeout = default;
    let mut next_update = EVERY;
    let mut timeouts = Vec::with_capacity(calls.len());
    let mut sorted: Vec<Duration> = Vec::new();
    for (t, o) in calls {
        if *t >= next_update {
            next_update += EVERY;
            while window.front().is_some_and(|(s, _)| *s < t - WINDOW) {
                window.pop_front();
            }
            let timed_out = window.iter().filter(|(_, l)| l.is_none()).count();
            if window.len() >= 100 && timed_out as f64 <= 0.01 * window.len() as f64 {
                sorted.clear();
                sorted.extend(window.iter().filter_map(|(_, l)| *l));
                sorted.sort_unstable();
                let rank = ((sorted.len() as f64 * 0.999).ceil() as usize).clamp(1, sorted.len());
                let p999 = sorted[rank - 1];
                timeout = p999.mul_f64(k).clamp(min, max);
            }
        }
        timeouts.push(timeout);
        let seen = match o {
            Outcome::Answered(d) if *d <= timeout => Some(*d),
            _ => None,
        };
        window.push_back((*t, seen));
    }
    judge_online(calls, &timeouts)
}

/// Restate's adaptive timeout (the `adaptive-timeout` crate's defaults, as Restate's
/// Bifrost uses it for appends), for comparison (not shipped): before each call,
/// `clamp(safety × p99.99 × 2^(attempt − 1), min, max)` over the last 60 s of recorded
/// round trips (answered calls at their latency, timed-out ones at their timeout), one
/// target, first attempts only; the floor (`min`) until 3 are recorded. Runs over both
/// hours, judged on the second.
pub fn restate(calls: &[(f64, Outcome)], min: Duration, max: Duration, safety: f64) -> Judged {
    const WINDOW: f64 = 60.0;
    const MIN_SAMPLES: usize = 3;
    // Re-estimated once a second of calls (at 10 calls a second, within 10 calls of
    // every call's own estimate).
    const EVERY: f64 = 1.0;
    let mut window: std::collections::VecDeque<(f64, Duration)> = Default::default();
    let mut timeout = min;
    let mut next_update = 0.0;
    let mut timeouts = Vec::with_capacity(calls.len());
    let mut sorted: Vec<Duration> = Vec::new();
    for (t, o) in calls {
        if *t >= next_update {
            next_update += EVERY;
            while window.front().is_some_and(|(s, _)| *s < t - WINDOW) {
                window.pop_front();
            }
            timeout = if window.len() < MIN_SAMPLES {
                min
            } else {
                sorted.clear();
                sorted.extend(window.iter().map(|(_, l)| *l));
                sorted.sort_unstable();
                let rank = ((sorted.len() as f64 * 0.9999).ceil() as usize).clamp(1, sorted.len());
                sorted[rank - 1].mul_f64(safety).clamp(min, max)
            };
        }
        timeouts.push(timeout);
        let recorded = match o {
            Outcome::Answered(d) if *d <= timeout => *d,
            _ => timeout,
        };
        window.push_back((*t, recorded));
    }
    judge_online(calls, &timeouts)
}

/// The judged hour under an online rule's timeouts, one per call of both hours.
fn judge_online(calls: &[(f64, Outcome)], timeouts: &[Duration]) -> Judged {
    let first_judged = calls
        .iter()
        .position(|(t, _)| *t >= HOUR)
        .unwrap_or(calls.len());
    let mut judged = timeouts[first_judged..].iter();
    judge(calls, |_| judged.next().copied().unwrap_or(Duration::MAX))
}
