//! What a call keeps so that it can send its request again — the request, a handle on
//! the inner service, and the box they live in — and why keeping it costs so little.
//!
//! A retry or a hedge re-sends the first attempt's request byte for byte, through a
//! handle of its own on the inner service. Keeping both naively costs every call that
//! may be retried (the common case: the standard profiles retry) five allocations and a
//! reference count on a cache line every thread shares, though most calls are answered
//! by their first attempt. What is here brings that to **one allocation** per call that
//! may be retried and none for one that may not (`tests/alloc_free.rs` counts them),
//! and the layer's own work with retries on to 4,021 instructions per call (callgrind,
//! 2026-11-26; 270–281 ns on the host of the earlier timings; `benches/README.md`):
//!
//! * `request.rs` ([`ReplayRequest`]): the request kept for replay, and each later attempt's
//!   request made from it; a message of at most 88 bytes is kept inline, and its head
//!   without copying the header and extension maps (five allocations a usual request
//!   would cost), built again only for a later attempt.
//! * `handle.rs` ([`Spare`]): the handle later attempts go through, shared by the
//!   layered service's calls and cloned only when a later attempt comes (over tonic's
//!   channel, a clone allocates).
//! * the box a call keeps all of it in (`RetryState`, in `retries.rs` with the rest of
//!   a call's retry state), reused from call to call on each thread (at most 32 boxes,
//!   15 KiB, per thread), emptied when a call ends so no credential outlives its call.

mod handle;
mod request;

pub(crate) use handle::{Spare, SpareSlot};
pub(crate) use request::{ReplayRequest, ToKeep, DEFAULT_REPLAY_LIMIT};
