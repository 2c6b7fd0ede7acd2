//! What a timeout or a cancel left behind, over loopback HTTP/2 against the embedded
//! server: each kind of `CallEffect` produced by a scenario that really leaves it, read
//! from the status's details as a caller (or a grpcio peer, from the `ErrorInfo`)
//! would.

use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::scheduler::{GetTaskStatusRequest, SubmitTaskRequest};
use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
use sw4rm_timeouts::testing::{Script, StreamScript, TestServer};
use sw4rm_timeouts::{
    scope, CallEffect, CancelDetails, OperationBudget, Sw4rm, TimeoutDetails, TimeoutProfileLayer,
};
use tokio::time::Instant;
use tonic::Code;

async fn setup() -> (TestServer, Sw4rm) {
    let server = TestServer::start().await.unwrap();
    let client = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard())
        .await
        .unwrap();
    (server, client)
}

fn timeout_effect(status: &tonic::Status) -> CallEffect {
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    TimeoutDetails::from_status(status)
        .unwrap()
        .effect()
        .unwrap()
}

#[tokio::test]
async fn a_call_cancelled_before_it_was_sent_left_nothing() {
    let (server, client) = setup().await;
    let budget = OperationBudget::new(Duration::from_secs(30));
    budget.cancel();
    let status = budget
        .run(client.scheduler().submit_task(SubmitTaskRequest::default()))
        .await
        .unwrap_err();
    let details = CancelDetails::from_status(&status).unwrap();
    assert_eq!(details.effect(), Some(CallEffect::NotSent));
    assert!(details.effect().unwrap().safe_to_resend());
    assert!(server.calls().is_empty(), "the server saw nothing");
}

#[tokio::test]
async fn a_call_whose_inherited_deadline_was_spent_left_nothing() {
    let (server, client) = setup().await;
    let spent = scope::with_deadline(
        Instant::now(),
        client.scheduler().submit_task(SubmitTaskRequest::default()),
    )
    .await
    .unwrap_err();
    assert_eq!(timeout_effect(&spent), CallEffect::NotSent);
    assert!(server.calls().is_empty(), "the server saw nothing");
}

#[tokio::test]
async fn a_slow_status_read_was_aborted_and_may_be_retried() {
    let (server, client) = setup().await;
    server
        .script("GetTaskStatus", Script::latency(Duration::from_secs(5)))
        .unwrap();
    let status = OperationBudget::new(Duration::from_millis(300))
        .run(
            client
                .scheduler()
                .get_task_status(GetTaskStatusRequest::default()),
        )
        .await
        .unwrap_err();
    let effect = timeout_effect(&status);
    assert_eq!(effect, CallEffect::ReadAborted);
    assert!(effect.safe_to_resend());
}

#[tokio::test]
async fn a_slow_submit_the_server_saw_is_indeterminate() {
    let (server, client) = setup().await;
    server
        .script("SubmitTask", Script::latency(Duration::from_secs(30)))
        .unwrap();
    // Two seconds for the request to reach the server, however loaded the machine.
    let status = OperationBudget::new(Duration::from_secs(2))
        .run(client.scheduler().submit_task(SubmitTaskRequest::default()))
        .await
        .unwrap_err();
    let effect = timeout_effect(&status);
    assert_eq!(effect, CallEffect::MutationIndeterminate);
    assert!(!effect.safe_to_resend());
    // It did reach the server: re-sending blindly could submit twice.
    assert_eq!(server.calls().len(), 1);
    // The metadata a grpcio peer reads.
    let info = tonic_types::StatusExt::get_details_error_info(&status).unwrap();
    assert_eq!(info.metadata["effect"], "mutation_indeterminate");
}

#[tokio::test]
async fn a_cut_stream_says_how_much_it_delivered() {
    let (server, client) = setup().await;
    let pacing = StreamScript {
        messages: 2,
        stall_after: true,
        ..StreamScript::default()
    };
    server.script("CallStream", Script::stream(pacing)).unwrap();
    // Three seconds for the two messages to arrive before the stall is cut.
    let budget = OperationBudget::new(Duration::from_secs(3));
    let status = budget
        .run(async {
            let mut stream = client
                .tool()
                .call_stream(ToolCall::default())
                .await?
                .into_inner();
            while stream.message().await?.is_some() {}
            Ok::<_, tonic::Status>(())
        })
        .await
        .unwrap_err();
    // CallStream's standard progress rule reads each ToolFrame: the effect says
    // where to resume (the second frame's `frame_no`), with no rule of the caller's.
    assert_eq!(
        timeout_effect(&status),
        CallEffect::StreamEnded {
            messages: 2,
            progress_marker: Some(1)
        }
    );
}
