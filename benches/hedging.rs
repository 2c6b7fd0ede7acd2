//! Hedging against a latency tail: the embedded server answers `GetTaskStatus` in
//! 2 ms, and every 20th call (5 %) in 20 ms (10x). Three clients over one loopback
//! HTTP/2 connection, in the same process and runtime: the layer without hedging, the
//! layer hedging once after a fixed 5 ms (a plausible guess), the layer hedging once
//! after the route's learned p95, and the layer hedging after 5 s, which no call
//! reaches (the machinery's own cost). Every round runs each client once (4 tasks ×
//! 50 calls), in a rotating order; the figures pool every round: p50 / p99 / p99.9 of
//! the call latency, and the extra requests sent (from each answer's
//! `sw4rm-attempts`). Run with `cargo bench --bench hedging`.

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

/// One window of `TASKS * CALLS_PER_TASK` calls: every call's latency, and the
/// attempts they sent.
async fn window(client: &Client) -> (Vec<Duration>, u64) {
    let mut tasks = Vec::with_capacity(TASKS);
    for _ in 0..TASKS {
        let mut client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(CALLS_PER_TASK);
            let mut attempts = 0u64;
            for _ in 0..CALLS_PER_TASK {
                let t = Instant::now();
                let response = client
                    .get_task_status(GetTaskStatusRequest::default())
                    .await
                    .expect("status");
                latencies.push(t.elapsed());
                attempts += response
                    .metadata()
                    .get(ATTEMPTS_HEADER)
                    .and_then(|v| v.to_str().ok()?.parse().ok())
                    .unwrap_or(1);
            }
            (latencies, attempts)
        }));
    }
    let mut latencies = Vec::with_capacity(TASKS * CALLS_PER_TASK);
    let mut attempts = 0;
    for task in tasks {
        let (l, a) = task.await.expect("task");
        latencies.extend(l);
        attempts += a;
    }
    (latencies, attempts)
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
        let fixed = HedgingPolicy::builder()
            .max_attempts(2)
            .delay(Duration::from_millis(5))
            .build()
            .expect("fixed");
        let learned = HedgingPolicy::builder()
            .max_attempts(2)
            .learned_delay(95)
            .min_delay(Duration::from_millis(1))
            .build()
            .expect("learned");
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

    let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(); NAMES.len()];
    let mut attempts = [0u64; NAMES.len()];
    rt.block_on(async {
        // Warm up: the connection, and the learned client's window of the route.
        for client in clients.iter() {
            window(client).await;
        }
        for round in 0..ROUNDS {
            for k in 0..NAMES.len() {
                let variant = (round + k) % NAMES.len();
                let (mut l, a) = window(&clients[variant]).await;
                latencies[variant].append(&mut l);
                attempts[variant] += a;
            }
        }
    });
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    println!(
        "\nhedging: 2 ms answers, every 20th 20 ms; {ROUNDS} interleaved rounds of {} calls per client",
        TASKS * CALLS_PER_TASK
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
        println!(
            "  {name:<18} p50 {:>6.2} ms ({:.3}x)   p99 {:>6.2} ms ({:+.0} %)   p99.9 {:>6.2} ms ({:+.0} %)   extra requests {extra:>5.1} %",
            ms(q[0]),
            ms(q[0]) / ms(base[0]),
            ms(q[1]),
            (ms(q[1]) / ms(base[1]) - 1.0) * 100.0,
            ms(q[2]),
            (ms(q[2]) / ms(base[2]) - 1.0) * 100.0,
        );
    }
}
