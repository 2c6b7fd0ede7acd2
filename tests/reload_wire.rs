//! Reloading a layer's profile table while it serves calls: over loopback, a call in
//! flight finishes on the table it started with while calls after the swap use the
//! new one (as the server's `grpc-timeout` shows), and no call fails because of a
//! swap; under paused time, a watched file is picked up within a second, and a bad
//! one is refused with every problem named while the table in use stays.

mod common;

use std::time::Duration;

use common::{call, capture_events, connect, server, Metrics, Opts, WAIT};
use sw4rm_timeouts::testing::Script;
use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";

fn heartbeat_default(ms: u32) -> ProfileSet {
    ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", ms)
        .build()
        .expect("valid table")
}

#[tokio::test]
async fn a_call_in_flight_keeps_its_table_and_the_next_call_uses_the_new_one() {
    let server = server().await;
    server
        .script(HEARTBEAT, Script::latency(Duration::from_millis(1_500)))
        .unwrap();
    let layer = TimeoutProfileLayer::new(heartbeat_default(10_000)).with_observations();
    let (layer, handle) = layer.reloadable();
    let sw4rm = connect(&server, layer.clone()).await;

    let first = tokio::spawn({
        let sw4rm = sw4rm.clone();
        async move { call(&sw4rm, HEARTBEAT, Opts::default()).await }
    });
    assert!(
        server.wait_until(WAIT, |calls| calls.len() == 1).await,
        "the first call reached the server"
    );
    let reloaded = handle.reload(heartbeat_default(1_000));
    assert_eq!(
        reloaded.changes(),
        ["heartbeat.default_timeout_ms 10000 -> 1000"]
    );
    let second = call(&sw4rm, HEARTBEAT, Opts::default()).await;

    // The call in flight finished on its table: not failed by the swap.
    first.await.unwrap().expect("the call in flight succeeds");
    // The call after the swap ran under the new default (1 s < the 1.5 s latency).
    let err = second.expect_err("the new table's 1 s default cuts the call");
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err:?}");
    let seen: Vec<Option<String>> = server
        .calls_to(HEARTBEAT)
        .into_iter()
        .map(|c| c.grpc_timeout)
        .collect();
    assert_eq!(
        seen,
        [Some("10000000u".to_owned()), Some("1000000u".to_owned())]
    );
    // The layer, a client made from it and the handle all read the new table.
    assert_eq!(
        layer
            .profiles()
            .profile("heartbeat")
            .unwrap()
            .default_timeout_ms,
        1_000
    );
    assert_eq!(
        sw4rm
            .profiles()
            .profile("heartbeat")
            .unwrap()
            .default_timeout_ms,
        1_000
    );
    let now = handle.profiles().expect("the layer is alive");
    assert_eq!(now.profile("heartbeat").unwrap().default_timeout_ms, 1_000);
    // The observations of the layer and of the client made from it stay one after
    // the swap: the client's call after it is seen through the layer's handle.
    let observed = layer.observations().expect("observed").routes();
    let heartbeat = observed
        .iter()
        .find(|r| r.method == "Heartbeat")
        .expect("observed");
    assert_eq!(heartbeat.latency.timeouts(), 1, "{heartbeat:?}");
}

#[tokio::test]
async fn swaps_under_load_fail_no_call() {
    let server = server().await;
    let (layer, handle) = TimeoutProfileLayer::new(heartbeat_default(10_000)).reloadable();
    let sw4rm = connect(&server, layer).await;
    let swapper = tokio::spawn(async move {
        for i in 0..200u32 {
            let ms = if i % 2 == 0 { 20_000 } else { 10_000 };
            handle.reload(heartbeat_default(ms));
            tokio::task::yield_now().await;
        }
        handle
    });
    let mut callers = Vec::new();
    for _ in 0..8 {
        let sw4rm = sw4rm.clone();
        callers.push(tokio::spawn(async move {
            for _ in 0..50 {
                call(&sw4rm, HEARTBEAT, Opts::default())
                    .await
                    .expect("no call fails because of a swap");
            }
        }));
    }
    for caller in callers {
        caller.await.unwrap();
    }
    let handle = swapper.await.unwrap();
    assert_eq!(handle.reloads(), 200);
    let calls = server.calls_to(HEARTBEAT);
    assert_eq!(calls.len(), 400);
    for c in &calls {
        let t = c.grpc_timeout.as_deref();
        assert!(
            matches!(t, Some("10000000u" | "20000000u")),
            "each call runs whole under one of the two tables: {t:?}"
        );
    }
    // After the last swap (to 10 s), calls use it.
    call(&sw4rm, HEARTBEAT, Opts::default()).await.unwrap();
    let last = server.calls_to(HEARTBEAT).pop().unwrap();
    assert_eq!(last.grpc_timeout.as_deref(), Some("10000000u"));
}

#[tokio::test(start_paused = true)]
async fn a_watched_file_is_picked_up_within_a_second_and_a_bad_one_is_refused() {
    common::install_subscriber();
    let (events, _guard) = capture_events();
    let dir = std::env::temp_dir().join(format!("sw4rm-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("timeouts.toml");
    let write = |text: &str| {
        // Written whole, then renamed over the watched file.
        let tmp = dir.join("timeouts.toml.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    };
    write("[profiles.heartbeat]\ndefault_timeout_ms = 4000\n");
    let builder = ProfileSet::builder().global_file(&path);
    let metrics = Metrics::new();
    let layer = TimeoutProfileLayer::new(builder.clone().build().unwrap())
        .with_meter_provider(&metrics.provider);
    let (layer, handle) = layer.reloadable();
    let _watch = handle.watch(builder.clone()).expect("watch");
    let default_ms = || {
        layer
            .profiles()
            .profile("heartbeat")
            .unwrap()
            .default_timeout_ms
    };
    assert_eq!(default_ms(), 4_000);

    write("[profiles.heartbeat]\ndefault_timeout_ms = 2000\n");
    tokio::time::sleep(Duration::from_millis(999)).await;
    assert_eq!(default_ms(), 2_000, "picked up within a second");
    let swaps = events.with_message("SW4RM timeout table reloaded");
    assert_eq!(swaps.len(), 1, "{swaps:?}");
    assert_eq!(
        swaps[0].get("changes").map(String::as_str),
        Some("heartbeat.default_timeout_ms 4000 -> 2000")
    );

    // Two problems at once: both named, as `check` names them; the table stays.
    write("[profiles.heartbeat]\ndefault_timeout_ms = \"soon\"\n[routes]\n\"/acme.Batch/*\" = \"nightly\"\n");
    let check = builder.clone().build().unwrap_err();
    assert_eq!(check.issues().len(), 2, "{check}");
    tokio::time::sleep(Duration::from_millis(999)).await;
    assert_eq!(default_ms(), 2_000, "the table in use stays");
    assert_eq!(handle.refusals(), 1);
    let refused = events.with_message("reload refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].get("error"), Some(&check.to_string()));

    // Fixed: applied again.
    write("[profiles.heartbeat]\ndefault_timeout_ms = 3000\n");
    tokio::time::sleep(Duration::from_millis(999)).await;
    assert_eq!(default_ms(), 3_000);
    assert_eq!((handle.reloads(), handle.refusals()), (2, 1));
    let outcomes: Vec<(String, u64)> = metrics
        .points()
        .into_iter()
        .filter(|p| p.name == "sw4rm_config_reloads_total")
        .map(|p| (p.attrs["outcome"].clone(), p.value))
        .collect();
    assert!(outcomes.contains(&("applied".into(), 2)), "{outcomes:?}");
    assert!(outcomes.contains(&("refused".into(), 1)), "{outcomes:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_watch_needs_a_file() {
    let (_layer, handle) = TimeoutProfileLayer::standard().reloadable();
    let err = handle
        .watch(ProfileSet::builder().without_global())
        .expect_err("nothing to watch");
    assert!(err.to_string().contains("global_file"), "{err}");
}
