//! An agent's health that follows its own heartbeats (SW4-003 §3, feature `health`):
//! the standard `grpc.health.v1.Health` service (tonic-health's) says NOT_SERVING once
//! the agent's heartbeats have failed for a while, and SERVING again when one succeeds.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

pub use tonic_health::server::{health_reporter, HealthReporter};
pub use tonic_health::ServingStatus;

/// How long heartbeats may fail before the agent says NOT_SERVING unless
/// [`HeartbeatHealth::unhealthy_after`] says otherwise: SW4-003's heartbeat freshness
/// objective (below 30 s).
pub const DEFAULT_UNHEALTHY_AFTER: Duration = Duration::from_secs(30);

/// The agent's health as its heartbeats tell it, published through tonic-health's
/// [`HealthReporter`] (feature `health`). Wrap each heartbeat in [`HeartbeatHealth::beat`]
/// (or give its outcome to [`HeartbeatHealth::record`]): once they have failed for
/// [`HeartbeatHealth::unhealthy_after`] without a success between, the service (the
/// whole server, `""`, unless [`HeartbeatHealth::for_service`] names one) is
/// NOT_SERVING; the first success makes it SERVING again. Clones share the state.
///
/// ```no_run
/// use std::time::Duration;
/// use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
/// use sw4rm_timeouts::scope::health::{health_reporter, HeartbeatHealth};
/// # async fn run(sw4rm: sw4rm_timeouts::Sw4rm) {
/// let (reporter, health_service) = health_reporter(); // serve it: `.add_service(health_service)`
/// let health = HeartbeatHealth::new(reporter).unhealthy_after(Duration::from_secs(20));
/// loop {
///     let _ = health.beat(sw4rm.registry().heartbeat(HeartbeatRequest::default())).await;
///     tokio::time::sleep(Duration::from_secs(5)).await;
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct HeartbeatHealth {
    reporter: HealthReporter,
    service: Arc<str>,
    unhealthy_after: Duration,
    failing_since: Arc<Mutex<Option<Instant>>>,
}

impl HeartbeatHealth {
    /// Health published through `reporter` (from [`health_reporter`]) for the whole
    /// server, NOT_SERVING after [`DEFAULT_UNHEALTHY_AFTER`] of failed heartbeats.
    pub fn new(reporter: HealthReporter) -> Self {
        HeartbeatHealth {
            reporter,
            service: "".into(),
            unhealthy_after: DEFAULT_UNHEALTHY_AFTER,
            failing_since: Arc::default(),
        }
    }

    /// Publishes for the service named `name` (`package.Service`) instead of the whole
    /// server.
    pub fn for_service(mut self, name: impl Into<String>) -> Self {
        self.service = name.into().into();
        self
    }

    /// How long heartbeats may fail, with no success between, before the agent says
    /// NOT_SERVING.
    pub fn unhealthy_after(mut self, after: Duration) -> Self {
        self.unhealthy_after = after;
        self
    }

    /// Runs the heartbeat `call` and records its outcome (a failure counted from when
    /// the call started), giving the outcome back.
    pub async fn beat<T>(
        &self,
        call: impl Future<Output = Result<T, tonic::Status>>,
    ) -> Result<T, tonic::Status> {
        let started = Instant::now();
        let outcome = call.await;
        self.noted(outcome.is_ok(), started).await;
        outcome
    }

    /// Records the outcome of a heartbeat that has just ended.
    pub async fn record<T>(&self, outcome: &Result<T, tonic::Status>) {
        self.noted(outcome.is_ok(), Instant::now()).await;
    }

    /// What the health service says now.
    pub fn status(&self) -> ServingStatus {
        verdict(self.failing(), Instant::now(), self.unhealthy_after)
    }

    fn failing(&self) -> Option<Instant> {
        *self
            .failing_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A success clears when the failing began; a failure keeps the first one's start.
    async fn noted(&self, ok: bool, started: Instant) {
        let since = {
            let mut since = self
                .failing_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match ok {
                true => *since = None,
                false => {
                    since.get_or_insert(started);
                }
            }
            *since
        };
        let status = verdict(since, Instant::now(), self.unhealthy_after);
        self.reporter
            .set_service_status(&*self.service, status)
            .await;
    }
}

/// The health rule: SERVING unless heartbeats have been failing since `since` for at
/// least `after` by `now`.
fn verdict(since: Option<Instant>, now: Instant, after: Duration) -> ServingStatus {
    match since {
        Some(since) if now.saturating_duration_since(since) >= after => ServingStatus::NotServing,
        _ => ServingStatus::Serving,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_rule() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let table = [
            (None, s(100), ServingStatus::Serving),
            (Some(t0), s(0), ServingStatus::Serving),
            (Some(t0), s(29), ServingStatus::Serving),
            (Some(t0), s(30), ServingStatus::NotServing),
            (Some(t0), s(31), ServingStatus::NotServing),
        ];
        for (since, at, expected) in table {
            assert_eq!(verdict(since, t0 + at, s(30)), expected, "{since:?} {at:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failures_count_from_the_first_and_a_success_clears_them() {
        let (reporter, _service) = health_reporter();
        let health = HeartbeatHealth::new(reporter).unhealthy_after(Duration::from_secs(10));
        let failed = || async { Err::<(), _>(tonic::Status::deadline_exceeded("late")) };
        let slow_fail = || async {
            tokio::time::sleep(Duration::from_secs(4)).await;
            Err::<(), _>(tonic::Status::deadline_exceeded("late"))
        };
        let _ = health.beat(slow_fail()).await; // failing since t0; 4 s in
        assert_eq!(health.status(), ServingStatus::Serving);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let _ = health.beat(failed()).await; // 9 s in
        assert_eq!(health.status(), ServingStatus::Serving);
        let _ = health.beat(slow_fail()).await; // 13 s since the first began
        assert_eq!(health.status(), ServingStatus::NotServing);
        let _ = health.beat(async { Ok::<(), tonic::Status>(()) }).await;
        assert_eq!(health.status(), ServingStatus::Serving);
        // A new failure starts a new count.
        let _ = health.beat(slow_fail()).await;
        assert_eq!(health.status(), ServingStatus::Serving);
    }
}
