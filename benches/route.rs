//! Routing alone: path → profile, for a standard RPC, a configured table, a
//! whole-service route and a path outside the table. The whole per-call plan
//! (routing, resolution, timers, header) is measured by `benches/layer.rs`.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use sw4rm_timeouts::{GlobalConfig, ProfileSet};

fn bench(c: &mut Criterion) {
    let set = ProfileSet::builder()
        .without_global()
        .route("/acme.Batch/*", "task_submit")
        .build()
        .unwrap();
    let mut group = c.benchmark_group("route");
    group.bench_function("standard_default", |b| {
        b.iter(|| set.profile_for_path(black_box("/sw4rm.registry.RegistryService/Heartbeat")))
    });
    group.bench_function("standard_long_path", |b| {
        b.iter(|| {
            set.profile_for_path(black_box(
                "/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision",
            ))
        })
    });
    // With the example global configuration and client settings on top: resolved once,
    // the per-call cost does not change.
    let global = GlobalConfig::from_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../sw4rm.example.toml"
    ))
    .unwrap();
    let configured = ProfileSet::builder()
        .global(global)
        .max_timeout_ms("heartbeat", 25_000)
        .route("/acme.Batch/*", "batch")
        .build()
        .unwrap();
    group.bench_function("configured_default", |b| {
        b.iter(|| {
            configured.profile_for_path(black_box("/sw4rm.registry.RegistryService/Heartbeat"))
        })
    });
    group.bench_function("service_wildcard", |b| {
        b.iter(|| set.profile_for_path(black_box("/acme.Batch/Run")))
    });
    group.bench_function("fallback", |b| {
        b.iter(|| set.profile_for_path(black_box("/other.Service/Method")))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
