//! [`TimeoutProfileService`]: per call, route the path to a profile, resolve the
//! effective timeout, write it as `grpc-timeout`, and start the timer.

use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::time::Instant;
use tonic::Status;
use tower_service::Service;

use super::call::{CallContext, RouteKey};
use super::future::ResponseFuture;
use super::shared::Shared;
use super::BoxError;
use crate::config::Field;
use crate::grpc_timeout::{self, GRPC_TIMEOUT};
use crate::message_deadline;
use crate::per_call::{CallStreamingPolicy, CallTimeout};
use crate::resolve::{resolve, Origin};
use crate::route::Matched;
use crate::streaming::{millis, stream_timers, TimerOrigin, Timers};

/// The service produced by [`super::TimeoutProfileLayer`].
#[derive(Clone, Debug)]
pub struct TimeoutProfileService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> TimeoutProfileService<S> {
    pub(crate) fn from_shared(inner: S, shared: Arc<Shared>) -> Self {
        TimeoutProfileService { inner, shared }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The profile table in use.
    pub fn profiles(&self) -> &crate::ProfileSet {
        &self.shared.profiles
    }
}

type Request = http::Request<tonic::body::Body>;

impl<S, ResBody> Service<Request> for TimeoutProfileService<S>
where
    S: Service<Request, Response = http::Response<ResBody>>,
    S::Error: Into<BoxError>,
    ResBody: http_body::Body,
    ResBody::Error: Into<BoxError>,
{
    type Response = http::Response<super::TimeoutBody<ResBody>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let start = Instant::now();
        let (mut parts, mut body) = req.into_parts();
        let shared = &self.shared;
        let profiles = &shared.profiles;

        let Some(lookup) = profiles.lookup(parts.uri.path()) else {
            return ResponseFuture::failed(Status::invalid_argument(format!(
                "request path {:?} is not a gRPC path (/package.Service/Method)",
                parts.uri.path()
            )));
        };
        let resolved_profile = profiles.get(lookup.profile);
        let profile = &resolved_profile.profile;
        // The RPC's span: clamp and timeout events are emitted inside it.
        let span = tracing::info_span!(
            "sw4rm_rpc",
            service = lookup.service,
            method = lookup.method,
            profile = %profile.name,
            timeout_ms = tracing::field::Empty,
            streaming = tracing::field::Empty,
        );
        let _entered = span.enter();
        let route = match lookup.matched {
            Matched::Exact(i) => RouteKey::Exact(i),
            Matched::Service | Matched::Fallback => {
                if lookup.matched == Matched::Fallback {
                    shared.note_unknown_path(parts.uri.path(), &profile.name);
                }
                match parts.uri.path_and_query() {
                    Some(p) => RouteKey::Path(p.clone()),
                    None => RouteKey::Path(http::uri::PathAndQuery::from_static("/")),
                }
            }
        };

        // Per-call value: typed extension first, then the grpc-timeout header.
        let per_call = match parts.extensions.get::<CallTimeout>() {
            Some(t) => Some(t.requested()),
            None => match parts.headers.get(GRPC_TIMEOUT) {
                None => None,
                Some(v) => match grpc_timeout::parse(v.as_bytes()) {
                    Ok(d) => Some(d),
                    Err(e) => {
                        return ResponseFuture::failed(Status::invalid_argument(e.to_string()))
                    }
                },
            },
        };
        let message = match (per_call, lookup.message_field) {
            (None, Some(field)) => message_deadline::peek(&mut body, field),
            _ => None,
        };
        let resolution = resolve(profile, per_call, message);
        if let (Some(bound), Some(requested)) = (resolution.bound, resolution.requested) {
            let source = match resolution.origin {
                Origin::Message => "message",
                _ => "per_call",
            };
            let bound_field = match bound {
                crate::Bound::Min => Field::Min,
                crate::Bound::Max => Field::Max,
                crate::Bound::Default => Field::Default,
            };
            let bound_source = &resolved_profile.sources[bound_field.index()];
            tracing::warn!(
                service = lookup.service,
                method = lookup.method,
                profile = %profile.name,
                requested_ms = millis(requested),
                effective_ms = resolution.effective.map_or(0, millis),
                bound = bound.as_str(),
                source,
                %bound_source,
                "SW4RM timeout override clamped to the profile's bounds"
            );
        }

        // Streams: three timers, the per-call policy over the profile's.
        let call_policy = parts.extensions.get::<CallStreamingPolicy>().map(|p| p.0);
        let streaming = lookup.streaming || call_policy.is_some();
        let (timers, timer_origins) = if streaming {
            let (timers, origins) = stream_timers(
                resolution.effective,
                resolved_profile.streaming,
                call_policy,
            );
            if timers.gap_clamped {
                tracing::warn!(
                    service = lookup.service,
                    method = lookup.method,
                    profile = %profile.name,
                    effective_ms = timers.total.map_or(0, millis),
                    bound = "total",
                    "SW4RM stream gap timeout clamped to the total timeout"
                );
            }
            (timers, origins)
        } else {
            (
                Timers::unary(resolution.effective),
                [TimerOrigin::Effective; 3],
            )
        };

        // The wire carries the whole-call deadline only (none for unlimited streams).
        match timers.total {
            Some(_) if !streaming && resolution.origin == Origin::Profile => {
                parts
                    .headers
                    .insert(GRPC_TIMEOUT, resolved_profile.default_header.clone());
            }
            Some(d) => {
                parts.headers.insert(GRPC_TIMEOUT, grpc_timeout::encode(d));
            }
            None => {
                parts.headers.remove(GRPC_TIMEOUT);
            }
        }

        // Before the response headers, the earliest of the initial and total timers.
        let first = timers.first();
        span.record("timeout_ms", timers.total.map(millis));
        span.record("streaming", streaming);
        drop(_entered);
        let call = CallContext::new(
            shared.clone(),
            start,
            lookup.profile,
            route,
            resolution.origin,
            timers,
            streaming,
            timer_origins,
            span,
        );
        ResponseFuture::new(
            self.inner.call(http::Request::from_parts(parts, body)),
            call,
            first,
        )
    }
}
