//! The same-process setup of the loopback benches: one runtime thread for client
//! and server (the least scheduling noise on a small machine), the embedded server,
//! and a connected channel.

use sw4rm_timeouts::testing::TestServer;
use tokio::runtime::Runtime;
use tonic::transport::Channel;

pub fn setup() -> (Runtime, TestServer, Channel) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt.block_on(TestServer::start()).expect("embedded server");
    let url = server.url();
    let channel = rt.block_on(async move {
        tonic::transport::Endpoint::from_shared(url)
            .expect("url")
            .connect()
            .await
            .expect("connect")
    });
    (rt, server, channel)
}
