//! Upstream SW4RM's portable idempotency token, profile `sw4rm-idempotency-bytes-v1`
//! (`tests/data/idempotency_vectors.json`, a copy of upstream's conformance data,
//! Apache-2.0: unchanged), row by row: every token computed as upstream's SDKs do, and
//! a line feed in `producer_id` or `operation` refused.

use serde::Deserialize;
use sw4rm_swarm::{idempotency_token, IdempotencyError};

#[derive(Deserialize)]
struct Suite {
    profile: String,
    vectors: Vec<Vector>,
}

#[derive(Deserialize)]
struct Vector {
    id: String,
    producer_id: String,
    operation: String,
    canonical_hex: String,
    token: String,
    #[serde(default)]
    rejected: bool,
}

fn bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn upstreams_vectors_pass_unchanged() {
    let text = include_str!("data/idempotency_vectors.json");
    let suite: Suite = serde_json::from_str(text).expect("the vectors parse");
    assert_eq!(suite.profile, "sw4rm-idempotency-bytes-v1");
    assert_eq!(suite.vectors.len(), 10);
    for v in &suite.vectors {
        let got = idempotency_token(&v.producer_id, &v.operation, &bytes(&v.canonical_hex));
        match v.rejected {
            false => assert_eq!(got.as_deref(), Ok(v.token.as_str()), "{}", v.id),
            true => assert!(
                matches!(got, Err(IdempotencyError::LineFeed { .. })),
                "{}: {got:?}",
                v.id
            ),
        }
    }
}
