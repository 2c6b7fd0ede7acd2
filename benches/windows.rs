//! What the HTTP/2 windows `cancel_safe` sets (512 KiB a stream, the largest
//! connection window) cost a bulk server stream against hyper's own (2 MiB, 5 MiB):
//! 1,000 `ToolFrame`s of 64 KiB (64 MB) over loopback, drained by a client on each
//! kind of connection, interleaved. Loopback's round trip is microseconds, so this
//! measures the window's cost where it is least; over a link, one stream moves at
//! most a window per round trip (`benches/README.md`).

use sw4rm_timeouts::proto::sw4rm::tool::tool_service_client::ToolServiceClient;
use sw4rm_timeouts::proto::sw4rm::tool::{ToolCall, ToolFrame};
use sw4rm_timeouts::testing::{Script, StreamScript, TestServer};
use tonic::transport::{Channel, Endpoint};

#[path = "support/interleaved.rs"]
mod interleaved;

const FRAMES: usize = 1_000;
const FRAME_BYTES: usize = 64 * 1024;
const NAMES: [&str; 2] = ["hyper's windows", "cancel_safe's windows"];

async fn drain(channel: Channel) {
    let mut client = ToolServiceClient::new(channel).max_decoding_message_size(1 << 20);
    let mut stream = client
        .call_stream(ToolCall::default())
        .await
        .expect("open stream")
        .into_inner();
    let mut n = 0;
    while stream.message().await.expect("message").is_some() {
        n += 1;
    }
    assert_eq!(n, FRAMES);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let server = TestServer::start().await.expect("embedded server");
        let frame = ToolFrame {
            data: vec![7; FRAME_BYTES],
            ..Default::default()
        };
        let frames = vec![frame; FRAMES];
        server
            .script("CallStream", Script::stream(StreamScript::frames(&frames)))
            .expect("a known RPC");
        let endpoint = Endpoint::from_shared(server.url()).expect("url");
        let hyper = endpoint.clone().connect().await.expect("connect");
        let safe = sw4rm_timeouts::cancel_safe(endpoint)
            .connect()
            .await
            .expect("connect");
        let run = |variant: usize| {
            let channel = [&hyper, &safe][variant].clone();
            drain(channel)
        };
        let medians = interleaved::medians(30, &NAMES, run).await;
        interleaved::report(
            "1,000 × 64 KiB CallStream over loopback (64 MB)",
            &NAMES,
            &medians,
        );
        for (name, m) in NAMES.iter().zip(&medians) {
            let mb_s = (FRAMES * FRAME_BYTES) as f64 / m.as_secs_f64() / 1e6;
            println!("  {name:<28} {mb_s:>8.0} MB/s");
        }
    });
}
