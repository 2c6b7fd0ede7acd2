//! Routing and resolving a call allocate nothing: counted with a global allocator
//! (deterministic, unlike timing).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sw4rm_timeouts::{resolve, ProfileSet};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; it only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn route_and_resolve_do_not_allocate() {
    let set = ProfileSet::builder()
        .without_global()
        .route("/acme.Batch/*", "task_submit")
        .build()
        .unwrap();
    let paths = [
        "/sw4rm.registry.RegistryService/Heartbeat",
        "/sw4rm.tool.ToolService/CallStream",
        "/acme.Batch/Run",
        "/unknown.Service/Method",
        "",
    ];
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let mut total = Duration::ZERO;
    for _ in 0..1_000 {
        for path in paths {
            let p = set.profile_for_path(std::hint::black_box(path));
            let r = resolve(p, Some(Duration::from_millis(200)), None);
            total += r.effective.unwrap_or_default();
            let r = resolve(p, None, Some(Duration::from_secs(90)));
            total += r.effective.unwrap_or_default();
        }
    }
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    assert!(total > Duration::ZERO);
    assert_eq!(after - before, 0, "route + resolve allocated");
}
