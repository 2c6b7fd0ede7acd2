//! The record's clock: where a call's timers are (its route's plan, or its own),
//! and what they say — the call's deadlines for the engine, the next timer to fire,
//! the phase a server's timeout names, the progress rule, the span steps run in.

use tokio::time::Instant;

use super::Record;
use crate::attempts::Deadlines;
use crate::policy::deadline::{Due, Phase, Received, Timers};
use crate::timeout::plan::RoutePlan;
use std::sync::Arc;

/// A span entered by its id, exited when dropped (on an unwind too).
struct Entered {
    id: tracing::span::Id,
    dispatch: tracing::Dispatch,
}

impl Entered {
    #[inline]
    fn enter(span: &tracing::Span) -> Option<Self> {
        let (id, dispatch) =
            span.with_subscriber(|(id, dispatch)| (id.clone(), dispatch.clone()))?;
        dispatch.enter(&id);
        Some(Entered { id, dispatch })
    }
}

impl Drop for Entered {
    #[inline]
    fn drop(&mut self) {
        self.dispatch.exit(&self.id);
    }
}

/// Where a call's timers are: in its route's plan, or its own.
#[derive(Debug)]
pub(super) enum CallTimers {
    /// The route's plan decided the call alone (the `Arc` the layer's per-path store
    /// hands back): nothing copied per call.
    Route(Arc<RoutePlan>),
    /// The call's own plan made them.
    Own(Timers),
}

impl CallTimers {
    #[inline(always)]
    pub(super) fn get(&self) -> &Timers {
        match self {
            CallTimers::Route(plan) => &plan.decided().timers,
            CallTimers::Own(timers) => timers,
        }
    }
}

impl Record {
    /// The call's timers.
    #[inline(always)]
    pub(super) fn timers(&self) -> &Timers {
        self.timers.get()
    }

    /// The call's deadlines as values, for the engine.
    #[inline]
    pub(crate) fn deadlines(&self) -> Deadlines {
        let timers = self.timers();
        Deadlines {
            start: self.start,
            total: timers.total.as_ref().map(|cap| cap.limit()),
            first: timers.next(Received::default()),
            server_phase: timers.server_phase(0),
        }
    }

    /// The phase to report when the server says its deadline passed, after `messages`.
    pub(crate) fn server_phase(&self, messages: u64) -> Phase {
        self.timers().server_phase(messages)
    }

    /// The call's `sw4rm_rpc` span (disabled when its level is off). A step of the
    /// call is run inside it, so that events of the transport and of the caller's code
    /// while the call is polled are correlated to it (as tower-http's trace body does);
    /// entering a disabled span does nothing. Whether it is on never changes what the
    /// call does, only where its events are logged.
    #[inline(always)]
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Runs `f` with the record inside the call's span ([`Record::span`]). The
    /// record is lent to the step, so the guard holds the span's id and subscriber
    /// rather than a clone of the span (a clone is a reference the subscriber counts,
    /// and closes, on every poll).
    #[inline(always)]
    pub(crate) fn in_span_mut<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        if self.span.is_disabled() {
            return f(self);
        }
        self.in_entered_span(f)
    }

    /// [`Record::in_span_mut`] with the span on: apart, so that the step's code
    /// with the span off stays as small as it was.
    #[inline(never)]
    fn in_entered_span<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let Some(entered) = Entered::enter(&self.span) else {
            return f(self);
        };
        let answer = f(self);
        drop(entered);
        answer
    }

    pub(crate) fn streaming(&self) -> bool {
        self.streaming
    }

    /// Which messages are progress (`None`: every message).
    pub(crate) fn progress_rule(&self) -> Option<&crate::policy::progress::ProgressRule> {
        self.timers().progress_rule()
    }

    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    /// The next timer to fire, placed on the clock.
    pub(crate) fn next_due(&self, progress: Received) -> Option<Due<Instant>> {
        let start = self.start;
        self.timers()
            .next(progress)
            .map(|due| due.map(|after| start + after))
    }
}
