//! The tower layer: one [`TimeoutProfileLayer`], one [`TimeoutProfileService`], one
//! pinned [`ResponseFuture`] and one response body wrapper [`TimeoutBody`].
//!
//! Reading order for one RPC: `service.rs` (route, resolve, header, timer) →
//! `future.rs` (wait for response headers or the deadline) → `body.rs` (wait for
//! messages, with the unary deadline or the streaming timers) → `call.rs` (the
//! per-call record that emits metrics, logs and the timeout status exactly once).

mod body;
mod call;
mod future;
mod layer;
mod service;
mod shared;

pub use body::TimeoutBody;
pub use future::ResponseFuture;
pub use layer::TimeoutProfileLayer;
pub use service::TimeoutProfileService;

/// The error type of the layer's service and body (tonic reads a [`tonic::Status`]
/// out of it, including the timeout details).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;
