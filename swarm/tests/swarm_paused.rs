//! The caller's delegation loop (SW4-004 §4.3, SW4-005) on paused time, against
//! scripted gateways: upstream's SW4-005 vectors from the JSON
//! (`tests/data/sw4_005_delegation_vectors.json`, a copy of upstream's conformance
//! data, suite version 2, Apache-2.0: unchanged), T-006 over hints and seeds, the
//! budget spent by sends and waits, the scope's cap and cancel, metadata kept across
//! hops, and the metrics.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use serde::Deserialize;
use sw4rm_swarm::{
    Delegation, DelegationEnd, DelegationError, DelegationOutcome, IDEMPOTENCY_TOKEN_KEY,
};
use sw4rm_timeouts::metrics;
use sw4rm_timeouts::proto::sw4rm::common::ErrorCode;
use sw4rm_timeouts::proto::sw4rm::handoff::{
    BudgetEnvelope, HandoffRequest, HandoffResponse, SwarmDelegationPolicy,
};
use sw4rm_timeouts::{CancelReason, OperationBudget};
use tokio::time::Instant;
use tonic::{Request, Status};

#[derive(Deserialize)]
struct Suite {
    suite: String,
    version: u32,
    vectors: Vec<Vector>,
}

#[derive(Deserialize)]
struct Vector {
    id: String,
    request_id: String,
    from_agent: String,
    to_agent: String,
    reason: String,
    budget: Budget,
    policy: Policy,
    redirect_map: HashMap<String, String>,
    expected: Expected,
}

#[derive(Deserialize)]
struct Budget {
    deadline_epoch_ms: u64,
    wall_time_remaining_ms: u64,
}

#[derive(Deserialize)]
struct Policy {
    allow_spillover_routing: bool,
    max_redirects: u32,
}

#[derive(Deserialize)]
struct Expected {
    accepted: bool,
    rejection_code: String,
    #[serde(default)]
    reason_contains: Option<String>,
    #[serde(default)]
    redirect_to_agent_id: Option<String>,
    attempts: Vec<String>,
}

/// One send as the gateway saw it.
#[derive(Clone, Debug)]
struct Seen {
    to_agent: String,
    at: Instant,
    budget: BudgetEnvelope,
    request_id: String,
    token: Option<String>,
    correlation: Option<String>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A scripted gateway's answer on its way.
type Answering =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<HandoffResponse, Status>> + Send>>;

fn seen(log: &Log, request: &Request<HandoffRequest>) {
    let header = |k: &str| {
        request
            .metadata()
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    log.lock().unwrap().push(Seen {
        to_agent: request.get_ref().to_agent.clone(),
        at: Instant::now(),
        budget: request.get_ref().budget.unwrap_or_default(),
        request_id: request.get_ref().request_id.clone(),
        token: header(IDEMPOTENCY_TOKEN_KEY),
        correlation: header("x-correlation-id"),
    });
}

/// A gateway answering each send from `script` in turn (accepting once it runs
/// out), after `latency`.
fn scripted(
    log: Log,
    script: Vec<HandoffResponse>,
    latency: Duration,
) -> impl FnMut(Request<HandoffRequest>) -> Answering {
    let mut script = script.into_iter();
    move |request| {
        seen(&log, &request);
        let answer = script.next().unwrap_or(HandoffResponse {
            accepted: true,
            accepting_agent: request.get_ref().to_agent.clone(),
            ..HandoffResponse::default()
        });
        Box::pin(async move {
            tokio::time::sleep(latency).await;
            Ok(answer)
        })
    }
}

fn overloaded(retry_after_ms: u64) -> HandoffResponse {
    HandoffResponse {
        rejection_code: ErrorCode::Overloaded.into(),
        rejection_reason: "Gateway at capacity".into(),
        retry_after_ms,
        ..HandoffResponse::default()
    }
}

fn request(wall_ms: u64, policy: Option<SwarmDelegationPolicy>) -> HandoffRequest {
    HandoffRequest {
        request_id: "d-1".into(),
        from_agent: "parent".into(),
        to_agent: "gateway-a".into(),
        budget: Some(BudgetEnvelope {
            wall_time_remaining_ms: wall_ms,
            deadline_epoch_ms: 10_000_000,
            max_delegation_depth: 4,
            ..BudgetEnvelope::default()
        }),
        delegation_policy: policy,
        ..HandoffRequest::default()
    }
}

fn delegation(request: HandoffRequest) -> Delegation {
    Delegation::new(request).unwrap().with_epoch_now_ms(0)
}

fn code_name(code: i32) -> &'static str {
    ErrorCode::try_from(code).unwrap().as_str_name()
}

#[tokio::test(start_paused = true)]
async fn upstreams_sw4_005_vectors_pass_unchanged() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/sw4_005_delegation_vectors.json"
    ))
    .unwrap();
    let suite: Suite = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (suite.suite.as_str(), suite.version),
        ("sw4_005_gateway_delegate_to_swarm", 2)
    );
    assert_eq!(suite.vectors.len(), 4);
    for v in suite.vectors {
        let map = v.redirect_map.clone();
        let log: Log = Arc::default();
        let sent = log.clone();
        let mut gateway = move |request: Request<HandoffRequest>| {
            seen(&sent, &request);
            let to = request.get_ref().to_agent.clone();
            let answer = match map.get(&to) {
                Some(next) => HandoffResponse {
                    rejection_code: ErrorCode::Redirect.into(),
                    redirect_to_agent_id: next.clone(),
                    ..HandoffResponse::default()
                },
                None => HandoffResponse {
                    accepted: true,
                    accepting_agent: to,
                    ..HandoffResponse::default()
                },
            };
            async move { Ok::<_, Status>(answer) }
        };
        let req = HandoffRequest {
            request_id: v.request_id.clone(),
            from_agent: v.from_agent.clone(),
            to_agent: v.to_agent.clone(),
            reason: v.reason.clone(),
            budget: Some(BudgetEnvelope {
                deadline_epoch_ms: v.budget.deadline_epoch_ms,
                wall_time_remaining_ms: v.budget.wall_time_remaining_ms,
                ..BudgetEnvelope::default()
            }),
            delegation_policy: Some(SwarmDelegationPolicy {
                allow_spillover_routing: v.policy.allow_spillover_routing,
                max_redirects: v.policy.max_redirects,
                ..SwarmDelegationPolicy::default()
            }),
            ..HandoffRequest::default()
        };
        let out = delegation(req).run(&mut gateway).await.unwrap();
        let e = &v.expected;
        assert_eq!(out.response.accepted, e.accepted, "{}", v.id);
        assert_eq!(
            code_name(out.response.rejection_code),
            e.rejection_code,
            "{}",
            v.id
        );
        if let Some(text) = &e.reason_contains {
            assert!(
                out.response.rejection_reason.contains(text.as_str()),
                "{}: {:?}",
                v.id,
                out.response.rejection_reason
            );
        }
        if let Some(to) = &e.redirect_to_agent_id {
            assert_eq!(&out.response.redirect_to_agent_id, to, "{}", v.id);
        }
        assert_eq!(out.sent_to, e.attempts, "{}", v.id);
        let gateways: Vec<_> = log
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.to_agent.clone())
            .collect();
        assert_eq!(gateways, e.attempts, "{}: what the gateways saw", v.id);
        // The correlation id is kept on every hop.
        assert!(
            log.lock()
                .unwrap()
                .iter()
                .all(|s| s.request_id == v.request_id),
            "{}",
            v.id
        );
    }
}

/// The issue's scenario: OVERLOADED twice with `retry_after_ms` 200, then accepted.
#[tokio::test(start_paused = true)]
async fn overloaded_twice_then_accepted_waits_the_hint_and_spends_the_budget() {
    let log: Log = Arc::default();
    let mut gateway = scripted(
        log.clone(),
        vec![overloaded(200), overloaded(200)],
        Duration::from_millis(30),
    );
    let mut metadata = tonic::metadata::MetadataMap::new();
    metadata.insert("x-correlation-id", "corr-7".parse().unwrap());
    let out = delegation(request(5_000, None))
        .with_metadata(metadata)
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!((out.end, out.retries), (DelegationEnd::Accepted, 2));
    let sends = log.lock().unwrap().clone();
    assert_eq!(sends.len(), 3);
    for pair in sends.windows(2) {
        // The send's 30 ms, then the wait in [200, 240].
        let wait = pair[1].at - pair[0].at - Duration::from_millis(30);
        assert!(
            wait >= Duration::from_millis(200) && wait <= Duration::from_millis(240),
            "{wait:?}"
        );
        // The envelope shrinks by what was spent, both fields agreeing.
        let spent = (pair[1].at - pair[0].at).as_millis() as u64;
        assert_eq!(
            pair[1].budget.wall_time_remaining_ms,
            pair[0].budget.wall_time_remaining_ms - spent
        );
    }
    for s in &sends {
        let now_epoch = (s.at - sends[0].at).as_millis() as u64;
        assert_eq!(
            s.budget.deadline_epoch_ms,
            now_epoch + s.budget.wall_time_remaining_ms
        );
        assert_eq!(s.budget.max_delegation_depth, 4);
        // Metadata and the idempotency token kept across sends.
        assert_eq!(s.correlation.as_deref(), Some("corr-7"));
        assert_eq!(s.token, sends[0].token);
    }
    assert_eq!(sends[0].budget.wall_time_remaining_ms, 5_000);
    let token = sends[0].token.clone().unwrap();
    assert_eq!(
        token,
        sw4rm_swarm::idempotency_token("parent", "RequestHandoff", b"d-1").unwrap()
    );
    let spent = (Instant::now() - sends[0].at).as_millis() as u64;
    assert_eq!(out.budget_left.wall_time_remaining_ms, 5_000 - spent);
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_the_budget_is_not_waited() {
    let log: Log = Arc::default();
    // 1 s asked for, 500 ms left: at once, the gateway's OVERLOADED as the answer.
    let mut gateway = scripted(
        log.clone(),
        vec![overloaded(1_000)],
        Duration::from_millis(10),
    );
    let start = Instant::now();
    let out = delegation(request(510, None))
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!(out.end, DelegationEnd::WaitBeyondBudget);
    assert_eq!(code_name(out.response.rejection_code), "OVERLOADED");
    assert_eq!(out.response.retry_after_ms, 1_000);
    assert_eq!(out.last_gateway_answer, None);
    assert_eq!(Instant::now() - start, Duration::from_millis(10), "no wait");
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_budget_spent_by_slow_sends_stops_before_the_next() {
    let log: Log = Arc::default();
    // Each send takes 300 ms; 0 jitter bound (a hint of 1 ms); 700 ms of budget.
    let mut gateway = scripted(
        log.clone(),
        vec![overloaded(1), overloaded(1), overloaded(1)],
        Duration::from_millis(300),
    );
    let policy = SwarmDelegationPolicy {
        max_retries_on_overloaded: 5,
        ..Default::default()
    };
    let out = delegation(request(700, Some(policy)))
        .run(&mut gateway)
        .await
        .unwrap();
    // 300 + 1 + 300 + 1 = 602; the third send is cut at 700 by the budget.
    assert_eq!(out.end, DelegationEnd::BudgetExhausted);
    assert_eq!(code_name(out.response.rejection_code), "ACK_TIMEOUT");
    assert_eq!(log.lock().unwrap().len(), 3);
    assert_eq!(out.budget_left.wall_time_remaining_ms, 0);
}

#[tokio::test(start_paused = true)]
async fn the_epoch_deadline_counts_as_the_wall_time_does() {
    let log: Log = Arc::default();
    let mut gateway = scripted(log.clone(), vec![], Duration::from_millis(10));
    let mut req = request(0, None); // wall time not set
    req.budget.as_mut().unwrap().deadline_epoch_ms = 1_000;
    // Already past the epoch deadline: nothing is sent.
    let out = Delegation::new(req.clone())
        .unwrap()
        .with_epoch_now_ms(1_000)
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!(out.end, DelegationEnd::BudgetExhausted);
    assert!(log.lock().unwrap().is_empty());
    // 400 ms before it: the envelope says 400 ms in both fields.
    let out = Delegation::new(req)
        .unwrap()
        .with_epoch_now_ms(600)
        .run(&mut gateway)
        .await
        .unwrap();
    assert!(out.accepted());
    let sent = log.lock().unwrap()[0].budget;
    assert_eq!(
        (sent.wall_time_remaining_ms, sent.deadline_epoch_ms),
        (400, 1_000)
    );
    // No epoch deadline at all is refused before sending.
    let mut none = request(1_000, None);
    none.budget.as_mut().unwrap().deadline_epoch_ms = 0;
    assert!(matches!(
        Delegation::new(none),
        Err(DelegationError::NoDeadline)
    ));
    // An epoch deadline written in seconds lies in 1970: refused, saying so, before
    // anything is sent (it read as a plain "budget exhausted").
    let now_ms = 1_780_000_000_000;
    let mut seconds = request(0, None);
    seconds.budget.as_mut().unwrap().deadline_epoch_ms = now_ms / 1_000 + 30;
    let err = Delegation::new(seconds)
        .unwrap()
        .with_epoch_now_ms(now_ms)
        .run(&mut gateway)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            DelegationError::DeadlineLongPast {
                reads_as_seconds: true,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("years in the past: milliseconds since the epoch?"),
        "{err}"
    );
    assert_eq!(log.lock().unwrap().len(), 1, "nothing more was sent");
}

#[tokio::test(start_paused = true)]
async fn inside_an_operation_budget_the_smaller_cap_rules_and_a_cancel_stops_the_loop() {
    // The budget (800 ms) is smaller than the envelope (5 s).
    let log: Log = Arc::default();
    let mut gateway = scripted(
        log.clone(),
        vec![overloaded(1_000)],
        Duration::from_millis(10),
    );
    let budget = OperationBudget::new(Duration::from_millis(800));
    let out = budget
        .run(delegation(request(5_000, None)).run(&mut gateway))
        .await
        .unwrap();
    assert_eq!(out.end, DelegationEnd::WaitBeyondBudget);
    assert_eq!(log.lock().unwrap()[0].budget.wall_time_remaining_ms, 800);

    // A cancel mid-wait: the wait is cut, nothing more is sent.
    let log: Log = Arc::default();
    let mut gateway = scripted(
        log.clone(),
        vec![overloaded(2_000)],
        Duration::from_millis(10),
    );
    let budget = OperationBudget::new(Duration::from_secs(60));
    let canceller = budget.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        canceller.cancel();
    });
    let start = Instant::now();
    let err = budget
        .run(delegation(request(50_000, None)).run(&mut gateway))
        .await
        .unwrap_err();
    assert_eq!(Instant::now() - start, Duration::from_millis(500));
    match err {
        DelegationError::Cancelled { reason, sent_to } => {
            assert_eq!(reason, CancelReason::BudgetCancelled);
            assert_eq!(sent_to, ["gateway-a"]);
        }
        other => panic!("{other}"),
    }
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(log.lock().unwrap().len(), 1, "no send after the cancel");
}

#[tokio::test(start_paused = true)]
async fn a_cancel_during_a_send_stops_the_loop_at_once() {
    let log: Log = Arc::default();
    let mut gateway = scripted(log.clone(), vec![], Duration::from_secs(5));
    let budget = OperationBudget::new(Duration::from_secs(60));
    let canceller = budget.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let start = Instant::now();
    let err = budget
        .run(delegation(request(50_000, None)).run(&mut gateway))
        .await;
    assert!(matches!(err, Err(DelegationError::Cancelled { .. })));
    assert_eq!(Instant::now() - start, Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn without_a_hint_the_waits_are_full_jitter_under_the_growing_bound() {
    let policy = SwarmDelegationPolicy {
        max_retries_on_overloaded: 4,
        ..Default::default()
    };
    let log: Log = Arc::default();
    let mut gateway = scripted(log.clone(), vec![overloaded(0); 4], Duration::ZERO);
    let out = delegation(request(60_000, Some(policy)))
        .with_seed(7)
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!((out.end, out.retries), (DelegationEnd::Accepted, 4));
    let at: Vec<_> = log.lock().unwrap().iter().map(|s| s.at).collect();
    let bounds = [250, 500, 1_000, 2_000];
    for (i, pair) in at.windows(2).enumerate() {
        assert!(
            pair[1] - pair[0] <= Duration::from_millis(bounds[i]),
            "wait {i}"
        );
    }
    // Jittered, not skipped: together the four waits take time.
    assert!(
        at[4] - at[0] >= Duration::from_millis(100),
        "{:?}",
        at[4] - at[0]
    );
}

#[tokio::test(start_paused = true)]
async fn a_rejection_and_spent_retries_are_returned_as_the_gateway_gave_them() {
    let log: Log = Arc::default();
    let refused = HandoffResponse {
        rejection_code: ErrorCode::PermissionDenied.into(),
        rejection_reason: "no".into(),
        ..HandoffResponse::default()
    };
    let mut gateway = scripted(log.clone(), vec![refused.clone()], Duration::ZERO);
    let out = delegation(request(5_000, None))
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!(
        (out.end, &out.response),
        (DelegationEnd::Rejected, &refused)
    );

    let policy = SwarmDelegationPolicy {
        max_retries_on_overloaded: 1,
        ..Default::default()
    };
    let mut gateway = scripted(
        log.clone(),
        vec![overloaded(5), overloaded(6)],
        Duration::ZERO,
    );
    let out = delegation(request(5_000, Some(policy)))
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!(
        (out.end, out.response.retry_after_ms, out.retries),
        (DelegationEnd::RetriesSpent, 6, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn a_gateway_error_ends_the_loop_with_it() {
    let mut gateway = |_: Request<HandoffRequest>| async {
        Err::<HandoffResponse, _>(Status::unavailable("down"))
    };
    let err = delegation(request(5_000, None))
        .run(&mut gateway)
        .await
        .unwrap_err();
    match err {
        DelegationError::Gateway { to_agent, status } => {
            assert_eq!(
                (to_agent.as_str(), status.code()),
                ("gateway-a", tonic::Code::Unavailable)
            );
        }
        other => panic!("{other}"),
    }
}

/// T-006 through the loop: for any hint and seed, the wait between the sends lies
/// in [hint, 1.2 × hint].
fn t006_run(hint: u64, seed: u64) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let log: Log = Arc::default();
        let mut gateway = scripted(log.clone(), vec![overloaded(hint)], Duration::ZERO);
        let out: DelegationOutcome = delegation(request(u64::MAX / 4, None))
            .with_seed(seed)
            .run(&mut gateway)
            .await
            .unwrap();
        assert!(out.accepted());
        let at: Vec<_> = log.lock().unwrap().iter().map(|s| s.at).collect();
        at[1] - at[0]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn t006_the_loop_waits_within_the_hint(hint in 1u64..100_000, seed in any::<u64>()) {
        let wait = t006_run(hint, seed);
        prop_assert!(wait >= Duration::from_millis(hint));
        prop_assert!(wait.as_millis() as f64 <= hint as f64 * 1.2);
    }
}

#[tokio::test(start_paused = true)]
async fn the_loop_records_the_metrics_the_specs_name() {
    let registry = metrics::Registry::new();
    let provider = metrics::prometheus_provider(registry.clone()).unwrap();
    let log: Log = Arc::default();
    // OVERLOADED once, then a REDIRECT chain past its bound of 1.
    let redirect = |to: &str| HandoffResponse {
        rejection_code: ErrorCode::Redirect.into(),
        redirect_to_agent_id: to.into(),
        ..HandoffResponse::default()
    };
    let mut gateway = scripted(
        log.clone(),
        vec![
            overloaded(100),
            redirect("gateway-b"),
            redirect("gateway-c"),
        ],
        Duration::from_millis(5),
    );
    let policy = SwarmDelegationPolicy {
        max_retries_on_overloaded: 2,
        allow_spillover_routing: true,
        max_redirects: 1,
        ..Default::default()
    };
    let out = delegation(request(10_000, Some(policy)))
        .with_meter_provider(&provider)
        .with_agent_labels()
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!(out.end, DelegationEnd::RedirectLimit);
    // And one that runs out of budget.
    let mut gateway = scripted(log.clone(), vec![overloaded(1_000)], Duration::ZERO);
    delegation(request(100, None))
        .with_meter_provider(&provider)
        .run(&mut gateway)
        .await
        .unwrap();
    let text = metrics::render(&[&registry]);
    let has = |line: &str| {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    };
    has(r#"sw4rm_swarm_delegations_total{outcome="redirect_limit"} 1"#);
    has(r#"sw4rm_swarm_delegations_total{outcome="wait_beyond_budget"} 1"#);
    has(r#"sw4rm_swarm_overloaded_total 2"#);
    has(
        r#"sw4rm_swarm_retry_total{from_agent="parent",reason="overloaded",to_agent="gateway-a"} 1"#,
    );
    has(r#"sw4rm_swarm_retry_total{from_agent="parent",reason="redirect",to_agent="gateway-b"} 1"#);
    has(r#"sw4rm_swarm_redirects_total 1"#);
    has(r#"sw4rm_swarm_redirect_limit_reached_total 1"#);
    has(r#"sw4rm_swarm_budget_exhausted_total 1"#);
    has(r#"sw4rm_swarm_redirect_latency_ms_count 1"#);
    // From the REDIRECT answer to the final answer: gateway-b's 5 ms.
    has(r#"sw4rm_swarm_redirect_latency_ms_sum 5"#);
}

#[tokio::test(start_paused = true)]
async fn the_span_names_the_redirect_chain_and_why_it_ended() {
    let (events, _guard) = common::capture_events();
    let redirect = |to: &str| HandoffResponse {
        rejection_code: ErrorCode::Redirect.into(),
        redirect_to_agent_id: to.into(),
        ..HandoffResponse::default()
    };
    let log: Log = Arc::default();
    let mut gateway = scripted(
        log,
        vec![redirect("gateway-b"), redirect("gateway-a")],
        Duration::ZERO,
    );
    let policy = SwarmDelegationPolicy {
        allow_spillover_routing: true,
        ..Default::default()
    };
    let out = delegation(request(5_000, Some(policy)))
        .run(&mut gateway)
        .await
        .unwrap();
    assert_eq!(out.end, DelegationEnd::RedirectLoop);
    // The loop's last event, in its span, carries the span's attributes.
    let ended = events.with_message("SW4RM delegation ended");
    let span = &ended.last().expect("the loop's end is logged");
    assert_eq!(span["span"], "sw4rm.delegate");
    // SW4-004 §8.2's name for the handoff's request id.
    assert_eq!(span["span.sw4rm.correlation_id"], "d-1");
    assert_eq!(span["span.sw4rm.redirect_count"], "1");
    assert_eq!(span["span.sw4rm.redirect_chain"], "gateway-a,gateway-b");
    assert_eq!(span["span.sw4rm.redirect_terminal_reason"], "redirect_loop");
}

/// Sends that take a fraction of a millisecond never let the envelope grow from hop to
/// hop: wall time and epoch deadline are measured on one clock.
#[tokio::test(start_paused = true)]
async fn the_envelope_never_grows_across_hops_of_a_fraction_of_a_millisecond() {
    let redirect = |to: &str| HandoffResponse {
        rejection_code: ErrorCode::Redirect.into(),
        redirect_to_agent_id: to.into(),
        ..HandoffResponse::default()
    };
    let log: Log = Arc::default();
    let sent = log.clone();
    let mut script = vec![redirect("b"), redirect("c"), redirect("d"), redirect("e")].into_iter();
    // Each send takes 700 µs exactly (the clock moved by hand: a timer would round
    // it to a whole millisecond).
    let mut gateway = move |request: Request<HandoffRequest>| {
        seen(&sent, &request);
        let answer = script.next().unwrap_or(HandoffResponse {
            accepted: true,
            ..HandoffResponse::default()
        });
        async move {
            tokio::time::advance(Duration::from_micros(700)).await;
            Ok::<_, Status>(answer)
        }
    };
    let policy = SwarmDelegationPolicy {
        allow_spillover_routing: true,
        max_redirects: 10,
        ..Default::default()
    };
    let out = delegation(request(20_000, Some(policy)))
        .run(&mut gateway)
        .await
        .unwrap();
    assert!(out.accepted());
    let sends = log.lock().unwrap().clone();
    assert_eq!(sends.len(), 5);
    for pair in sends.windows(2) {
        let (a, b) = (pair[0].budget, pair[1].budget);
        assert!(
            b.deadline_epoch_ms <= a.deadline_epoch_ms,
            "{a:?} then {b:?}"
        );
        assert!(
            b.wall_time_remaining_ms <= a.wall_time_remaining_ms,
            "{a:?} then {b:?}"
        );
    }
    assert_eq!(sends[4].budget.deadline_epoch_ms, 20_000);
}
