//! Route + resolve alone: path → profile, then the per-call resolution, for a
//! standard RPC, an RPC with a per-call override, and a path outside the table.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use sw4rm_timeouts::{resolve, GlobalConfig, ProfileSet};

fn bench(c: &mut Criterion) {
    let set = ProfileSet::builder()
        .without_global()
        .route("/acme.Batch/*", "task_submit")
        .build()
        .unwrap();
    let mut group = c.benchmark_group("route_resolve");
    group.bench_function("standard_default", |b| {
        b.iter(|| {
            let p = set.profile_for_path(black_box("/sw4rm.registry.RegistryService/Heartbeat"));
            resolve(p, None, None)
        })
    });
    group.bench_function("standard_per_call_clamped", |b| {
        b.iter(|| {
            let p = set.profile_for_path(black_box(
                "/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision",
            ));
            resolve(p, Some(black_box(Duration::from_millis(200))), None)
        })
    });
    // With the example global configuration and client settings on top: resolved once,
    // the per-call cost does not change.
    let global =
        GlobalConfig::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/sw4rm.toml"))
            .unwrap();
    let configured = ProfileSet::builder()
        .global(global)
        .max_timeout_ms("heartbeat", 25_000)
        .route("/acme.Batch/*", "batch")
        .build()
        .unwrap();
    group.bench_function("configured_default", |b| {
        b.iter(|| {
            let p =
                configured.profile_for_path(black_box("/sw4rm.registry.RegistryService/Heartbeat"));
            resolve(p, None, None)
        })
    });
    group.bench_function("service_wildcard", |b| {
        b.iter(|| {
            let p = set.profile_for_path(black_box("/acme.Batch/Run"));
            resolve(p, None, None)
        })
    });
    group.bench_function("fallback", |b| {
        b.iter(|| {
            let p = set.profile_for_path(black_box("/other.Service/Method"));
            resolve(p, None, None)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
