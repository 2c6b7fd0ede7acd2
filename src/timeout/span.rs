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
#[inline]
pub(super) fn rpc_span(
    settings: &Settings,
    route: &Lookup<'_>,
    profile: &ResolvedProfile,
    decided: &Decided,
) -> tracing::Span {
    // The first of `tracing`'s own checks, before the span's fields are gathered: no
    // subscriber wants the level (the span would be `Span::none()`).
    let level = settings.span_level;
    if level > tracing::level_filters::STATIC_MAX_LEVEL
        || level > tracing::level_filters::LevelFilter::current()
    {
        return tracing::Span::none();
    }
    made_span(settings, route, profile, decided)
}

/// [`rpc_span`] at a level some subscriber may want: out of line.
#[inline(never)]
fn made_span(
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

/// A field of the call's span recorded after the span is made (declared `Empty` by
/// [`rpc_span`] under the feature `otel`; without it, recording one does nothing).
#[cfg(feature = "otel")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Late {
    /// `sw4rm.attempts`: the attempts sent, when the call ends.
    Attempts,
    /// `sw4rm.hedges`: the hedges sent, as each is.
    Hedges,
    /// `sw4rm.timeout_phase`: which deadline fired.
    TimeoutPhase,
    /// `sw4rm.effect`: what the timeout left behind.
    Effect,
    /// `rpc.response.status_code`: the final status's name.
    StatusCode,
    /// `error.type`: the final status's name, on a failure.
    ErrorType,
    /// `otel.status_code`: `ERROR`, on a failure.
    OtelStatus,
}

#[cfg(feature = "otel")]
impl Late {
    /// Each late field, in the order of [`Resolved::fields`].
    const ALL: [Late; 7] = [
        Late::Attempts,
        Late::Hedges,
        Late::TimeoutPhase,
        Late::Effect,
        Late::StatusCode,
        Late::ErrorType,
        Late::OtelStatus,
    ];

    /// The field's name on the span.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Late::Attempts => "sw4rm.attempts",
            Late::Hedges => "sw4rm.hedges",
            Late::TimeoutPhase => "sw4rm.timeout_phase",
            Late::Effect => "sw4rm.effect",
            Late::StatusCode => "rpc.response.status_code",
            Late::ErrorType => "error.type",
            Late::OtelStatus => "otel.status_code",
        }
    }
}

/// The late fields of one of [`rpc_span`]'s callsites (one a level), found by name
/// once: `tracing` finds a field named by a string by comparing it with each of the
/// span's twenty-odd names, on every record.
#[cfg(feature = "otel")]
struct Resolved {
    callsite: tracing::callsite::Identifier,
    fields: [Option<tracing::field::Field>; Late::ALL.len()],
}

/// Each level's callsite's late fields, found on the first record at that level.
#[cfg(feature = "otel")]
static RESOLVED: [std::sync::OnceLock<Resolved>; 5] = [const { std::sync::OnceLock::new() }; 5];

/// Records `value` as the call's `span`'s field `late` (nothing for a span no one
/// records, or one without that field). A span made where the first span recorded at
/// its level was made (every call's comes from [`rpc_span`]) records through the
/// fields found then; any other span, by the field's name.
#[cfg(feature = "otel")]
pub(crate) fn record_late(span: &tracing::Span, late: Late, value: impl tracing::Value) {
    let Some(meta) = span.metadata().filter(|_| !span.is_disabled()) else {
        return;
    };
    let at = match *meta.level() {
        tracing::Level::ERROR => 0,
        tracing::Level::WARN => 1,
        tracing::Level::INFO => 2,
        tracing::Level::DEBUG => 3,
        _ => 4,
    };
    let resolved = RESOLVED[at].get_or_init(|| Resolved {
        callsite: meta.callsite(),
        fields: Late::ALL.map(|late| meta.fields().field(late.name())),
    });
    if resolved.callsite != meta.callsite() {
        span.record(late.name(), value);
    } else if let Some(field) = &resolved.fields[late as usize] {
        span.record(field, value);
    }
}

#[cfg(all(test, feature = "otel"))]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing_subscriber::layer::{Context, SubscriberExt};

    use super::{record_late, Late};

    /// Each late value recorded, as `span name: field = value`.
    #[derive(Clone, Default)]
    struct Recorded(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorded {
        fn on_record(
            &self,
            id: &tracing::span::Id,
            values: &tracing::span::Record<'_>,
            _: Context<'_, S>,
        ) {
            struct Each<'a>(&'a mut Vec<String>, u64);
            impl Visit for Each<'_> {
                fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                    self.0
                        .push(format!("{}: {} = {value:?}", self.1, field.name()));
                }
            }
            values.record(&mut Each(&mut self.0.lock().unwrap(), id.into_u64()));
        }
    }

    /// Two spans at one level from two callsites, both with the late fields: whichever
    /// is recorded first has its callsite's fields found once, and the other is
    /// recorded by name; each value lands on its own span's field.
    #[test]
    fn a_late_field_lands_on_its_span_whichever_callsite_made_it() {
        let recorded = Recorded::default();
        let subscriber = tracing_subscriber::registry().with(recorded.clone());
        tracing::subscriber::with_default(subscriber, || {
            let make = |first: bool| match first {
                true => {
                    tracing::debug_span!("a", sw4rm.attempts = tracing::field::Empty, error.type = tracing::field::Empty)
                }
                false => {
                    tracing::debug_span!("b", error.type = tracing::field::Empty, sw4rm.attempts = tracing::field::Empty)
                }
            };
            let (a, b) = (make(true), make(false));
            let ids = [&a, &b].map(|s| s.id().unwrap().into_u64());
            record_late(&a, Late::Attempts, 2u32);
            record_late(&b, Late::Attempts, 3u32);
            record_late(&b, Late::ErrorType, "UNAVAILABLE");
            record_late(&a, Late::StatusCode, "OK");
            record_late(&tracing::Span::none(), Late::Attempts, 4u32);
            let seen = recorded.0.lock().unwrap().clone();
            let want = [
                format!("{}: sw4rm.attempts = 2", ids[0]),
                format!("{}: sw4rm.attempts = 3", ids[1]),
                format!("{}: error.type = \"UNAVAILABLE\"", ids[1]),
            ];
            assert_eq!(
                seen, want,
                "a span without `rpc.response.status_code` records none"
            );
        });
    }
}
