//! The embedded server under a long load holds a bounded call log: once the log is
//! full, the live heap grows by at most 16 bytes a call (the records are kept for the
//! last calls only). Counted with a global allocator (live bytes), not timed. One test
//! in its own binary, so that nothing else allocates meanwhile. Run with `MORE` =
//! 200,000 and the default log (10,000 records) it measured +16,264 bytes in all,
//! 0.08 a call (`benches/README.md`); the suite runs 20,000 calls over a 1,000-record
//! log, which shows the same bound in a tenth of the time.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::{Sw4rm, TimeoutProfileLayer};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// `n` heartbeats, 64 at a time.
async fn calls(sw4rm: &Sw4rm, n: usize) {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..n {
        if set.len() >= 64 {
            set.join_next().await.unwrap().unwrap();
        }
        let sw4rm = sw4rm.clone();
        let agent_id = format!("agent-{}", i % 100);
        set.spawn(async move {
            let request = HeartbeatRequest {
                agent_id,
                ..Default::default()
            };
            sw4rm.registry().heartbeat(request).await.unwrap();
        });
    }
    while let Some(done) = set.join_next().await {
        done.unwrap();
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_long_load_holds_a_bounded_call_log() {
    const KEPT: usize = 1_000;
    let server = TestServer::start().await.unwrap();
    server.keep_calls(KEPT);
    let layer = TimeoutProfileLayer::standard().without_metrics();
    let sw4rm = Sw4rm::connect_with(server.url(), layer).await.unwrap();
    // The log fills up: from then on every call drops the oldest record.
    calls(&sw4rm, 2 * KEPT).await;
    let before = LIVE.load(Ordering::Relaxed);
    const MORE: usize = 20_000;
    calls(&sw4rm, MORE).await;
    let grown = LIVE.load(Ordering::Relaxed) - before;
    let per_call = grown as f64 / MORE as f64;
    println!("live heap after {MORE} more calls: {grown:+} bytes, {per_call:.2} per call");
    assert!(per_call <= 16.0, "{per_call} bytes per call");
    let kept = server.calls();
    assert_eq!(kept.len(), KEPT);
    let last = 2 * KEPT + MORE - 1;
    assert_eq!(kept.last().map(|c| c.id), Some(last));
    // Taking the log empties it; ids go on counting.
    assert_eq!(server.take_calls().len(), KEPT);
    assert!(server.calls().is_empty());
}
