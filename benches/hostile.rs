//! Measurements against a peer that never answers (figures, not assertions):
//!
//! * **timer lateness**: 3,000 calls with a 200 ms deadline started at once; how late
//!   each call ends after its deadline, against plain `tokio::time::sleep_until` at
//!   the same instants on the same runtime, interleaved over rounds;
//! * **server-side cancel latency**: from each call's deadline to the moment the
//!   server sees its stream reset (the server tags each stream by a call number the
//!   client sends);
//! * **bytes per in-flight call**: live heap bytes held by the client while 1,000
//!   calls wait, through the layer and through plain tonic sending the same deadline.
//!
//! The client runs on a current-thread runtime on the main thread; the raw HTTP/2
//! server on its own thread, whose allocations are not counted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::{cancel_safe, ProfileSet, Sw4rm, TimeoutProfileLayer};
use tokio::time::Instant;

// ---------------------------------------------------------------------------------
// Live bytes, counted on the client's thread (`support/counting.rs`).

#[path = "support/counting.rs"]
mod counting;

// ---------------------------------------------------------------------------------
// A peer that never answers, on its own thread.

#[derive(Clone, Default)]
struct Silent {
    accepted: Arc<AtomicUsize>,
    resets: Arc<Mutex<HashMap<u64, Instant>>>,
}

fn silent_server() -> (SocketAddr, Silent) {
    let silent = Silent::default();
    let seen = silent.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("server runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            tx.send(listener.local_addr().expect("addr"))
                .expect("send addr");
            while let Ok((socket, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut builder = h2::server::Builder::new();
                    builder
                        .max_concurrent_streams(100_000)
                        .max_pending_accept_reset_streams(100_000)
                        .max_local_error_reset_streams(None)
                        .initial_connection_window_size(16 << 20);
                    let Ok(mut conn) = builder.handshake::<_, Bytes>(socket).await else {
                        return;
                    };
                    while let Some(accepted) = conn.accept().await {
                        let (request, mut respond) = match accepted {
                            Ok(stream) => stream,
                            Err(e) => {
                                eprintln!("silent server: {e}");
                                break;
                            }
                        };
                        seen.accepted.fetch_add(1, Ordering::Relaxed);
                        let id = request
                            .headers()
                            .get("x-call")
                            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
                        let resets = seen.resets.clone();
                        let mut body = request.into_body();
                        tokio::spawn(async move {
                            // Read the request, as a server does, then never answer.
                            while let Some(Ok(data)) = body.data().await {
                                let _ = body.flow_control().release_capacity(data.len());
                            }
                            let reset = std::future::poll_fn(|cx| respond.poll_reset(cx)).await;
                            if let (Ok(_), Some(id)) = (reset, id) {
                                resets.lock().expect("lock").insert(id, Instant::now());
                            }
                        });
                    }
                });
            }
        });
    });
    (rx.recv().expect("server address"), silent)
}

// ---------------------------------------------------------------------------------

const CALLS: usize = 3_000;
const ROUNDS: usize = 5;
const DEADLINE: Duration = Duration::from_millis(200);

fn heartbeat(id: u64) -> tonic::Request<HeartbeatRequest> {
    let mut req = tonic::Request::new(HeartbeatRequest::default());
    req.metadata_mut().insert("x-call", id.into());
    req
}

/// Plain `sleep_until` at each of `CALLS` deadlines: how late each wakes.
async fn sleep_round() -> Vec<Duration> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..CALLS {
        set.spawn(async move {
            let at = Instant::now() + DEADLINE;
            tokio::time::sleep_until(at).await;
            Instant::now() - at
        });
    }
    set.join_all().await
}

/// `CALLS` heartbeats through the layer: how late each ends, and when the server saw
/// its reset after the deadline.
async fn layer_round(sw4rm: &Sw4rm, silent: &Silent, first: u64) -> (Vec<Duration>, Vec<Duration>) {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..CALLS as u64 {
        let sw4rm = sw4rm.clone();
        set.spawn(async move {
            let at = Instant::now() + DEADLINE;
            let status = sw4rm.registry().heartbeat(heartbeat(first + i)).await;
            let status = status.map(drop).expect_err("the peer never answers");
            assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
            (first + i, at, Instant::now() - at)
        });
    }
    cancel_latency(silent, set.join_all().await).await
}

/// Each call's lateness, and how long after its deadline the server saw its reset.
async fn cancel_latency(
    silent: &Silent,
    ends: Vec<(u64, Instant, Duration)>,
) -> (Vec<Duration>, Vec<Duration>) {
    // Give the server a moment to see the last resets.
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let resets = silent.resets.lock().expect("lock");
        if ends.iter().all(|(id, _, _)| resets.contains_key(id)) {
            break;
        }
    }
    let resets = silent.resets.lock().expect("lock");
    let cancels = ends
        .iter()
        .filter_map(|(id, at, _)| Some(resets.get(id)?.saturating_duration_since(*at)))
        .collect();
    (ends.into_iter().map(|(_, _, late)| late).collect(), cancels)
}

/// `CALLS` heartbeats through plain tonic with the same deadline set by hand.
async fn plain_round(
    channel: &tonic::transport::Channel,
    silent: &Silent,
    first: u64,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..CALLS as u64 {
        let mut client = RegistryServiceClient::new(channel.clone());
        set.spawn(async move {
            let at = Instant::now() + DEADLINE;
            let mut req = heartbeat(first + i);
            req.set_timeout(DEADLINE);
            let result = client.heartbeat(req).await;
            assert!(result.is_err(), "the peer never answers");
            (first + i, at, Instant::now() - at)
        });
    }
    cancel_latency(silent, set.join_all().await).await
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(i).copied().unwrap_or_default()
}

fn show(name: &str, samples: &mut [Duration]) {
    let p50 = percentile(samples, 0.5);
    let p99 = percentile(samples, 0.99);
    let max = percentile(samples, 1.0);
    println!(
        "  {name:<44} n={:<6} p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
        samples.len(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3,
    );
}

/// Live client bytes per call while `n` calls wait on the silent peer.
async fn bytes_per_call<F, Fut>(silent: &Silent, n: usize, call: F) -> f64
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let before_accepted = silent.accepted.load(Ordering::Relaxed);
    let before = counting::live();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n as u64 {
        tasks.push(tokio::task::spawn_local(call(i)));
    }
    while silent.accepted.load(Ordering::Relaxed) < before_accepted + n {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Let every call settle into waiting.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let during = counting::live();
    let per_call = (during - before) as f64 / n as f64;
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let _ = task.await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    per_call
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let (addr, silent) = silent_server();
    counting::count_this_thread();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let url = format!("http://{addr}");
        let profiles = ProfileSet::builder()
            .without_global()
            .default_timeout_ms("heartbeat", DEADLINE.as_millis() as u32)
            .min_timeout_ms("heartbeat", 1)
            .max_timeout_ms("heartbeat", 60_000)
            .build()
            .expect("profiles");
        let endpoint = tonic::transport::Endpoint::from_shared(url.clone()).expect("url");
        let sw4rm = Sw4rm::builder(endpoint.clone())
            .layer(TimeoutProfileLayer::new(profiles).without_metrics())
            .connect()
            .await
            .expect("connect");

        let plain_channel = cancel_safe(endpoint.clone()).connect().await.expect("connect");
        println!("timer lateness after a 200 ms deadline, {CALLS} calls at once, {ROUNDS} interleaved rounds");
        let (mut sleeps, mut plain, mut layer) = (Vec::new(), Vec::new(), Vec::new());
        let (mut plain_cancels, mut cancels) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let first = (2 * round * CALLS) as u64;
            for k in 0..3 {
                match (round + k) % 3 {
                    0 => sleeps.extend(sleep_round().await),
                    1 => {
                        let (late, cancel) =
                            plain_round(&plain_channel, &silent, first + CALLS as u64).await;
                        plain.extend(late);
                        plain_cancels.extend(cancel);
                    }
                    _ => {
                        let (late, cancel) = layer_round(&sw4rm, &silent, first).await;
                        layer.extend(late);
                        cancels.extend(cancel);
                    }
                }
            }
        }
        show("plain tokio::time::sleep_until", &mut sleeps);
        show("plain tonic, the same deadline by hand", &mut plain);
        show("layer: call ends with DEADLINE_EXCEEDED", &mut layer);
        println!("server-side cancel latency (deadline to RST_STREAM seen by the server)");
        show("plain tonic, the same deadline by hand", &mut plain_cancels);
        show("layer", &mut cancels);

        const IN_FLIGHT: usize = 1_000;
        let plain = bytes_per_call(&silent, IN_FLIGHT, |i| {
            let mut client = RegistryServiceClient::new(plain_channel.clone());
            async move {
                let mut req = heartbeat(i);
                req.set_timeout(Duration::from_secs(60));
                let _ = client.heartbeat(req).await;
            }
        })
        .await;
        let layered = bytes_per_call(&silent, IN_FLIGHT, |i| {
            let sw4rm = sw4rm.clone();
            async move {
                let mut req = heartbeat(i);
                req.set_timeout(Duration::from_secs(60));
                let _ = sw4rm.registry().heartbeat(req).await;
            }
        })
        .await;
        println!("live client heap per in-flight call ({IN_FLIGHT} calls waiting)");
        println!("  plain tonic, set_timeout(60 s)               {plain:>8.0} bytes");
        println!(
            "  layer, the same deadline                     {layered:>8.0} bytes ({:+.0})",
            layered - plain
        );
    });
}
