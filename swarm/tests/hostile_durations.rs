//! The swarm's setters that take a `Duration`, given hostile values (0, 1 ns,
//! `Duration::MAX`, `u64::MAX` ms): the cancel cascade's grace and a delegation
//! cancel's grace under each wait. No panic, and the work still ends (against the
//! embedded server over loopback).

use std::time::Duration;

use sw4rm_swarm::{CancelWait, DelegationCancel, HandoffLayer};
use sw4rm_timeouts::proto::sw4rm::handoff::HandoffRequest;
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::{OperationBudget, Sw4rm, TimeoutProfileLayer};

#[path = "../../tests/common/hostile.rs"]
mod hostile;
use hostile::{no_panic, HOSTILE};

#[tokio::test]
async fn the_cascade_and_delegation_cancels_take_hostile_durations() {
    let server = TestServer::start().await.unwrap();
    let sw4rm = Sw4rm::connect(server.url()).await.unwrap();
    let bound = Duration::from_secs(20);
    for value in HOSTILE {
        let url = server.url();
        no_panic(
            "HandoffLayer::with_cancel_cascade",
            value,
            bound,
            || async move {
                let layer = TimeoutProfileLayer::standard();
                let sw4rm = Sw4rm::connect_with(url, layer).await.unwrap();
                let mut handoff = HandoffLayer::new()
                    .with_cancel_cascade(value)
                    .client(&sw4rm);
                // A handoff made in a budget, then the budget cancelled: the cascade
                // reads the grace, and its cancel is sent.
                let budget = OperationBudget::new(Duration::from_secs(60));
                let request = HandoffRequest {
                    request_id: "hostile".into(),
                    ..HandoffRequest::default()
                };
                budget.run(handoff.request_handoff(request)).await.unwrap();
                budget.cancel();
                tokio::time::sleep(Duration::from_millis(20)).await;
            },
        )
        .await;
        for wait in [
            CancelWait::Try,
            CancelWait::UntilAcknowledged,
            CancelWait::UntilEnded,
        ] {
            let s = sw4rm.clone();
            no_panic(
                "DelegationCancel::with_grace",
                value,
                bound,
                || async move {
                    let _ = DelegationCancel::new("c-1")
                        .with_grace(value)
                        .with_wait(wait)
                        .send(&s)
                        .await;
                },
            )
            .await;
        }
    }
}
