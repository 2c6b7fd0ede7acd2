//! Long work on both ends of a call: a tool server whose `CallStream` handler runs the
//! work under [`LongWork`] (an idle limit and a hard cap), and a caller whose stream
//! has an idle limit of its own and reads `ToolFrame`s with the crate's progress rule.
//!
//! Run with `cargo run --example long_tool`. Two tool calls: one that keeps reporting
//! progress runs past its 1 s idle limit and finishes; one that gets stuck is cut 1 s
//! after its last progress, and the caller receives what it sent plus why it ended.

use std::pin::Pin;
use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::tool::tool_service_server::{ToolService, ToolServiceServer};
use sw4rm_timeouts::proto::sw4rm::tool::{
    DescribeToolRequest, DescribeToolResponse, InvokeToolRequest, InvokeToolResponse, ToolCall,
    ToolError, ToolFrame,
};
use sw4rm_timeouts::route::RoutePattern;
use sw4rm_timeouts::scope::{self, Frame, InboundDeadlineLayer, LongWork};
use sw4rm_timeouts::{
    CallStreamingPolicy, ProgressRule, Sw4rm, TimeoutDetails, TimeoutProfileLayer,
};
use tonic::codegen::tokio_stream::Stream;
use tonic::{Request, Response, Status};

const CALL_STREAM: &str = "/sw4rm.tool.ToolService/CallStream";

struct Tool;

/// The work: parse 12 chunks, 250 ms each, reporting progress per chunk and pushing a
/// result every 4th. `stuck` stops reporting after the 5th chunk.
async fn parse(stuck: bool, out: scope::Output<String>) {
    for chunk in 0..12u64 {
        if stuck && chunk == 5 {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        if chunk % 4 == 3 {
            out.push(format!("rows {}-{}", chunk * 100, chunk * 100 + 99));
        } else {
            scope::progress_at(chunk);
        }
    }
}

#[tonic::async_trait]
impl ToolService for Tool {
    type CallStreamStream = Pin<Box<dyn Stream<Item = Result<ToolFrame, Status>> + Send>>;

    async fn call_stream(
        &self,
        request: Request<ToolCall>,
    ) -> Result<Response<Self::CallStreamStream>, Status> {
        let stuck = request.get_ref().tool_name == "stuck";
        let stream = LongWork::new()
            .idle_limit(Duration::from_secs(1))
            .cap(Duration::from_secs(60))
            .for_rpc(CALL_STREAM)
            .stream(
                move |out| parse(stuck, out),
                |frame| {
                    Ok(match frame {
                        Frame::Item(rows) => ToolFrame {
                            data: rows.into_bytes(),
                            ..Default::default()
                        },
                        // The work moved but had nothing to send: tell the caller.
                        Frame::Progress { count, marker } => ToolFrame {
                            frame_no: marker.unwrap_or(0),
                            summary: format!("{count} of 12 chunks parsed").into_bytes(),
                            ..Default::default()
                        },
                        _ => ToolFrame::default(),
                    })
                },
            );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn call(&self, _: Request<ToolCall>) -> Result<Response<ToolFrame>, Status> {
        Err(Status::unimplemented("call"))
    }
    async fn cancel(&self, _: Request<ToolCall>) -> Result<Response<ToolError>, Status> {
        Err(Status::unimplemented("cancel"))
    }
    async fn invoke_tool(
        &self,
        _: Request<InvokeToolRequest>,
    ) -> Result<Response<InvokeToolResponse>, Status> {
        Err(Status::unimplemented("use CallStream for long work"))
    }
    async fn describe_tool(
        &self,
        _: Request<DescribeToolRequest>,
    ) -> Result<Response<DescribeToolResponse>, Status> {
        Err(Status::unimplemented("describe"))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(InboundDeadlineLayer::new())
            .add_service(ToolServiceServer::new(Tool))
            .serve_with_incoming(
                tonic::codegen::tokio_stream::wrappers::TcpListenerStream::new(listener),
            ),
    );

    // The caller: ToolFrames are read with the crate's rule (an empty frame is a
    // keep-alive, not progress).
    let layer = TimeoutProfileLayer::standard().with_progress(
        RoutePattern::parse(CALL_STREAM)?,
        ProgressRule::of::<ToolFrame>(),
    );
    let sw4rm = Sw4rm::connect_with(format!("http://{addr}"), layer).await?;

    for tool in ["steady", "stuck"] {
        let mut request = Request::new(ToolCall {
            tool_name: tool.into(),
            stream: true,
            ..Default::default()
        });
        // The caller's own limits: 2 s without progress, 10 minutes in all.
        CallStreamingPolicy::default()
            .with_idle(Duration::from_secs(2))
            .with_total(Duration::from_secs(600))
            .apply(&mut request);
        let mut frames = sw4rm.tool().call_stream(request).await?.into_inner();
        println!("{tool}:");
        loop {
            match frames.message().await {
                Ok(Some(f)) if !f.data.is_empty() => {
                    println!("  result   {}", String::from_utf8_lossy(&f.data))
                }
                Ok(Some(f)) => println!("  progress {}", String::from_utf8_lossy(&f.summary)),
                Ok(None) => {
                    println!("  finished");
                    break;
                }
                Err(status) => {
                    println!("  {:?}: {}", status.code(), status.message());
                    if let Some(d) = TimeoutDetails::from_status(&status) {
                        let w = d.long_work().expect("long-work details");
                        println!(
                            "  phase {:?}, detected by {:?}: idle limit {} ms, cap {:?} ms, {} progress reports",
                            d.phase(),
                            d.detected_by(),
                            w.idle_limit_ms(),
                            w.cap_ms(),
                            w.progress_count()
                        );
                    }
                    break;
                }
            }
        }
    }
    Ok(())
}
