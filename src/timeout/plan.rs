//! The call plan: everything the layer decides about one call before sending it, as
//! one pure function of the profile table, the request head and the message's own
//! timeout. No clock, no I/O: the service only carries the plan out. A call that
//! brings nothing of its own (no per-call value, no message timeout, no scope) is
//! planned by its route alone: that plan ([`RoutePlan`]) is made once per route and
//! copied.

use std::time::Duration;

use tonic::Status;

use super::per_call::{Asked, CallHedging, CallOptions, CallRetry};
use super::stream_plan::{call_timers, Streamed};
use crate::attempts::{HedgePlan, RetryPlan, WireTimeout};
use crate::config::{ProfileSet, ResolvedProfile};
use crate::policy::deadline::{Cap, Timers};
use crate::policy::inherit::Propagation;
use crate::policy::message::MessageField;
use crate::policy::profile::ProfileField;
use crate::policy::progress::{ProgressRoutes, NO_PROGRESS_RULES};
use crate::policy::resolve::{resolve, Clamp};
use crate::policy::retry::first_timeout;
use crate::policy::route::Lookup;
use crate::policy::source::Source;
use crate::scope::{BudgetNow, Current, Tightened};
use crate::wire::grpc_timeout;

/// What the plan reads besides the request: the layer's settings and the caps of the
/// scope the call is made in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outer<'a> {
    /// Retries at all.
    pub(crate) retries: bool,
    /// Hedging at all.
    pub(crate) hedging: bool,
    /// The scope's caps at the call's start (`None` outside any scope).
    pub(crate) scope: Option<Current>,
    pub(crate) propagation: Propagation,
    /// Which messages of a stream are progress, by route.
    pub(crate) progress: &'a ProgressRoutes,
}

impl Default for Outer<'_> {
    fn default() -> Self {
        Outer {
            retries: false,
            hedging: false,
            scope: None,
            propagation: Propagation::default(),
            progress: &NO_PROGRESS_RULES,
        }
    }
}

/// What a plan decides of a call besides its route and profile: its timers, the
/// `grpc-timeout` it sends, how its attempts go out, and what the rules changed (to
/// log). For a call its route alone decides, a copy of the route's ([`RoutePlan`]).
#[derive(Clone, Debug)]
pub(crate) struct Decided {
    /// Watch the response body with the streaming timers.
    pub(crate) streaming: bool,
    /// The timers, each naming its source; `total` is the smallest cap.
    pub(crate) timers: Timers,
    /// The `grpc-timeout` to send.
    pub(crate) wire: WireTimeout,
    /// A request that SW4-002 §2.2 changed, to log.
    pub(crate) clamp: Option<Clamp>,
    /// A stream's gap timer as asked, when it was lowered to its total, to log
    /// (boxed, as the idle limit's).
    pub(crate) gap_clamped: Option<Box<Cap>>,
    /// A stream's idle limit as asked, when it was lowered to its total, to log
    /// (boxed: rare, and every call's plan would carry its 32 bytes).
    pub(crate) idle_clamped: Option<Box<Cap>>,
    /// How the call is retried; `None`: sent once (or hedged).
    pub(crate) retry: Option<RetryPlan>,
    /// How the call is hedged; `None`: one attempt at a time.
    pub(crate) hedge: Option<HedgePlan>,
}

/// A route's plan: what [`plan`] decides of a call that nothing but its route decides
/// (no per-call value, no `grpc-timeout` of the caller's, no message timeout to read,
/// made outside any scope). It is the same for every such call, so a layer makes it
/// once per route and copies it into each call ([`RoutePlan::call_plan`]), where
/// planning would resolve, clamp and derive it all again.
#[derive(Clone, Debug)]
pub(crate) struct RoutePlan(Decided);

impl RoutePlan {
    /// Whether a call on `route` with these `options`, `asked` and `scope` is planned
    /// by its route alone.
    #[inline]
    pub(crate) fn decides(
        route: &Lookup<'_>,
        options: CallOptions<'_>,
        asked: Asked,
        scope: Option<Current>,
    ) -> bool {
        options.is_none()
            && asked == Asked::default()
            && scope.is_none()
            && route.message_field.is_none()
    }

    /// The plan of `route` under the layer's settings (`outer`; its scope is not
    /// read).
    pub(crate) fn of(profiles: &ProfileSet, route: Lookup<'_>, outer: &Outer<'_>) -> Self {
        let outer = Outer {
            scope: None,
            ..*outer
        };
        let planned = plan(
            profiles,
            route,
            CallOptions::NONE,
            Asked::default(),
            &outer,
            |_| None,
        );
        RoutePlan(planned.decided)
    }

    /// What the route decides of its calls.
    #[inline(always)]
    pub(crate) fn decided(&self) -> &Decided {
        &self.0
    }

    /// Whether the route's calls are sent as this plan says with nothing of their
    /// own to set up: unary, not hedged, nothing clamped to log on each call.
    pub(crate) fn is_plain(&self) -> bool {
        let d = &self.0;
        !d.streaming
            && d.hedge.is_none()
            && d.clamp.is_none()
            && d.gap_clamped.is_none()
            && d.idle_clamped.is_none()
    }

    /// The plan of a call on `route` that the route alone decides
    /// ([`RoutePlan::decides`]): what [`plan`] would say, copied.
    #[inline]
    pub(crate) fn call_plan<'a>(
        &self,
        profiles: &'a ProfileSet,
        route: Lookup<'a>,
    ) -> CallPlan<'a> {
        CallPlan {
            route,
            profile: profiles.by_id(route.profile),
            decided: self.0.clone(),
            exhausted: false,
            budget: None,
        }
    }
}

/// The plan for one call.
#[derive(Debug)]
pub(crate) struct CallPlan<'a> {
    /// The route the path matched, borrowing the path.
    pub(crate) route: Lookup<'a>,
    /// The profile after every configuration level.
    pub(crate) profile: &'a ResolvedProfile,
    /// The call's timers, deadline header and attempts.
    pub(crate) decided: Decided,
    /// Too little of an inherited deadline or a budget is left: fail at once
    /// without sending.
    pub(crate) exhausted: bool,
    /// The budget at the call's start, when a budget caps the call.
    pub(crate) budget: Option<BudgetNow>,
}

/// The answer to a request path that is not `/package.Service/Method` (it has no
/// route): `INVALID_ARGUMENT`.
pub(crate) fn not_a_grpc_path(path: &str) -> Status {
    Status::invalid_argument(format!(
        "request path {path:?} is not a gRPC path (/package.Service/Method)"
    ))
}

/// Plans one call on its route: resolve (per-call > message > profile default,
/// clamped by SW4-002 §2.2), derive the timers, take the smallest cap, and choose the
/// wire header. `asked` is what the caller asked
/// ([`asked`](super::per_call::asked)); `message` reads the
/// request message's own timeout field when the route has one and no per-call value
/// was given.
pub(crate) fn plan<'a>(
    profiles: &'a ProfileSet,
    route: Lookup<'a>,
    options: CallOptions<'_>,
    asked: Asked,
    outer: &Outer<'_>,
    message: impl FnOnce(MessageField) -> Option<Duration>,
) -> CallPlan<'a> {
    let profile = profiles.by_id(route.profile);

    let Asked {
        per_call,
        from_header,
    } = asked;
    let from_message = match (per_call, route.message_field) {
        (None, Some(field)) => message(field),
        _ => None,
    };
    let resolved = resolve(
        &profile.profile,
        profile.default_source(),
        per_call,
        from_message,
    );

    let mut timers = call_timers(profile, &route, options, resolved.deadline, outer.progress);
    let streaming = timers.streaming;
    let clamp = resolved.clamp.or(timers.clamp.take());
    // The one rule for every cap: the smallest wins and names itself. An inherited
    // deadline and an operation budget only ever shrink the call's deadline.
    let Tightened { exhausted, budget } = match outer.scope {
        Some(scope) => scope.tighten(&mut timers.timers.total, &outer.propagation),
        None => Tightened::default(),
    };
    let Streamed {
        timers,
        gap_clamped,
        idle_clamped,
        ..
    } = timers;

    // Hedging (gRPC A6): concurrent attempts under the deadline above, instead of
    // retries. Retries (SW4-002 §5.2): the deadline above covers every attempt; an
    // attempt timeout below it is one more cap, on the first attempt only.
    let floor = || retry_floor(profile, &timers, &outer.propagation);
    let hedge = match outer.hedging && !streaming {
        true => hedge_plan(profile, options, route.idempotent, floor),
        false => None,
    };
    let retry = match outer.retries && hedge.is_none() {
        true => retry_plan(profile, options, route.idempotent, &timers, floor()),
        false => None,
    };
    let attempt = retry.as_ref().and_then(|r| r.first);

    let wire = wire_timeout(profile, timers.total.as_ref(), attempt, from_header);
    CallPlan {
        route,
        profile,
        decided: Decided {
            streaming,
            timers,
            wire,
            clamp,
            gap_clamped,
            idle_clamped,
            retry,
            hedge,
        },
        exhausted,
        budget,
    }
}

/// The `grpc-timeout` to send: the first attempt's timeout when it is a cap of its
/// own, else the call's deadline (the caller's header kept when it says it, the
/// profile's default as prebuilt text).
#[inline]
fn wire_timeout(
    profile: &ResolvedProfile,
    total: Option<&Cap>,
    attempt: Option<Duration>,
    from_header: Option<Duration>,
) -> WireTimeout {
    match (total, attempt) {
        (_, Some(attempt)) => WireTimeout::Set(grpc_timeout::encode_unique(attempt)),
        (None, None) => WireTimeout::Remove,
        (Some(cap), None) if from_header == Some(cap.limit()) => WireTimeout::Keep,
        (Some(cap), None) if cap.limit() == profile.profile.default_timeout() => {
            WireTimeout::Set(profile.default_header.clone())
        }
        (Some(cap), None) => WireTimeout::Set(grpc_timeout::encode_unique(cap.limit())),
    }
}

/// The least time a retry may run under. Under the call's own deadline: the profile's
/// minimum (SW4-002 §2.2 bounds what callers ask for). Under an inherited deadline or
/// a budget, which are limits, not requests (the call itself goes out below the
/// minimum): the propagation floor, the least any call is sent with.
fn retry_floor(profile: &ResolvedProfile, timers: &Timers, propagation: &Propagation) -> Duration {
    let limited = timers.total.as_ref().is_some_and(|c| c.source.is_limit());
    match limited {
        true => propagation.floor(),
        false => profile.profile.min_timeout(),
    }
}

/// The call's retry plan: the per-call policy or the profile's, the per-call
/// idempotency or the route's; `None` when the policy makes one attempt. No retry
/// runs under less than `floor`.
fn retry_plan(
    profile: &ResolvedProfile,
    options: CallOptions<'_>,
    route_idempotent: bool,
    timers: &Timers,
    floor: Duration,
) -> Option<RetryPlan> {
    let per_call = options.get::<CallRetry>();
    let call_policy = per_call.and_then(CallRetry::retry_policy);
    let policy = call_policy.unwrap_or(profile.retry);
    if !policy.is_on() {
        return None;
    }
    let deadline = timers.total.as_ref().map(|c| c.limit());
    let min_timeout = profile.profile.min_timeout();
    // Where the policy's attempt timeout came from, when it has one.
    let attempt_source = policy.attempt_timeout().map(|_| match call_policy {
        Some(_) => Source::PerCall,
        None => profile.sources[ProfileField::RetryAttemptTimeout.index()].clone(),
    });
    // The first attempt's timeout is a cap of its own only below the deadline.
    let first = first_timeout(&policy, deadline, min_timeout)
        .filter(|t| deadline.is_none_or(|d| *t < d))
        .filter(|_| attempt_source.is_some());
    Some(RetryPlan {
        policy,
        idempotent: per_call
            .and_then(CallRetry::is_idempotent)
            .unwrap_or(route_idempotent),
        min_timeout: floor,
        first,
        attempt_source,
    })
}

/// The call's hedging plan: the per-call policy or the profile's, for a call that may
/// be sent twice (the per-call idempotency or the route's); `None` otherwise.
fn hedge_plan(
    profile: &ResolvedProfile,
    options: CallOptions<'_>,
    route_idempotent: bool,
    floor: impl FnOnce() -> Duration,
) -> Option<HedgePlan> {
    let policy = options
        .get::<CallHedging>()
        .map_or(profile.hedging, CallHedging::hedging_policy);
    if !policy.is_on() {
        return None;
    }
    let idempotent = options
        .get::<CallRetry>()
        .and_then(CallRetry::is_idempotent)
        .unwrap_or(route_idempotent);
    idempotent.then(|| HedgePlan {
        policy,
        floor: floor(),
    })
}

impl CallPlan<'_> {
    /// The wire header, moved out (a clone of a fresh header value would allocate).
    pub(crate) fn take_wire(&mut self) -> WireTimeout {
        std::mem::replace(&mut self.decided.wire, WireTimeout::Keep)
    }

    /// Logs what SW4-002 §2.2 (or the stream gap ≤ total rule) changed, as warnings,
    /// inside the call's `span`, naming the request's `correlation` id.
    #[inline]
    pub(crate) fn log_clamps(&self, span: &tracing::Span, correlation: Option<&str>) {
        if self.decided.clamp.is_some()
            || self.decided.idle_clamped.is_some()
            || self.decided.gap_clamped.is_some()
        {
            self.log_clamped(span, correlation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::deadline::Phase;
    use crate::policy::resolve::Bound;
    use crate::policy::source::Source;
    use crate::policy::streaming::StreamingTimeoutPolicy;
    use crate::timeout::per_call::CallStreamingPolicy;
    use crate::timeout::per_call::{asked, CallTimeout};
    use crate::wire::grpc_timeout::GRPC_TIMEOUT;
    use http::HeaderMap;
    use http::HeaderValue;

    const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
    const WAIT: &str = "/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision";
    const STREAM: &str = "/sw4rm.tool.ToolService/CallStream";

    /// The route of a gRPC path in `set`.
    fn route<'a>(set: &'a ProfileSet, path: &'a str) -> Lookup<'a> {
        set.lookup(path).expect("a gRPC path")
    }

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// The plan of a call to `path` with the per-call values in `ext`, outside any
    /// scope.
    fn plan_of<'a>(set: &'a ProfileSet, path: &'a str, ext: &http::Extensions) -> CallPlan<'a> {
        plan(
            set,
            route(set, path),
            CallOptions::of(ext),
            asked(CallOptions::of(ext), &HeaderMap::new()).unwrap(),
            &Outer::default(),
            |_| None,
        )
    }

    /// One row: the request, then what the plan must say.
    struct Row {
        name: &'static str,
        path: &'static str,
        header: Option<&'static str>,
        call_timeout: Option<CallTimeout>,
        stream_policy: Option<StreamingTimeoutPolicy>,
        message: Option<Duration>,
        deadline: Option<(Duration, Source)>,
        wire: Option<&'static str>,
        clamp: Option<Bound>,
        streaming: bool,
    }

    const BASE: Row = Row {
        name: "",
        path: HEARTBEAT,
        header: None,
        call_timeout: None,
        stream_policy: None,
        message: None,
        deadline: None,
        wire: None,
        clamp: None,
        streaming: false,
    };

    fn profiles() -> ProfileSet {
        ProfileSet::builder()
            .without_global()
            .default_timeout_ms("workflow_status", 2_000)
            .route("/acme.Batch/*", "workflow_status")
            .build()
            .unwrap()
    }

    #[test]
    fn a_per_call_stream_total_is_clamped_like_any_per_call_timeout() {
        let set = ProfileSet::standard();
        // tool_call: 1 s to 1 h.
        let rows = [
            (7_200_000, ms(3_600_000), Some(Bound::Max)),
            (10, ms(1_000), Some(Bound::Min)),
            (60_000, ms(60_000), None),
        ];
        for (total, want, bound) in rows {
            let mut ext = http::Extensions::new();
            ext.insert(CallStreamingPolicy(StreamingTimeoutPolicy {
                initial_timeout_ms: 0,
                message_gap_timeout_ms: 5_000,
                total_timeout_ms: total,
                idle_timeout_ms: 0,
            }));
            let p = plan_of(&set, STREAM, &ext);
            let t = p.decided.timers.total.clone().unwrap();
            assert_eq!((t.limit(), t.source), (want, Source::PerCall), "{total}");
            assert_eq!(p.decided.clamp.map(|c| c.bound), bound, "{total}");
            assert!(
                p.decided.timers.gap().unwrap().limit() <= want,
                "gap within the total"
            );
        }
    }

    #[test]
    fn scope_caps_only_shrink_and_name_themselves() {
        let set = profiles();
        // Heartbeat: 5 s default, 1 s minimum.
        struct Row {
            name: &'static str,
            inherited: Option<Duration>,
            budget: Option<Duration>,
            total: (Duration, Source),
            exhausted: bool,
        }
        let rows = [
            Row {
                name: "no scope: the profile",
                inherited: None,
                budget: None,
                total: (ms(5_000), Source::Standard),
                exhausted: false,
            },
            Row {
                name: "inherited, less the 5 ms hop offset",
                inherited: Some(ms(2_000)),
                budget: None,
                total: (ms(1_995), Source::Inherited),
                exhausted: false,
            },
            Row {
                name: "below the profile minimum: not raised",
                inherited: Some(ms(300)),
                budget: None,
                total: (ms(295), Source::Inherited),
                exhausted: false,
            },
            Row {
                name: "larger than the profile: the profile",
                inherited: Some(ms(60_000)),
                budget: None,
                total: (ms(5_000), Source::Standard),
                exhausted: false,
            },
            Row {
                name: "budget smaller than inherited",
                inherited: Some(ms(3_000)),
                budget: Some(ms(1_000)),
                total: (ms(1_000), Source::Budget),
                exhausted: false,
            },
            Row {
                name: "nothing inherited left",
                inherited: Some(ms(2)),
                budget: None,
                total: (ms(0), Source::Inherited),
                exhausted: true,
            },
            Row {
                name: "budget spent",
                inherited: None,
                budget: Some(ms(0)),
                total: (ms(0), Source::Budget),
                exhausted: true,
            },
        ];
        // The Heartbeat's plan inside a scope: its deadline and source, whether it is
        // exhausted, and the budget's paused time.
        let in_scope = |scope: Current| {
            let outer = Outer {
                scope: Some(scope),
                ..Outer::default()
            };
            let p = heartbeat_plan(&set, &outer);
            let total = p
                .decided
                .timers
                .total
                .clone()
                .map(|c| (c.limit(), c.source));
            (total, p.exhausted, p.budget.map(|b| b.paused))
        };
        for row in rows {
            let (total, exhausted, paused) = in_scope(Current {
                inherited: row.inherited,
                budget: row.budget.map(|remaining| BudgetNow {
                    remaining,
                    paused: ms(7),
                    ran: ms(9),
                }),
                delegation: None,
            });
            assert_eq!(total, Some(row.total.clone()), "{}", row.name);
            assert_eq!(exhausted, row.exhausted, "{}", row.name);
            assert_eq!(
                paused,
                (row.total.1 == Source::Budget).then_some(ms(7)),
                "{}",
                row.name
            );
        }
        // A budget read from a handoff's envelope names itself, and keeps its paused
        // time like any budget.
        let (total, _, paused) = in_scope(Current {
            inherited: None,
            budget: Some(BudgetNow {
                remaining: ms(1_000),
                paused: ms(7),
                ran: ms(9),
            }),
            delegation: Some(Default::default()),
        });
        assert_eq!(total, Some((ms(1_000), Source::BudgetEnvelope)));
        assert_eq!(paused, Some(ms(7)));
    }

    /// The plan of a plain Heartbeat under `outer`.
    fn heartbeat_plan<'a>(set: &'a ProfileSet, outer: &Outer) -> CallPlan<'a> {
        plan(
            set,
            route(set, HEARTBEAT),
            CallOptions::of(&Default::default()),
            asked(CallOptions::of(&Default::default()), &HeaderMap::new()).unwrap(),
            outer,
            |_| None,
        )
    }

    /// A retry under an inherited deadline may run down to the propagation floor; under
    /// the call's own deadline, down to the profile's minimum.
    #[test]
    fn the_retry_floor_under_a_scope_is_the_propagation_floor() {
        let set = ProfileSet::standard();
        let floor = |scope: Option<Current>| {
            let outer = Outer {
                retries: true,
                scope,
                ..Outer::default()
            };
            heartbeat_plan(&set, &outer)
                .decided
                .retry
                .map(|r| r.min_timeout)
        };
        let inherited = |left| Current {
            inherited: Some(left),
            budget: None,
            delegation: None,
        };
        assert_eq!(floor(None), Some(ms(1_000)), "the heartbeat's minimum");
        assert_eq!(
            floor(Some(inherited(ms(600)))),
            Some(ms(1)),
            "below the minimum"
        );
        // An inherited deadline above the profile's own leaves the profile in charge.
        assert_eq!(floor(Some(inherited(ms(60_000)))), Some(ms(1_000)));
    }

    #[test]
    fn plan_table() {
        let rows = [
            Row {
                name: "standard default",
                deadline: Some((ms(5_000), Source::Standard)),
                wire: Some("5000000u"),
                ..BASE
            },
            Row {
                name: "client default on a service route",
                path: "/acme.Batch/Run",
                deadline: Some((ms(2_000), Source::Client)),
                wire: Some("2000000u"),
                ..BASE
            },
            Row {
                name: "fallback profile",
                path: "/other.Service/Method",
                deadline: Some((ms(30_000), Source::Standard)),
                wire: Some("30000000u"),
                ..BASE
            },
            Row {
                name: "set_timeout inside the bounds keeps the caller's header",
                header: Some("2000m"),
                deadline: Some((ms(2_000), Source::PerCall)),
                wire: Some("2000m"),
                ..BASE
            },
            Row {
                name: "set_timeout below min is raised (§2.2)",
                header: Some("200000u"),
                deadline: Some((ms(1_000), Source::PerCall)),
                wire: Some("1000000u"),
                clamp: Some(Bound::Min),
                ..BASE
            },
            Row {
                name: "CallTimeout above max is lowered (§2.2)",
                call_timeout: Some(CallTimeout::After(Duration::MAX)),
                deadline: Some((ms(30_000), Source::PerCall)),
                wire: Some("30000000u"),
                clamp: Some(Bound::Max),
                ..BASE
            },
            Row {
                name: "the largest grpc-timeout a header can say is clamped",
                header: Some("99999999H"),
                deadline: Some((ms(30_000), Source::PerCall)),
                wire: Some("30000000u"),
                clamp: Some(Bound::Max),
                ..BASE
            },
            Row {
                name: "infinite where not allowed gives the default (§2.2)",
                call_timeout: Some(CallTimeout::Infinite),
                deadline: Some((ms(5_000), Source::PerCall)),
                wire: Some("5000000u"),
                clamp: Some(Bound::Default),
                ..BASE
            },
            Row {
                name: "infinite where allowed: no deadline, no header",
                path: WAIT,
                call_timeout: Some(CallTimeout::Infinite),
                ..BASE
            },
            Row {
                name: "a zero duration where infinite is allowed is the minimum, not no deadline",
                path: WAIT,
                call_timeout: Some(CallTimeout::After(Duration::ZERO)),
                deadline: Some((ms(30_000), Source::PerCall)),
                wire: Some("30000000u"),
                clamp: Some(Bound::Min),
                ..BASE
            },
            Row {
                name: "set_timeout(ZERO) where infinite is allowed is the minimum too",
                path: WAIT,
                header: Some("0m"),
                deadline: Some((ms(30_000), Source::PerCall)),
                wire: Some("30000000u"),
                clamp: Some(Bound::Min),
                ..BASE
            },
            Row {
                name: "the extension wins over the header",
                path: WAIT,
                header: Some("45S"),
                call_timeout: Some(CallTimeout::After(ms(40_000))),
                deadline: Some((ms(40_000), Source::PerCall)),
                wire: Some("40000000u"),
                ..BASE
            },
            Row {
                name: "message field plus margin",
                path: WAIT,
                message: Some(ms(90_000)),
                deadline: Some((ms(91_000), Source::Message)),
                wire: Some("91000000u"),
                ..BASE
            },
            Row {
                name: "per-call wins over the message field",
                path: WAIT,
                header: Some("60S"),
                message: Some(ms(90_000)),
                deadline: Some((ms(60_000), Source::PerCall)),
                wire: Some("60S"),
                ..BASE
            },
            Row {
                name: "message field below min is raised",
                path: WAIT,
                message: Some(ms(1_000)),
                deadline: Some((ms(30_000), Source::Message)),
                wire: Some("30000000u"),
                clamp: Some(Bound::Min),
                ..BASE
            },
            Row {
                name: "a stream without a total sends no deadline",
                path: STREAM,
                streaming: true,
                ..BASE
            },
            Row {
                name: "a stream's per-call total goes on the wire",
                path: STREAM,
                stream_policy: Some(StreamingTimeoutPolicy {
                    total_timeout_ms: 9_000,
                    ..Default::default()
                }),
                deadline: Some((ms(9_000), Source::PerCall)),
                wire: Some("9000000u"),
                streaming: true,
                ..BASE
            },
            Row {
                name: "a stream policy makes any route streaming",
                stream_policy: Some(StreamingTimeoutPolicy::default()),
                streaming: true,
                ..BASE
            },
        ];
        let set = profiles();
        for row in rows {
            let mut headers = HeaderMap::new();
            if let Some(h) = row.header {
                headers.insert(GRPC_TIMEOUT, HeaderValue::from_static(h));
            }
            let mut ext = http::Extensions::new();
            if let Some(t) = row.call_timeout {
                ext.insert(t);
            }
            if let Some(p) = row.stream_policy {
                ext.insert(CallStreamingPolicy(p));
            }
            let p = plan(
                &set,
                route(&set, row.path),
                CallOptions::of(&ext),
                asked(CallOptions::of(&ext), &headers).unwrap(),
                &Outer::default(),
                |_| row.message,
            );
            let deadline = p
                .decided
                .timers
                .total
                .clone()
                .map(|c| (c.limit(), c.source));
            assert_eq!(deadline, row.deadline, "{}: deadline", row.name);
            p.decided.wire.clone().apply(&mut headers);
            let sent = headers.get(GRPC_TIMEOUT).map(|v| v.to_str().unwrap());
            assert_eq!(sent, row.wire, "{}: wire", row.name);
            assert_eq!(
                p.decided.clamp.map(|c| c.bound),
                row.clamp,
                "{}: clamp",
                row.name
            );
            assert_eq!(
                p.decided.streaming, row.streaming,
                "{}: streaming",
                row.name
            );
        }
    }

    /// A route's plan is what planning says of a call with nothing of its own, on
    /// every kind of route (unary, stream, message timeout, whole-service, fallback),
    /// with retries, attempt timeouts, hedging and stream policies from the profiles,
    /// under each of the layer's retry and hedging settings.
    #[test]
    fn a_route_plan_is_the_plan_of_a_call_with_nothing_of_its_own() {
        use crate::policy::streaming::StreamingTimeoutPolicy;
        use crate::HedgingPolicy;
        use crate::RetryPolicy;
        let attempt = RetryPolicy::builder()
            .max_attempts(3)
            .attempt_timeout(ms(2_000))
            .build()
            .unwrap();
        let hedged = HedgingPolicy::builder()
            .max_attempts(2)
            .learned_delay(95)
            .build()
            .unwrap();
        let gap = StreamingTimeoutPolicy {
            message_gap_timeout_ms: 5_000,
            total_timeout_ms: 10_000,
            idle_timeout_ms: 30_000,
            ..Default::default()
        };
        let configured = ProfileSet::builder()
            .without_global()
            .default_timeout_ms("workflow_status", 2_000)
            .route("/acme.Batch/*", "workflow_status")
            .retry("heartbeat", attempt)
            .hedging("workflow_status", hedged)
            .streaming("tool_call", gap)
            .build()
            .unwrap();
        let paths = [
            HEARTBEAT,
            WAIT,
            STREAM,
            "/sw4rm.workflow.WorkflowService/GetWorkflowState",
            "/acme.Batch/Run",
            "/other.Svc/Do",
        ];
        let mut planned = 0;
        for set in [ProfileSet::standard(), configured] {
            for (retries, hedging) in [(true, true), (true, false), (false, true), (false, false)] {
                let outer = Outer {
                    retries,
                    hedging,
                    ..Outer::default()
                };
                for path in paths {
                    let route = route(&set, path);
                    let none = CallOptions::NONE;
                    let fresh = plan(&set, route, none, Asked::default(), &outer, |_| None);
                    let copied = RoutePlan::of(&set, route, &outer).call_plan(&set, route);
                    assert_eq!(format!("{copied:?}"), format!("{fresh:?}"), "{path}");
                    planned +=
                        usize::from(fresh.decided.retry.is_some() || fresh.decided.hedge.is_some());
                }
            }
        }
        // The table above has retried and hedged routes in it.
        assert!(planned > 0);
    }

    /// Only a call with nothing of its own is planned by its route.
    #[test]
    fn only_a_call_with_nothing_of_its_own_is_planned_by_its_route() {
        let set = ProfileSet::standard();
        let beat = route(&set, HEARTBEAT);
        let none = CallOptions::NONE;
        assert!(RoutePlan::decides(&beat, none, Asked::default(), None));
        let mut ext = http::Extensions::new();
        ext.insert(CallTimeout::After(ms(700)));
        assert!(!RoutePlan::decides(
            &beat,
            CallOptions::of(&ext),
            Asked::default(),
            None
        ));
        let mut head = HeaderMap::new();
        head.insert(GRPC_TIMEOUT, HeaderValue::from_static("700m"));
        let written = asked(none, &head).unwrap();
        assert!(!RoutePlan::decides(&beat, none, written, None));
        let scope = Current {
            inherited: Some(ms(700)),
            budget: None,
            delegation: None,
        };
        assert!(!RoutePlan::decides(
            &beat,
            none,
            Asked::default(),
            Some(scope)
        ));
        // A route that reads its message's timeout is planned per call.
        let wait = route(&set, WAIT);
        assert!(!RoutePlan::decides(&wait, none, Asked::default(), None));
    }

    #[test]
    fn stream_timers_name_their_sources() {
        let set = ProfileSet::builder()
            .without_global()
            .streaming(
                "tool_call",
                StreamingTimeoutPolicy {
                    initial_timeout_ms: 0,
                    message_gap_timeout_ms: 500,
                    total_timeout_ms: 0,
                    idle_timeout_ms: 0,
                },
            )
            .build()
            .unwrap();
        let p = plan(
            &set,
            route(&set, STREAM),
            CallOptions::of(&Default::default()),
            asked(CallOptions::of(&Default::default()), &HeaderMap::new()).unwrap(),
            &Outer::default(),
            |_| None,
        );
        let due =
            |t: Option<&crate::policy::deadline::Cap>| t.cloned().map(|c| (c.limit(), c.source));
        assert_eq!(
            due(p.decided.timers.initial()),
            Some((ms(30_000), Source::Standard))
        );
        assert_eq!(due(p.decided.timers.gap()), Some((ms(500), Source::Client)));
        assert_eq!(p.decided.timers.total, None);
        let first = p.decided.timers.next(Default::default()).unwrap();
        assert_eq!((first.at, first.phase), (ms(30_000), Phase::Initial));
    }

    /// The caller's `grpc-timeout` is found among a few headers (compared by name)
    /// and among many (looked up), and the first of two values is the one read, as a
    /// lookup reads it.
    #[test]
    fn bad_input_is_invalid_argument_before_any_plan() {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_static("5x"));
        let err = asked(CallOptions::of(&Default::default()), &headers).unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(
            err.message()
                .contains("malformed grpc-timeout header \"5x\""),
            "{}",
            err.message()
        );
        let err = not_a_grpc_path("/nope");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("\"/nope\""));
    }

    /// A per-call stream total alone lowers the standard table's gap in silence (no
    /// one set it); a gap the caller set above the total is said.
    #[test]
    fn only_a_gap_someone_set_is_said_to_be_clamped() {
        let set = ProfileSet::standard();
        // (the per-call gap, said)
        for (gap_ms, said) in [(0, false), (20_000, true)] {
            let mut ext = http::Extensions::new();
            let mut policy = CallStreamingPolicy::default().with_total(ms(10_000));
            policy.0.message_gap_timeout_ms = gap_ms;
            ext.insert(policy);
            let p = plan_of(&set, STREAM, &ext);
            assert!(
                p.decided.timers.gap().unwrap().limit() <= ms(10_000),
                "{gap_ms}"
            );
            assert_eq!(p.decided.gap_clamped.is_some(), said, "{gap_ms}");
        }
    }

    /// A value unique to the call goes never-indexed; a profile's default, which
    /// repeats call after call, stays indexable (HPACK).
    #[test]
    fn only_a_calls_own_grpc_timeout_is_never_indexed() {
        let set = ProfileSet::standard();
        let sensitive = |ext: &http::Extensions| match plan_of(&set, HEARTBEAT, ext).take_wire() {
            WireTimeout::Set(v) => v.is_sensitive(),
            other => panic!("{other:?}"),
        };
        assert!(
            !sensitive(&http::Extensions::new()),
            "the profile's default"
        );
        let mut ext = http::Extensions::new();
        ext.insert(CallTimeout::After(ms(2_000)));
        assert!(sensitive(&ext), "a per-call value");
    }
}
