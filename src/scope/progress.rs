//! Progress reports from inside long work ([`progress`], [`progress_at`]), to the
//! guard the current task's scope names (its state is `work_state.rs`).

use super::task::with_current_work;

/// Reports that the long work the current task does has moved: the idle limit of its
/// [`super::LongWork`] guard starts again. Outside a guard it does nothing. Work moved
/// to another task reports too when it was wrapped with [`super::carry`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// use sw4rm_timeouts::scope::{self, LongWork};
/// let outcome = LongWork::new()
///     .idle_limit(Duration::from_secs(1))
///     .run(|_out: scope::Output<()>| async {
///         for _ in 0..3 {
///             scope::progress(); // a row parsed, a page fetched, a token generated...
///         }
///         "done"
///     })
///     .await;
/// assert_eq!(outcome.progress_count(), 3);
/// # }
/// ```
pub fn progress() {
    with_current_work(|w| w.report(None));
}

/// [`progress`] with a marker: how far the work has come (a frame number, a row, a
/// sequence number), reported in the details of a timeout.
pub fn progress_at(marker: u64) {
    with_current_work(|w| w.report(Some(marker)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::task::with_work;
    use crate::scope::work_state::WorkState;
    use std::sync::Arc;
    use tokio::time::Instant;

    #[tokio::test(start_paused = true)]
    async fn reports_reach_the_work_of_the_scope_and_nothing_outside_one() {
        // Outside any guard: nothing to report to, nothing happens.
        progress();
        progress_at(9);
        let work = Arc::new(WorkState::new(Instant::now()));
        with_work(work.clone(), async {
            progress();
            progress_at(4);
        })
        .await;
        assert_eq!((work.count(), work.marker()), (2, Some(4)));
    }
}
