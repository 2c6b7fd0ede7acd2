//! Long work over loopback: a real tonic tool server whose handlers run under
//! [`LongWork`], called through the layer. A tool that keeps reporting progress runs
//! past its idle limit and finishes; one that stops is cut at its last progress plus
//! the idle limit, and the caller gets the frames it sent and the guard's details; a
//! caller that goes away stops the work (its future is dropped) and the handler is
//! told the truth.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sw4rm_timeouts::proto::sw4rm::tool::tool_service_server::{ToolService, ToolServiceServer};
use sw4rm_timeouts::proto::sw4rm::tool::{
    DescribeToolRequest, DescribeToolResponse, InvokeToolRequest, InvokeToolResponse, ToolCall,
    ToolError, ToolFrame,
};
use sw4rm_timeouts::route::RoutePattern;
use sw4rm_timeouts::scope::{self, Ending, Frame, InboundDeadlineLayer, LongWork};
use sw4rm_timeouts::{
    CallEffect, CallProgress, CallStreamingPolicy, DetectedBy, Phase, ProgressRule, Source, Sw4rm,
    TimeoutDetails, TimeoutProfileLayer,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::{Code, Request, Response, Status};

const CALL_STREAM: &str = "/sw4rm.tool.ToolService/CallStream";
const INVOKE: &str = "/sw4rm.tool.ToolService/InvokeTool";
const IDLE: Duration = Duration::from_secs(1);
const CAP: Duration = Duration::from_secs(20);

/// Sets a flag when dropped: proves the work's future was dropped.
struct DropFlag(Arc<AtomicBool>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// How abandoned work ended, and how many items it had produced.
type Abandoned = Arc<Mutex<Vec<(Ending<()>, usize)>>>;

/// What the handlers tell the test.
#[derive(Clone, Default)]
struct Seen {
    work_dropped: Arc<AtomicBool>,
    abandoned: Abandoned,
    /// The `sw4rm-stream-idle-ms` each streaming call arrived with.
    quiet: Arc<Mutex<Vec<Option<String>>>>,
}

#[derive(Clone)]
struct LongTool {
    seen: Seen,
    /// Sends the test each guarded stream's end, when the handler learns it.
    ended: mpsc::UnboundedSender<String>,
}

fn guard() -> LongWork {
    LongWork::new().idle_limit(IDLE).cap(CAP)
}

/// The work a tool call asks for, by its `tool_name`: `steady` reports progress every
/// 200 ms for 3 s and finishes; `stops` sends three frames and then hangs;
/// `forever` reports progress every 200 ms for ever.
async fn work(name: String, out: scope::Output<u64>, dropped: Arc<AtomicBool>) {
    let _flag = DropFlag(dropped);
    let tick = Duration::from_millis(200);
    match name.as_str() {
        "steady" => {
            for i in 0..15u64 {
                tokio::time::sleep(tick).await;
                // Every 5th tick produces a frame; the others are progress only.
                if i % 5 == 4 {
                    out.push(i);
                } else {
                    scope::progress_at(i);
                }
            }
        }
        "stops" => {
            for i in 0..3u64 {
                tokio::time::sleep(tick).await;
                out.push(i);
            }
            std::future::pending::<()>().await;
        }
        // 16 KiB every millisecond with `push`, for ever: more than any caller reads.
        "flood" => loop {
            tokio::time::sleep(Duration::from_millis(1)).await;
            out.push(u64::MAX);
        },
        _ => loop {
            tokio::time::sleep(tick).await;
            scope::progress();
        },
    }
}

fn tool_frame(frame: Frame<u64>) -> Result<ToolFrame, Status> {
    Ok(match frame {
        Frame::Item(u64::MAX) => ToolFrame {
            data: vec![7; 16 * 1024],
            ..Default::default()
        },
        Frame::Item(n) => ToolFrame {
            frame_no: n,
            data: format!("rows of step {n}").into_bytes(),
            ..Default::default()
        },
        Frame::Progress { marker, count } => ToolFrame {
            frame_no: marker.unwrap_or(count),
            summary: format!("{count} steps").into_bytes(),
            ..Default::default()
        },
        _ => ToolFrame::default(),
    })
}

#[tonic::async_trait]
impl ToolService for LongTool {
    async fn call(&self, _: Request<ToolCall>) -> Result<Response<ToolFrame>, Status> {
        Err(Status::unimplemented("call"))
    }

    type CallStreamStream =
        Pin<Box<dyn tokio_stream::Stream<Item = Result<ToolFrame, Status>> + Send>>;

    async fn call_stream(
        &self,
        request: Request<ToolCall>,
    ) -> Result<Response<Self::CallStreamStream>, Status> {
        let quiet = request.metadata().get("sw4rm-stream-idle-ms");
        let quiet = quiet.map(|v| v.to_str().unwrap_or("?").to_owned());
        self.seen.quiet.lock().unwrap().push(quiet);
        let name = request.into_inner().tool_name;
        let dropped = self.seen.work_dropped.clone();
        let abandoned = self.seen.abandoned.clone();
        let ended = self.ended.clone();
        let stream = guard().for_rpc(CALL_STREAM).stream_or_tell(
            move |out| work(name, out, dropped),
            tool_frame,
            move |outcome| {
                let (ending, produced) = outcome.into_parts();
                abandoned.lock().unwrap().push((ending, produced.len()));
                let _ = ended.send("abandoned".into());
            },
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn cancel(&self, _: Request<ToolCall>) -> Result<Response<ToolError>, Status> {
        Err(Status::unimplemented("cancel"))
    }

    /// A unary tool: the guard's status, or the output when it finished.
    async fn invoke_tool(
        &self,
        request: Request<InvokeToolRequest>,
    ) -> Result<Response<InvokeToolResponse>, Status> {
        let name = request.into_inner().call.unwrap_or_default().tool_name;
        let dropped = self.seen.work_dropped.clone();
        let abandoned = self.seen.abandoned.clone();
        let ended = self.ended.clone();
        // "unnamed": the guard as the guide's first snippet makes it, with a cap, no
        // idle limit, and no `for_rpc`.
        let guard = match name.as_str() {
            "unnamed" => LongWork::new().cap(Duration::from_millis(300)),
            _ => guard().for_rpc(INVOKE),
        };
        let outcome = guard
            .run_or_tell(
                move |out| work(name, out, dropped),
                move |outcome| {
                    let (ending, produced) = outcome.into_parts();
                    abandoned.lock().unwrap().push((ending, produced.len()));
                    let _ = ended.send("abandoned".into());
                },
            )
            .await;
        if let Some(status) = outcome.status() {
            let _ = self.ended.send(format!("{:?}", status.code()));
            return Err(status);
        }
        Ok(Response::new(InvokeToolResponse {
            result: Some(ToolFrame {
                r#final: true,
                data: format!("{} parts", outcome.produced().len()).into_bytes(),
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

struct Served {
    addr: SocketAddr,
    seen: Seen,
    ended: mpsc::UnboundedReceiver<String>,
}

async fn serve() -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    let (tx, ended) = mpsc::unbounded_channel();
    let tool = LongTool {
        seen: seen.clone(),
        ended: tx,
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(InboundDeadlineLayer::new())
            .add_service(ToolServiceServer::new(tool))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    Served { addr, seen, ended }
}

/// Our caller: `ToolFrame`s read with the crate's rule, the stream under `idle` (its
/// own idle limit) and a cap above the guard's.
async fn caller(addr: SocketAddr) -> Sw4rm {
    let layer = TimeoutProfileLayer::standard()
        .without_metrics()
        .with_progress(
            RoutePattern::parse(CALL_STREAM).unwrap(),
            ProgressRule::of::<ToolFrame>(),
        );
    Sw4rm::connect_with(format!("http://{addr}"), layer)
        .await
        .unwrap()
}

fn tool_call(name: &str, caller_idle: Duration) -> Request<ToolCall> {
    let mut req = Request::new(ToolCall {
        tool_name: name.into(),
        stream: true,
        ..Default::default()
    });
    CallStreamingPolicy::default()
        .with_idle(caller_idle)
        .with_total(Duration::from_secs(60))
        .apply(&mut req);
    req
}

/// Reads a stream to its end: the frames, then how it ended.
async fn read_all(
    stream: &mut tonic::Streaming<ToolFrame>,
) -> (Vec<ToolFrame>, Result<(), Status>) {
    let mut frames = Vec::new();
    loop {
        match stream.message().await {
            Ok(Some(f)) => frames.push(f),
            Ok(None) => return (frames, Ok(())),
            Err(status) => return (frames, Err(status)),
        }
    }
}

/// Progress every 200 ms for 3 s under a 1 s idle limit (the guard's, and the
/// caller's own): the work finishes. Most steps produce nothing to send, so the guard
/// sends progress frames, often enough for the caller's idle limit.
#[tokio::test]
async fn a_tool_that_reports_progress_runs_past_its_idle_limit() {
    let served = serve().await;
    let sw4rm = caller(served.addr).await;
    let started = Instant::now();
    let mut stream = sw4rm
        .tool()
        .call_stream(tool_call("steady", IDLE))
        .await
        .unwrap()
        .into_inner();
    let (frames, end) = read_all(&mut stream).await;
    assert!(end.is_ok(), "{end:?}");
    assert!(started.elapsed() >= Duration::from_secs(3));
    let data: Vec<u64> = frames
        .iter()
        .filter(|f| !f.data.is_empty())
        .map(|f| f.frame_no)
        .collect();
    assert_eq!(data, [4, 9, 14], "every item the work pushed");
    assert!(
        frames.iter().any(|f| !f.summary.is_empty()),
        "progress frames between the items: {frames:?}"
    );
    assert!(served.seen.abandoned.lock().unwrap().is_empty());
}

/// A caller whose idle limit (480 ms) is below the guard's own cadence (half its 1 s
/// idle limit): the call says its limit (`sw4rm-stream-idle-ms`), and the guard sends
/// progress at least every half of it, so the working tool is not cut.
#[tokio::test]
async fn the_progress_cadence_follows_a_callers_shorter_idle_limit() {
    let served = serve().await;
    let sw4rm = caller(served.addr).await;
    let mut stream = sw4rm
        .tool()
        .call_stream(tool_call("steady", Duration::from_millis(480)))
        .await
        .unwrap()
        .into_inner();
    let (frames, end) = read_all(&mut stream).await;
    assert!(end.is_ok(), "cut by the caller: {end:?}");
    let data: Vec<u64> = frames
        .iter()
        .filter(|f| !f.data.is_empty())
        .map(|f| f.frame_no)
        .collect();
    assert_eq!(data, [4, 9, 14]);
    assert_eq!(
        served.seen.quiet.lock().unwrap().as_slice(),
        [Some("480".to_owned())],
        "what the server received"
    );
}

/// A tool that stops reporting is cut by the guard at its last progress plus the idle
/// limit: the frames it sent reach the caller, then `DEADLINE_EXCEEDED` with the
/// guard's details (idle, both numbers, how many messages).
#[tokio::test]
async fn a_stuck_tool_is_cut_and_its_frames_reach_the_caller() {
    let mut served = serve().await;
    let sw4rm = caller(served.addr).await;
    // The caller's own idle limit is longer: the guard's status is what arrives.
    let started = Instant::now();
    let mut stream = sw4rm
        .tool()
        .call_stream(tool_call("stops", Duration::from_secs(30)))
        .await
        .unwrap()
        .into_inner();
    let (frames, end) = read_all(&mut stream).await;
    let status = end.unwrap_err();
    // Three frames at 200, 400, 600 ms, then nothing: cut at 600 ms + 1 s.
    assert!(started.elapsed() >= Duration::from_millis(1_600));
    assert_eq!(
        frames.iter().map(|f| f.frame_no).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    let d = TimeoutDetails::from_status(&status).expect("the guard's details");
    assert_eq!(
        (d.phase(), d.detected_by(), d.message_count()),
        (Phase::Idle, DetectedBy::Server, Some(3))
    );
    assert_eq!(
        (d.service(), d.method(), d.profile_name()),
        ("sw4rm.tool.ToolService", "CallStream", "tool_call")
    );
    // The idle limit is the server's guard's, and says so.
    assert_eq!(d.source(), &Source::Server);
    assert!(
        status.message().contains("from server"),
        "{}",
        status.message()
    );
    let w = d.long_work().unwrap();
    assert_eq!(
        (w.idle_limit_ms(), w.cap_ms(), w.progress_count()),
        (1_000, Some(20_000), 3)
    );
    assert!(w.since_progress_ms() >= 1_000);
    assert!(
        status
            .message()
            .contains("no progress for 1000 ms (idle limit; cap 20000 ms) after 3 messages"),
        "{}",
        status.message()
    );
    // The work was dropped, and nobody was told it was abandoned: it timed out.
    assert!(served.seen.work_dropped.load(Ordering::SeqCst));
    assert!(served.seen.abandoned.lock().unwrap().is_empty());
    assert!(served.ended.try_recv().is_err());
}

/// Our caller's own idle limit, shorter than the guard's progress interval allows:
/// a tool that stops is cut by the caller at its last progress plus its idle limit,
/// and the caller's details name the idle limit and the marker it saw last.
#[tokio::test]
async fn our_caller_cuts_a_stuck_tool_at_its_own_idle_limit() {
    let served = serve().await;
    let sw4rm = caller(served.addr).await;
    let caller_idle = Duration::from_millis(500);
    let mut stream = sw4rm
        .tool()
        .call_stream(tool_call("stops", caller_idle))
        .await
        .unwrap()
        .into_inner();
    let (frames, end) = read_all(&mut stream).await;
    let status = end.unwrap_err();
    let d = TimeoutDetails::from_status(&status).expect("details");
    assert_eq!(
        (d.phase(), d.detected_by()),
        (Phase::Idle, DetectedBy::Client)
    );
    assert_eq!(frames.len(), 3);
    let w = d.long_work().unwrap();
    assert_eq!(
        (w.idle_limit_ms(), w.progress_count(), w.progress_marker()),
        (500, 3, Some(2))
    );
    // The server saw the reset: the guard's stream was dropped and told so.
    let mut ended = served.ended;
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), ended.recv())
            .await
            .unwrap()
            .as_deref(),
        Some("abandoned")
    );
    let told = served.seen.abandoned.lock().unwrap().clone();
    assert_eq!(told, [(Ending::CallerGone, 0)]);
}

/// The caller drops a streaming call: the handler's outcome is "caller went away",
/// and the work's future is dropped.
#[tokio::test]
async fn a_caller_that_goes_away_stops_the_stream_work() {
    let mut served = serve().await;
    let sw4rm = caller(served.addr).await;
    let mut stream = sw4rm
        .tool()
        .call_stream(tool_call("forever", IDLE))
        .await
        .unwrap()
        .into_inner();
    // Wait for the first progress frame, then go away.
    stream.message().await.unwrap().unwrap();
    drop(stream);
    let told = tokio::time::timeout(Duration::from_secs(10), served.ended.recv()).await;
    assert_eq!(told.unwrap().as_deref(), Some("abandoned"));
    let seen = served.seen.abandoned.lock().unwrap().clone();
    assert_eq!(seen, [(Ending::CallerGone, 0)]);
    for _ in 0..100 {
        if served.seen.work_dropped.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        served.seen.work_dropped.load(Ordering::SeqCst),
        "the work's future was dropped"
    );
}

/// A unary tool (`InvokeTool`) has no messages to show progress to the caller: the
/// caller gives it a cap only (its deadline), and the guard inside the handler cuts
/// stuck work at its idle limit, answering `DEADLINE_EXCEEDED` with its details.
#[tokio::test]
async fn a_unary_tool_is_cut_by_the_guard_and_the_caller_reads_why() {
    let mut served = serve().await;
    let sw4rm = caller(served.addr).await;
    let mut req = Request::new(InvokeToolRequest {
        call: Some(ToolCall {
            tool_name: "stops".into(),
            ..Default::default()
        }),
    });
    req.set_timeout(Duration::from_secs(30));
    let status = sw4rm.tool().invoke_tool(req).await.unwrap_err();
    let d = TimeoutDetails::from_status(&status).expect("the guard's details");
    assert_eq!(
        (d.phase(), d.detected_by(), d.message_count()),
        (Phase::Idle, DetectedBy::Server, None)
    );
    assert_eq!(d.long_work().unwrap().progress_count(), 3);
    assert_eq!(d.source(), &Source::Server);
    assert!(
        status.message().contains("after 3 progress reports"),
        "{}",
        status.message()
    );
    assert_eq!(
        served.ended.recv().await.as_deref(),
        Some("DeadlineExceeded")
    );
    // A unary call the caller abandons: the handler is dropped, the work with it,
    // and the guard tells the caller went away.
    let mut req = Request::new(InvokeToolRequest {
        call: Some(ToolCall {
            tool_name: "forever".into(),
            ..Default::default()
        }),
    });
    req.set_timeout(Duration::from_secs(30));
    let mut tool = sw4rm.tool();
    let call = tokio::spawn(async move { tool.invoke_tool(req).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    call.abort();
    let told = tokio::time::timeout(Duration::from_secs(10), served.ended.recv()).await;
    assert_eq!(told.unwrap().as_deref(), Some("abandoned"));
    assert_eq!(
        served
            .seen
            .abandoned
            .lock()
            .unwrap()
            .last()
            .map(|(e, _)| e.clone()),
        Some(Ending::CallerGone)
    );
}

/// The caller's `CallProgress` replaces the route's rule: here no frame is progress,
/// so even a working tool is cut at the caller's idle limit (what a rule that is too
/// strict costs).
#[tokio::test]
async fn a_per_call_rule_replaces_the_routes() {
    let served = serve().await;
    let sw4rm = caller(served.addr).await;
    let mut req = tool_call("steady", Duration::from_millis(700));
    CallProgress(ProgressRule::decoded(|_: &ToolFrame| {
        sw4rm_timeouts::Heard::KeepAlive
    }))
    .apply(&mut req);
    let mut stream = sw4rm.tool().call_stream(req).await.unwrap().into_inner();
    let (frames, end) = read_all(&mut stream).await;
    let d = TimeoutDetails::from_status(&end.unwrap_err()).unwrap();
    assert_eq!(
        (d.phase(), d.detected_by()),
        (Phase::Idle, DetectedBy::Client)
    );
    assert_eq!(d.long_work().unwrap().progress_count(), 0);
    assert_eq!(d.message_count(), Some(frames.len() as u64));
    drop(served);
}

/// A caller that stops reading: a raw HTTP/2 client that calls `CallStream` for
/// `tool` (with `grpc_timeout` when given), gives the stream a 16-byte window and never
/// reads (so never gives any back). The response body, to hold unread.
async fn never_reading(addr: SocketAddr, tool: &str, grpc_timeout: Option<&str>) -> h2::RecvStream {
    use prost::Message;
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(16)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut client = client.ready().await.unwrap();
    let mut request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{CALL_STREAM}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(t) = grpc_timeout {
        request = request.header("grpc-timeout", t);
    }
    let (response, mut send) = client
        .send_request(request.body(()).unwrap(), false)
        .unwrap();
    let call = ToolCall {
        tool_name: tool.into(),
        stream: true,
        ..Default::default()
    }
    .encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend((call.len() as u32).to_be_bytes());
    framed.extend(call);
    send.send_data(bytes::Bytes::from(framed), true).unwrap();
    response.await.unwrap().into_body()
}

/// A caller that stops reading: a raw HTTP/2 client that gives the stream a 16-byte
/// window and never reads (so never gives any back). The server cannot send, hyper
/// stops polling the response stream — and the caller's deadline still ends the
/// work, its future dropped (what it held freed).
#[tokio::test]
async fn a_caller_that_stops_reading_does_not_keep_the_work_alive() {
    let served = serve().await;
    let started = Instant::now();
    let _never_read = never_reading(served.addr, "forever", Some("2S")).await;
    // The bound only turns a hang into a failure; the outcome is what is asserted.
    let mut waited = 0;
    while !served.seen.work_dropped.load(Ordering::SeqCst) && waited < 3_000 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    assert!(
        served.seen.work_dropped.load(Ordering::SeqCst),
        "the work outlived the caller's deadline"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "not before the deadline"
    );
}

/// A caller that stops reading a stream whose work pushes 16 KiB every millisecond:
/// the guard holds at most its buffer for it (it held every item until the cap: 76
/// MiB after 1.5 s for 20 such streams), ends the stream and stops the work, long
/// before the 20 s cap.
#[tokio::test]
async fn a_stalled_reader_of_a_flooding_stream_costs_the_buffer_and_stops_the_work() {
    let served = serve().await;
    let _never_read = never_reading(served.addr, "flood", None).await;
    // Bounded wait far below the cap: the outcome is what is asserted.
    let mut waited = 0;
    while !served.seen.work_dropped.load(Ordering::SeqCst) && waited < 1_000 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 1;
    }
    assert!(
        served.seen.work_dropped.load(Ordering::SeqCst),
        "the flooding work ran on for a reader that stopped"
    );
}

/// `send` waits for room (the reader paces the work); `try_push` gives the item back
/// when the buffer is full.
#[tokio::test(start_paused = true)]
async fn a_streams_buffer_paces_send_and_refuses_try_push_when_full() {
    use tokio_stream::StreamExt;
    let (told, mut accepted) = mpsc::unbounded_channel();
    let mut stream = LongWork::new().buffer(2).stream(
        move |out: scope::Output<u64>| async move {
            for n in 0..6u64 {
                out.send(n).await;
                let _ = told.send(("sent", n));
            }
            let refused = (6..20u64).find(|n| out.try_push(*n).is_err());
            let _ = told.send(("refused", refused.unwrap_or(0)));
            std::future::pending::<()>().await
        },
        |frame| {
            Ok::<_, Status>(match frame {
                Frame::Item(n) => n,
                _ => u64::MAX,
            })
        },
    );
    // Nothing read yet: two in the buffer, the third send waits.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut sent = Vec::new();
    while let Ok(m) = accepted.try_recv() {
        sent.push(m);
    }
    assert_eq!(sent, [("sent", 0), ("sent", 1)], "send waits for room");
    for n in 0..6 {
        assert_eq!(stream.next().await.unwrap().unwrap(), n);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut last = None;
    while let Ok(m) = accepted.try_recv() {
        last = Some(m);
    }
    assert_eq!(last, Some(("refused", 6)), "4 and 5 unread: 6 given back");
}

/// The guard the guide's first snippet makes (a cap, no idle limit, no `for_rpc`)
/// behind `InboundDeadlineLayer`: its status names the RPC from the inbound call, says
/// "no idle limit", and says what it left behind: the work was stopped (it said
/// `//: … (idle limit 0 ms)` and `effect=None`).
#[tokio::test]
async fn a_guards_timeout_names_its_rpc_and_says_the_work_was_stopped() {
    let served = serve().await;
    let sw4rm = caller(served.addr).await;
    let mut req = Request::new(InvokeToolRequest {
        call: Some(ToolCall {
            tool_name: "unnamed".into(),
            ..Default::default()
        }),
    });
    req.set_timeout(Duration::from_secs(30));
    let status = sw4rm.tool().invoke_tool(req).await.unwrap_err();
    let d = TimeoutDetails::from_status(&status).expect("the guard's details");
    assert_eq!(
        (d.phase(), d.detected_by()),
        (Phase::Total, DetectedBy::Server)
    );
    assert!(
        status.message().starts_with(
            "/sw4rm.tool.ToolService/InvokeTool: exceeded the wall-clock cap of 300 ms \
             (no idle limit)"
        ),
        "{}",
        status.message()
    );
    assert_eq!(
        d.effect(),
        Some(CallEffect::WorkStopped {
            results: 0,
            progress_marker: None,
        })
    );
    assert!(!d.effect().unwrap().safe_to_resend());
}
