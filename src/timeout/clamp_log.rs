//! The warnings of what a call's plan clamped: SW4-002 §2.2's override clamp and
//! the stream rules' (gap and idle limit ≤ total), one set of fields for all three.
//! Cold: only a call with something clamped comes here.

use super::plan::CallPlan;
use crate::policy::streaming::millis;

impl CallPlan<'_> {
    /// [`CallPlan::log_clamps`] when something was clamped.
    #[cold]
    pub(super) fn log_clamped(&self, span: &tracing::Span, correlation: Option<&str>) {
        let profile = &self.profile.profile.name;
        let call = (self.route.service, self.route.method, profile);
        if let Some(c) = &self.decided.clamp {
            let bound_source = &self.profile.sources[c.bound.field().index()];
            call_event!(
                warn,
                span,
                correlation,
                (call.0, call.1, call.2),
                requested_ms = millis(c.requested),
                effective_ms = c.effective.map_or(0, millis),
                bound = c.bound.as_str(),
                rule = c.bound.rule(),
                source = c.requested_by.level(),
                %bound_source,
                "SW4RM timeout override clamped to the profile's bounds"
            );
        }
        // The stream clamps say what the override clamp says, field for field: what
        // was asked and by whom, what is used, the bound, the rule and its source.
        let total = self.decided.timers.total.as_ref();
        if let (Some(asked), Some(idle), Some(total)) = (
            &self.decided.idle_clamped,
            self.decided.timers.idle_limit(),
            total,
        ) {
            call_event!(
                warn,
                span,
                correlation,
                (call.0, call.1, call.2),
                requested_ms = millis(asked.limit()),
                effective_ms = millis(idle.limit()),
                bound = "total",
                rule = "a stream's idle limit is at most its total timeout (the cap)",
                source = asked.source.level(),
                bound_source = %total.source,
                "SW4RM stream idle limit above its cap: clamped to the cap"
            );
        }
        if let (Some(asked), Some(total)) = (&self.decided.gap_clamped, total) {
            call_event!(
                warn,
                span,
                correlation,
                (call.0, call.1, call.2),
                requested_ms = millis(asked.limit()),
                effective_ms = millis(total.limit()),
                bound = "total",
                rule = "a stream's gap timeout is at most its total timeout",
                source = asked.source.level(),
                bound_source = %total.source,
                "SW4RM stream gap timeout clamped to the total timeout"
            );
        }
    }
}
