//! A call's timers: a unary call's deadline, or a stream's (the profile's streaming
//! policy under the per-call one, the route's progress rule, a per-call total clamped by SW4-002 §2.2, and what
//! the stream rules lowered, to log).

use std::time::Duration;

use super::per_call::{CallOptions, CallProgress, CallStreamingPolicy};
use crate::config::ResolvedProfile;
use crate::policy::deadline::{Cap, Timers};
use crate::policy::progress::ProgressRoutes;
use crate::policy::resolve::{apply_override, Clamp};
use crate::policy::route::Lookup;
use crate::policy::source::Source;
use crate::policy::streaming::{lower_to, stream_timers, StreamingTimeoutPolicy};

/// A call's timers before the scope's caps: a unary call's deadline, or a stream's
/// timers (the profile's, the per-call policy's, the route's progress rule), with
/// what the stream rules lowered, to log.
pub(super) struct Streamed {
    pub(super) timers: Timers,
    pub(super) streaming: bool,
    /// A per-call stream total that SW4-002 §2.2 changed.
    pub(super) clamp: Option<Clamp>,
    pub(super) gap_clamped: Option<Box<Cap>>,
    pub(super) idle_clamped: Option<Box<Cap>>,
}

/// The timers of a call on `route` whose resolved deadline is `deadline`.
#[inline]
pub(super) fn call_timers(
    profile: &ResolvedProfile,
    route: &Lookup<'_>,
    options: CallOptions<'_>,
    deadline: Option<Cap>,
    progress: &ProgressRoutes,
) -> Streamed {
    let call_policy = options.get::<CallStreamingPolicy>().map(|p| p.0);
    let streaming = route.streaming || call_policy.is_some();
    if !streaming {
        return Streamed {
            timers: Timers::unary(deadline),
            streaming,
            clamp: None,
            gap_clamped: None,
            idle_clamped: None,
        };
    }
    streamed(profile, route, options, deadline, progress, call_policy)
}

/// The timers of a streaming call on `route` whose resolved deadline is `deadline`,
/// under the per-call policy `call_policy`.
fn streamed(
    profile: &ResolvedProfile,
    route: &Lookup<'_>,
    options: CallOptions<'_>,
    deadline: Option<Cap>,
    progress: &ProgressRoutes,
    call_policy: Option<StreamingTimeoutPolicy>,
) -> Streamed {
    let streaming = true;
    let st = stream_timers(
        deadline.as_ref(),
        profile.sourced_streaming(),
        call_policy,
        route.long_lived,
    );
    let rule = match options.get::<CallProgress>() {
        Some(call) => Some(call.0.clone()),
        None => progress.find(route.service, route.method).cloned(),
    };
    let mut timers = st.timers.with_progress_rule(rule);
    let mut gap_clamped = st.gap_clamped.map(Box::new);
    let mut idle_clamped = st.idle_clamped.map(Box::new);
    let mut clamp = None;
    let call_total = call_policy.map_or(0, |p| p.total_timeout_ms);
    if call_total > 0 {
        let requested = Duration::from_millis(u64::from(call_total));
        if let Some(total_clamp) = stream_total(profile, requested, &mut timers, &mut gap_clamped) {
            let total = timers.total.clone();
            if let Some(asked) = lower_to(timers.idle_limit_mut(), total.as_ref()) {
                idle_clamped = idle_clamped.or(Some(Box::new(asked)));
            }
            clamp = Some(total_clamp);
        }
    }
    Streamed {
        timers,
        streaming,
        clamp,
        gap_clamped,
        idle_clamped,
    }
}

/// A per-call stream total is a per-call timeout like any other: clamped into the
/// profile's bounds (SW4-002 §2.2), and the gap lowered to it. The initial and gap
/// timers are idle limits, not the call's deadline, and are left as asked. The clamp,
/// when the bounds changed the request.
fn stream_total(
    profile: &ResolvedProfile,
    requested: Duration,
    timers: &mut Timers,
    gap_clamped: &mut Option<Box<Cap>>,
) -> Option<Clamp> {
    let (Some(effective), Some(bound)) = apply_override(&profile.profile, requested) else {
        return None;
    };
    timers.total = Some(Cap::new(effective, Source::PerCall));
    if let Some(gap) = timers.gap_mut().filter(|g| g.limit() > effective) {
        *gap_clamped = gap.was_set().then(|| Box::new(gap.clone()));
        *gap = Cap::new(effective, Source::PerCall);
    }
    Some(Clamp {
        requested,
        effective: Some(effective),
        bound,
        requested_by: Source::PerCall,
    })
}
