//! The embedded server's service implementations: every SW4RM service, answering
//! with success (`success.rs`: the default message, its `ok`/`accepted`/… field set) or
//! scripted messages after the scripted latency, and recording every
//! call. Reading order: this file (the shared handlers), `core.rs` (the five services
//! of SW4-002's table), `upstream.rs` (the other eleven upstream services).

mod core;
mod success;
mod upstream;

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::state::State;

/// Implements every service trait of the embedded server.
#[derive(Clone, Debug)]
pub(crate) struct Embedded {
    pub(crate) state: Arc<State>,
}

/// A server-stream response of the embedded server.
pub(crate) type Frames<T> = ReceiverStream<Result<T, Status>>;

impl Embedded {
    async fn unary<Req: prost::Message, Resp: Default + prost::Message>(
        &self,
        req: Request<Req>,
        path: &'static str,
    ) -> Result<Response<Resp>, Status> {
        self.unary_with(req, path, |_| success::success(path)).await
    }

    /// A unary handler whose unscripted answer `answer` makes from the request.
    async fn unary_with<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        req: Request<Req>,
        path: &'static str,
        answer: impl FnOnce(Req) -> Resp,
    ) -> Result<Response<Resp>, Status> {
        let guard = self.state.begin(path, &req);
        let (script, since) = self.state.script(path);
        let nth = guard.nth_of_path(since);
        let latency = script.latency_of(nth);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        guard.finish();
        match script.fail_with {
            Some(code) if script.fail_first.is_none_or(|n| nth < n) => {
                Err(Status::new(code, format!("scripted failure of {path}")))
            }
            _ => {
                let message = match script.response {
                    Some(bytes) => Resp::decode(bytes).unwrap_or_default(),
                    None => answer(req.into_inner()),
                };
                Ok(Response::new(message))
            }
        }
    }

    /// A server stream paced by the RPC's `StreamScript`: its scripted frames, or the
    /// messages `frame(i, last)` makes; `sent` sees each message as it goes out.
    fn stream<T: prost::Message + Default + 'static>(
        &self,
        path: &'static str,
        request: &Request<impl prost::Message>,
        frame: impl Fn(u32, bool) -> T + Send + 'static,
        sent: impl Fn(&T) + Send + 'static,
    ) -> Frames<T> {
        let guard = self.state.begin(path, request);
        let script = self.state.script(path).0.stream;
        let count = match script.frames.len() {
            0 => script.messages,
            n => u32::try_from(n).unwrap_or(u32::MAX),
        };
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            for i in 0..count {
                let wait = if i == 0 {
                    script.first_after
                } else {
                    script.gap
                };
                if !wait.is_zero() {
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = tx.closed() => return, // guard drops: Cancelled
                    }
                }
                let last = i + 1 == count && !script.stall_after;
                let message = script
                    .frames
                    .get(i as usize)
                    .and_then(|bytes| T::decode(bytes.clone()).ok())
                    .unwrap_or_else(|| frame(i, last));
                let permit = match tx.reserve().await {
                    Ok(permit) => permit,
                    Err(_) => return,
                };
                sent(&message);
                permit.send(Ok(message));
                guard.sent_message();
            }
            if script.stall_after {
                tx.closed().await; // until the client goes away
                return;
            }
            guard.finish();
        });
        ReceiverStream::new(rx)
    }
}

/// One unary handler, written in the shape `#[async_trait]` gives trait methods
/// (the attribute does not see inside macro expansions).
macro_rules! unary {
    ($name:ident, $req:ty, $resp:ty, $path:literal) => {
        fn $name<'life0, 'async_trait>(
            &'life0 self,
            request: tonic::Request<$req>,
        ) -> std::pin::Pin<
            Box<
                dyn std::future::Future<Output = Result<tonic::Response<$resp>, tonic::Status>>
                    + Send
                    + 'async_trait,
            >,
        >
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(self.unary(request, $path))
        }
    };
}
use unary;
