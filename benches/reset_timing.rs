//! What a server records for a call whose client gives up at its deadline (figures,
//! not assertions; the deadlines chapter of the guide states the decision they back):
//!
//! * a **grpcio** server (`reset_timing/grpcio_server.py`, gRPC's own OpenTelemetry
//!   plugin, `grpcio-observability`, counting `grpc.server.call.duration` by
//!   `grpc.status`), and the embedded **tonic** server;
//! * calls of a 200 ms deadline whose handler outlives it, sent through the layer
//!   (which resets the stream at the deadline) and through a raw HTTP/2 client sending
//!   the same `grpc-timeout` and resetting 0, 1, 5 and 20 ms after it (grpc-java's
//!   client waits about 1 ms; plain tonic's channel gives up at the `grpc-timeout`
//!   itself, answering its caller `CANCELLED`);
//! * for each: what the server counted and what the caller got.
//!
//! The grpcio half needs Python with `grpcio-observability` and `opentelemetry-sdk`
//! (`SW4RM_PYTHON` names the interpreter, `python3` by default); without them it is
//! skipped with a note.
//!
//! ```sh
//! cargo bench --bench reset_timing
//! ```

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::testing::{Script, ServedEnd, TestServer};
use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};

const DEADLINE: Duration = Duration::from_millis(200);
const CALLS: usize = 40;

/// How the client gives up: the layer, or plain tonic `grace` after the deadline.
#[derive(Clone, Copy)]
enum Client {
    Layer,
    Plain(Duration),
}

impl Client {
    fn name(self) -> String {
        match self {
            Client::Layer => "the layer (reset at the deadline)".into(),
            Client::Plain(grace) => format!("raw HTTP/2, reset {} ms after", grace.as_millis()),
        }
    }
}

const CLIENTS: [Client; 5] = [
    Client::Layer,
    Client::Plain(Duration::ZERO),
    Client::Plain(Duration::from_millis(1)),
    Client::Plain(Duration::from_millis(5)),
    Client::Plain(Duration::from_millis(20)),
];

/// `CALLS` heartbeats at once to `url`, each given up as `client` does; the codes the
/// caller got, counted.
async fn storm(url: &str, client: Client) -> BTreeMap<String, usize> {
    let mut calls = tokio::task::JoinSet::new();
    match client {
        Client::Layer => {
            let profiles = ProfileSet::builder()
                .without_global()
                .min_timeout_ms("heartbeat", 100)
                .default_timeout_ms("heartbeat", DEADLINE.as_millis() as u32)
                .build()
                .expect("profiles");
            let layer = TimeoutProfileLayer::new(profiles).without_metrics();
            let sw4rm = Sw4rm::connect_with(url.to_owned(), layer)
                .await
                .expect("connect");
            for _ in 0..CALLS {
                let mut registry = sw4rm.registry();
                calls.spawn(async move {
                    match registry.heartbeat(HeartbeatRequest::default()).await {
                        Ok(_) => "OK".to_owned(),
                        Err(status) => format!("{:?}", status.code()),
                    }
                });
            }
        }
        Client::Plain(grace) => {
            let addr: std::net::SocketAddr = url
                .trim_start_matches("http://")
                .parse()
                .expect("an address");
            let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let (client, conn) = h2::client::handshake(tcp).await.expect("HTTP/2");
            tokio::spawn(conn);
            for _ in 0..CALLS {
                calls.spawn(raw_call(client.clone(), url.to_owned(), grace));
            }
        }
    }
    let mut got = BTreeMap::new();
    while let Some(answer) = calls.join_next().await {
        *got.entry(answer.expect("a call")).or_default() += 1;
    }
    // Let the server see every reset before it is asked.
    tokio::time::sleep(Duration::from_millis(300)).await;
    got
}

/// One heartbeat over raw HTTP/2 (plain tonic's channel would give up at the
/// `grpc-timeout` itself): `grpc-timeout` sent, the stream reset `grace` after the
/// deadline unless an answer came first; what came back.
async fn raw_call(client: h2::client::SendRequest<Bytes>, url: String, grace: Duration) -> String {
    let until = tokio::time::Instant::now() + DEADLINE + grace;
    let mut client = client.ready().await.expect("a stream");
    let request = http::Request::post(format!("{url}/sw4rm.registry.RegistryService/Heartbeat"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", format!("{}m", DEADLINE.as_millis()))
        .body(())
        .expect("a request");
    let (response, mut send) = client.send_request(request, false).expect("sent");
    send.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true)
        .expect("an empty message");
    let answer = async {
        let response = response.await.ok()?;
        let code = |headers: &http::HeaderMap| {
            let code = headers
                .get("grpc-status")?
                .to_str()
                .ok()?
                .parse::<i32>()
                .ok()?;
            Some(format!("{:?} from the server", tonic::Code::from(code)))
        };
        if let Some(code) = code(response.headers()) {
            return Some(code);
        }
        let mut body = response.into_body();
        while body.data().await.is_some() {}
        body.trailers().await.ok()?.as_ref().and_then(code)
    };
    match tokio::time::timeout_at(until, answer).await {
        Ok(Some(code)) => code,
        Ok(None) => "an answer without a status".into(),
        Err(_) => {
            send.send_reset(h2::Reason::CANCEL);
            "(reset)".into()
        }
    }
}

struct Grpcio {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    port: u16,
}

impl Grpcio {
    fn start() -> Option<Grpcio> {
        let python = std::env::var("SW4RM_PYTHON").unwrap_or_else(|_| "python3".into());
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/reset_timing/grpcio_server.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let stdin = child.stdin.take()?;
        let mut stdout = BufReader::new(child.stdout.take()?);
        let mut line = String::new();
        stdout.read_line(&mut line).ok()?;
        let port = line.trim().strip_prefix("listening ")?.parse().ok()?;
        Some(Grpcio {
            child,
            stdin,
            stdout,
            port,
        })
    }

    /// The server's counts by `grpc.status` so far.
    fn counts(&mut self) -> BTreeMap<String, u64> {
        writeln!(self.stdin, "report").expect("ask");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("answer");
        parse_counts(&line)
    }
}

impl Drop for Grpcio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `{"CANCELLED": 3, "DEADLINE_EXCEEDED": 37}` (the script's one line of JSON).
fn parse_counts(line: &str) -> BTreeMap<String, u64> {
    line.trim()
        .trim_matches(|c| c == '{' || c == '}')
        .split(',')
        .filter_map(|pair| {
            let (k, v) = pair.split_once(':')?;
            Some((
                k.trim().trim_matches('"').to_owned(),
                v.trim().parse().ok()?,
            ))
        })
        .collect()
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> String {
    let parts: Vec<_> = after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0);
            (d > 0).then(|| format!("{k} {d}"))
        })
        .collect();
    parts.join(", ")
}

fn show(got: &BTreeMap<String, usize>) -> String {
    let parts: Vec<_> = got.iter().map(|(k, v)| format!("{k} {v}")).collect();
    parts.join(", ")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    println!(
        "{CALLS} calls at once, a {} ms deadline, handlers that outlive it\n",
        DEADLINE.as_millis()
    );
    match Grpcio::start() {
        None => println!(
            "grpcio: skipped (needs Python with grpcio-observability and opentelemetry-sdk; \
             SW4RM_PYTHON names the interpreter)\n"
        ),
        Some(mut grpcio) => {
            println!(
                "| grpcio server | server counted (grpc.status) | caller got |\n|---|---|---|"
            );
            let url = format!("http://127.0.0.1:{}", grpcio.port);
            for client in CLIENTS {
                let before = grpcio.counts();
                let got = storm(&url, client).await;
                let counted = delta(&before, &grpcio.counts());
                println!("| {} | {counted} | {} |", client.name(), show(&got));
            }
            println!();
        }
    }
    let server = TestServer::start().await.expect("a tonic server");
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .expect("a known RPC");
    println!("| tonic server | handler's end | caller got |\n|---|---|---|");
    for client in CLIENTS {
        server.clear_calls();
        let got = storm(&server.url(), client).await;
        let cancelled = server
            .calls()
            .iter()
            .filter(|c| c.outcome == ServedEnd::Cancelled)
            .count();
        println!(
            "| {} | dropped {cancelled} of {CALLS} | {} |",
            client.name(),
            show(&got)
        );
    }
}
