//! What the advisor says when Prometheus's query API is not what it should be: down,
//! slow, at another URL, refusing credentials, timing out on its own, answering
//! nothing, NaN or absurd counts, or without end. Each message names the URL, the
//! query and the fix. A small raw HTTP server plays each peer; and `--out` is written
//! whole or not at all, even when the command is killed while it writes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sw4rm_advise::fleet::{FleetError, Prometheus};

/// What the server answers to one request.
enum Reply {
    Json(u16, String),
    Text(u16, &'static str),
    /// Waits this long, then closes.
    Stall(Duration),
    /// A 200 whose body never ends.
    Endless,
}

/// A server answering every request with `reply(request line)`; the requests' heads
/// are kept.
struct Peer {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
}

fn peer(reply: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Peer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let kept = heads.clone();
    let reply = Arc::new(reply);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (reply, kept) = (reply.clone(), kept.clone());
            std::thread::spawn(move || answer(stream, &*reply, &kept));
        }
    });
    Peer { url, heads }
}

fn answer(mut stream: TcpStream, reply: &dyn Fn(&str) -> Reply, kept: &Mutex<Vec<String>>) {
    let mut head = String::new();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    kept.lock().unwrap().push(head.clone());
    let request_line = head.lines().next().unwrap_or("").to_owned();
    let (status, kind, body) = match reply(&request_line) {
        Reply::Json(status, body) => (status, "application/json", body),
        Reply::Text(status, body) => (status, "text/plain", body.to_owned()),
        Reply::Stall(wait) => {
            std::thread::sleep(wait);
            return;
        }
        Reply::Endless => {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
            let chunk = format!("{:x}\r\n{}\r\n", 65_536, "{".repeat(65_536));
            while stream.write_all(chunk.as_bytes()).is_ok() {}
            return;
        }
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut rest = [0u8; 1];
    let _ = stream.read(&mut rest);
}

fn vector(series: &[(&str, &str)]) -> String {
    let result: Vec<String> = series
        .iter()
        .map(|(labels, value)| {
            format!("{{\"metric\":{{{labels}}},\"value\":[1780000000,\"{value}\"]}}")
        })
        .collect();
    format!(
        "{{\"status\":\"success\",\"data\":{{\"resultType\":\"vector\",\"result\":[{}]}}}}",
        result.join(",")
    )
}

const ROUTE: &str = "\"instance\":\"a1\",\"service\":\"sw4rm.registry.RegistryService\",\"method\":\"Heartbeat\",\"profile\":\"heartbeat\"";

/// A small healthy fleet: one instance, one route, 1,000 calls under 20 ms.
fn healthy(request_line: &str) -> Reply {
    if request_line.contains("sw4rm_rpc_duration_ms_bucket") {
        let le = |b: &str| format!("{ROUTE},\"le\":\"{b}\"");
        let (l10, l20, inf) = (le("10"), le("20"), le("+Inf"));
        Reply::Json(
            200,
            vector(&[(&l10, "900"), (&l20, "1000"), (&inf, "1000")]),
        )
    } else {
        Reply::Json(200, vector(&[]))
    }
}

fn read(peer: &Peer) -> Result<sw4rm_advise::fleet::Fleet, FleetError> {
    Prometheus::new(&peer.url)
        .timeout(Duration::from_millis(500))
        .read_fleet("{job=\"agents\"}", "7d", "instance")
}

/// The error's message, checked to name the URL, the query and `fix`.
fn says(e: &FleetError, url: &str, fix: &str) {
    let text = e.to_string();
    assert!(
        text.contains(&format!("{url}/api/v1/query")),
        "no URL: {text}"
    );
    assert!(text.contains("{job=\"agents\"}[7d]"), "no query: {text}");
    assert!(text.contains(fix), "no fix {fix:?}: {text}");
}

#[test]
fn prometheus_down_names_the_url_and_how_to_check_it() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let e = Prometheus::new(&url)
        .read_fleet("{job=\"agents\"}", "7d", "instance")
        .unwrap_err();
    assert!(matches!(e, FleetError::Unreachable { .. }), "{e:?}");
    says(&e, &url, "that the server is up");
}

#[test]
fn a_slow_prometheus_ends_at_the_advisors_own_timeout() {
    let p = peer(|_| Reply::Stall(Duration::from_secs(10)));
    let started = Instant::now();
    let e = read(&p).unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert!(
        matches!(e, FleetError::TimedOut { after, .. } if after == Duration::from_millis(500)),
        "{e:?}"
    );
    says(&e, &p.url, "raise --timeout");
}

#[test]
fn http_statuses_name_their_fix() {
    // (status, body, the fix named)
    let rows = [
        (404, "404 page not found", "give the server's base URL"),
        (401, "Unauthorized", "--bearer-token-file"),
        (403, "Forbidden", "--tenant"),
        (502, "Bad Gateway", "server's own logs"),
    ];
    for (status, body, fix) in rows {
        let p = peer(move |_| Reply::Text(status, body));
        let e = read(&p).unwrap_err();
        assert!(
            matches!(e, FleetError::Status { status: s, .. } if s == status),
            "{e:?}"
        );
        says(&e, &p.url, fix);
        assert!(e.to_string().contains(body), "{e}");
    }
}

#[test]
fn prometheus_own_errors_say_what_it_said_and_what_to_do() {
    let rows = [
        (
            503,
            "timeout",
            "query timed out in expression evaluation",
            "a shorter --window",
        ),
        (
            400,
            "bad_data",
            "1:5: parse error: unexpected character",
            "check --selector",
        ),
        (
            422,
            "execution",
            "many-to-many matching not allowed",
            "server's logs",
        ),
    ];
    for (status, error_type, error, fix) in rows {
        let body = format!(
            "{{\"status\":\"error\",\"errorType\":\"{error_type}\",\"error\":\"{error}\"}}"
        );
        let p = peer(move |_| Reply::Json(status, body.clone()));
        let e = read(&p).unwrap_err();
        assert!(
            matches!(&e, FleetError::Api { error_type: t, .. } if t == error_type),
            "{e:?}"
        );
        says(&e, &p.url, fix);
        assert!(e.to_string().contains(error), "{e}");
    }
}

#[test]
fn nothing_matched_and_not_prometheus_are_told_apart() {
    let p = peer(|_| Reply::Json(200, vector(&[])));
    let e = read(&p).unwrap_err();
    assert!(matches!(e, FleetError::NoSeries { .. }), "{e:?}");
    says(&e, &p.url, "check --selector");

    let p = peer(|_| Reply::Text(200, "<html><title>Grafana</title></html>"));
    let e = read(&p).unwrap_err();
    assert!(matches!(e, FleetError::NotPrometheus { .. }), "{e:?}");
    says(&e, &p.url, "Prometheus's UI");
}

#[test]
fn nan_infinite_and_absurd_counts_are_refused_by_name() {
    for value in ["NaN", "+Inf", "-1", "1e300"] {
        let p = peer(move |line| {
            if line.contains("sw4rm_rpc_duration_ms_bucket") {
                let labels = format!("{ROUTE},\"le\":\"+Inf\"");
                Reply::Json(200, vector(&[(&labels, value)]))
            } else {
                Reply::Json(200, vector(&[]))
            }
        });
        let e = read(&p).unwrap_err();
        assert!(
            matches!(&e, FleetError::BadSample { value: v, .. } if v == value),
            "{value}: {e:?}"
        );
        says(&e, &p.url, "a finite number at least 0");
        assert!(e.to_string().contains("a1"), "names the series: {e}");
    }
}

#[test]
fn an_answer_without_end_is_refused_at_the_limit() {
    let p = peer(|_| Reply::Endless);
    let e = Prometheus::new(&p.url)
        .max_response_bytes(1 << 20)
        .read_fleet("{job=\"agents\"}", "7d", "instance")
        .unwrap_err();
    assert!(
        matches!(e, FleetError::TooLarge { limit, .. } if limit == 1 << 20),
        "{e:?}"
    );
    says(&e, &p.url, "--max-response-mb");
}

#[test]
fn credentials_tenant_and_time_go_on_every_query() {
    let p = peer(healthy);
    let fleet = Prometheus::new(&format!("{}/prometheus/", p.url))
        .tenant("swarm-7")
        .basic_auth("ops", "open sesame")
        .at(1_780_000_000.0)
        .read_fleet("{job=\"agents\"}", "7d", "instance")
        .unwrap();
    assert_eq!(fleet.routes().unwrap()[0].latency.successes(), 1_000);
    let heads = p.heads.lock().unwrap();
    assert_eq!(heads.len(), 3, "three queries");
    for head in heads.iter() {
        let lower = head.to_ascii_lowercase();
        assert!(
            head.starts_with("GET /prometheus/api/v1/query?query="),
            "{head}"
        );
        assert!(head.contains("time=1780000000.000"), "{head}");
        assert!(lower.contains("x-scope-orgid: swarm-7"), "{head}");
        assert!(
            head.contains("authorization: Basic b3BzOm9wZW4gc2VzYW1l"),
            "{head}"
        );
    }
    drop(heads);
    let bearer = peer(healthy);
    Prometheus::new(&bearer.url)
        .bearer_token("t0k3n\n")
        .read_fleet("", "1d", "pod")
        .unwrap();
    assert!(bearer.heads.lock().unwrap()[0].contains("authorization: Bearer t0k3n\r\n"));
}

#[test]
fn the_overlay_is_the_old_file_or_the_new_one_whenever_the_command_is_killed() {
    let p = peer(healthy);
    let dir = std::env::temp_dir().join(format!("sw4rm-killed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("sw4rm.toml");
    let command = || {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_sw4rm-timeouts"));
        c.args(["advise", "--prometheus", &p.url, "--out"])
            .arg(&out)
            .env_remove("SW4RM_CONFIG")
            .current_dir(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    };
    // The new file, from a run left to finish.
    assert!(command()
        .status()
        .unwrap()
        .code()
        .is_some_and(|c| c == 0 || c == 3));
    let new = std::fs::read_to_string(&out).unwrap();
    assert!(new.contains("default_timeout_ms"), "{new}");
    let old = "# the table deployed before\n";
    for i in 0..40u64 {
        std::fs::write(&out, old).unwrap();
        let mut child = command().spawn().unwrap();
        std::thread::sleep(Duration::from_micros(i * 500));
        let _ = child.kill();
        let _ = child.wait();
        let now = std::fs::read_to_string(&out).unwrap();
        assert!(
            now == old || now == new,
            "after a kill at {} µs: neither file:\n{now}",
            i * 500
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
