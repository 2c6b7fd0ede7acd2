//! The record of one call in flight. It moves from the response future into the
//! response body, and emits its end event (duration metric, and for a timeout the
//! counter, the `warn!` and the status) exactly once: when the call finishes, times
//! out, or is dropped by the caller.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tonic::Status;

use super::shared::Shared;
use crate::details::{DetectedBy, Phase, TimeoutDetails};
use crate::metrics::attributes;
use crate::resolve::Origin;
use crate::route::{split_path, ProfileId};
use crate::streaming::{millis, TimerOrigin, Timers};

/// Which route table entry, or the path itself for service/fallback routes.
#[derive(Debug)]
pub(crate) enum RouteKey {
    Exact(usize),
    Path(http::uri::PathAndQuery),
}

#[derive(Debug)]
pub(crate) struct CallContext {
    shared: Arc<Shared>,
    pub(crate) start: Instant,
    profile: ProfileId,
    route: RouteKey,
    origin: Origin,
    pub(crate) timers: Timers,
    pub(crate) streaming: bool,
    /// Origins of the initial, gap and total timers (streams).
    timer_origins: [TimerOrigin; 3],
    pub(crate) span: tracing::Span,
    done: bool,
}

impl CallContext {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        shared: Arc<Shared>,
        start: Instant,
        profile: ProfileId,
        route: RouteKey,
        origin: Origin,
        timers: Timers,
        streaming: bool,
        timer_origins: [TimerOrigin; 3],
        span: tracing::Span,
    ) -> Self {
        CallContext {
            shared,
            start,
            profile,
            route,
            origin,
            timers,
            streaming,
            timer_origins,
            span,
            done: false,
        }
    }

    fn service_method(&self) -> (&str, &str) {
        match &self.route {
            RouteKey::Exact(i) => {
                split_path(&self.shared.profiles.routes.exact[*i].0).unwrap_or(("", ""))
            }
            RouteKey::Path(p) => split_path(p.path()).unwrap_or(("", "")),
        }
    }

    fn record(&self, timed_out: bool) {
        let Some(instruments) = &self.shared.instruments else {
            return;
        };
        let elapsed = self.start.elapsed();
        match &self.route {
            RouteKey::Exact(i) => {
                instruments.record(elapsed, timed_out, &self.shared.route_attrs[*i])
            }
            RouteKey::Path(_) => {
                let (service, method) = self.service_method();
                let attrs = attributes(
                    &self.shared.profiles.get(self.profile).profile.name,
                    service,
                    method,
                );
                instruments.record(elapsed, timed_out, &attrs);
            }
        }
    }

    /// The call finished (success or a non-timeout error).
    pub(crate) fn complete(&mut self) {
        if !self.done {
            self.done = true;
            self.record(false);
        }
    }

    fn source_text(&self, phase: Phase) -> String {
        let profile = self.shared.profiles.get(self.profile);
        let timer = match (self.streaming, phase) {
            (true, Phase::Initial) => self.timer_origins[0],
            (true, Phase::Gap) => self.timer_origins[1],
            (true, Phase::Total) => self.timer_origins[2],
            (false, _) => TimerOrigin::Effective,
        };
        match (timer, self.origin) {
            (TimerOrigin::PerCall, _) | (TimerOrigin::Effective, Origin::PerCall) => {
                "per_call".to_owned()
            }
            (TimerOrigin::Field(i), _) => profile.sources[i].to_string(),
            (TimerOrigin::Effective, Origin::Message) => "message".to_owned(),
            (TimerOrigin::Effective, Origin::Profile) => profile.default_source().to_string(),
        }
    }

    /// The call timed out: counts it, logs it and builds the status, once.
    pub(crate) fn timed_out(
        &mut self,
        phase: Phase,
        configured: Duration,
        messages: Option<u64>,
        detected_by: DetectedBy,
    ) -> Status {
        let elapsed = self.start.elapsed();
        let (service, method) = self.service_method();
        let details = TimeoutDetails {
            profile_name: self
                .shared
                .profiles
                .get(self.profile)
                .profile
                .name
                .to_string(),
            configured_timeout_ms: millis(configured),
            elapsed_ms: millis(elapsed),
            service: service.to_owned(),
            method: method.to_owned(),
            source: self.source_text(phase),
            phase,
            message_count: messages,
            detected_by,
        };
        if !self.done {
            self.done = true;
            self.record(true);
            self.span.in_scope(|| {
                tracing::warn!(
                    service = %details.service,
                    method = %details.method,
                    profile = %details.profile_name,
                    configured_timeout_ms = details.configured_timeout_ms,
                    elapsed_ms = details.elapsed_ms,
                    phase = phase.as_str(),
                    source = %details.source,
                    detected_by = detected_by.as_str(),
                    "SW4RM RPC timed out"
                )
            });
        }
        details.to_status()
    }
}

impl Drop for CallContext {
    /// A call the caller abandoned still counts in the duration histogram.
    fn drop(&mut self) {
        self.complete();
    }
}

/// True when the error (or its sources) is tonic's transport timer firing.
pub(crate) fn is_transport_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if e.is::<tonic::TimeoutExpired>() {
            return true;
        }
        cur = e.source();
    }
    false
}

/// True when headers or trailers report that the server (or a proxy) ended the call
/// for its deadline: `grpc-status: 4` (DEADLINE_EXCEEDED), or `grpc-status: 1`
/// (CANCELLED, which is how tonic servers report their own deadline) once our
/// deadline has passed.
pub(crate) fn is_server_timeout(headers: &http::HeaderMap, deadline: Option<Instant>) -> bool {
    match headers.get("grpc-status").map(|v| v.as_bytes()) {
        Some(b"4") => true,
        Some(b"1") => deadline.is_some_and(|d| Instant::now() >= d),
        _ => false,
    }
}
