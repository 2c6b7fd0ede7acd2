//! gRPC over HTTP/2, as this crate reads and writes it: the `grpc-timeout` header,
//! message framing, timeout fields inside request messages, the timeout details (`google.rpc.ErrorInfo`) and what a peer's status
//! says.
//!
//! Reading order: `grpc_timeout.rs` → `details.rs` (its sentence in `details_text.rs`);
//! `headers.rs`, a header of a short head found by its name; `framing.rs`,
//! `message_field.rs`, `message_ids.rs` (SW4-003's ids) and `reassembled.rs` for the body; `status.rs` for
//! classifying answers; `error.rs` the layer's error type; `stream_idle.rs` the
//! caller's quiet limit a long-work guard paces its progress messages by;
//! `tool_frame.rs` the standard progress rule of `ToolService/CallStream`; `messages.rs`
//! what the crate makes of SW4RM's messages (its profiles to and from their wire form);
//! `connect_clock.rs` how long a call waited for a connection.

pub(crate) mod cancel;
pub(crate) mod connect_clock;
pub(crate) mod details;
mod details_text;
pub(crate) mod error;
pub(crate) mod first_words;
pub(crate) mod framing;
pub mod grpc_timeout;
pub(crate) mod headers;
pub(crate) mod long_work;
pub(crate) mod message_field;
pub(crate) mod message_ids;
pub(crate) mod messages;
pub(crate) mod partial;
pub(crate) mod reassembled;
pub(crate) mod status;
pub mod stream_idle;
pub(crate) mod tool_frame;
