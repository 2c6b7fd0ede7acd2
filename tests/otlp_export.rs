//! OTLP export (feature `otlp`) to a receiver that is not ours: the OpenTelemetry
//! project's generated OTLP services (PyPI's `opentelemetry-proto`) served by grpcio
//! (`tests/otlp/receiver.py`), which prints every export it took as protobuf's JSON.
//!
//! Three agents, A → B → C, each on a thread and runtime of its own with its own
//! `Otlp` (its own `service.name`) and its own `tracing` subscriber, call each other
//! over loopback twice: once in time, once with a deadline that runs out at B's hop.
//! What the receiver decoded is one trace per chain across the three resources with
//! the parents right, the RPC conventions' names and attributes, and the layer's
//! metrics with their counts.
//!
//! Without Python's `grpcio` and `opentelemetry-proto` the test says so and passes,
//! unless `SW4RM_NEED_OTLP_RECEIVER` is set (as `.ci/run` sets it): then it fails.

#[path = "common/heartbeat_chain.rs"]
mod heartbeat_chain;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use heartbeat_chain::{agent_with, client_layer, inbound_layer, HEARTBEAT};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use serde_json::Value;
use sw4rm_timeouts::otlp::Otlp;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::Sw4rm;
use tonic::{Code, Request};
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer as _;

/// The receiver, started; `None` when it cannot run here (and need not).
fn receiver() -> Option<(Child, u16)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/otlp/receiver.py");
    let need = std::env::var_os("SW4RM_NEED_OTLP_RECEIVER").is_some();
    let spawned = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if !need => {
            eprintln!("otlp_export not run: python3 cannot start ({e})");
            return None;
        }
        Err(e) => panic!("python3 cannot start: {e}"),
    };
    let mut first = String::new();
    let stdout = child.stdout.as_mut().expect("piped");
    let _ = BufReader::new(stdout).read_line(&mut first);
    match first.strip_prefix("listening ") {
        Some(port) => Some((child, port.trim().parse().expect("a port"))),
        None if !need => {
            eprintln!("otlp_export not run: the receiver needs grpcio and opentelemetry-proto");
            let _ = child.kill();
            None
        }
        None => panic!("the OTLP receiver did not start (pip install grpcio opentelemetry-proto)"),
    }
}

/// Counts the server spans (`sw4rm_rpc_server`) that have closed, so an agent knows
/// every handler's span has ended before it shuts its export down.
#[derive(Clone, Default)]
struct ServerSpansClosed(Arc<AtomicUsize>);

impl<S> tracing_subscriber::Layer<S> for ServerSpansClosed
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if ctx
            .span(&id)
            .is_some_and(|s| s.name() == "sw4rm_rpc_server")
        {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Runs `work` on a thread of its own: a current-thread runtime, an `Otlp` named
/// `name` exporting to `port`, and a subscriber of its own with that export's layer;
/// `work` is given the export's meter provider and the count of its closed server
/// spans. The export is shut down (what is batched sent) when `work` is done.
fn on_own_thread<F, T>(
    name: &'static str,
    port: u16,
    work: impl FnOnce(SdkMeterProvider, ServerSpansClosed) -> F + Send + 'static,
) -> std::thread::JoinHandle<T>
where
    F: std::future::Future<Output = T>,
    T: Send + 'static,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let otlp = Otlp::builder(name)
            .endpoint(format!("http://127.0.0.1:{port}"))
            .attribute("service.instance.id", format!("{name}-1"))
            .start()
            .unwrap();
        let ours = Targets::new()
            .with_target("sw4rm_timeouts", Level::TRACE)
            .with_target("otlp_export", Level::TRACE);
        let closed = ServerSpansClosed::default();
        let subscriber = tracing_subscriber::registry()
            .with(otlp.tracing_layer().with_filter(ours))
            .with(closed.clone());
        let _default = tracing::subscriber::set_default(subscriber);
        runtime.block_on(async move {
            let out = work(otlp.meter_provider().clone(), closed).await;
            otlp.shutdown()
                .await
                .expect("the receiver took every export");
            out
        })
    })
}

/// A server agent (`next` its downstream URL): its URL is sent on `url`, and it
/// serves until `done` says the caller has finished.
fn serving(
    name: &'static str,
    port: u16,
    next: Option<String>,
    delay: Duration,
) -> (String, mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (url_tx, url_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let thread = on_own_thread(name, port, move |meters, closed| async move {
        let layer = client_layer().with_meter_provider(&meters);
        let (url, seen) = agent_with(next.as_deref(), delay, layer, inbound_layer()).await;
        url_tx.send(url).unwrap();
        // Serve (on this runtime) until told, then until the span of every call it
        // took has ended; polled, as the wait is a std channel (whose one message is
        // taken once: being told is remembered).
        let handled = || seen.lock().unwrap().len();
        let mut told = false;
        loop {
            told = told || done_rx.try_recv().is_ok();
            if told && closed.0.load(Ordering::SeqCst) >= handled() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    (url_rx.recv().unwrap(), done_tx, thread)
}

/// The receiver's exports of one kind, parsed.
fn exports(lines: &[String], kind: &str) -> Vec<Value> {
    let prefix = format!("{kind} ");
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|json| serde_json::from_str(json).expect("protobuf JSON"))
        .collect()
}

/// A flat view of one exported span: its resource's service name, and the span.
fn spans(traces: &[Value]) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for export in traces {
        for rs in export["resourceSpans"].as_array().into_iter().flatten() {
            let service = attr(&rs["resource"], "service.name").unwrap_or_default();
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for span in ss["spans"].as_array().into_iter().flatten() {
                    out.push((service.clone(), span.clone()));
                }
            }
        }
    }
    out
}

/// A string, integer or boolean attribute of an OTLP object, as text.
fn attr(object: &Value, key: &str) -> Option<String> {
    let kv = object["attributes"]
        .as_array()?
        .iter()
        .find(|kv| kv["key"] == key)?;
    let v = &kv["value"];
    v["stringValue"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| v["intValue"].as_str().map(str::to_owned))
        .or_else(|| v["boolValue"].as_bool().map(|b| b.to_string()))
}

/// The data points of metric `name` exported by service `service` (the last export
/// of each: the metrics are cumulative).
fn points(metrics: &[Value], service: &str, name: &str) -> Vec<Value> {
    let mut last = Vec::new();
    for export in metrics {
        for rm in export["resourceMetrics"].as_array().into_iter().flatten() {
            if attr(&rm["resource"], "service.name").as_deref() != Some(service) {
                continue;
            }
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                for m in sm["metrics"].as_array().into_iter().flatten() {
                    if m["name"] == name {
                        let data = m
                            .get("sum")
                            .or(m.get("histogram"))
                            .expect("sum or histogram");
                        last = data["dataPoints"].as_array().cloned().unwrap_or_default();
                    }
                }
            }
        }
    }
    last
}

fn count(point: &Value, field: &str) -> u64 {
    point[field]
        .as_str()
        .map(|s| s.parse().unwrap())
        .or_else(|| point[field].as_u64())
        .unwrap_or_else(|| panic!("{field} of {point}"))
}

#[test]
fn three_agents_export_one_trace_and_their_metrics_to_an_otlp_receiver() {
    let Some((mut receiver, port)) = receiver() else {
        return;
    };
    // C answers after 2 s; B passes on what it was given less 300 ms.
    let (c_url, c_done, c) = serving("agent-c", port, None, Duration::from_secs(2));
    let (b_url, b_done, b) = serving("agent-b", port, Some(c_url), Duration::ZERO);
    let a = on_own_thread("agent-a", port, move |meters, _| async move {
        let layer = client_layer().with_meter_provider(&meters);
        let a = Sw4rm::connect_with(b_url, layer).await.unwrap();
        let in_time = a.registry().heartbeat(HeartbeatRequest::default()).await;
        // 1.2 s from A: B gives C under 1 s, and C takes 2 s.
        let mut late = Request::new(HeartbeatRequest::default());
        late.set_timeout(Duration::from_millis(1_200));
        let late = a.registry().heartbeat(late).await;
        (in_time.map(drop), late.map(drop))
    });
    let (in_time, late) = a.join().unwrap();
    in_time.unwrap();
    assert_eq!(late.unwrap_err().code(), Code::DeadlineExceeded);
    b_done.send(()).unwrap();
    b.join().unwrap();
    c_done.send(()).unwrap();
    c.join().unwrap();

    // Every agent shut its export down (and so sent all it had): close the receiver.
    drop(receiver.stdin.take());
    let out = receiver.wait_with_output().unwrap();
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    check_spans(&spans(&exports(&lines, "traces")));
    check_metrics(&exports(&lines, "metrics"));
}

/// Two traces (one per call of A), each A's client → B's server → B's client → C's
/// server, each span on its own agent's resource.
fn check_spans(all: &[(String, Value)]) {
    let of = |service: &str, kind: &str| -> Vec<&Value> {
        all.iter()
            .filter(|(s, span)| s == service && span["kind"] == kind)
            .map(|(_, span)| span)
            .collect()
    };
    let a_calls = of("agent-a", "SPAN_KIND_CLIENT");
    assert_eq!(a_calls.len(), 2, "A's two calls: {all:#?}");
    for (i, a_call) in a_calls.iter().enumerate() {
        let trace = &a_call["traceId"];
        let child_of = |service: &str, kind: &str, parent: &Value| -> Value {
            let found: Vec<&Value> = of(service, kind)
                .into_iter()
                .filter(|s| &s["traceId"] == trace && s["parentSpanId"] == parent["spanId"])
                .collect();
            assert_eq!(found.len(), 1, "{service} {kind} under {parent}: {all:#?}");
            found[0].clone()
        };
        let b_serves = child_of("agent-b", "SPAN_KIND_SERVER", a_call);
        let b_call = child_of("agent-b", "SPAN_KIND_CLIENT", &b_serves);
        let c_serves = child_of("agent-c", "SPAN_KIND_SERVER", &b_call);
        for span in [*a_call, &b_serves, &b_call, &c_serves] {
            assert_eq!(span["name"], HEARTBEAT, "{span}");
            assert_eq!(attr(span, "rpc.system.name").as_deref(), Some("grpc"));
            assert_eq!(attr(span, "rpc.method").as_deref(), Some(HEARTBEAT));
        }
        assert_eq!(attr(a_call, "profile").as_deref(), Some("heartbeat"));
        if i == 0 {
            assert_eq!(attr(a_call, "timeout_ms").as_deref(), Some("5000"));
            assert_eq!(
                attr(&b_call, "rpc.response.status_code").as_deref(),
                Some("OK")
            );
        } else {
            assert_eq!(attr(a_call, "timeout_ms").as_deref(), Some("1200"));
            // The hop where the deadline ran out: B's call to C, marked an error.
            let code = attr(&b_call, "error.type");
            assert_eq!(code.as_deref(), Some("DEADLINE_EXCEEDED"), "{b_call}");
            assert_eq!(b_call["status"]["code"], "STATUS_CODE_ERROR", "{b_call}");
        }
    }
    // Nothing but the two chains: every span belongs to one of A's two traces.
    let traces: Vec<&Value> = a_calls.iter().map(|s| &s["traceId"]).collect();
    assert!(
        all.iter().all(|(_, s)| traces.contains(&&s["traceId"])),
        "{all:#?}"
    );
}

/// The layer's metrics as each agent exported them: A's and B's durations (two calls
/// each), and B's one timeout, with the profile, service and method.
fn check_metrics(metrics: &[Value]) {
    for service in ["agent-a", "agent-b"] {
        let durations = points(metrics, service, "sw4rm_rpc_duration_ms");
        assert_eq!(durations.len(), 1, "{service}: {durations:#?}");
        let point = &durations[0];
        assert_eq!(count(point, "count"), 2, "{service}: {point}");
        assert_eq!(attr(point, "profile").as_deref(), Some("heartbeat"));
        assert_eq!(attr(point, "method").as_deref(), Some("Heartbeat"));
    }
    let timeouts = points(metrics, "agent-b", "sw4rm_rpc_timeout_total");
    assert_eq!(timeouts.len(), 1, "{timeouts:#?}");
    assert_eq!(count(&timeouts[0], "asInt"), 1, "{}", timeouts[0]);
    assert_eq!(attr(&timeouts[0], "profile").as_deref(), Some("heartbeat"));
    // C calls no one: it has no client metrics to export.
    assert!(points(metrics, "agent-c", "sw4rm_rpc_duration_ms").is_empty());
}

#[tokio::test]
async fn a_receiver_that_is_down_is_named_at_shutdown() {
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let otlp = Otlp::builder("agent-alone")
        .endpoint(format!("http://127.0.0.1:{port}"))
        .export_timeout(Duration::from_millis(500))
        .start()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(otlp.tracing_layer());
    tracing::subscriber::with_default(subscriber, || {
        let _span = tracing::info_span!("work").entered();
    });
    let ended = otlp.shutdown().await;
    let error = ended.expect_err("nothing could be sent").to_string();
    assert!(error.contains("spans"), "{error}");
    assert!(
        error.contains(&format!("http://127.0.0.1:{port}")),
        "{error}"
    );
}

#[test]
fn a_header_that_is_no_metadata_is_refused_at_start() {
    let refused = Otlp::builder("agent")
        .header("Bad Header", "x")
        .start()
        .expect_err("a space is no metadata key");
    let error = refused.to_string();
    assert!(error.contains("\"Bad Header\""), "{error}");
    assert!(error.contains("OtlpBuilder::header"), "{error}");
}

/// An endpoint that is no URL is refused at start, inside a runtime too: the export
/// runtime made for it is let go of without blocking the caller's.
#[tokio::test]
async fn an_endpoint_that_is_no_url_is_refused_at_start_inside_a_runtime() {
    let refused = Otlp::builder("agent")
        .endpoint("not a url at all")
        .start()
        .expect_err("no URL");
    let error = refused.to_string();
    assert!(error.contains("not a url at all"), "{error}");
    assert!(error.contains("OtlpBuilder::endpoint"), "{error}");
}
