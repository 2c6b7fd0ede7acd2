//! What the embedded server does per RPC, and what it records.

use std::time::Duration;

/// Scripted behaviour of one RPC on the embedded server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    /// How long a unary handler waits before answering.
    pub latency: Duration,
    /// Answer with this status instead of a response (after `latency`).
    pub fail_with: Option<tonic::Code>,
    /// With `fail_with`: fail only the first this many calls of the RPC, then answer
    /// (`None`: fail every call).
    pub fail_first: Option<usize>,
    /// Pacing of a server-streaming response.
    pub stream: StreamScript,
}

impl Script {
    /// A unary script that answers after `latency`.
    pub fn latency(latency: Duration) -> Self {
        Script {
            latency,
            ..Script::default()
        }
    }

    /// A unary script that fails the first `n` calls with `code`, then answers.
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
/// never ends) when `stall_after` is set.
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
}

impl Default for StreamScript {
    fn default() -> Self {
        StreamScript {
            first_after: Duration::ZERO,
            gap: Duration::ZERO,
            messages: 3,
            stall_after: false,
        }
    }
}

/// How a call ended on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
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
pub struct CallRecord {
    /// Sequence number, from 0.
    pub id: usize,
    /// The gRPC path, `/package.Service/Method`.
    pub path: &'static str,
    /// The `grpc-timeout` header as received, if any.
    pub grpc_timeout: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// Stream messages sent.
    pub messages_sent: u32,
}
