//! Hostile durations and the check every hostile-duration test runs them through
//! (`tests/hostile_durations.rs` here and in `sw4rm-swarm`).
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

/// 0, 1 ns, `Duration::MAX` and `u64::MAX` ms: user input a setter must take.
pub const HOSTILE: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_nanos(1),
    Duration::MAX,
    Duration::from_millis(u64::MAX),
];

/// Runs `case` for `value` on a task of its own: a panic there fails with the
/// setter's name and value; so does work that does not end within `bound`.
pub async fn no_panic<F, Fut>(setter: &str, value: Duration, bound: Duration, case: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let ran = tokio::time::timeout(bound, tokio::spawn(case())).await;
    match ran {
        Ok(Ok(())) => {}
        Ok(Err(panic)) => panic!("{setter}({value:?}) panicked: {panic:?}"),
        Err(_) => panic!("{setter}({value:?}) did not end within {bound:?}"),
    }
}
