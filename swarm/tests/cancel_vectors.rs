//! Upstream SW4RM's SW4-004 cancellation vectors (`tests/data/sw4_004_cancellation_vectors.json`,
//! a copy of upstream's conformance data, version 1, Apache-2.0: unchanged) run
//! against the agent's delegation book, row by row: the grace floor, direct children
//! only, and `FORCED_PREEMPTION` from offset 0 of the grace deadline.

use serde::Deserialize;
use sw4rm_swarm::DelegationBook;
use sw4rm_timeouts::proto::sw4rm::handoff::CancelDelegation;

#[derive(Deserialize)]
struct Suite {
    suite: String,
    version: u32,
    vectors: Vec<Vector>,
}

#[derive(Deserialize)]
struct Vector {
    id: String,
    children: Vec<Link>,
    request: Request,
    expected: Expected,
}

#[derive(Deserialize)]
struct Link {
    parent: String,
    child: String,
}

#[derive(Deserialize)]
struct Request {
    correlation_id: String,
    reason: String,
    grace_period_ms: u64,
}

#[derive(Deserialize)]
struct Expected {
    acknowledged: bool,
    effective_grace_period_ms: u64,
    cancelled: Vec<String>,
    grace_expiry_checks: Vec<ExpiryCheck>,
    forced_preemption_checks: Vec<CodeCheck>,
    collect_forced: CollectForced,
}

#[derive(Deserialize)]
struct ExpiryCheck {
    correlation_id: String,
    offset_ms: i64,
    expired: bool,
}

#[derive(Deserialize)]
struct CodeCheck {
    correlation_id: String,
    offset_ms: i64,
    error_code: String,
}

#[derive(Deserialize)]
struct CollectForced {
    active_correlations: Vec<String>,
    offset_ms: i64,
    expected: Vec<String>,
}

#[test]
fn upstream_cancellation_vectors() {
    let text = include_str!("data/sw4_004_cancellation_vectors.json");
    let suite: Suite = serde_json::from_str(text).expect("vectors parse");
    assert_eq!(
        (suite.suite.as_str(), suite.version),
        ("sw4_004_cancellation", 1)
    );
    assert!(!suite.vectors.is_empty());
    for v in suite.vectors {
        let mut book = DelegationBook::new();
        for link in &v.children {
            book.link(&link.parent, &link.child);
        }
        let cancelled_at = 1_000_000;
        let request = CancelDelegation {
            correlation_id: v.request.correlation_id.clone(),
            reason: v.request.reason.clone(),
            grace_period_ms: v.request.grace_period_ms,
        };
        let answer = book.cancel(&request, cancelled_at);
        let id = &v.id;
        assert_eq!(answer.acknowledged, v.expected.acknowledged, "{id}");
        assert_eq!(
            answer.grace_ms, v.expected.effective_grace_period_ms,
            "{id}"
        );
        assert_eq!(answer.cancelled, v.expected.cancelled, "{id}");
        let deadline = book
            .grace_deadline(&v.request.correlation_id)
            .expect("cancelled");
        let at = |offset: i64| deadline.checked_add_signed(offset).expect("in range");
        for c in &v.expected.grace_expiry_checks {
            let expired = book.expired(&c.correlation_id, at(c.offset_ms));
            assert_eq!(
                expired, c.expired,
                "{id}: {} at {}",
                c.correlation_id, c.offset_ms
            );
        }
        for c in &v.expected.forced_preemption_checks {
            let code = book.error_code(&c.correlation_id, at(c.offset_ms));
            assert_eq!(
                code.as_str_name(),
                c.error_code,
                "{id}: {} at {}",
                c.correlation_id,
                c.offset_ms
            );
        }
        let f = &v.expected.collect_forced;
        let active = f.active_correlations.iter().map(String::as_str);
        assert_eq!(
            book.collect_forced(active, at(f.offset_ms)),
            f.expected,
            "{id}"
        );
    }
}
