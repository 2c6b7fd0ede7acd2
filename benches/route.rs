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

    // The cost of finding a route as the table grows: 1, 100 and 10,000 custom routes,
    // exact (`/acme.Svc7/Run`) and whole-service (`/acme.Svc7/*`), looking up the
    // middle one. (The layer asks the table once per path and keeps the answer; the
    // instruction bench's `routes-N` variants measure a call through it.)
    let mut sizes = c.benchmark_group("route_table_size");
    for n in [1usize, 100, 10_000] {
        let exact = table(n, false);
        let services = table(n, true);
        let path = format!("/acme.Svc{}/Run", n / 2);
        sizes.bench_function(format!("exact_{n}"), |b| {
            b.iter(|| exact.profile_for_path(black_box(&path)))
        });
        sizes.bench_function(format!("service_{n}"), |b| {
            b.iter(|| services.profile_for_path(black_box(&path)))
        });
    }
    sizes.finish();
}

/// A table with `n` custom routes: `/acme.Svc{i}/Run` each, or `/acme.Svc{i}/*`.
fn table(n: usize, whole_service: bool) -> ProfileSet {
    let mut builder = ProfileSet::builder().without_global();
    for i in 0..n {
        let pattern = match whole_service {
            true => format!("/acme.Svc{i}/*"),
            false => format!("/acme.Svc{i}/Run"),
        };
        builder = builder.route(&pattern, "task_submit");
    }
    builder.build().unwrap()
}

criterion_group!(benches, bench);
criterion_main!(benches);
