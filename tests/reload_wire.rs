//! Reloading a layer's profile table while it serves calls: over loopback, a call in
//! flight finishes on the table it started with while calls after the swap use the
//! new one (as the server's `grpc-timeout` shows), and no call fails because of a
//! swap; a watched file is picked up, a bad one is refused with every problem named
//! while the table in use stays, and what is not a whole regular file (empty, a FIFO,
//! too large) is never applied nor blocks the runtime.

mod common;

use std::time::Duration;

use common::{call, connect, server, Metrics, Opts, WAIT};
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

/// A fresh folder for one test's files.
fn folder(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sw4rm-reload-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Waits (real time: the watch runs on a thread of its own) until `done` holds;
/// false after 20 s.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..2_000 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}

fn heartbeat_ms(layer: &TimeoutProfileLayer) -> u32 {
    layer
        .profiles()
        .profile("heartbeat")
        .unwrap()
        .default_timeout_ms
}

#[tokio::test]
async fn a_watched_file_is_picked_up_and_a_bad_one_is_refused() {
    let (events, _guard) = common::capture_events_scoped();
    let dir = folder("watch");
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
    // Before the first reload the counter is there, at 0 for each outcome (a Reloads
    // panel reads 0, not "no data").
    let before: Vec<(String, u64)> = metrics
        .points()
        .into_iter()
        .filter(|p| p.name == "sw4rm_config_reloads_total")
        .map(|p| (p.attrs["outcome"].clone(), p.value))
        .collect();
    assert!(
        before.contains(&("applied".into(), 0)) && before.contains(&("refused".into(), 0)),
        "{before:?}"
    );
    let _watch = handle
        .watch_every(builder.clone(), Duration::from_millis(20))
        .expect("watch");
    assert_eq!(heartbeat_ms(&layer), 4_000);

    write("[profiles.heartbeat]\ndefault_timeout_ms = 2000\n");
    assert!(
        eventually(|| heartbeat_ms(&layer) == 2_000).await,
        "picked up"
    );
    // The swap is seen before its log line is written (another thread): wait for both.
    let logged = || {
        !events
            .with_message("SW4RM timeout table reloaded")
            .is_empty()
    };
    assert!(eventually(logged).await, "logged");
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
    assert!(eventually(|| handle.refusals() == 1).await);
    let logged = || !events.with_message("reload refused").is_empty();
    assert!(eventually(logged).await, "logged");
    assert_eq!(heartbeat_ms(&layer), 2_000, "the table in use stays");
    assert_eq!(handle.last_refusal(), Some(check.clone()));
    let refused = events.with_message("reload refused");
    assert_eq!(refused.len(), 1, "{refused:?}");
    // One line per event; the whole text is the last refusal's.
    assert_eq!(refused[0].get("error"), Some(&check.one_line()));
    assert!(!check.one_line().contains('\n'));

    // Fixed: applied again.
    write("[profiles.heartbeat]\ndefault_timeout_ms = 3000\n");
    assert!(eventually(|| heartbeat_ms(&layer) == 3_000).await);
    // The count follows the swap (another thread): wait for it too.
    assert!(eventually(|| handle.reloads() == 2).await);
    assert_eq!(handle.refusals(), 1);
    let outcomes = || -> Vec<(String, u64)> {
        metrics
            .points()
            .into_iter()
            .filter(|p| p.name == "sw4rm_config_reloads_total")
            .map(|p| (p.attrs["outcome"].clone(), p.value))
            .collect()
    };
    let counted = || {
        let now = outcomes();
        now.contains(&("applied".into(), 2)) && now.contains(&("refused".into(), 1))
    };
    assert!(eventually(counted).await, "{:?}", outcomes());
    std::fs::remove_dir_all(&dir).ok();
}

/// A layer over a table read from a file of its own (heartbeat at 2 s), watched every
/// 5 ms.
struct Watched {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
    layer: TimeoutProfileLayer,
    handle: sw4rm_timeouts::ReloadHandle,
    _watch: sw4rm_timeouts::ConfigWatch,
}

fn watched(name: &str) -> Watched {
    let dir = folder(name);
    let path = dir.join("timeouts.toml");
    std::fs::write(&path, "[profiles.heartbeat]\ndefault_timeout_ms = 2000\n").unwrap();
    let builder = ProfileSet::builder().global_file(&path);
    let (layer, handle) = TimeoutProfileLayer::new(builder.clone().build().unwrap()).reloadable();
    let _watch = handle
        .watch_every(builder, Duration::from_millis(5))
        .expect("watch");
    Watched {
        dir,
        path,
        layer,
        handle,
        _watch,
    }
}

/// A rewrite that is not a rename (a shell `>`): the file is empty first. The empty
/// file is not the standard table: calls keep the table in use until the text lands.
#[tokio::test]
async fn an_empty_file_is_not_applied_and_the_text_that_follows_is() {
    let (events, _guard) = common::capture_events_scoped();
    let Watched {
        dir,
        path,
        layer,
        handle,
        ..
    } = watched("empty");
    std::fs::File::create(&path).unwrap(); // truncated: 0 bytes
    assert!(
        eventually(|| !events
            .with_message("SW4RM configuration file is empty")
            .is_empty())
        .await
    );
    // Many ticks later, still the table in use.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(heartbeat_ms(&layer), 2_000, "an empty file is no table");
    assert_eq!((handle.reloads(), handle.refusals()), (0, 0));
    std::fs::write(&path, "[profiles.heartbeat]\ndefault_timeout_ms = 3000\n").unwrap();
    assert!(eventually(|| heartbeat_ms(&layer) == 3_000).await);
    assert!(eventually(|| handle.reloads() == 1).await);
    std::fs::remove_dir_all(&dir).ok();
}

/// Kubernetes updates a mounted ConfigMap by swapping its `..data` link: the file's
/// path goes through two links, and the swap is one change.
#[cfg(unix)]
#[tokio::test]
async fn a_configmap_update_by_link_swap_is_picked_up() {
    use std::os::unix::fs::symlink;
    let dir = folder("configmap");
    let version = |name: &str, ms: u32| {
        std::fs::create_dir(dir.join(name)).unwrap();
        let text = format!("[profiles.heartbeat]\ndefault_timeout_ms = {ms}\n");
        std::fs::write(dir.join(name).join("timeouts.toml"), text).unwrap();
    };
    version("..2026_11_27_01", 2_000);
    symlink("..2026_11_27_01", dir.join("..data")).unwrap();
    symlink("..data/timeouts.toml", dir.join("timeouts.toml")).unwrap();
    let builder = ProfileSet::builder().global_file(dir.join("timeouts.toml"));
    let (layer, handle) = TimeoutProfileLayer::new(builder.clone().build().unwrap()).reloadable();
    let _watch = handle
        .watch_every(builder, Duration::from_millis(5))
        .expect("watch");
    assert_eq!(heartbeat_ms(&layer), 2_000);
    // kubelet: the new version beside the old, a new link, renamed over `..data`, the
    // old version removed.
    version("..2026_11_27_02", 3_000);
    symlink("..2026_11_27_02", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(dir.join("..2026_11_27_01")).unwrap();
    assert!(eventually(|| heartbeat_ms(&layer) == 3_000).await);
    assert!(eventually(|| handle.reloads() == 1).await);
    assert_eq!(handle.refusals(), 0);
    std::fs::remove_dir_all(&dir).ok();
}

/// A FIFO at the path blocks whoever opens it. The watch never opens it, and never
/// holds a runtime worker: timers keep firing on a two-worker runtime.
#[cfg(unix)]
#[test]
fn a_fifo_at_the_path_blocks_no_runtime_worker() {
    let dir = folder("fifo");
    let path = dir.join("timeouts.toml");
    let made = std::process::Command::new("mkfifo").arg(&path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo");
    let (done, finished) = std::sync::mpsc::channel();
    let run_path = path.clone();
    // On a thread of its own, so that a watch that blocks fails the test, not hangs it.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let outcome = runtime.block_on(async {
            let (events, _guard) = common::capture_events_scoped();
            let (_layer, handle) = TimeoutProfileLayer::standard().reloadable();
            let builder = ProfileSet::builder().global_file(&run_path);
            let _watch = handle
                .watch_every(builder, Duration::from_millis(1))
                .unwrap();
            for _ in 0..4 {
                tokio::spawn(tokio::time::sleep(Duration::from_millis(50)))
                    .await
                    .unwrap();
            }
            let said = events.with_message("not a regular file");
            (said.len(), handle.reloads(), handle.refusals())
        });
        let _ = done.send(outcome);
    });
    let outcome = finished.recv_timeout(Duration::from_secs(30));
    assert_eq!(outcome, Ok((1, 0, 0)), "the watch blocked the runtime");
    std::fs::remove_dir_all(&dir).ok();
}

/// A 10 MB file is never read whole, and an unchanged file is not read at all.
#[tokio::test]
async fn a_large_file_is_refused_unread() {
    let (events, _guard) = common::capture_events_scoped();
    let Watched {
        dir, path, layer, ..
    } = watched("large");
    let mut text = String::from("[profiles.heartbeat]\ndefault_timeout_ms = 3000\n");
    text.push_str(&"# padding\n".repeat(1 << 20));
    let tmp = dir.join("timeouts.toml.tmp");
    std::fs::write(&tmp, &text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    assert!(
        eventually(|| !events
            .with_message("larger than any timeout table")
            .is_empty())
        .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let said = events.with_message("larger than any timeout table");
    assert_eq!(said.len(), 1, "said once: {said:?}");
    assert_eq!(
        said[0].get("bytes").map(String::as_str),
        Some(text.len().to_string().as_str())
    );
    assert_eq!(heartbeat_ms(&layer), 2_000);
    std::fs::remove_dir_all(&dir).ok();
}

/// `let _ = handle.watch(..)?` keeps watching (dropping the value detaches it, as a
/// Tokio `JoinHandle` does); `stop()` stops it.
#[tokio::test]
async fn a_dropped_watch_goes_on_and_a_stopped_one_does_not() {
    let dir = folder("detach");
    let path = dir.join("timeouts.toml");
    let write = |ms: u32| {
        let tmp = dir.join("timeouts.toml.tmp");
        std::fs::write(
            &tmp,
            format!("[profiles.heartbeat]\ndefault_timeout_ms = {ms}\n"),
        )
        .unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    };
    write(2_000);
    let builder = ProfileSet::builder().global_file(&path);
    let (layer, handle) = TimeoutProfileLayer::new(builder.clone().build().unwrap()).reloadable();
    let _ = handle
        .watch_every(builder.clone(), Duration::from_millis(5))
        .expect("watch");
    write(3_000);
    assert!(
        eventually(|| heartbeat_ms(&layer) == 3_000).await,
        "still watching"
    );

    let (other, other_handle) =
        TimeoutProfileLayer::new(builder.clone().build().unwrap()).reloadable();
    let watch = other_handle
        .watch_every(builder, Duration::from_millis(5))
        .expect("watch");
    write(4_000);
    assert!(eventually(|| heartbeat_ms(&other) == 4_000).await);
    watch.stop();
    tokio::time::sleep(Duration::from_millis(50)).await;
    write(5_000);
    assert!(eventually(|| heartbeat_ms(&layer) == 5_000).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        heartbeat_ms(&other),
        4_000,
        "a stopped watch reloads nothing"
    );
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
