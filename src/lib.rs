//! # sw4rm-timeouts
//!
//! SW4-002 timeout profiles for SW4RM gRPC clients. Generated tonic clients for all
//! fifteen SW4RM services (Registry, Scheduler, NegotiationRoom, Handoff, Tool, Router,
//! Workflow, HITL and the rest) run over one tower layer that, for every RPC:
//!
//! 1. routes the request path to its profile (`Heartbeat` → `heartbeat`, 5 s),
//! 2. resolves the timeout: per-call > message field > client > global > standard,
//! 3. clamps overrides into the profile's bounds (SW4-002 §2.2, with a `warn!`),
//! 4. writes the deadline on the wire as `grpc-timeout`,
//! 5. enforces it locally (unary and streaming), cancelling the HTTP/2 stream,
//! 6. answers a timeout with `DEADLINE_EXCEEDED` and a `google.rpc.ErrorInfo`
//!    ([`TimeoutDetails`]),
//! 7. records `sw4rm_rpc_timeout_total` and `sw4rm_rpc_duration_ms`,
//!
//! and beyond one call: retries inside the call's one deadline (SW4-002 §5.2,
//! [`RetryPolicy`]), hedged reads with a delay learned from the route's own latency
//! ([`HedgingPolicy`]), deadlines inherited from the inbound call an agent serves and
//! operation budgets that pause while a human decides ([`scope`]), long work inside a
//! handler under an idle limit and a cap (`scope::LongWork`, feature `long-work`),
//! operations submitted once and followed by status (`follow`, feature `follow`). The [`guide`] has a chapter
//! for each, and for how it fits ordinary tonic code. Delegation across agents and
//! swarms (SW4-004/005) is the `sw4rm-swarm` crate's; the operator's advisor is
//! `sw4rm-advise`'s.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
//! use sw4rm_timeouts::testing::TestServer;
//! use sw4rm_timeouts::{ProfileSet, Sw4rm, TimeoutProfileLayer};
//!
//! let server = TestServer::start().await?;                 // embedded SW4RM server
//! let layer = TimeoutProfileLayer::new(ProfileSet::standard());
//! let sw4rm = Sw4rm::connect_with(server.url(), layer).await?;
//!
//! sw4rm.registry().heartbeat(HeartbeatRequest::default()).await?;   // heartbeat profile
//! let mut req = tonic::Request::new(HeartbeatRequest::default());
//! req.set_timeout(Duration::from_millis(200));              // below heartbeat's 1 s min
//! sw4rm.registry().heartbeat(req).await?;
//!
//! let seen: Vec<_> = server.calls().into_iter().map(|c| c.grpc_timeout).collect();
//! assert_eq!(seen, [Some("5000000u".to_owned()), Some("1000000u".to_owned())]);
//! # Ok(()) }
//! ```
//!
//! The layer works under any tonic client, including clients generated from the
//! upstream SW4RM protos: `ServiceBuilder::new().layer(TimeoutProfileLayer::standard())`.
//!
//! Message-level timeouts (`WaitForDecisionRequest.timeout_seconds`,
//! `HandoffRequest.timeout`, `ToolCall.policy.timeout`): see [`MessageField`].
//!
//! Where things are: [`ProfileSet`] (profiles, routes, precedence; built from
//! [`GlobalConfig`] and the client builder), [`TimeoutProfileLayer`] (the layer),
//! [`TimeoutDetails`] (the error details), [`CallTimeout`] and
//! [`CallStreamingPolicy`] (per-call overrides), [`metrics`] (instrument names).
//!
//! ## Reading order: one unary call, file by file
//!
//! The tower glue (`src/timeout/`) plans a call and hands its attempts to the attempt
//! engine (`src/attempts/`), which reports what happens to the call's record. Every
//! call runs under that one engine with that one record, whatever the log level and
//! however ready the inner service is; a unary call its route alone plans (nothing of
//! its own, no scope, no hedging) reads its plan from the one kept for its route,
//! where any other call makes its own first. Counted honestly — every file of the
//! glue and the engine whose code such a call with retries on runs when its first
//! attempt answers it (the rules in `policy/` and the codecs in `wire/` are read
//! through them) — that is twenty-one files (`tests/reading_order.rs` holds this list
//! to the tree):
//!
//! 1. `timeout/service.rs` — `TimeoutProfileService::call`: route, plan, open the
//!    record, keep the request, write the deadline, send.
//! 2. `timeout/span.rs` — the call's `sw4rm_rpc` span, named by its route.
//! 3. `timeout/state/shared.rs` — where the call finds the layer's state (one atomic
//!    load), what that state holds, and the path's route and labels, asked of the
//!    profile table once per path.
//! 4. `timeout/per_call.rs` — what the caller set on the request (its header names
//!    compared, nothing looked up, when it set nothing).
//! 5. `timeout/plan.rs` — the pure call plan over the rules in `policy/`: the resolved
//!    timeout, the smallest cap, the timers, the retry and hedge plans; a route's
//!    plan, made once.
//! 6. `timeout/state/per_path.rs` — where the route's plan is kept, made on the
//!    route's first call.
//! 7. `timeout/record/boxed.rs` — the record's box, reused per thread, moved as a
//!    pointer;
//! 8. `timeout/record/mod.rs` — the record: where its end is recorded (its
//!    duration, what the advisor observes);
//! 9. `timeout/record/clock.rs` — where the call's timers are (the route's plan, or
//!    its own) and what they say to the engine;
//! 10. `timeout/record/cancel_watch.rs` — the watch on the scope's cancel and
//!     tonic's.
//! 11. `attempts/replay/request.rs` — the request's head and bytes, kept for replay,
//! 12. `attempts/replay/handle.rs` — and the spare handle on the inner service later
//!     attempts go through.
//! 13. `attempts/retries.rs` — the call's retry state and its box;
//! 14. `attempts/retry_budget.rs` — the layer's retry budget, paid into by every
//!     answer.
//! 15. `timeout/future.rs` — the call's future: the engine's loop, the record.
//! 16. `attempts/call_loop.rs` — the loop: attempts under the call's one timer.
//! 17. `attempts/attempt.rs` — one attempt; the one writer of an attempt's
//!     `grpc-timeout`, and the timer, armed lazily, re-armed without allocating.
//! 18. `attempts/verdict.rs` — what an attempt's end means: the answer, a retry, or
//!     the call's failure.
//! 19. `attempts/event.rs` — what the engine and the body report, and to whom (the
//!     `Sink`).
//! 20. `timeout/body.rs` — the response body under the remaining timers.
//! 21. `timeout/record/events.rs` — what the record makes of what it is told:
//!     metrics, logs, the end.
//!
//! A call with a value of its own, a scope or a stream reads the same files; a stream
//! adds `timeout/stream_plan.rs` (its timers). A hedged call reads those but the
//! retry state, and `attempts/hedges.rs` (its concurrent attempts),
//! `attempts/hedge_verdict.rs` (what each one's end means) and
//! `attempts/hedge_rate.rs` (the layer's cap on hedges); a learned delay adds
//! `attempts/hedge_delay.rs` (the percentile read from the route's window).
//!
//! Off a plain call's path: `timeout/layer.rs` (building the layer, and the service's
//! handles), `timeout/state/settings.rs` (the settings, and the state made from
//! them), `timeout/state/reload.rs` (live reload), `timeout/state/observations.rs`
//! (the advisor's reading of what was observed), `timeout/clamp_log.rs` (the warnings
//! of a call whose plan clamped something), `timeout/record/timed_out.rs` and
//! `timeout/record/cancelled.rs` (how a call that timed out, or that its scope
//! cancelled, ends), `timeout/refuse.rs` (a call a layer above refused before it was
//! sent), `timeout/record/differential/` (the test that holds every call alike
//! however it was planned and whatever the log level), and
//! each folder's `mod.rs`. Each is off it for a reason `tests/reading_order.rs`
//! checks: compiled for tests only, every function it defines `#[cold]` (a timeout,
//! a cancel, a clamp), or nothing on the list above calls it.
//!
//! ## Features
//!
//! * `server`: generated tonic servers for the SW4RM services, and tonic's server,
//!   for agents that serve SW4RM RPCs.
//! * `testing`: `testing::TestServer`, an embedded in-process SW4RM server with
//!   scripted latency and stream pacing, for agents' own tests (implies `server`;
//!   with a TLS provider it also serves TLS); `testing::Scripted`, an inner service
//!   without a socket that plays attempts as scripted, for tests on paused time.
//! * `prometheus`: `metrics::prometheus_provider`, an OpenTelemetry meter provider
//!   exporting to Prometheus that keeps the SW4-002 metric names exact.
//! * `tls-ring` or `tls-aws-lc`: TLS (rustls) with that crypto provider;
//!   `tls-native-roots`, `tls-webpki-roots`: the trust roots [`Sw4rm::connect`] uses
//!   for `https://` URLs. Without a provider an `https://` URL is refused, never
//!   reached in plaintext.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// No function of the crate itself is longer than clippy.toml says (tables of tests may be).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Dependencies point one way: `swarm` and `follow` (loops over many calls) use
// `clients`, `scope`, `wire` and `policy`; `timeout` (tower parts) and `clients` use
// `config`, `wire` and `policy`; `config` and `wire` use `policy`; `policy` uses
// nothing.
mod attempts;
mod clients;
mod config;
#[cfg(feature = "follow")]
#[cfg_attr(docsrs, doc(cfg(feature = "follow")))]
pub mod follow;
mod observe;
mod policy;
/// The generated prost messages and tonic clients and servers of the SW4RM services:
/// the [`sw4rm_proto`] crate, re-exported so that one dependency line brings the
/// clients and the layer they run over.
pub use sw4rm_proto as proto;
pub mod scope;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod timeout;
pub mod wire;

pub use observe::metrics;
#[cfg(feature = "otlp")]
#[cfg_attr(docsrs, doc(cfg(feature = "otlp")))]
pub use observe::otlp;
#[cfg(feature = "otel")]
#[cfg_attr(docsrs, doc(cfg(feature = "otel")))]
pub use observe::span_name::SpanName;

/// What the crates beside this one (`sw4rm-swarm`) build on and no user should:
/// seams of the layer, kept out of the documented API. Only this workspace's crates
/// use it; it changes with them, in lockstep.
#[doc(hidden)]
pub mod seams {
    use std::sync::Arc;

    use crate::scope::CancelSignal;
    use crate::{CancelReason, OperationBudget, Propagation, TimeoutProfileService};

    pub use crate::policy::envelope::{long_past, Envelope};
    pub use crate::policy::ids::{random_id, random_u64, unit_draw};
    pub use crate::policy::quote::{cut, quoted, Cut, Quoted, QUOTE_LIMIT};
    pub use crate::scope::cancel::{CancelSignal as Signal, Hook, Watch};
    pub use crate::scope::cancelled::own_grace_left;
    pub use crate::scope::caps::Current;
    pub use crate::scope::operation_budget::epoch_ms_now;
    pub use crate::scope::task::current;
    pub use crate::timeout::refuse::RefuseSending;
    pub use crate::wire::framing::first_message;
    pub use crate::wire::message_field::{fields, next_field, Value};
    pub use crate::wire::reassembled::with_first_frame;
    pub use crate::wire::status::passes;

    /// The propagation settings of the layer `service` runs under, now.
    pub fn propagation<S>(service: &TimeoutProfileService<S>) -> Propagation {
        service.propagation()
    }

    /// The meter the layer `service` runs under records to (`None`: metrics off).
    pub fn meter<S>(service: &TimeoutProfileService<S>) -> Option<opentelemetry::metrics::Meter> {
        service.instruments().map(|i| i.meter().clone())
    }

    /// `budget`'s cancel signal.
    pub fn signal(budget: &OperationBudget) -> &Arc<CancelSignal> {
        budget.signal()
    }

    /// Cancels `budget` for `reason`, its work given until `grace_until` to end.
    pub fn cancel_within(
        budget: &OperationBudget,
        reason: CancelReason,
        grace_until: tokio::time::Instant,
    ) -> bool {
        budget.cancel_within(reason, grace_until)
    }
}

/// What a layer built `with_observations()` observed of its calls, per route
/// ([`Observations`](observations::Observations)): latency estimates the advisor
/// (the `sw4rm-advise` crate) weighs against the table in use, and an agent can read
/// itself.
pub mod observations {
    pub use crate::observe::latency::{Above, LatencySnapshot, Resolution, RouteLatency};
    pub use crate::timeout::Observations;
}

#[doc = include_str!("../docs/guide.md")]
pub mod guide {
    #[doc = include_str!("../docs/guide/tonic.md")]
    pub mod tonic {}
    #[doc = include_str!("../docs/guide/profiles.md")]
    pub mod profiles {}
    #[doc = include_str!("../docs/guide/rules.md")]
    pub mod rules {}
    #[doc = include_str!("../docs/guide/long_work.md")]
    pub mod long_work {}
    #[doc = include_str!("../docs/guide/retries.md")]
    pub mod retries {}
    #[doc = include_str!("../docs/guide/hedging.md")]
    pub mod hedging {}
    #[doc = include_str!("../docs/guide/deadlines.md")]
    pub mod deadlines {}
    #[doc = include_str!("../docs/guide/cancellation.md")]
    pub mod cancellation {}
    #[doc = include_str!("../docs/guide/connections.md")]
    pub mod connections {}
    #[doc = include_str!("../docs/guide/tls.md")]
    pub mod tls {}
    #[doc = include_str!("../docs/guide/configuration.md")]
    pub mod configuration {}
    #[doc = include_str!("../docs/guide/observability.md")]
    pub mod observability {}
    #[doc = include_str!("../docs/guide/operating.md")]
    pub mod operating {}
    #[doc = include_str!("../docs/guide/interop.md")]
    pub mod interop {}
    #[doc = include_str!("../docs/guide/building.md")]
    pub mod building {}
}

/// The routing table: the standard routes of the SW4RM services, and route patterns.
pub mod route {
    pub use crate::policy::route::{split_path, RoutePattern, StandardRoute, STANDARD_ROUTES};
}

pub use attempts::{HedgeCap, DEFAULT_HEDGE_BURST};
pub use clients::{
    cancel_safe, ConnectError, ConnectStage, Sw4rm, Sw4rmBuilder, Sw4rmChannel,
    DEFAULT_CONNECT_TIMEOUT,
};
pub use config::{
    ConfigError, ConfigIssue, GlobalConfig, ProfileSet, ProfileSetBuilder, ResolvedProfile,
    RouteEntry, ServiceConfigMode, CONFIG_PATH_VAR, DEFAULT_CONFIG_FILE,
};
pub use metrics::MetricFamily;
pub use observe::answered::Answered;
pub use policy::cancel::CancelReason;
pub use policy::deadline::Phase;
pub use policy::effect::CallEffect;
pub use policy::hedge::{HedgingDelay, HedgingPolicy, HedgingPolicyBuilder, HedgingPolicyError};
pub use policy::inherit::Propagation;
pub use policy::message::{MessageField, MESSAGE_DEADLINE_MARGIN};
pub use policy::message_ids::MessageIds;
pub use policy::profile::{
    names, ProfileError, ProfileField, ProfileRule, ProfileViolation, TimeoutProfile,
    TimeoutProfileBuilder, STANDARD_PROFILES, UNIVERSAL_PROFILE,
};
pub use policy::progress::{Heard, ProgressMessage, ProgressRule};
pub use policy::retry::{RetryPolicy, RetryPolicyBuilder, RetryPolicyError};
pub use policy::source::Source;
pub use policy::streaming::StreamingTimeoutPolicy;
pub use policy::wrap_up::WrapUp;
pub use scope::{EnvelopeError, OperationBudget};
pub use timeout::{
    BoxError, CallHedging, CallProgress, CallRetry, CallStreamingPolicy, CallTimeout, ConfigWatch,
    CurrentProfiles, ReloadHandle, Reloaded, RetryBudget, TimeoutProfileLayer,
    TimeoutProfileService, ATTEMPTS_HEADER,
};
pub use wire::cancel::{CancelDetails, CANCEL_REASON};
pub use wire::details::{DetectedBy, TimeoutDetails, TIMEOUT_DOMAIN, TIMEOUT_REASON};
pub use wire::long_work::LongWorkDetails;
pub use wire::partial::{Partial, PARTIAL_KEY};

/// The closest of `candidates` to `word` when it is close enough to be a typo: the
/// "did you mean" of configuration errors, for the crate's own `sw4rm-timeouts`
/// command (not part of the API).
#[doc(hidden)]
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    config::did_you_mean(word, candidates)
}

// The versions the generated clients are built with: name these instead of adding
// your own `tonic` / `prost` dependency, and mismatched versions cannot happen.
pub use prost;
pub use prost_types;
pub use tonic;

/// The README's code, compiled as a doctest so it cannot drift from the API (in a
/// build with TLS, which its TLS section needs: the workspace's `cargo test`).
#[cfg(all(doctest, any(feature = "tls-ring", feature = "tls-aws-lc")))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
