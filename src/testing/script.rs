//! What the embedded server does per RPC, and what it records.

use std::time::Duration;

/// Scripted behaviour of one RPC on the embedded server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    /// How long a unary handler waits before answering.
    pub latency: Duration,
    /// Answer with this status instead of a response (after `latency`).
    pub fail_with: Option<tonic::Code>,
    /// With `fail_with`: fail only the first this many calls of the RPC made after the
    /// script was set ([`super::TestServer::script`]), then answer (`None`: fail every
    /// call).
    pub fail_first: Option<usize>,
    /// With `latency`: wait only in the first this many calls of the RPC made after the
    /// script was set, then answer at once (`None`: every call waits).
    pub slow_first: Option<usize>,
    /// The response message, encoded (`None`: the default message). Set it with
    /// [`Script::respond_with`].
    pub response: Option<bytes::Bytes>,
    /// Pacing of a server-streaming response.
    pub stream: StreamScript,
    /// A tail: every `n`-th call of the RPC (counted from the script) waits this long
    /// instead of `latency`. Set it with [`Script::with_tail`].
    pub tail: Option<(usize, Duration)>,
}

impl Script {
    /// A unary script that answers after `latency`.
    pub fn latency(latency: Duration) -> Self {
        Script {
            latency,
            ..Script::default()
        }
    }

    /// A unary script that fails the first `n` calls with `code`, then answers. Calls
    /// count from the moment the script is set, so re-scripting starts over.
    ///
    /// ```
    /// use sw4rm_timeouts::testing::Script;
    /// let flaky = Script::fail_first(2, tonic::Code::Unavailable);
    /// assert_eq!((flaky.fail_with, flaky.fail_first), (Some(tonic::Code::Unavailable), Some(2)));
    /// ```
    pub fn fail_first(n: usize, code: tonic::Code) -> Self {
        Script {
            fail_with: Some(code),
            fail_first: Some(n),
            ..Script::default()
        }
    }

    /// A unary script whose first `n` calls wait `latency`, the rest answer at once
    /// (counted from the moment the script is set).
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::testing::Script;
    /// let warming_up = Script::slow_first(1, Duration::from_secs(3));
    /// assert_eq!(warming_up.slow_first, Some(1));
    /// ```
    pub fn slow_first(n: usize, latency: Duration) -> Self {
        Script {
            latency,
            slow_first: Some(n),
            ..Script::default()
        }
    }

    /// Answers with this message (of the RPC's response type) instead of the
    /// default one. A message of another type decodes as far as the fields match.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sw4rm_timeouts::proto::sw4rm::registry::{HeartbeatRequest, HeartbeatResponse};
    /// use sw4rm_timeouts::testing::{Script, TestServer};
    /// use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
    /// let server = TestServer::start().await?;
    /// let answer = HeartbeatResponse { ok: true };
    /// server.script("Heartbeat", Script::default().respond_with(&answer))?;
    /// let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::new(ProfileSet::standard())).await?;
    /// let got = sw4rm.registry().heartbeat(HeartbeatRequest::default()).await?.into_inner();
    /// assert_eq!(got, answer);
    /// # Ok(()) }
    /// ```
    pub fn respond_with(mut self, message: &impl prost::Message) -> Self {
        self.response = Some(message.encode_to_vec().into());
        self
    }

    /// Every `every`-th call (the `every`-th, the `2·every`-th, … counted from the
    /// script) waits `slow` instead of the script's latency: a tail of `1/every` of the
    /// calls, deterministic.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_timeouts::testing::Script;
    /// // 5 % of calls ten times slower.
    /// let tail = Script::latency(Duration::from_millis(20)).with_tail(20, Duration::from_millis(200));
    /// assert_eq!(tail.tail, Some((20, Duration::from_millis(200))));
    /// ```
    pub fn with_tail(mut self, every: usize, slow: Duration) -> Self {
        self.tail = Some((every.max(1), slow));
        self
    }

    /// How long call `nth` (from 0, counted from the script) waits.
    pub(crate) fn latency_of(&self, nth: usize) -> Duration {
        match self.tail {
            Some((every, slow)) if (nth + 1).is_multiple_of(every) => slow,
            _ if self.slow_first.is_none_or(|n| nth < n) => self.latency,
            _ => Duration::ZERO,
        }
    }

    /// A streaming script.
    pub fn stream(stream: StreamScript) -> Self {
        Script {
            stream,
            ..Script::default()
        }
    }
}

/// Pacing of a server stream: `messages` messages, the first after `first_after`,
/// the next ones `gap` apart; then the stream ends, or stalls (sends nothing more and
/// never ends) when `stall_after` is set. The messages are numbered default messages,
/// or the given `frames`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamScript {
    /// Delay before the first message.
    pub first_after: Duration,
    /// Delay between messages.
    pub gap: Duration,
    /// Number of messages.
    pub messages: u32,
    /// Stall forever after the last message instead of ending.
    pub stall_after: bool,
    /// The messages to send, encoded, in order; when not empty they replace the
    /// numbered default messages and `messages` is ignored. Set with
    /// [`StreamScript::frames`].
    pub frames: Vec<bytes::Bytes>,
}

impl StreamScript {
    /// A stream of exactly these messages (of the RPC's message type), sent at once
    /// one after another; set `first_after`, `gap` or `stall_after` on the result to
    /// pace it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sw4rm_timeouts::proto::sw4rm::tool::{ToolCall, ToolFrame};
    /// use sw4rm_timeouts::testing::{Script, StreamScript, TestServer};
    /// use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
    /// let server = TestServer::start().await?;
    /// let frames = [
    ///     ToolFrame { frame_no: 7, data: b"half".to_vec(), ..Default::default() },
    ///     ToolFrame { frame_no: 8, r#final: true, ..Default::default() },
    /// ];
    /// server.script("CallStream", Script::stream(StreamScript::frames(&frames)))?;
    /// let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::new(ProfileSet::standard())).await?;
    /// let mut stream = sw4rm.tool().call_stream(ToolCall::default()).await?.into_inner();
    /// assert_eq!(stream.message().await?, Some(frames[0].clone()));
    /// assert_eq!(stream.message().await?, Some(frames[1].clone()));
    /// assert_eq!(stream.message().await?, None);
    /// # Ok(()) }
    /// ```
    pub fn frames<'a, M: prost::Message + 'a>(messages: impl IntoIterator<Item = &'a M>) -> Self {
        StreamScript {
            frames: messages
                .into_iter()
                .map(|m| m.encode_to_vec().into())
                .collect(),
            ..StreamScript::default()
        }
    }
}

impl Default for StreamScript {
    fn default() -> Self {
        StreamScript {
            first_after: Duration::ZERO,
            gap: Duration::ZERO,
            messages: 3,
            stall_after: false,
            frames: Vec::new(),
        }
    }
}

/// How a call ended on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServedEnd {
    /// Still running.
    Running,
    /// The handler answered (or the stream ended).
    Completed,
    /// The handler was dropped before answering: the client cancelled (or the
    /// server's own deadline fired).
    Cancelled,
}

/// One call as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServedCall {
    /// Sequence number, from 0.
    pub id: usize,
    /// The gRPC path, `/package.Service/Method`.
    pub path: &'static str,
    /// The `grpc-timeout` header as received, if any.
    pub grpc_timeout: Option<String>,
    /// The deadline it carried (`None` without a header, or a malformed one).
    pub deadline: Option<Duration>,
    /// The request's ASCII metadata (custom headers such as `authorization`), in
    /// the order received; gRPC's own headers are left out.
    pub metadata: Vec<(String, String)>,
    /// How it ended.
    pub outcome: ServedEnd,
    /// Stream messages sent.
    pub messages_sent: u32,
    /// The request message as received, encoded (read it with
    /// [`ServedCall::request_as`]).
    pub request: bytes::Bytes,
    /// The `grpc-previous-rpc-attempts` header (gRPC A6), on a retried call's later
    /// attempts.
    pub previous_attempts: Option<u32>,
}

impl ServedCall {
    /// The request message as received, decoded as `M` (`None` when it does not
    /// decode as one).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
    /// use sw4rm_timeouts::testing::TestServer;
    /// use sw4rm_timeouts::{Sw4rm, TimeoutProfileLayer};
    /// let server = TestServer::start().await?;
    /// let sw4rm = Sw4rm::connect_with(server.url(), TimeoutProfileLayer::standard()).await?;
    /// let beat = HeartbeatRequest { agent_id: "agent-7".into(), ..Default::default() };
    /// sw4rm.registry().heartbeat(beat.clone()).await?;
    /// assert_eq!(server.calls()[0].request_as::<HeartbeatRequest>(), Some(beat));
    /// # Ok(()) }
    /// ```
    pub fn request_as<M: prost::Message + Default>(&self) -> Option<M> {
        M::decode(self.request.clone()).ok()
    }
}
