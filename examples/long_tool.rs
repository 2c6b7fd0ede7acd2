//! Long work on both ends of a call: a tool server whose handlers run the work under
//! [`LongWork`] (an idle limit and a hard cap), and a caller whose stream has an idle
//! limit of its own and reads `ToolFrame`s with the crate's progress rule.
//!
//! Run with `cargo run --example long_tool`. Two tool calls: one that keeps reporting
//! progress runs past its 1 s idle limit and finishes; one that gets stuck is cut 1 s
//! after its last progress, and the caller receives what it sent plus why it ended.
//!
//! `cargo run --example long_tool -- --serve 127.0.0.1:50051` runs the tool server
//! alone, for callers in other languages (`tests/grpcio/long_work.py` is one): it prints
//! `listening on ADDR`, then one `server:` line for each guarded call that ends without
//! an answer being sent (stuck, capped, or the caller gone). `CallStream` and
//! `InvokeTool` take the tool names `steady` and `stuck`.
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "net", "rt-multi-thread", "time"] }
//! ```

use std::pin::Pin;
use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::tool::tool_service_server::{ToolService, ToolServiceServer};
use sw4rm_timeouts::proto::sw4rm::tool::{
    DescribeToolRequest, DescribeToolResponse, InvokeToolRequest, InvokeToolResponse, ToolCall,
    ToolError, ToolFrame,
};
use sw4rm_timeouts::route::RoutePattern;
use sw4rm_timeouts::scope::{self, Frame, InboundDeadlineLayer, LongWork};
use sw4rm_timeouts::tonic::codegen::tokio_stream::Stream;
use sw4rm_timeouts::tonic::{Request, Response, Status};
use sw4rm_timeouts::{
    CallStreamingPolicy, ProgressRule, Sw4rm, TimeoutDetails, TimeoutProfileLayer,
};

const CALL_STREAM: &str = "/sw4rm.tool.ToolService/CallStream";
const INVOKE_TOOL: &str = "/sw4rm.tool.ToolService/InvokeTool";

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

/// The tool's limits: stuck after 1 s without progress, a minute in all.
fn guard() -> LongWork {
    LongWork::new()
        .idle_limit(Duration::from_secs(1))
        .cap(Duration::from_secs(60))
}

/// One `server:` line for guarded work that did not finish: how it ended and how far
/// it came (for a call that ended with nobody left to answer, or a unary call cut).
fn told<R: std::fmt::Debug>(rpc: &str, tool: &str, outcome: &scope::Outcome<R, String>) {
    println!(
        "server: {rpc} {tool}: {:?} after {} progress reports, {} results produced",
        outcome.ending(),
        outcome.progress_count(),
        outcome.produced_count()
    );
}

#[sw4rm_timeouts::tonic::async_trait]
impl ToolService for Tool {
    type CallStreamStream = Pin<Box<dyn Stream<Item = Result<ToolFrame, Status>> + Send>>;

    async fn call_stream(
        &self,
        request: Request<ToolCall>,
    ) -> Result<Response<Self::CallStreamStream>, Status> {
        let tool = request.into_inner().tool_name;
        let stuck = tool == "stuck";
        let stream = guard().for_rpc(CALL_STREAM).stream_or_tell(
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
            move |outcome| told("CallStream", &tool, &outcome),
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn call(&self, _: Request<ToolCall>) -> Result<Response<ToolFrame>, Status> {
        Err(Status::unimplemented("call"))
    }
    async fn cancel(&self, _: Request<ToolCall>) -> Result<Response<ToolError>, Status> {
        Err(Status::unimplemented("cancel"))
    }
    /// A unary tool: the caller sees no progress, only the answer; the guard cuts
    /// stuck work and the status says why.
    async fn invoke_tool(
        &self,
        request: Request<InvokeToolRequest>,
    ) -> Result<Response<InvokeToolResponse>, Status> {
        let tool = request.into_inner().call.unwrap_or_default().tool_name;
        let stuck = tool == "stuck";
        let gone = tool.clone();
        let outcome = guard()
            .for_rpc(INVOKE_TOOL)
            .run_or_tell(
                move |out| parse(stuck, out),
                move |outcome| told("InvokeTool", &gone, &outcome),
            )
            .await;
        if let Some(status) = outcome.status() {
            told("InvokeTool", &tool, &outcome);
            return Err(status);
        }
        Ok(Response::new(InvokeToolResponse {
            result: Some(ToolFrame {
                r#final: true,
                data: outcome.produced().join("\n").into_bytes(),
                ..Default::default()
            }),
            error: None,
        }))
    }
    async fn describe_tool(
        &self,
        _: Request<DescribeToolRequest>,
    ) -> Result<Response<DescribeToolResponse>, Status> {
        Err(Status::unimplemented("describe"))
    }
}

/// Prints a stream's frames as they come, and how it ended.
async fn print_frames(mut frames: sw4rm_timeouts::tonic::Streaming<ToolFrame>) {
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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let serve_only = match args.as_slice() {
        [] => None,
        [flag, addr] if flag == "--serve" => Some(addr.parse::<std::net::SocketAddr>()?),
        _ => return Err("usage: long_tool [--serve ADDR]".into()),
    };
    let listener =
        tokio::net::TcpListener::bind(serve_only.unwrap_or(([127, 0, 0, 1], 0).into())).await?;
    let addr = listener.local_addr()?;
    let server = sw4rm_timeouts::tonic::transport::Server::builder()
        .layer(InboundDeadlineLayer::new())
        .add_service(ToolServiceServer::new(Tool))
        .serve_with_incoming(
            sw4rm_timeouts::tonic::codegen::tokio_stream::wrappers::TcpListenerStream::new(
                listener,
            ),
        );
    if serve_only.is_some() {
        println!("listening on {addr}");
        return Ok(server.await?);
    }
    tokio::spawn(server);

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
        let frames = sw4rm.tool().call_stream(request).await?.into_inner();
        println!("{tool}:");
        print_frames(frames).await;
    }
    // A unary tool shows the caller no progress: the caller gives it a cap (its
    // deadline), and the guard in the handler cuts it when it is stuck.
    let mut request = Request::new(InvokeToolRequest {
        call: Some(ToolCall {
            tool_name: "stuck".into(),
            ..Default::default()
        }),
    });
    request.set_timeout(Duration::from_secs(600));
    match sw4rm.tool().invoke_tool(request).await {
        Ok(answer) => println!("InvokeTool stuck: answered {:?}", answer.get_ref().result),
        Err(status) => println!(
            "InvokeTool stuck:\n  {:?}: {}",
            status.code(),
            status.message()
        ),
    }
    Ok(())
}
