//! Hedging against a latency tail: the embedded server answers `GetTaskStatus` in
//! 2 ms, and every 20th call (5 %) in 20 ms (10x). Four clients over one loopback
//! HTTP/2 connection, in the same process and runtime: the layer without hedging, the
//! layer hedging once after a fixed 5 ms (a plausible guess), the layer hedging once
//! after the route's learned p95, and the layer hedging after 5 s, which no call
//! reaches (the machinery's own cost). Every round runs each client once, in a
//! rotating order; the figures pool every round: p50 / p99 / p99.9 of the call
//! latency, the extra requests sent (from each answer's `sw4rm-attempts`), and the
//! calls per second the client completed.
//!
//! Two loads, each run in full:
//!
//! * **open**: every client is offered the same calls at the same moments (a seeded
//!   Poisson schedule, 1,000 calls/s; each call starts on schedule whatever the
//!   earlier ones are doing), as a service's many independent callers do. This is
//!   the comparison at equal load, where the p50 goal is read.
//! * **closed**: four tasks, each making its calls one after another. A client
//!   whose tail is shorter makes more calls per second here, so its p50 is measured
//!   under more load than the baseline's.
//!
//! Then **drift**: one call a millisecond for a second on the 2 ms route, then the
//! route steps to 20 ms for every call, and clients hedging after a fixed 5 ms (which
//! every call now passes) with the layer's default cap (10 % of calls in any second)
//! and without it, and after the learned p95 with the cap, are offered the same load
//! for 4 s more; per second, the share of calls that sent a hedge.
//!
//! Run with `cargo bench --bench hedging` (`-- drift` for the drift scenario alone).

use std::sync::Arc;
use std::time::{Duration, Instant};

use sw4rm_timeouts::proto::sw4rm::scheduler::scheduler_service_client::SchedulerServiceClient;
use sw4rm_timeouts::proto::sw4rm::scheduler::GetTaskStatusRequest;
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{HedgingPolicy, ProfileSet, TimeoutProfileLayer, ATTEMPTS_HEADER};
use tower_layer::Layer;

const NAMES: [&str; 4] = [
    "no_hedging",
    "fixed_5ms",
    "learned_p95",
    "armed_never_fires",
];
const TASKS: usize = 4;
const CALLS_PER_TASK: usize = 50;
const ROUNDS: usize = 60;

type Client =
    SchedulerServiceClient<sw4rm_timeouts::TimeoutProfileService<tonic::transport::Channel>>;

/// How the calls of a window are offered.
#[derive(Clone, Copy, Debug)]
enum Load {
    /// Calls start at fixed moments, whatever the earlier calls are doing.
    Open,
    /// `TASKS` tasks, each calling again when its last call has answered.
    Closed,
}

/// Calls per window, in either load.
const CALLS: usize = TASKS * CALLS_PER_TASK;
/// The open load's mean gap between calls (1,000 calls/s).
const MEAN_GAP: Duration = Duration::from_millis(1);

/// One call: its latency and the attempts it sent.
async fn call(client: &mut Client) -> (Duration, u64) {
    let t = Instant::now();
    let response = client
        .get_task_status(GetTaskStatusRequest::default())
        .await
        .expect("status");
    let latency = t.elapsed();
    let attempts = response
        .metadata()
        .get(ATTEMPTS_HEADER)
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(1);
    (latency, attempts)
}

/// The open load's start times from a window's start: exponential gaps (a Poisson
/// process) from a fixed seed, the same for every window and client.
fn schedule() -> Vec<Duration> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut at = Duration::ZERO;
    (0..CALLS)
        .map(|_| {
            // xorshift64*, then the exponential's inverse CDF.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let u = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            at += MEAN_GAP.mul_f64(-(1.0 - u).ln());
            at
        })
        .collect()
}

/// Spawns `calls` as tasks and gathers every call's latency and the attempts sent.
async fn gather(calls: Vec<tokio::task::JoinHandle<Vec<(Duration, u64)>>>) -> (Vec<Duration>, u64) {
    let mut latencies = Vec::with_capacity(CALLS);
    let mut attempts = 0;
    for task in calls {
        for (latency, sent) in task.await.expect("task") {
            latencies.push(latency);
            attempts += sent;
        }
    }
    (latencies, attempts)
}

/// One window of `CALLS` calls under `load`: every call's latency, and the attempts
/// they sent.
async fn window(client: &Client, load: Load, schedule: &[Duration]) -> (Vec<Duration>, u64) {
    match load {
        Load::Open => {
            let start = tokio::time::Instant::now();
            let mut tasks = Vec::with_capacity(CALLS);
            for at in schedule {
                tokio::time::sleep_until(start + *at).await;
                let mut client = client.clone();
                tasks.push(tokio::spawn(async move { vec![call(&mut client).await] }));
            }
            gather(tasks).await
        }
        Load::Closed => {
            let tasks = (0..TASKS)
                .map(|_| {
                    let mut client = client.clone();
                    tokio::spawn(async move {
                        let mut calls = Vec::with_capacity(CALLS_PER_TASK);
                        for _ in 0..CALLS_PER_TASK {
                            calls.push(call(&mut client).await);
                        }
                        calls
                    })
                })
                .collect();
            gather(tasks).await
        }
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn layer(hedging: Option<HedgingPolicy>) -> TimeoutProfileLayer {
    let mut profiles = ProfileSet::builder().without_global();
    if let Some(policy) = hedging {
        profiles = profiles.hedging("workflow_status", policy);
    }
    TimeoutProfileLayer::new(profiles.build().expect("profiles")).without_metrics()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt.block_on(TestServer::start()).expect("embedded server");
    server
        .script(
            "GetTaskStatus",
            Script::latency(Duration::from_millis(2)).with_tail(20, Duration::from_millis(20)),
        )
        .expect("script");
    let url = server.url();
    let clients = rt.block_on(async move {
        let channel = tonic::transport::Endpoint::from_shared(url)
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let (fixed, learned) = (fixed_5ms(), learned_p95());
        // Hedging on, with a delay no call reaches: what the machinery itself costs.
        let armed = HedgingPolicy::builder()
            .max_attempts(2)
            .delay(Duration::from_secs(5))
            .build()
            .expect("armed");
        [None, Some(fixed), Some(learned), Some(armed)]
            .map(|policy| SchedulerServiceClient::new(layer(policy).layer(channel.clone())))
    });
    let clients = Arc::new(clients);
    let schedule = schedule();
    if !std::env::args().any(|a| a == "drift") {
        for load in [Load::Open, Load::Closed] {
            rt.block_on(run(&clients, load, &schedule));
        }
    }
    rt.block_on(drift(&server));
}

/// Hedging once after a fixed 5 ms.
fn fixed_5ms() -> HedgingPolicy {
    HedgingPolicy::builder()
        .max_attempts(2)
        .delay(Duration::from_millis(5))
        .build()
        .expect("fixed")
}

/// Hedging once after the route's learned p95.
fn learned_p95() -> HedgingPolicy {
    HedgingPolicy::builder()
        .max_attempts(2)
        .learned_delay(95)
        .min_delay(Duration::from_millis(1))
        .build()
        .expect("learned")
}

/// The drift scenario: a step change to 20 ms for every call, offered to a fixed-delay
/// client with the default hedge cap and without it, and to a learned one with it.
async fn drift(server: &TestServer) {
    let channel = tonic::transport::Endpoint::from_shared(server.url())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let (fixed, learned) = (fixed_5ms(), learned_p95());
    let client = |policy, cap: bool| {
        let layer = layer(Some(policy));
        let layer = if cap {
            layer
        } else {
            layer.without_hedge_cap()
        };
        SchedulerServiceClient::new(layer.layer(channel.clone()))
    };
    println!(
        "\nhedging, drift: 2 ms answers, then every call 20 ms; 1,000 calls/s offered for 4 s"
    );
    for (name, client) in [
        ("fixed_5ms no cap", client(fixed, false)),
        ("fixed_5ms capped", client(fixed, true)),
        ("learned_p95 capped", client(learned, true)),
    ] {
        // Learn the fast route first, at the same load.
        server
            .script("GetTaskStatus", Script::latency(Duration::from_millis(2)))
            .expect("script");
        offer(&client, 1).await;
        server
            .script("GetTaskStatus", Script::latency(Duration::from_millis(20)))
            .expect("script");
        let shares: Vec<String> = offer(&client, 4)
            .await
            .iter()
            .map(|(calls, hedged)| {
                format!("{:.1} %", f64::from(*hedged) * 100.0 / f64::from(*calls))
            })
            .collect();
        println!(
            "  {name:<18} calls hedged per second: {}",
            shares.join(", ")
        );
    }
}

/// One call a millisecond for `seconds`; per second (by when each call started), the
/// calls and how many of them sent a hedge.
async fn offer(client: &Client, seconds: u64) -> Vec<(u32, u32)> {
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for i in 0..seconds * 1_000 {
        tokio::time::sleep_until(start + Duration::from_millis(i)).await;
        let mut client = client.clone();
        tasks.push(tokio::spawn(async move {
            (i / 1_000, call(&mut client).await.1)
        }));
    }
    let mut per_second = vec![(0u32, 0u32); seconds as usize];
    for task in tasks {
        let (second, attempts) = task.await.expect("task");
        if let Some(s) = per_second.get_mut(second as usize) {
            s.0 += 1;
            s.1 += u32::from(attempts > 1);
        }
    }
    per_second
}

/// Every round of one load, then its table.
async fn run(clients: &[Client; 4], load: Load, schedule: &[Duration]) {
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(); NAMES.len()];
    let mut attempts = [0u64; NAMES.len()];
    let mut spent = [Duration::ZERO; NAMES.len()];
    // Warm up: the connection, and the learned client's window of the route.
    for client in clients.iter() {
        window(client, load, schedule).await;
    }
    for round in 0..ROUNDS {
        for k in 0..NAMES.len() {
            let variant = (round + k) % NAMES.len();
            let start = Instant::now();
            let (mut l, a) = window(&clients[variant], load, schedule).await;
            spent[variant] += start.elapsed();
            latencies[variant].append(&mut l);
            attempts[variant] += a;
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    println!(
        "\nhedging, {load:?} load: 2 ms answers, every 20th 20 ms; {ROUNDS} interleaved rounds of {CALLS} calls per client",
    );
    let mut base = [Duration::ZERO; 3];
    for (variant, name) in NAMES.iter().enumerate() {
        let l = &mut latencies[variant];
        l.sort_unstable();
        let q = [quantile(l, 0.5), quantile(l, 0.99), quantile(l, 0.999)];
        if variant == 0 {
            base = q;
        }
        let calls = l.len() as f64;
        let extra = (attempts[variant] as f64 - calls) / calls * 100.0;
        // The open load offers the same calls per second to every client.
        let rate = match load {
            Load::Open => String::new(),
            Load::Closed => format!("   {:>5.0} calls/s", calls / spent[variant].as_secs_f64()),
        };
        println!(
            "  {name:<18} p50 {:>6.2} ms ({:.3}x)   p99 {:>6.2} ms ({:+.0} %)   p99.9 {:>6.2} ms ({:+.0} %)   extra requests {extra:>5.1} %{rate}",
            ms(q[0]),
            ms(q[0]) / ms(base[0]),
            ms(q[1]),
            (ms(q[1]) / ms(base[1]) - 1.0) * 100.0,
            ms(q[2]),
            (ms(q[2]) / ms(base[2]) - 1.0) * 100.0,
        );
    }
}
