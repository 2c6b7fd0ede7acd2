//! What the layer does for a SW4-004 handoff (`RequestHandoff`) made inside a scope:
//! `stamp.rs` writes the delegation's budget envelope into the request, `cascade.rs`
//! remembers its `request_id` so that cancelling the scope sends `CancelDelegation`;
//! `step.rs` is the call's step that decides on both and does them.

pub(crate) mod cascade;
pub(crate) mod stamp;
pub(crate) mod step;
