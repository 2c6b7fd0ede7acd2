//! `advise --prometheus` against a real Prometheus: a week of an agent fleet's metrics
//! written as OpenMetrics, backfilled into a TSDB with `promtool tsdb
//! create-blocks-from openmetrics`, served by `prometheus` on loopback, and read
//! through its HTTP query API. Five instances: one restarts mid-week (a counter
//! reset), one starts mid-week with an older histogram's buckets, one is ten times
//! slower than the rest on one route, one runs another table. What the fleet should
//! say is computed here from the generated series, not by the advisor.
//!
//! Needs Debian's `prometheus` package (`prometheus` and `promtool`); `.ci/run`
//! installs it and sets `SW4RM_NEED_PROMETHEUS=1`, under which its absence fails the
//! test instead of skipping it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sw4rm_advise::fleet::{FleetError, Prometheus};
use sw4rm_advise::{from_exposition, Advice, ScrapedTable, Verdict};
use sw4rm_timeouts::ProfileSet;

/// The window's end (a fixed instant: the data and the advice never change).
const END: u64 = 1_780_000_000;
/// One sample every 30 minutes for a week: 336 steps.
const STEP: u64 = 1_800;
const STEPS: u64 = 336;

const NEW_BOUNDS: &[f64] = &[
    5., 10., 20., 50., 100., 200., 500., 1000., 2000., 5000., 10000., 20000.,
];
const OLD_BOUNDS: &[f64] = &[10., 100., 1000., 10000.];
const HEARTBEAT: (&str, &str, &str) = ("sw4rm.registry.RegistryService", "Heartbeat", "heartbeat");
const SUBMIT: (&str, &str, &str) = (
    "sw4rm.scheduler.SchedulerService",
    "SubmitTask",
    "task_submit",
);

/// One route on one instance: calls per step in each bucket (the last: above every
/// bound), and timeouts among those above every bound.
struct RouteSpec {
    route: (&'static str, &'static str, &'static str),
    bounds: &'static [f64],
    per_step: Vec<u64>,
    timeouts_per_step: u64,
}

struct Spec {
    name: &'static str,
    /// The first step it has samples for (its counters start at 0 there).
    start: u64,
    /// The step it restarts at (its counters are 0 again there).
    restart: Option<u64>,
    heartbeat_default: u64,
    routes: Vec<RouteSpec>,
}

/// `per_step` with `n` calls in the bucket bounded by `le` (NEW_BOUNDS or OLD_BOUNDS).
fn calls(bounds: &[f64], spread: &[(f64, u64)]) -> Vec<u64> {
    let mut v = vec![0; bounds.len() + 1];
    for (le, n) in spread {
        let i = bounds.iter().position(|b| b == le).unwrap_or(bounds.len());
        v[i] += n;
    }
    v
}

fn fleet_specs() -> Vec<Spec> {
    let steady = |bounds| RouteSpec {
        route: HEARTBEAT,
        bounds,
        per_step: calls(bounds, &[(10., 95), (20., 4), (50., 1)]),
        timeouts_per_step: 0,
    };
    vec![
        Spec {
            name: "a1",
            start: 1,
            restart: None,
            heartbeat_default: 5000,
            routes: vec![
                steady(NEW_BOUNDS),
                RouteSpec {
                    route: SUBMIT,
                    bounds: NEW_BOUNDS,
                    // 2 of 100 time out at 30 s (above every bound); the rest cluster
                    // up to 20 s, near the 30 s default.
                    per_step: calls(
                        NEW_BOUNDS,
                        &[(1000., 80), (5000., 15), (20000., 3), (f64::INFINITY, 2)],
                    ),
                    timeouts_per_step: 2,
                },
            ],
        },
        Spec {
            name: "a2",
            start: 1,
            restart: Some(168),
            heartbeat_default: 5000,
            routes: vec![steady(NEW_BOUNDS)],
        },
        Spec {
            name: "a3",
            start: 1,
            restart: None,
            heartbeat_default: 5000,
            routes: vec![RouteSpec {
                route: HEARTBEAT,
                bounds: NEW_BOUNDS,
                per_step: calls(NEW_BOUNDS, &[(100., 5), (200., 5)]),
                timeouts_per_step: 0,
            }],
        },
        Spec {
            name: "a4",
            start: 1,
            restart: None,
            heartbeat_default: 2000,
            routes: vec![RouteSpec {
                route: HEARTBEAT,
                bounds: NEW_BOUNDS,
                per_step: calls(NEW_BOUNDS, &[(1000., 50), (2000., 50)]),
                timeouts_per_step: 0,
            }],
        },
        Spec {
            name: "a5",
            start: 192,
            restart: None,
            heartbeat_default: 5000,
            routes: vec![
                RouteSpec {
                    route: HEARTBEAT,
                    bounds: OLD_BOUNDS,
                    per_step: calls(OLD_BOUNDS, &[(10., 100)]),
                    timeouts_per_step: 0,
                },
                RouteSpec {
                    route: SUBMIT,
                    bounds: OLD_BOUNDS,
                    per_step: calls(OLD_BOUNDS, &[(1000., 10)]),
                    timeouts_per_step: 0,
                },
            ],
        },
    ]
}

/// How many steps of calls a counter holds at step `k` (0 at its first sample).
fn lived(spec: &Spec, k: u64) -> u64 {
    match spec.restart {
        Some(r) if k >= r => k - r,
        _ => k - spec.start,
    }
}

fn labels(spec: &Spec, route: (&str, &str, &str)) -> String {
    format!(
        "instance=\"{}\",job=\"agents\",method=\"{}\",profile=\"{}\",service=\"{}\"",
        spec.name, route.1, route.2, route.0
    )
}

/// The week as OpenMetrics: the histogram, the timeout counter, the table gauge.
fn openmetrics(specs: &[Spec]) -> String {
    let mut out = String::from("# TYPE sw4rm_rpc_duration_ms histogram\n");
    let at = |k: u64| END - (STEPS - k) * STEP;
    for s in specs {
        for r in &s.routes {
            let l = labels(s, r.route);
            for k in s.start..=STEPS {
                let n = lived(s, k);
                let mut cumulative = 0;
                for (i, per) in r.per_step.iter().enumerate() {
                    cumulative += per * n;
                    let le = r.bounds.get(i).map_or("+Inf".to_owned(), |b| b.to_string());
                    let _ = writeln!(
                        out,
                        "sw4rm_rpc_duration_ms_bucket{{{l},le=\"{le}\"}} {cumulative} {}",
                        at(k)
                    );
                }
                let _ = writeln!(
                    out,
                    "sw4rm_rpc_duration_ms_count{{{l}}} {cumulative} {}",
                    at(k)
                );
                let _ = writeln!(out, "sw4rm_rpc_duration_ms_sum{{{l}}} 0 {}", at(k));
            }
        }
    }
    out.push_str("# TYPE sw4rm_rpc_timeout counter\n");
    for s in specs {
        for r in &s.routes {
            let l = labels(s, r.route);
            for k in s.start..=STEPS {
                let _ = writeln!(
                    out,
                    "sw4rm_rpc_timeout_total{{{l}}} {} {}",
                    r.timeouts_per_step * lived(s, k),
                    at(k)
                );
            }
        }
    }
    out.push_str("# TYPE sw4rm_rpc_configured_timeout_ms gauge\n");
    for s in specs {
        let table = [
            ("heartbeat", "default", s.heartbeat_default),
            ("heartbeat", "max", 30_000),
            ("heartbeat", "min", 1_000),
            ("task_submit", "default", 30_000),
            ("task_submit", "max", 300_000),
            ("task_submit", "min", 5_000),
        ];
        for (profile, bound, ms) in table {
            for k in s.start..=STEPS {
                let _ = writeln!(
                    out,
                    "sw4rm_rpc_configured_timeout_ms{{bound=\"{bound}\",instance=\"{}\",job=\"agents\",profile=\"{profile}\"}} {ms} {}",
                    s.name,
                    at(k)
                );
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

/// A route's bounds, each cumulative bucket's increase over the week, its timeouts'.
type Increase = (&'static [f64], Vec<u64>, u64);

/// What a scrape of one process that made the counted instances' calls would show:
/// each counter's increase over the week (a fall is a restart from 0), summed on
/// the union of the bounds, an instance counting at a bound it lacks its count at
/// its nearest bound below.
fn expected_exposition(specs: &[&Spec]) -> String {
    let mut routes: BTreeMap<(&str, &str, &str), Vec<Increase>> = BTreeMap::new();
    for s in specs {
        for r in &s.routes {
            // The increase of each cumulative bucket, step by step.
            let mut increase = vec![0u64; r.per_step.len()];
            let mut timeouts = 0;
            let mut last: Option<(Vec<u64>, u64)> = None;
            for k in s.start..=STEPS {
                let n = lived(s, k);
                let now: Vec<u64> = (0..r.per_step.len())
                    .map(|i| r.per_step[..=i].iter().sum::<u64>() * n)
                    .collect();
                let t = r.timeouts_per_step * n;
                if let Some((before, t_before)) = &last {
                    for i in 0..now.len() {
                        increase[i] += if now[i] >= before[i] {
                            now[i] - before[i]
                        } else {
                            now[i]
                        };
                    }
                    timeouts += if t >= *t_before { t - t_before } else { t };
                }
                last = Some((now, t));
            }
            routes
                .entry(r.route)
                .or_default()
                .push((r.bounds, increase, timeouts));
        }
    }
    let mut out = String::new();
    for ((service, method, profile), on) in routes {
        let mut union: Vec<f64> = on.iter().flat_map(|(b, _, _)| b.iter().copied()).collect();
        union.sort_by(f64::total_cmp);
        union.dedup();
        let l = format!("method=\"{method}\",profile=\"{profile}\",service=\"{service}\"");
        for b in &union {
            let n: u64 = on
                .iter()
                .map(|(bounds, inc, _)| bounds.iter().rposition(|x| x <= b).map_or(0, |i| inc[i]))
                .sum();
            let _ = writeln!(out, "sw4rm_rpc_duration_ms_bucket{{{l},le=\"{b}\"}} {n}");
        }
        let inf: u64 = on.iter().map(|(_, inc, _)| *inc.last().unwrap()).sum();
        let _ = writeln!(out, "sw4rm_rpc_duration_ms_bucket{{{l},le=\"+Inf\"}} {inf}");
        let t: u64 = on.iter().map(|(_, _, t)| t).sum();
        let _ = writeln!(out, "sw4rm_rpc_timeout_total{{{l}}} {t}");
    }
    out
}

/// A Prometheus serving the backfilled week; killed on drop.
struct Server {
    child: Child,
    url: String,
    _dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn on_path(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Backfills `data` and starts Prometheus over it, or `None` when it is not installed
/// (and `SW4RM_NEED_PROMETHEUS` is not set).
fn prometheus(data: &str) -> Option<Server> {
    if !(on_path("prometheus") && on_path("promtool")) {
        assert!(
            std::env::var_os("SW4RM_NEED_PROMETHEUS").is_none(),
            "SW4RM_NEED_PROMETHEUS is set but prometheus or promtool is not on PATH \
             (Debian's package `prometheus`)"
        );
        eprintln!("skipped: prometheus and promtool are not installed (Debian's `prometheus`)");
        return None;
    }
    let dir = TempDir(std::env::temp_dir().join(format!("sw4rm-fleet-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(dir.0.join("tsdb")).unwrap();
    let file = dir.0.join("week.om.txt");
    std::fs::write(&file, data).unwrap();
    let backfill = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&file)
        .arg(dir.0.join("tsdb"))
        .output()
        .unwrap();
    assert!(
        backfill.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&backfill.stderr)
    );
    std::fs::write(
        dir.0.join("prometheus.yml"),
        "global:\n  scrape_interval: 1h\n",
    )
    .unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.0.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.0.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--storage.tsdb.retention.time=100y")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    wait_ready(&server.url);
    Some(server)
}

/// Waits until Prometheus says it is ready (at most a minute: it only fails slower).
fn wait_ready(url: &str) {
    let started = Instant::now();
    loop {
        let ready = ureq::get(&format!("{url}/-/ready"))
            .call()
            .is_ok_and(|r| r.status() == 200);
        if ready {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "prometheus at {url} never ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn judged(text: &str) -> Advice {
    let standard = ProfileSet::standard();
    let set = ScrapedTable::from_exposition(text)
        .apply(ProfileSet::builder().without_global(), &standard)
        .build()
        .unwrap();
    Advice::new(&set, &from_exposition(text).unwrap())
}

#[test]
fn the_fleet_through_prometheus_gives_the_scrape_paths_advice_and_names_who_differs() {
    let specs = fleet_specs();
    let Some(server) = prometheus(&openmetrics(&specs)) else {
        return;
    };
    let fleet = Prometheus::new(&server.url)
        .at(END as f64)
        .read_fleet("{job=\"agents\"}", "7d", "instance")
        .unwrap();

    let names: Vec<&str> = fleet.instances().iter().map(|i| i.name()).collect();
    assert_eq!(names, ["a1", "a2", "a3", "a4", "a5"]);
    // a4 ran heartbeat at 2 s: named, and left out rather than averaged in.
    let disagreeing = fleet.disagreeing();
    assert_eq!(disagreeing.len(), 1, "{disagreeing:?}");
    assert_eq!(disagreeing[0].instance, "a4");
    assert_eq!(
        disagreeing[0].differences,
        ["heartbeat default: 2000 ms (the fleet's table: 5000 ms)"]
    );
    // a3's heartbeat p99 (200 ms) is ten times the typical instance's (20 ms).
    let outliers = fleet.outliers();
    assert_eq!(outliers.len(), 1, "{outliers:?}");
    assert_eq!(
        (outliers[0].instance.as_str(), outliers[0].path.as_str()),
        ("a3", "/sw4rm.registry.RegistryService/Heartbeat")
    );
    assert_eq!(
        (outliers[0].p99, outliers[0].typical_p99),
        (Duration::from_millis(200), Duration::from_millis(20))
    );

    // The calls, as the generated counters say (a2's restart, a5's late start, a5's
    // older buckets), from the instances on the fleet's table.
    let counted: Vec<&Spec> = specs.iter().filter(|s| s.name != "a4").collect();
    let mut expected = expected_exposition(&counted);
    for (profile, bound, ms) in [
        ("heartbeat", "default", 5000),
        ("heartbeat", "max", 30000),
        ("heartbeat", "min", 1000),
        ("task_submit", "default", 30000),
        ("task_submit", "max", 300000),
        ("task_submit", "min", 5000),
    ] {
        let _ = writeln!(
            expected,
            "sw4rm_rpc_configured_timeout_ms{{bound=\"{bound}\",profile=\"{profile}\"}} {ms}"
        );
    }
    let from_api = fleet.routes().unwrap();
    let from_scrape = from_exposition(&expected).unwrap();
    assert_eq!(
        from_api,
        from_scrape,
        "the fleet's routes are the scrape path's:\n{}\n---\n{expected}",
        fleet.exposition()
    );
    let heartbeat = from_api.iter().find(|r| r.method == "Heartbeat").unwrap();
    // a1 and a3: 335 steps; a2: 166 + 168 (a restart); a5: 144 from step 192.
    assert_eq!(
        heartbeat.latency.successes(),
        100 * 335 + 100 * (166 + 168) + 10 * 335 + 100 * 144
    );
    let submit = from_api.iter().find(|r| r.method == "SubmitTask").unwrap();
    assert_eq!(
        (submit.latency.successes(), submit.latency.timeouts()),
        (98 * 335 + 10 * 144, 2 * 335)
    );

    // The advice: the scrape path's, to the letter; heartbeat's slowest calls (200 ms)
    // are far below its 5 s, so it comes down to its 1 s minimum; task_submit times out
    // on 2 % of calls while the rest reach 20 s of its 30 s: false failures.
    let advice = judged(&fleet.exposition());
    assert_eq!(advice.overlay(), judged(&expected).overlay());
    let verdict = |name: &str| {
        advice
            .profiles()
            .iter()
            .find(|p| p.name == name)
            .unwrap()
            .finding
            .verdict
            .clone()
    };
    assert!(
        matches!(verdict("heartbeat"), Verdict::DetectionSlow { proposed, .. } if proposed == Duration::from_secs(1)),
        "{:?}",
        verdict("heartbeat")
    );
    assert!(
        matches!(verdict("task_submit"), Verdict::FalseFailures { .. }),
        "{:?}",
        verdict("task_submit")
    );
    assert!(
        advice
            .overlay()
            .contains("[profiles.heartbeat]\ndefault_timeout_ms = 1000\n"),
        "{}",
        advice.overlay()
    );

    // A selector that matches nothing says so, naming the query.
    let none = Prometheus::new(&server.url).at(END as f64).read_fleet(
        "{job=\"nobody\"}",
        "7d",
        "instance",
    );
    match none {
        Err(e @ FleetError::NoSeries { .. }) => {
            assert!(e.to_string().contains("{job=\"nobody\"}[7d]"), "{e}")
        }
        other => panic!("{other:?}"),
    }

    // The command: the same advice written whole to --out, the notes on stderr.
    let dir = std::env::temp_dir().join(format!("sw4rm-fleet-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("sw4rm.toml");
    let run = Command::new(env!("CARGO_BIN_EXE_sw4rm-timeouts"))
        .args([
            "advise",
            "--prometheus",
            &server.url,
            "--selector",
            "{job=\"agents\"}",
            "--window",
            "7d",
            "--at",
            &END.to_string(),
            "--out",
        ])
        .arg(&out)
        .arg("--report")
        .arg(dir.join("page.html"))
        .env_remove("SW4RM_CONFIG")
        .current_dir(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(matches!(run.status.code(), Some(0 | 3)), "{stderr}");
    assert!(run.stdout.is_empty(), "the overlay went to --out");
    let written = std::fs::read_to_string(&out).unwrap();
    let values = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(values(&written), values(&advice.overlay()));
    assert!(
        written.contains("# a4 ran another table, left out of the advice"),
        "{written}"
    );
    assert!(written.contains("# query: sum by (instance, service, method, profile, le) (increase(sw4rm_rpc_duration_ms_bucket{job=\"agents\"}[7d]))"), "{written}");
    assert!(
        stderr.contains("a3 stands out on /sw4rm.registry.RegistryService/Heartbeat"),
        "{stderr}"
    );
    // The diff against the table in use, as the generated data says: heartbeat to 1 s.
    assert!(
        stderr.contains("change: heartbeat.default_timeout_ms 5000 -> 1000\n"),
        "{stderr}"
    );
    assert_eq!(
        advice.changes(),
        ["heartbeat.default_timeout_ms 5000 -> 1000"]
    );
    let page = std::fs::read_to_string(dir.join("page.html")).unwrap();
    assert!(
        page.contains("Where the data came from"),
        "the page shows the queries"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
