//! The profile table exported as a gRPC service config: golden files for both modes
//! (reviewed by hand: every route, its timeout and, for the idempotent ones, the
//! retry policy), and the JSON is what gRPC's schema expects.

use std::path::Path;

use sw4rm_timeouts::{ProfileSet, ServiceConfigMode};

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("SW4RM_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (SW4RM_BLESS=1 writes it)", path.display()));
    assert_eq!(actual, expected, "{} differs", path.display());
}

#[test]
fn default_mode_matches_its_golden_file() {
    golden(
        "service_config_default.json",
        &ProfileSet::standard().service_config(ServiceConfigMode::Default),
    );
}

#[test]
fn max_mode_matches_its_golden_file() {
    golden(
        "service_config_max.json",
        &ProfileSet::standard().service_config(ServiceConfigMode::Max),
    );
}

#[test]
fn the_json_has_the_shape_grpc_reads() {
    let json = ProfileSet::standard().service_config(ServiceConfigMode::Default);
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    let configs = v["methodConfig"].as_array().unwrap();
    // Every exact route, then the fallback (`"name": [{}]`).
    assert_eq!(
        configs.len(),
        sw4rm_timeouts::route::STANDARD_ROUTES.len() + 1
    );
    let last = configs.last().unwrap();
    assert_eq!(last["name"], serde_json::json!([{}]));
    assert_eq!(last["timeout"], "30s");
    let heartbeat = configs
        .iter()
        .find(|c| c["name"][0]["method"] == "Heartbeat")
        .unwrap();
    assert_eq!(heartbeat["timeout"], "5s");
    assert_eq!(heartbeat["retryPolicy"]["maxAttempts"], 3);
    assert_eq!(
        heartbeat["retryPolicy"]["retryableStatusCodes"],
        serde_json::json!(["UNAVAILABLE"])
    );
    let submit = configs
        .iter()
        .find(|c| c["name"][0]["method"] == "SubmitTask")
        .unwrap();
    assert!(
        submit.get("retryPolicy").is_none(),
        "mutations are not retried"
    );
    let stream = configs
        .iter()
        .find(|c| c["name"][0]["method"] == "CallStream")
        .unwrap();
    assert!(
        stream.get("timeout").is_none(),
        "no total cap on the stream"
    );
    assert_eq!(v["retryThrottling"]["maxTokens"], 10);

    // Custom routes and client settings are exported too.
    let set = ProfileSet::builder()
        .without_global()
        .route("/acme.Batch/*", "workflow_status")
        .default_timeout_ms("heartbeat", 2_500)
        .build()
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&set.service_config(ServiceConfigMode::Max)).unwrap();
    let configs = v["methodConfig"].as_array().unwrap();
    assert!(configs.iter().any(
        |c| c["name"] == serde_json::json!([{"service": "acme.Batch"}]) && c["timeout"] == "60s"
    ));
    let vote = configs
        .iter()
        .find(|c| c["name"][0]["method"] == "SubmitVote")
        .unwrap();
    assert!(
        vote.get("timeout").is_none(),
        "infinite allowed: no cap in max mode"
    );
}
