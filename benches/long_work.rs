//! Long work: what a progress report costs inside a `LongWork` guard (the goal: ≤ 50 ns,
//! no lock) and outside any guard (a task-local lookup), and what reading one message
//! with a progress rule costs (one decode, once per complete message; no rule, no
//! cost). Figures in `benches/README.md`.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;
use sw4rm_timeouts::prost::Message;
use sw4rm_timeouts::proto::sw4rm::tool::ToolFrame;
use sw4rm_timeouts::scope::{self, LongWork};
use sw4rm_timeouts::ProgressRule;

fn progress(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("long_work");
    group.bench_function("progress_outside_a_guard", |b| b.iter(scope::progress));
    // Inside a guard: the report lands in the guard's state.
    rt.block_on(LongWork::new().idle_limit(Duration::from_secs(3_600)).run(
        |_: scope::Output<()>| async {
            group.bench_function("progress_in_a_guard", |b| b.iter(scope::progress));
            group.bench_function("progress_at_in_a_guard", |b| {
                b.iter(|| scope::progress_at(black_box(42)))
            });
        },
    ));
    group.finish();
}

fn rule(c: &mut Criterion) {
    let frame = ToolFrame {
        call_id: "call-7f3a".into(),
        frame_no: 41,
        data: vec![7; 256],
        ..Default::default()
    }
    .encode_to_vec();
    let keep_alive = ToolFrame::default().encode_to_vec();
    let rule = ProgressRule::of::<ToolFrame>();
    let mut group = c.benchmark_group("progress_rule");
    group.bench_function("tool_frame_256b", |b| {
        b.iter(|| rule.read(black_box(&frame)))
    });
    group.bench_function("tool_frame_keep_alive", |b| {
        b.iter(|| rule.read(black_box(&keep_alive)))
    });
    group.finish();
}

criterion_group!(benches, progress, rule);
criterion_main!(benches);
