//! Reading what ended a call from the transport's error or the peer's status headers.

use tokio::time::Instant;

/// True when the error (or one of its sources) is tonic's transport timer firing
/// (tonic reports it as `Cancelled`, "Timeout expired").
pub(crate) fn is_transport_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<tonic::TimeoutExpired>() {
            return true;
        }
        cur = e.source();
    }
    false
}

/// True when headers or trailers report that the server (or a proxy) ended the call
/// for *our* deadline: `grpc-status: 4` (DEADLINE_EXCEEDED) or `1` (CANCELLED, which
/// is how tonic servers report their own deadline) at or after our deadline. Before
/// it, the status is the server's own (its downstream call timed out, say) and passes
/// through unchanged, message and details, as plain gRPC does.
pub(crate) fn is_server_timeout(headers: &http::HeaderMap, deadline: Option<Instant>) -> bool {
    match headers.get("grpc-status").map(|v| v.as_bytes()) {
        Some(b"4" | b"1") => deadline.is_some_and(|d| Instant::now() >= d),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_server_timeout_is_ours_only_from_our_deadline_on() {
        let now = Instant::now();
        let status = |code: &'static str| {
            let mut h = http::HeaderMap::new();
            h.insert("grpc-status", http::HeaderValue::from_static(code));
            h
        };
        struct Row {
            code: &'static str,
            deadline: Option<Instant>,
            ours: bool,
        }
        let (past, future) = (Some(now), Some(now + Duration::from_secs(1)));
        let rows = [
            Row {
                code: "4",
                deadline: past,
                ours: true,
            },
            Row {
                code: "1",
                deadline: past,
                ours: true,
            },
            Row {
                code: "4",
                deadline: future,
                ours: false,
            },
            Row {
                code: "1",
                deadline: future,
                ours: false,
            },
            Row {
                code: "4",
                deadline: None,
                ours: false,
            },
            Row {
                code: "14",
                deadline: past,
                ours: false,
            },
            Row {
                code: "0",
                deadline: past,
                ours: false,
            },
        ];
        for row in rows {
            assert_eq!(
                is_server_timeout(&status(row.code), row.deadline),
                row.ours,
                "grpc-status {} deadline {:?}",
                row.code,
                row.deadline.map(|d| d > now)
            );
        }
        assert!(!is_server_timeout(&http::HeaderMap::new(), past));
    }
}
