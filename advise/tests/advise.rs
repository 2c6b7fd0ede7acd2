//! The timeout advisor: verdicts and the TOML overlay on known latencies (golden),
//! the overlay accepted by the configuration, a layer observing real calls over
//! loopback, and the overlay's suggestion, once accepted, removing the false failures
//! it saw.

use std::time::Duration;

use sw4rm_advise::{Advice, LatencySnapshot, RouteLatency, Verdict, SUGGESTION};
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::testing::{Script, TestServer};
use sw4rm_timeouts::{GlobalConfig, ProfileSet, Sw4rm, TimeoutProfileLayer};

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// `n` calls spread evenly over `from..to` ms, then `timeouts` timed out.
fn latency(n: u64, from: u64, to: u64, timeouts: u64) -> LatencySnapshot {
    let mut s = LatencySnapshot::default();
    for i in 0..n {
        s.record(Duration::from_micros(
            from * 1_000 + (to - from) * 1_000 * i / n,
        ));
    }
    s.record_timeouts(timeouts);
    s
}

/// A deployment's mix: tools that answer in 100-200 ms under `tool_call`'s long
/// default, one tool an order of magnitude slower than the others, heartbeats
/// that fit, and a registry call with too few calls to judge.
fn mix() -> Vec<RouteLatency> {
    let mut routes = fast_tools();
    routes.extend([
        RouteLatency::new(
            "sw4rm.tool.ToolService",
            "Render",
            "tool_call",
            latency(500, 4_000, 9_000, 0),
        ),
        RouteLatency::new(
            "sw4rm.registry.RegistryService",
            "Heartbeat",
            "heartbeat",
            latency(3_000, 300, 900, 0),
        ),
        RouteLatency::new(
            "sw4rm.registry.RegistryService",
            "RegisterAgent",
            "registration",
            latency(40, 5, 10, 0),
        ),
    ]);
    routes
}

/// Two tools of `tool_call` that answer in 20-200 ms.
fn fast_tools() -> Vec<RouteLatency> {
    vec![
        RouteLatency::new(
            "sw4rm.tool.ToolService",
            "Call",
            "tool_call",
            latency(5_000, 100, 200, 0),
        ),
        RouteLatency::new(
            "sw4rm.tool.ToolService",
            "Describe",
            "tool_call",
            latency(2_000, 20, 60, 0),
        ),
    ]
}

#[test]
fn the_overlay_of_a_known_mix_is_as_golden() {
    let advice = Advice::new(&ProfileSet::standard(), &mix());
    let overlay = advice.overlay();
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/advise_overlay.toml");
    if std::env::var_os("SW4RM_BLESS").is_some() {
        std::fs::write(&golden, &overlay).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    assert_eq!(
        overlay, want,
        "stale golden file: SW4RM_BLESS=1 cargo test --test advise"
    );

    let verdicts: Vec<(&str, &Verdict)> = advice
        .profiles()
        .iter()
        .map(|p| (p.name.as_str(), &p.finding.verdict))
        .collect();
    assert!(
        matches!(verdicts[0], ("heartbeat", Verdict::Fits)),
        "{verdicts:?}"
    );
    assert!(
        matches!(
            verdicts[1],
            ("registration", Verdict::NotEnoughData { calls: 40 })
        ),
        "{verdicts:?}"
    );
    assert!(
        matches!(verdicts[2], ("tool_call", Verdict::DetectionSlow { .. })),
        "{verdicts:?}"
    );
    let render = &advice.profiles()[2]
        .routes
        .iter()
        .find(|(p, _)| p.ends_with("/Render"))
        .unwrap()
        .1;
    assert!(
        matches!(render.verdict, Verdict::DoesNotFit { .. }),
        "{render:?}"
    );
}

#[test]
fn the_overlay_is_a_valid_global_configuration_and_applies() {
    let advice = Advice::new(&ProfileSet::standard(), &mix());
    let overlay =
        GlobalConfig::from_toml_str(&advice.overlay(), "overlay.toml").expect("valid TOML");
    let set = ProfileSet::builder()
        .global(overlay)
        .build()
        .expect("valid configuration");
    let tool_call = set.profile("tool_call").unwrap();
    // 4x the p99.9 of the routes that fit (about 200 ms), rounded up: 1 s, held at the
    // profile's own minimum if that were higher.
    assert_eq!(tool_call.default_timeout(), ms(1_000));
    assert_eq!(
        set.profile_for_path("/sw4rm.tool.ToolService/Render").name,
        "tool_call_render"
    );
    // Its own profile keeps it at the default it had (4 x its p99.9 would be more,
    // which no replay can show is better), while `tool_call` drops to 1 s.
    assert_eq!(
        set.profile("tool_call_render").unwrap().default_timeout(),
        ms(30_000)
    );
    // Every proposal stays within SW4-002's bounds of its standard profile.
    for p in advice.profiles() {
        let standard = ProfileSet::standard();
        let bounds = standard.profile(&p.name).unwrap();
        let now = set.profile(&p.name).unwrap();
        assert!(
            now.default_timeout() >= bounds.min_timeout()
                && now.default_timeout() <= bounds.max_timeout()
        );
    }
}

/// A negotiation-room-like RPC whose default is just too short: answers take 600 ms,
/// one call in ten 2.5 s, and the default is 1 s, so one call in ten fails though
/// it would have succeeded. The layer observes it; the overlay it proposes, laid over
/// the deployment's file, removes those failures.
#[tokio::test]
async fn a_layer_observes_false_failures_and_its_overlay_removes_them() {
    let server = TestServer::start().await.unwrap();
    server
        .script(
            "Heartbeat",
            Script::latency(ms(600)).with_tail(10, ms(2_500)),
        )
        .unwrap();
    let deployment = "[profiles.room]\ndefault_timeout_ms = 1000\nmin_timeout_ms = 10\nmax_timeout_ms = 30000\n\n\
                      [routes]\n\"/sw4rm.registry.RegistryService/Heartbeat\" = \"room\"\n";
    let file = GlobalConfig::from_toml_str(deployment, "sw4rm.toml").unwrap();
    let run = |global: GlobalConfig| {
        let url = server.url();
        async move {
            let set = ProfileSet::builder().global(global).build().unwrap();
            let layer = TimeoutProfileLayer::new(set)
                .without_metrics()
                .without_retries()
                .with_observations();
            let observations = layer.observations().unwrap();
            let sw4rm = Sw4rm::connect_with(url, layer).await.unwrap();
            // 120 calls at once: one in ten is the scripted tail.
            let calls: Vec<_> = (0..120)
                .map(|_| {
                    let sw4rm = sw4rm.clone();
                    tokio::spawn(async move {
                        sw4rm
                            .registry()
                            .heartbeat(HeartbeatRequest::default())
                            .await
                    })
                })
                .collect();
            let mut failed = 0;
            for call in calls {
                if let Err(status) = call.await.unwrap() {
                    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
                    failed += 1;
                }
            }
            (failed, Advice::observed(&observations))
        }
    };
    let (failed, advice) = run(file.clone()).await;
    // Every call of the tail times out (2.5 s against 1 s); the others have 400 ms to
    // spare, and a loaded machine that takes them past it only adds false failures.
    assert!(failed >= 12, "{failed}: the tail timed out");
    let room = &advice.profiles()[0];
    assert_eq!(room.name, "room");
    assert_eq!(room.finding.calls, 120);
    let Verdict::FalseFailures { proposed, .. } = room.finding.verdict else {
        panic!("{room:?}");
    };
    // Long enough for the tail (2.5 s), within the profile's 30 s maximum.
    assert!(
        proposed > ms(2_500) && proposed <= ms(30_000),
        "{proposed:?}"
    );
    // A longer default cannot be shown to be better by a replay (the calls that timed
    // out have no latency): the overlay writes it as a suggestion, not as a value.
    let overlay = advice.overlay();
    let line = format!(
        "#? [profiles.room]\n#? default_timeout_ms = {}\n",
        proposed.as_millis()
    );
    assert!(overlay.contains(&line), "{overlay}");
    assert!(
        overlay.contains("does not dominate: it raises detection time"),
        "{overlay}"
    );
    let as_written = GlobalConfig::from_toml_str(&overlay, "overlay.toml").unwrap();
    let unchanged = ProfileSet::builder()
        .global(file.clone().merged_with(as_written))
        .build()
        .unwrap();
    assert_eq!(
        unchanged.profile("room").unwrap().default_timeout(),
        ms(1_000)
    );

    // The operator applies the suggestion, as `sed 's/^#? //'` would.
    let accepted = overlay.replace(SUGGESTION, "");
    let applied = file.merged_with(GlobalConfig::from_toml_str(&accepted, "overlay.toml").unwrap());
    let (failed, advice) = run(applied).await;
    assert_eq!(failed, 0, "the overlay removed the false failures");
    assert!(
        matches!(advice.profiles()[0].finding.verdict, Verdict::Fits),
        "{advice}"
    );
}

/// A route that does not fit `tool_call` but whose own profile would cut its longest
/// calls keeps running under `tool_call`: the profile's proposal is replayed on its
/// calls too, would cut them, and is left a suggestion.
#[test]
fn a_proposal_that_would_cut_a_route_left_under_it_is_not_written() {
    let mut render = latency(3_000, 3_000, 3_001, 0);
    for _ in 0..2 {
        render.record(ms(25_000));
    }
    let mut routes = fast_tools();
    routes.push(RouteLatency::new(
        "sw4rm.tool.ToolService",
        "Render",
        "tool_call",
        render,
    ));
    let advice = Advice::new(&ProfileSet::standard(), &routes);
    let tool_call = &advice.profiles()[0];
    // The routes that fit alone would have it at 1 s ...
    assert!(matches!(
        tool_call.finding.verdict,
        Verdict::DetectionSlow { .. }
    ));
    // ... but Render's own profile (20 s) would cut its two 25 s calls, so Render
    // stays, and 1 s would cut its 3,000 calls of 3 s.
    let (_, render) = &tool_call.routes[2];
    assert!(
        matches!(render.verdict, Verdict::DoesNotFit { .. }),
        "{render:?}"
    );
    assert!(!render.evaluation.unwrap().holds());
    let e = tool_call.finding.evaluation.unwrap();
    assert_eq!(
        e.dominance(),
        Err(sw4rm_advise::NotDominant::MoreFalseTimeouts)
    );
    assert!(e.proposed.false_timeouts >= 3_000, "{e:?}");

    let overlay = advice.overlay();
    assert!(overlay.contains("# 0 of 2 proposals written."), "{overlay}");
    assert!(
        overlay.contains("#? [profiles.tool_call]\n#? default_timeout_ms = 1000\n"),
        "{overlay}"
    );
    let set = ProfileSet::builder()
        .global(GlobalConfig::from_toml_str(&overlay, "overlay.toml").unwrap())
        .build()
        .unwrap();
    assert_eq!(
        set.profile("tool_call").unwrap().default_timeout(),
        ms(30_000)
    );
    // Render gets no route of its own.
    assert!(
        !overlay
            .lines()
            .any(|l| l.starts_with("\"/sw4rm.tool.ToolService/Render\"")),
        "{overlay}"
    );
}
