//! A streaming call's timers: the profile's streaming policy under the per-call
//! one, the route's progress rule, a per-call total clamped by SW4-002 §2.2, and what
//! the stream rules lowered (to log).

use std::time::Duration;

use super::per_call::{CallOptions, CallProgress};
use super::plan::{Outer, Streamed};
use crate::config::ResolvedProfile;
use crate::policy::deadline::{Cap, Timers};
use crate::policy::resolve::{apply_override, Clamp};
use crate::policy::route::Lookup;
use crate::policy::source::Source;
use crate::policy::streaming::{lower_to, stream_timers, StreamingTimeoutPolicy};

/// The timers of a streaming call on `route` whose resolved deadline is `deadline`,
/// under the per-call policy `call_policy`.
pub(super) fn streamed(
    profile: &ResolvedProfile,
    route: &Lookup<'_>,
    options: CallOptions<'_>,
    deadline: Option<Cap>,
    outer: &Outer<'_>,
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
        None => outer.progress.find(route.service, route.method).cloned(),
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
