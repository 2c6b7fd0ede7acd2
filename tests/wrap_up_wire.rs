//! The wrap-up notice over loopback: a tool whose work selects on the notice returns
//! a partial answer at `cap − reserve`, marked `sw4rm-partial: time-budget`, and the
//! caller reads the marker; a tool that ignores it is stopped at the cap as before; a
//! caller's operation budget with a wrap-up stops its loop of sub-calls before the
//! budget runs out.

use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::tool::tool_service_server::{ToolService, ToolServiceServer};
use sw4rm_timeouts::proto::sw4rm::tool::{
    DescribeToolRequest, DescribeToolResponse, InvokeToolRequest, InvokeToolResponse, ToolCall,
    ToolError, ToolFrame,
};
use sw4rm_timeouts::scope::{self, InboundDeadlineLayer, LongWork};
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{
    OperationBudget, Partial, Phase, Sw4rm, TimeoutDetails, TimeoutProfileLayer, WrapUp,
};
use tokio::time::Instant;
use tonic::{Code, Request, Response, Status};

const CAP: Duration = Duration::from_millis(2_000);
/// A quarter of the cap: the notice comes at 1.5 s.
const NOTICE: Duration = Duration::from_millis(1_500);

struct Tool;

type Frames = std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<ToolFrame, Status>> + Send>>;

#[tonic::async_trait]
impl ToolService for Tool {
    /// `tool_name` "wraps-up": steps every 100 ms and returns what it has when told;
    /// "ignores": steps for ever.
    async fn invoke_tool(
        &self,
        request: Request<InvokeToolRequest>,
    ) -> Result<Response<InvokeToolResponse>, Status> {
        let name = request
            .get_ref()
            .call
            .as_ref()
            .map(|c| c.tool_name.clone())
            .unwrap_or_default();
        if name == "inbound" {
            // No guard: the inbound call's own notice, for work of many steps.
            let mut steps = 0;
            while !scope::should_wrap_up() {
                tokio::time::sleep(Duration::from_millis(100)).await;
                steps += 1;
            }
            let mut response = Response::new(InvokeToolResponse {
                result: Some(ToolFrame {
                    frame_no: steps,
                    ..ToolFrame::default()
                }),
                ..InvokeToolResponse::default()
            });
            Partial::TimeBudget.mark(response.metadata_mut());
            return Ok(response);
        }
        let listens = name == "wraps-up";
        let outcome = LongWork::new()
            .cap(CAP)
            .wrap_up(WrapUp::share(25))
            .for_rpc("/sw4rm.tool.ToolService/InvokeTool")
            .run(|out| async move {
                let notice = out.wrap_up_notice();
                tokio::pin!(notice);
                let mut steps = 0u32;
                loop {
                    tokio::select! {
                        () = &mut notice, if listens => return steps,
                        () = tokio::time::sleep(Duration::from_millis(100)) => {
                            steps += 1;
                            out.push(steps);
                        }
                    }
                }
            })
            .await;
        if let Some(status) = outcome.status() {
            return Err(status);
        }
        let partial = outcome.partial();
        let (ending, _) = outcome.into_parts();
        let scope::Ending::Finished(steps) = ending else {
            unreachable!("not finished: the status above")
        };
        let mut response = Response::new(InvokeToolResponse {
            result: Some(ToolFrame {
                frame_no: u64::from(steps),
                r#final: true,
                ..ToolFrame::default()
            }),
            ..InvokeToolResponse::default()
        });
        if let Some(partial) = partial {
            partial.mark(response.metadata_mut());
        }
        Ok(response)
    }

    type CallStreamStream = Frames;
    async fn call(&self, _: Request<ToolCall>) -> Result<Response<ToolFrame>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
    async fn call_stream(&self, _: Request<ToolCall>) -> Result<Response<Frames>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
    async fn cancel(&self, _: Request<ToolCall>) -> Result<Response<ToolError>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
    async fn describe_tool(
        &self,
        _: Request<DescribeToolRequest>,
    ) -> Result<Response<DescribeToolResponse>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

async fn tool() -> Sw4rm {
    tool_under(InboundDeadlineLayer::new()).await
}

async fn tool_under(layer: InboundDeadlineLayer) -> Sw4rm {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(ToolServiceServer::new(Tool))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    Sw4rm::connect_with(url, TimeoutProfileLayer::standard())
        .await
        .unwrap()
}

fn invoke(name: &str) -> InvokeToolRequest {
    InvokeToolRequest {
        call: Some(ToolCall {
            tool_name: name.into(),
            ..ToolCall::default()
        }),
    }
}

#[tokio::test]
async fn a_tool_that_listens_returns_a_partial_answer_at_the_notice() {
    let client = tool().await;
    let start = Instant::now();
    let answer = client.tool().invoke_tool(invoke("wraps-up")).await.unwrap();
    assert!(start.elapsed() >= NOTICE, "{:?}", start.elapsed());
    // A normal answer, marked partial, with what the work had.
    assert_eq!(Partial::of(answer.metadata()), Some(Partial::TimeBudget));
    // Steps every 100 ms until the notice at 1.5 s: never more than 15 (a loaded
    // machine makes fewer).
    let steps = answer.get_ref().result.as_ref().unwrap().frame_no;
    assert!(steps <= 15, "{steps}");
}

#[tokio::test]
async fn a_tool_that_ignores_the_notice_is_stopped_at_the_cap() {
    let client = tool().await;
    let start = Instant::now();
    let status = client
        .tool()
        .invoke_tool(invoke("ignores"))
        .await
        .unwrap_err();
    assert!(start.elapsed() >= CAP);
    assert_eq!(status.code(), Code::DeadlineExceeded);
    let details = TimeoutDetails::from_status(&status).unwrap();
    assert_eq!(details.phase(), Phase::Total);
    assert_eq!(details.configured_timeout_ms(), 2_000);
}

#[tokio::test]
async fn a_budgets_notice_stops_new_sub_calls_before_it_runs_out() {
    let server = TestServer::start().await.unwrap();
    server
        .script("Heartbeat", Script::latency(Duration::from_millis(50)))
        .unwrap();
    let client = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard())
        .await
        .unwrap();
    // Told halfway through 4 s: 2 s of reserve for a 50 ms sub-call in flight.
    let budget = OperationBudget::new(Duration::from_secs(4)).with_wrap_up(WrapUp::share(50));
    let (calls, left) = budget
        .run(async {
            let mut calls = 0;
            while !scope::should_wrap_up() {
                client
                    .registry()
                    .heartbeat(HeartbeatRequest::default())
                    .await
                    .expect("every sub-call inside the budget succeeds");
                calls += 1;
            }
            (calls, scope::remaining().unwrap())
        })
        .await;
    assert!(calls >= 1);
    assert_eq!(server.calls().len(), calls, "no sub-call after the notice");
    // Stopped once only its reserve was left, none of it spent by a new sub-call.
    assert!(left > Duration::ZERO && left <= Duration::from_secs(2));
    assert!(budget.should_wrap_up());
}

#[tokio::test]
async fn a_handler_is_told_by_its_inbound_calls_notice() {
    // Told halfway through the caller's 6 s: 3 s of reserve to answer in.
    let client = tool_under(InboundDeadlineLayer::new().with_wrap_up(WrapUp::share(50))).await;
    let mut request = Request::new(invoke("inbound"));
    request.set_timeout(Duration::from_secs(6));
    let start = Instant::now();
    let answer = client.tool().invoke_tool(request).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(3));
    assert_eq!(Partial::of(answer.metadata()), Some(Partial::TimeBudget));
}
