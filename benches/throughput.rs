//! Throughput with many calls in flight, the case agents run: a multi-thread runtime
//! with 2 workers, the embedded server in the same process and runtime, 64 calls in
//! flight (64 tasks, each calling in a loop) over one loopback HTTP/2 connection.
//! Plain tonic sending the same deadline by hand (the baseline) against the layer with
//! its defaults (retries on, metrics off) and with retries off. Every round runs each
//! variant once, in a rotating order; the figure of merit is the median over rounds of
//! the baseline's window time over the variant's in the same round (paired, so drift
//! that slows a whole round cancels out), beside each variant's median throughput and
//! per-call latency.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tower_layer::Layer;

#[path = "support/interleaved.rs"]
mod interleaved;

const NAMES: [&str; 3] = [
    "plain_tonic_with_deadline",
    "layer_defaults",
    "layer_retries_off",
];
const IN_FLIGHT: usize = 64;
const CALLS_PER_TASK: usize = 20;
const ROUNDS: usize = 150;

type Plain = RegistryServiceClient<tonic::transport::Channel>;
type Layered =
    RegistryServiceClient<sw4rm_timeouts::TimeoutProfileService<tonic::transport::Channel>>;

#[derive(Clone)]
struct Clients {
    plain: Plain,
    layered: Layered,
    once: Layered,
}

impl Clients {
    /// One heartbeat through the variant's client (the baseline sets by hand the
    /// deadline the layer puts on a heartbeat).
    async fn call(&mut self, variant: usize) {
        let mut req = tonic::Request::new(HeartbeatRequest::default());
        let response = match variant {
            0 => {
                req.set_timeout(Duration::from_secs(5));
                self.plain.heartbeat(req).await
            }
            1 => self.layered.heartbeat(req).await,
            _ => self.once.heartbeat(req).await,
        };
        response.expect("heartbeat");
    }
}

/// One window of `IN_FLIGHT * CALLS_PER_TASK` calls: its wall time and every call's
/// latency.
async fn window(clients: &Clients, variant: usize) -> (Duration, Vec<Duration>) {
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(IN_FLIGHT);
    for _ in 0..IN_FLIGHT {
        let mut clients = clients.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(CALLS_PER_TASK);
            for _ in 0..CALLS_PER_TASK {
                let t = Instant::now();
                clients.call(variant).await;
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::with_capacity(IN_FLIGHT * CALLS_PER_TASK);
    for task in tasks {
        latencies.extend(task.await.expect("task"));
    }
    (start.elapsed(), latencies)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt.block_on(TestServer::start()).expect("embedded server");
    let url = server.url();
    let clients = rt.block_on(async move {
        let channel = tonic::transport::Endpoint::from_shared(url)
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let layer = || TimeoutProfileLayer::new(ProfileSet::standard()).without_metrics();
        Clients {
            plain: RegistryServiceClient::new(channel.clone()),
            layered: RegistryServiceClient::new(layer().layer(channel.clone())),
            once: RegistryServiceClient::new(layer().without_retries().layer(channel)),
        }
    });
    let clients = Arc::new(clients);

    let mut walls: Vec<Vec<Duration>> = vec![Vec::new(); NAMES.len()];
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(); NAMES.len()];
    rt.block_on(async {
        // Warm up: connection, path tables, the server's tasks.
        for variant in 0..NAMES.len() {
            window(&clients, variant).await;
        }
        for round in 0..ROUNDS {
            for k in 0..NAMES.len() {
                let variant = (round + k) % NAMES.len();
                let (wall, mut l) = window(&clients, variant).await;
                walls[variant].push(wall);
                latencies[variant].append(&mut l);
            }
        }
    });
    let calls = (IN_FLIGHT * CALLS_PER_TASK) as f64;
    println!(
        "\nthroughput, {IN_FLIGHT} calls in flight, 2-worker runtime, {ROUNDS} interleaved rounds"
    );
    let base_p50 = interleaved::median(&mut latencies[0].clone()).as_secs_f64();
    for (variant, name) in NAMES.iter().enumerate() {
        let mut paired: Vec<f64> = walls[0]
            .iter()
            .zip(&walls[variant])
            .map(|(base, v)| base.as_secs_f64() / v.as_secs_f64())
            .collect();
        paired.sort_unstable_by(f64::total_cmp);
        let rate = calls / interleaved::median(&mut walls[variant].clone()).as_secs_f64();
        let p50 = interleaved::median(&mut latencies[variant]).as_secs_f64();
        println!(
            "  {name:<28} {rate:>9.0} calls/s   paired throughput {:.3}x   call p50 {:>8.1} µs ({:.3}x)",
            paired[paired.len() / 2],
            p50 * 1e6,
            p50 / base_p50
        );
    }
    println!();

    let mut group = c.benchmark_group("throughput_64_in_flight");
    group.sample_size(10);
    for (variant, name) in NAMES.iter().enumerate() {
        let clients = clients.clone();
        group.bench_function(*name, |b| {
            b.to_async(&rt).iter(|| {
                let clients = clients.clone();
                async move {
                    window(&clients, variant).await;
                }
            })
        });
    }
    group.finish();
    drop(server);
}

criterion_group!(benches, bench);
criterion_main!(benches);
