//! The call's `sw4rm_rpc` span: named by its route, at the layer's level (a disabled
//! level costs nothing), with OpenTelemetry's RPC fields under the feature `otel`.

use super::plan::{Decided, RoutePlan};
use super::state::settings::Settings;
use super::state::shared::{Found, Shared};
use crate::config::ResolvedProfile;
use crate::policy::route::Lookup;
use crate::policy::streaming::millis;

/// The RPC's span (clamp and timeout events are emitted inside it), at the layer's
/// level: a disabled level costs nothing. With the feature `otel` it carries
/// OpenTelemetry's RPC fields too.
pub(super) fn rpc_span(
    settings: &Settings,
    route: &Lookup<'_>,
    profile: &ResolvedProfile,
    decided: &Decided,
) -> tracing::Span {
    macro_rules! span {
        ($make:ident $(, $($more:tt)+)?) => {
            tracing::$make!(
                "sw4rm_rpc",
                service = route.service,
                method = route.method,
                profile = %profile.profile.name,
                timeout_ms = decided.timers.total.as_ref().map(|c| millis(c.limit())),
                streaming = decided.streaming,
                // SW4-003's ids, from the request when it carries them.
                sw4rm.correlation_id = tracing::field::Empty,
                sw4rm.agent_id = tracing::field::Empty,
                sw4rm.task_id = tracing::field::Empty,
                $($($more)+)?
            )
        };
    }
    // With `otel`, OpenTelemetry's stable RPC conventions beside ours, as
    // tracing-opentelemetry maps them (the status fields and the attempts are recorded
    // when the call ends, the hedges as they are sent, the phase and effect of a
    // timeout when it fires).
    #[cfg(feature = "otel")]
    let title = crate::observe::span_name::Title {
        name: settings.span_name,
        service: route.service,
        method: route.method,
    };
    #[cfg(feature = "otel")]
    let server = settings.server.as_ref();
    #[cfg(feature = "otel")]
    macro_rules! fields {
        ($make:ident) => {
            span!(
                $make,
                otel.name = %title,
                otel.kind = "client",
                rpc.system.name = "grpc",
                rpc.method = %format_args!("{}/{}", route.service, route.method),
                server.address = server.map(|s| &*s.address),
                server.port = server.map(|s| s.port),
                // Where the timeout in force came from (`standard`, `inherited`, …).
                sw4rm.timeout_source = decided
                    .timers
                    .total
                    .as_ref()
                    .map(|c| tracing::field::display(&c.source)),
                sw4rm.attempts = tracing::field::Empty,
                sw4rm.hedges = tracing::field::Empty,
                sw4rm.timeout_phase = tracing::field::Empty,
                sw4rm.effect = tracing::field::Empty,
                rpc.response.status_code = tracing::field::Empty,
                error.type = tracing::field::Empty,
                otel.status_code = tracing::field::Empty,
            )
        };
    }
    #[cfg(not(feature = "otel"))]
    macro_rules! fields {
        ($make:ident) => {
            span!($make)
        };
    }
    match settings.span_level {
        tracing::Level::ERROR => fields!(error_span),
        tracing::Level::WARN => fields!(warn_span),
        tracing::Level::INFO => fields!(info_span),
        tracing::Level::DEBUG => fields!(debug_span),
        _ => fields!(trace_span),
    }
}

/// The span of a call its route alone plans ([`rpc_span`]).
#[inline(always)]
pub(super) fn route_span(shared: &Shared, found: &Found<'_>, plan: &RoutePlan) -> tracing::Span {
    let profile = shared.profiles.by_id(found.route.profile);
    rpc_span(&shared.settings, &found.route, profile, plan.decided())
}
