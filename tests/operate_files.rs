//! The dashboard and the rules that ship in `operate/`: every PromQL expression parses
//! (`promql-parser`), and every metric it names is in an exposition the SDK really
//! produced (real calls on loopback with every family on: answered, retried, hedged,
//! timed out, a reload applied and one refused) or is a rule the file records.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{call, connect, server, Opts};
use promql_parser::parser::{self, Expr};
use promql_parser::util::{walk_expr, ExprVisitor};
use sw4rm_timeouts::metrics;
use sw4rm_timeouts::testing::Script;
use sw4rm_timeouts::{
    HedgingPolicy, MetricFamily, ProfileSet, RetryPolicy, Sw4rm, TimeoutProfileLayer,
};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
const GET_TASK_STATUS: &str = "/sw4rm.scheduler.SchedulerService/GetTaskStatus";

/// Metric names a PromQL expression selects.
#[derive(Default)]
struct Names(BTreeSet<String>);

impl ExprVisitor for Names {
    type Error = String;

    fn pre_visit(&mut self, expr: &Expr) -> Result<bool, String> {
        match expr {
            Expr::VectorSelector(vs) => self.0.extend(vs.name.clone()),
            Expr::MatrixSelector(ms) => self.0.extend(ms.vs.name.clone()),
            _ => {}
        }
        Ok(true)
    }
}

/// Grafana's variables, as a query would run them.
fn substituted(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
}

fn names_in(expr: &str) -> BTreeSet<String> {
    let parsed = parser::parse(&substituted(expr)).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let mut names = Names::default();
    walk_expr(&mut names, &parsed).unwrap();
    names.0
}

/// The names of an exposition's families (`# TYPE name kind`), with a histogram's
/// `_bucket`, `_sum` and `_count`.
fn exposed(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (words.next(), words.next(), words.next(), words.next())
        {
            out.insert(name.to_owned());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    out.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    out
}

/// An exposition of real calls with every family on.
async fn exposition() -> String {
    let server = server().await;
    let retry = RetryPolicy::builder()
        .max_attempts(3)
        .initial_backoff(Duration::from_millis(5))
        .build()
        .unwrap();
    let hedge = HedgingPolicy::builder()
        .max_attempts(2)
        .delay(Duration::from_millis(50))
        .build()
        .unwrap();
    let profiles = ProfileSet::builder()
        .without_global()
        .min_timeout_ms("heartbeat", 50)
        .retry("heartbeat", retry)
        .hedging("workflow_status", hedge)
        .build()
        .unwrap();
    let registry = metrics::Registry::new();
    let provider = metrics::prometheus_provider(registry.clone()).unwrap();
    let mut layer = TimeoutProfileLayer::new(profiles.clone()).with_meter_provider(&provider);
    for family in [
        MetricFamily::Sw4003,
        MetricFamily::OpenTelemetryRpc,
        MetricFamily::GrpcAttempts,
        MetricFamily::GrpcRetries,
        MetricFamily::ConfiguredTimeouts,
    ] {
        layer = layer.with_metric_family(family);
    }
    let (layer, handle) = layer.reloadable();
    let sw4rm_layer = layer.clone();
    let sw4rm = connect(&server, layer).await;
    // Retried once, then answered.
    server
        .script("Heartbeat", Script::fail_first(1, tonic::Code::Unavailable))
        .unwrap();
    call(&sw4rm, HEARTBEAT, Opts::default()).await.unwrap();
    // Hedged: the first attempt waits 2 s, the hedge answers at once.
    server
        .script(
            "GetTaskStatus",
            Script::slow_first(1, Duration::from_secs(2)),
        )
        .unwrap();
    call(&sw4rm, GET_TASK_STATUS, Opts::default())
        .await
        .unwrap();
    // Timed out.
    server
        .script("Heartbeat", Script::latency(Duration::from_secs(30)))
        .unwrap();
    let late = Opts {
        set_timeout: Some(Duration::from_millis(100)),
        ..Opts::default()
    };
    call(&sw4rm, HEARTBEAT, late).await.unwrap_err();
    // A call that waited for a connection (to a port nobody listens on).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let endpoint = tonic::transport::Endpoint::from_shared(nobody).unwrap();
    let waiting = Sw4rm::builder(endpoint)
        .layer(sw4rm_layer)
        .connect_lazy()
        .unwrap();
    call(&waiting, HEARTBEAT, Opts::default())
        .await
        .unwrap_err();
    // A reload applied, one refused.
    handle.reload(profiles);
    let bad = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", 1);
    handle.reload_from(&bad).unwrap_err();
    metrics::render(&[&registry])
}

/// Every `expr:` of the rule files (the rules, and the timeout SLOs `sw4rm-timeouts
/// slo-rules` writes), and the names they record.
fn rules() -> (Vec<String>, BTreeSet<String>) {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = ["prometheus-rules.yml", "slo-rules.yml"]
        .map(|file| std::fs::read_to_string(format!("{root}/operate/{file}")).unwrap())
        .join("\n");
    let mut exprs = Vec::new();
    let mut recorded = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if let Some(expr) = line.strip_prefix("expr: ") {
            exprs.push(expr.to_owned());
        } else if let Some(name) = line.strip_prefix("- record: ") {
            recorded.insert(name.to_owned());
        }
    }
    (exprs, recorded)
}

/// Every target expression of the dashboard.
fn dashboard() -> Vec<String> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/operate/grafana-dashboard.json"
    ))
    .unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn every_expression_parses_and_names_only_metrics_the_sdk_exposes() {
    let exposed = exposed(&exposition().await);
    let (rules, recorded) = rules();
    let dashboard = dashboard();
    assert!(rules.len() >= 13 + 11, "{rules:?}");
    assert_eq!(dashboard.len(), 20, "{dashboard:?}");
    let mut named = BTreeSet::new();
    for expr in rules.iter().chain(&dashboard) {
        for name in names_in(expr) {
            assert!(
                exposed.contains(&name) || recorded.contains(&name),
                "{name} (in `{expr}`) is neither exposed nor recorded; exposed: {exposed:?}"
            );
            named.insert(name);
        }
    }
    // What the panels and alerts promise is there: the threshold, both durations,
    // retries, hedges and wins, the budget, reloads.
    for must in [
        "sw4rm_rpc_configured_timeout_ms",
        "sw4rm_rpc_duration_ms_bucket",
        "rpc_client_call_duration_bucket",
        "sw4rm_rpc_retries_total",
        "sw4rm_rpc_hedge_wins_total",
        "sw4rm_rpc_cancelled_total",
        "sw4rm_retry_budget_tokens",
        "sw4rm_config_reloads_total",
        "sw4rm_rpc_in_flight",
        "grpc_client_call_delay_duration_bucket",
    ] {
        assert!(named.contains(must), "{must} is not used");
    }
    // Both alerts are there.
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/operate/prometheus-rules.yml"
    ))
    .unwrap();
    for alert in ["SW4RMTimeoutRateSpike", "SW4RMP99NearTimeout"] {
        assert!(text.contains(&format!("- alert: {alert}")), "{alert}");
    }
}

#[test]
fn a_misspelt_metric_is_caught() {
    let names = names_in("sum by (profile) (rate(sw4rm_rpc_timeouts_total[$__rate_interval]))");
    assert_eq!(
        names,
        BTreeSet::from(["sw4rm_rpc_timeouts_total".to_owned()])
    );
    assert!(parser::parse("sum by (profile (rate(x[5m]))").is_err());
}
