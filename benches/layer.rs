//! The layer's own cost per unary call, without sockets: the same in-memory inner
//! service (answers at once with an empty body) called plainly, with the deadline set
//! by hand as tonic would, and through the layer (metrics off, and on through the
//! OpenTelemetry SDK, both with retries on as by default; with retries and metrics
//! off; with the advisor's observations on; and reloadable, its table behind a
//! `ReloadHandle`), for an exact route, a whole-service route and the fallback.
//! Each sample is a batch of calls, every route's variants interleaved in the same
//! rounds; the layer's work is the median, over rounds, of a layered batch minus the
//! same round's batch with the deadline set by hand.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
use tower::Layer;

#[path = "support/interleaved.rs"]
mod interleaved;

#[path = "support/in_memory.rs"]
mod in_memory;

use in_memory::{drive, request, InMemory};

const NAMES: [&str; 8] = [
    "plain",
    "plain_deadline_by_hand",
    "layer_metrics_off",
    "layer_metrics_on",
    "layer_retries_off",
    "layer_answered_ok",
    "layer_answered_ok_observed",
    "layer_reloadable",
];
const PATHS: [(&str, &str); 3] = [
    ("exact", "/sw4rm.registry.RegistryService/Heartbeat"),
    ("service", "/acme.Batch/Run"),
    ("fallback", "/unknown.Service/Method"),
];
const BATCH: usize = 1_000;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(InMemoryMetricExporter::default()).build())
        .build();
    let profiles = ProfileSet::builder()
        .without_global()
        .route("/acme.Batch/*", "heartbeat")
        .build()
        .expect("profiles");
    let off = TimeoutProfileLayer::new(profiles.clone()).without_metrics();
    let once = off.clone().without_retries();
    let on = TimeoutProfileLayer::new(profiles).with_meter_provider(&provider);
    let observed = off.clone().with_observations();
    let (reloadable, _handle) = off.clone().reloadable();

    let run = |route: usize, variant: usize| {
        let path = PATHS[route].1;
        let (mut plain, mut layered_off, mut layered_on, mut layered_once) = (
            InMemory::empty(),
            off.layer(InMemory::empty()),
            on.layer(InMemory::empty()),
            once.layer(InMemory::empty()),
        );
        let (mut answered_ok, mut answered_ok_observed) =
            (off.layer(InMemory::ok()), observed.layer(InMemory::ok()));
        let mut live = reloadable.layer(InMemory::empty());
        async move {
            for _ in 0..BATCH {
                match variant {
                    0 => drive(&mut plain, request(path, false)).await,
                    1 => drive(&mut plain, request(path, true)).await,
                    2 => drive(&mut layered_off, request(path, false)).await,
                    3 => drive(&mut layered_on, request(path, false)).await,
                    4 => drive(&mut layered_once, request(path, false)).await,
                    5 => drive(&mut answered_ok, request(path, false)).await,
                    6 => drive(&mut answered_ok_observed, request(path, false)).await,
                    _ => drive(&mut live, request(path, false)).await,
                }
            }
        }
    };

    // Every route's variants in one set of interleaved rounds, so that the routes are
    // compared under the same conditions, not one after another.
    let n = NAMES.len();
    let samples = rt.block_on(interleaved::samples(1_500, PATHS.len() * n, |i| {
        run(i / n, i % n)
    }));
    for (route, (kind, _)) in PATHS.iter().enumerate() {
        let mine = &samples[route * n..(route + 1) * n];
        let medians: Vec<Duration> = mine
            .iter()
            .map(|s| interleaved::median(&mut s.clone()))
            .collect();
        interleaved::report(
            &format!("{kind} route, batches of {BATCH} calls"),
            &NAMES,
            &medians,
        );
        // Paired by round: each layered batch minus the same round's batch with the
        // deadline set by hand.
        let work = |variant: usize| {
            interleaved::paired_difference_ns(&mine[variant], &mine[1]) / BATCH as f64
        };
        println!(
            "  layer work per call ({kind}): metrics off {:.0} ns, metrics on {:.0} ns, retries and metrics off {:.0} ns (vs the deadline set by hand)",
            work(2),
            work(3),
            work(4),
        );
        // The advisor's estimate on: paired against the same layer without it.
        let observing = interleaved::paired_difference_ns(&mine[6], &mine[5]) / BATCH as f64;
        println!("  observations on add {observing:.1} ns per call ({kind})");
        // Reload on: paired against the same layer with a fixed table.
        let reload = interleaved::paired_difference_ns(&mine[7], &mine[2]) / BATCH as f64;
        println!("  reload on adds {reload:.1} ns per call ({kind})\n");
    }

    for (route, (kind, _)) in PATHS.iter().enumerate() {
        let mut group = c.benchmark_group(format!("layer_{kind}"));
        for (variant, name) in NAMES.iter().enumerate() {
            group.bench_function(*name, |b| b.to_async(&rt).iter(|| run(route, variant)));
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
