//! Stalled readers of small messages beside healthy calls on one connection, over
//! loopback against a raw HTTP/2 server that sends every message of a server stream
//! in a DATA frame of its own (as a server streaming progress frames does).
//!
//! h2 counts the framing overhead of unread DATA frames under 256 bytes against a
//! connection-wide budget (half the connection window) and closes the whole
//! connection with `GOAWAY(ENHANCE_YOUR_CALM)` when it runs out. With hyper's windows
//! (2 MiB per stream, 5 MiB per connection) one consumer that stops reading such a
//! stream took every call beside it down within a second. The windows the SDK sets
//! ([`sw4rm_timeouts::cancel_safe`]) hold for 40
//! stalled streams (512 KiB per stream, the largest connection window): 1 and 8 are tried here, with no healthy call lost.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::router::{StreamItem, StreamRequest};
use sw4rm_timeouts::Sw4rm;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// What the server counted: DATA frames sent on streams (all streams together), and
/// connections accepted (a second one is a client that lost the first).
#[derive(Default)]
struct Counts {
    frames: AtomicU64,
    connections: AtomicU64,
    /// Server streams that ended (their stream reset, their connection gone).
    ended: AtomicU64,
}

type Sent = Arc<Counts>;

/// One gRPC message of `StreamIncoming`: a small `StreamItem`, framed (27 bytes).
fn item(seq: i64) -> Bytes {
    let message = StreamItem {
        msg: None,
        seq: seq | (1 << 62),
    }
    .encode_to_vec();
    let mut framed = BytesMut::with_capacity(5 + message.len());
    framed.put_u8(0);
    framed.put_u32(message.len() as u32);
    framed.put_slice(&message);
    framed.freeze()
}

fn grpc_headers() -> http::Response<()> {
    http::Response::builder()
        .header("content-type", "application/grpc")
        .body(())
        .unwrap()
}

/// A raw HTTP/2 server: `StreamIncoming` sends small messages one per DATA frame as
/// fast as flow control lets it, forever; every other RPC answers an empty message.
async fn server() -> (SocketAddr, Sent) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sent = Sent::default();
    let counted = sent.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let sent = counted.clone();
            sent.connections.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::Builder::new()
                    .max_send_buffer_size(64 << 20)
                    .handshake(socket)
                    .await
                else {
                    return;
                };
                while let Some(Ok((request, respond))) = conn.accept().await {
                    let streaming = request.uri().path().ends_with("/StreamIncoming");
                    tokio::spawn(answer(respond, streaming, sent.clone()));
                }
            });
        }
    });
    (addr, sent)
}

async fn answer(respond: h2::server::SendResponse<Bytes>, streaming: bool, sent: Sent) {
    let streamed = streaming.then(|| sent.clone());
    send_all(respond, streaming, sent).await;
    if let Some(sent) = streamed {
        sent.ended.fetch_add(1, Ordering::Relaxed);
    }
}

async fn send_all(mut respond: h2::server::SendResponse<Bytes>, streaming: bool, sent: Sent) {
    let Ok(mut send) = respond.send_response(grpc_headers(), false) else {
        return;
    };
    if !streaming {
        // Long enough that healthy calls are in flight at every moment.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let _ = send.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
        let trailers = http::HeaderMap::from_iter([(
            http::HeaderName::from_static("grpc-status"),
            http::HeaderValue::from_static("0"),
        )]);
        let _ = send.send_trailers(trailers);
        return;
    }
    for seq in 0.. {
        let frame = item(seq);
        send.reserve_capacity(frame.len());
        // Wait for the client's window: a stalled reader's stream blocks here.
        loop {
            match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                Some(Ok(n)) if n >= frame.len() => break,
                Some(Ok(_)) => continue,
                _ => return,
            }
        }
        if send.send_data(frame, false).is_err() {
            return;
        }
        sent.frames.fetch_add(1, Ordering::Relaxed);
        // One message per DATA frame: let the connection write it before the next.
        tokio::task::yield_now().await;
    }
}

/// Waits until `done` holds of what the server counted (bounded: 60 s, a bound that
/// only turns a hang into a failure), then half a second more for what it caused;
/// the frames sent by then.
async fn until(sent: &Sent, done: impl Fn(&Counts) -> bool) -> u64 {
    let give_up = Instant::now() + Duration::from_secs(60);
    while !done(sent) && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    sent.frames.load(Ordering::Relaxed)
}

/// `stalled` streams that read one message and stop, beside healthy heartbeats on the
/// same connection (four in flight at every moment while the stalled streams' windows
/// fill, then more): none may fail, and the connection is the first one still.
async fn stalled_readers_leave_healthy_calls_alone(stalled: usize) {
    let (addr, sent) = server().await;
    let sw4rm = Sw4rm::connect(format!("http://{addr}")).await.unwrap();
    let mut streams = Vec::new();
    for _ in 0..stalled {
        let mut stream = sw4rm
            .router()
            .stream_incoming(StreamRequest::default())
            .await
            .expect("the stream opens")
            .into_inner();
        stream.message().await.expect("a first message").unwrap();
        streams.push(stream); // and never read again
    }
    // Healthy calls while the stalled streams fill their windows, and after.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (sw4rm, done) = (sw4rm.clone(), done.clone());
            tokio::spawn(async move {
                let mut failed = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    if let Err(status) = sw4rm
                        .registry()
                        .heartbeat(HeartbeatRequest::default())
                        .await
                    {
                        failed.push(status);
                    }
                }
                failed
            })
        })
        .collect();
    // Each stalled stream's window filled: 512 KiB of 27-byte messages (or a stream
    // ended: the connection was lost).
    let per_window = 512 * 1024 / 27;
    let target = per_window * stalled as u64;
    let frames = until(&sent, |c| {
        c.frames.load(Ordering::Relaxed) >= target || c.ended.load(Ordering::Relaxed) > 0
    })
    .await;
    done.store(true, Ordering::Relaxed);
    let mut failed = Vec::new();
    for caller in callers {
        failed.extend(caller.await.unwrap());
    }
    for _ in 0..20 {
        if let Err(status) = sw4rm
            .registry()
            .heartbeat(HeartbeatRequest::default())
            .await
        {
            failed.push(status);
        }
    }
    assert!(
        failed.is_empty(),
        "{} healthy calls failed beside {stalled} stalled streams after {frames} small \
         frames; the first: {:?}",
        failed.len(),
        failed.first()
    );
    assert_eq!(
        (
            sent.connections.load(Ordering::Relaxed),
            sent.ended.load(Ordering::Relaxed)
        ),
        (1, 0),
        "the connection was lost after {frames} small frames"
    );
    assert!(
        frames >= target,
        "the stalled streams' windows took only {frames} frames"
    );
    // The stalled streams were not ended either: each reads on.
    for stream in &mut streams {
        assert!(stream.message().await.expect("still open").is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stalled_reader_of_small_messages_leaves_the_connection_up() {
    stalled_readers_leave_healthy_calls_alone(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_stalled_readers_of_small_messages_leave_the_connection_up() {
    stalled_readers_leave_healthy_calls_alone(8).await;
}

/// Past the bound (here: hyper's own windows, on a channel of the caller's own that
/// did not go through `cancel_safe`) the connection is lost; what it ended surfaces
/// as `UNAVAILABLE`, which a caller may retry, not as tonic's `RESOURCE_EXHAUSTED`
/// (a code that reads like the server's own limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_to_a_stalled_reader_fails_its_calls_unavailable() {
    let (addr, sent) = server().await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let sw4rm = Sw4rm::with_layer(channel, sw4rm_timeouts::TimeoutProfileLayer::standard());
    let mut stream = sw4rm
        .router()
        .stream_incoming(StreamRequest::default())
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().unwrap();
    // The connection goes: the server's stream ends.
    let frames = until(&sent, |c| c.ended.load(Ordering::Relaxed) > 0).await;
    assert_eq!(
        sent.ended.load(Ordering::Relaxed),
        1,
        "after {frames} frames"
    );
    // Read what was buffered; then the stream's end is the lost connection.
    let status = loop {
        match stream.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended cleanly after {frames} frames"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("too_many_data_frames"),
        "{status:?}"
    );
    // A new call reconnects.
    sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await
        .unwrap();
}
