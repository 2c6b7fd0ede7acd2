//! The cost of a call at scale (figures, not assertions): 1,000 / 10,000 / 100,000
//! heartbeats in flight at once over 1 / 4 / 8 connections, through the layer, through
//! the layer without retries (no copy of the request kept for replay) and through
//! plain tonic sending the same deadline (one hour: it never fires), in interleaved
//! rounds. For each:
//!
//! * **bytes per call in flight**: live client heap while every call waits for its
//!   answer (the server holds them all), over what was live before;
//! * **CPU per call**: the client thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`) from
//!   the first call sent to the last answer read, over the calls;
//! * **p50 / p99**: each call's time from being sent to its answer, when all are sent
//!   at once and the server answers each as it arrives (a burst: queueing included).
//!
//! The client runs on a current-thread runtime on the main thread (its allocations
//! and CPU are the ones counted); a raw HTTP/2 server answers on its own thread.
//! `cargo bench --bench scale` runs the whole grid; `-- quick` runs 1,000 and 10,000
//! only.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sw4rm_timeouts::proto::sw4rm::registry::registry_service_client::RegistryServiceClient;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::{cancel_safe, ProfileSet, Sw4rm, TimeoutProfileLayer};
use tonic::transport::Channel;

// ---------------------------------------------------------------------------------
// Live bytes, counted on the client's thread (`support/counting.rs`).

#[path = "support/counting.rs"]
mod counting;

/// The calling thread's CPU time.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

// ---------------------------------------------------------------------------------
// A raw HTTP/2 server, on its own thread: answers each heartbeat at once, or holds
// every answer until released.

#[derive(Clone, Default)]
struct Peer {
    accepted: Arc<AtomicUsize>,
    hold: Arc<AtomicBool>,
    release: Arc<tokio::sync::Notify>,
}

fn answer() -> (http::Response<()>, Bytes, http::HeaderMap) {
    let head = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .expect("head");
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    // An empty `HeartbeatResponse`: the 5-byte frame header alone.
    (head, Bytes::from_static(&[0, 0, 0, 0, 0]), trailers)
}

fn serve(peer: Peer, socket: tokio::net::TcpStream) {
    tokio::spawn(async move {
        let mut builder = h2::server::Builder::new();
        builder
            .max_concurrent_streams(200_000)
            .initial_window_size(1 << 20)
            .initial_connection_window_size(64 << 20);
        let Ok(mut conn) = builder.handshake::<_, Bytes>(socket).await else {
            return;
        };
        while let Some(Ok((request, mut respond))) = conn.accept().await {
            peer.accepted.fetch_add(1, Ordering::Relaxed);
            let peer = peer.clone();
            tokio::spawn(async move {
                let mut body = request.into_body();
                while let Some(Ok(data)) = body.data().await {
                    let _ = body.flow_control().release_capacity(data.len());
                }
                if peer.hold.load(Ordering::Acquire) {
                    let released = peer.release.notified();
                    if peer.hold.load(Ordering::Acquire) {
                        released.await;
                    }
                }
                let (head, message, trailers) = answer();
                let Ok(mut send) = respond.send_response(head, false) else {
                    return;
                };
                let _ = send.send_data(message, false);
                let _ = send.send_trailers(trailers);
            });
        }
    });
}

fn start_peer() -> (SocketAddr, Peer) {
    let peer = Peer::default();
    let served = peer.clone();
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
                serve(served.clone(), socket);
            }
        });
    });
    (rx.recv().expect("server address"), peer)
}

// ---------------------------------------------------------------------------------
// The two clients, over `connections` connections each.

const DEADLINE: Duration = Duration::from_secs(3_600);

#[derive(Clone)]
enum Client {
    Plain(Vec<Channel>),
    Layer(Vec<Sw4rm>),
}

impl Client {
    /// Call `i`, on connection `i % connections`: `Ok` when answered.
    fn call(&self, i: usize) -> impl std::future::Future<Output = bool> + 'static {
        let req = || {
            let mut req = tonic::Request::new(HeartbeatRequest::default());
            req.set_timeout(DEADLINE);
            req
        };
        let this = self.clone();
        async move {
            match this {
                Client::Plain(channels) => {
                    let channel = channels[i % channels.len()].clone();
                    let mut client = RegistryServiceClient::new(channel);
                    client.heartbeat(req()).await.is_ok()
                }
                Client::Layer(clients) => {
                    let client = &clients[i % clients.len()];
                    client.registry().heartbeat(req()).await.is_ok()
                }
            }
        }
    }
}

/// Plain tonic, the layer, and the layer without retries (a call in flight keeps no
/// copy of its request for replay), over `connections` connections each.
async fn clients(addr: SocketAddr, connections: usize) -> [Client; 3] {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("url")
        .initial_connection_window_size(64 << 20);
    let profiles = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", DEADLINE.as_millis() as u32)
        .max_timeout_ms("heartbeat", DEADLINE.as_millis() as u32)
        .build()
        .expect("profiles");
    let layer = TimeoutProfileLayer::new(profiles);
    let once = layer.clone().without_retries();
    let (mut plain, mut layered, mut sent_once) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..connections {
        plain.push(
            cancel_safe(endpoint.clone())
                .initial_connection_window_size(64 << 20)
                .connect()
                .await
                .expect("connect"),
        );
        for (kind, layer) in [(&mut layered, &layer), (&mut sent_once, &once)] {
            let client = Sw4rm::builder(endpoint.clone()).layer(layer.clone());
            kind.push(client.connect().await.expect("connect"));
        }
    }
    [
        Client::Plain(plain),
        Client::Layer(layered),
        Client::Layer(sent_once),
    ]
}

// ---------------------------------------------------------------------------------
// One round of each measure.

/// `n` calls held by the server: live bytes per call while they wait, and the client
/// thread's CPU per call from the first sent to the last answered.
async fn held(peer: &Peer, client: &Client, n: usize) -> (f64, Duration) {
    peer.hold.store(true, Ordering::Release);
    let accepted = peer.accepted.load(Ordering::Relaxed);
    let before = counting::live();
    let cpu = thread_cpu();
    let tasks: Vec<_> = (0..n)
        .map(|i| tokio::task::spawn_local(client.call(i)))
        .collect();
    while peer.accepted.load(Ordering::Relaxed) < accepted + n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Every request is read: let each call settle into waiting for its answer.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let during = counting::live();
    peer.hold.store(false, Ordering::Release);
    peer.release.notify_waiters();
    let mut answered = 0;
    for task in tasks {
        answered += usize::from(task.await.expect("call task"));
    }
    assert_eq!(answered, n, "every held call is answered");
    let cpu = thread_cpu() - cpu;
    ((during - before) as f64 / n as f64, cpu / n as u32)
}

/// `n` calls sent at once and answered as they arrive: each call's time.
async fn burst(client: &Client, n: usize) -> Vec<Duration> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let call = client.call(i);
            tokio::task::spawn_local(async move {
                let start = Instant::now();
                assert!(call.await, "answered");
                start.elapsed()
            })
        })
        .collect();
    let mut times = Vec::with_capacity(n);
    for task in tasks {
        times.push(task.await.expect("call task"));
    }
    times
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples.get(i).copied().unwrap_or_default()
}

fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[derive(Default)]
struct Figures {
    bytes: Vec<f64>,
    cpu: Vec<f64>,
    times: Vec<Duration>,
}

impl Figures {
    fn line(&mut self) -> (f64, f64, f64, f64) {
        let bytes = median_f64(std::mem::take(&mut self.bytes));
        let cpu = median_f64(std::mem::take(&mut self.cpu));
        let p50 = percentile(&mut self.times, 0.5).as_secs_f64() * 1e3;
        let p99 = percentile(&mut self.times, 0.99).as_secs_f64() * 1e3;
        (bytes, cpu, p50, p99)
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::args().any(|a| a == "quick");
    let (addr, peer) = start_peer();
    counting::count_this_thread();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        println!(
            "{:>7} {:>5}  {:>12} {:>19} {:>19}  {:>9} {:>15} {:>15}  {:>13} {:>13} {:>13}",
            "calls",
            "conns",
            "plain B/call",
            "layer B/call (+)",
            "no retry B/call (+)",
            "plain cpu",
            "layer cpu (+)",
            "no retry cpu (+)",
            "plain p50/p99",
            "layer p50/p99",
            "no retry",
        );
        let sizes: &[usize] = if quick {
            &[1_000, 10_000]
        } else {
            &[1_000, 10_000, 100_000]
        };
        for &n in sizes {
            for connections in [1, 4, 8] {
                let clients = clients(addr, connections).await;
                // A warm-up of each: connections open, buffers grown, routes planned.
                for client in &clients {
                    burst(client, 1_000).await;
                }
                let rounds = if n >= 100_000 { 2 } else { 4 };
                let mut figures: [Figures; 3] = Default::default();
                // Interleaved: each round runs every client once, in a rotating order.
                for round in 0..rounds {
                    for k in 0..clients.len() {
                        let at = (round + k) % clients.len();
                        let (bytes, cpu) = held(&peer, &clients[at], n).await;
                        figures[at].bytes.push(bytes);
                        figures[at].cpu.push(cpu.as_secs_f64() * 1e6);
                        figures[at].times.extend(burst(&clients[at], n).await);
                    }
                }
                let [(pb, pc, p50, p99), (lb, lc, l50, l99), (ob, oc, o50, o99)] =
                    figures.each_mut().map(Figures::line);
                let over = |b: f64, c: f64| (b - pb, (c / pc - 1.0) * 100.0);
                let ((lo, lp), (oo, op)) = (over(lb, lc), over(ob, oc));
                println!(
                    "{n:>7} {connections:>5}  {pb:>12.0} {lb:>11.0} ({lo:>+5.0}) {ob:>11.0} ({oo:>+5.0})  {pc:>7.2}µs {lc:>7.2}µs ({lp:>+4.0}%) {oc:>7.2}µs ({op:>+4.0}%)  {p50:>6.1}/{p99:<6.1} {l50:>6.1}/{l99:<6.1} {o50:>6.1}/{o99:<6.1}",
                );
            }
        }
    });
}
