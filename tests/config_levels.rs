//! Customization at every level (SW4-002 §2.3): the example file, per-field
//! precedence, every validation rule with its message, and the end-to-end effect on
//! the `grpc-timeout` the server receives. Environment and files run in figment's
//! `Jail`, which serializes them across tests.

// figment's `Jail` closures return `figment::Result`, whose error type is large.
#![allow(clippy::result_large_err)]

mod common;

use std::time::Duration;

use figment::Jail;
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::{
    GlobalConfig, ProfileField, ProfileSet, Source, StreamingTimeoutPolicy, Sw4rm,
    TimeoutProfileLayer,
};

const EXAMPLE: &str = include_str!("../sw4rm.example.toml");

fn build_from_env() -> Result<ProfileSet, sw4rm_timeouts::ConfigError> {
    ProfileSet::builder().build()
}

#[test]
fn example_file_loads_with_every_key() {
    Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file("sw4rm.toml", EXAMPLE)?;
        let set = build_from_env().expect("example config is valid");
        let hb = set.resolved("heartbeat").unwrap();
        assert_eq!(
            (
                hb.profile().default_timeout_ms,
                hb.profile().min_timeout_ms,
                hb.profile().max_timeout_ms
            ),
            (3_000, 1_000, 20_000)
        );
        assert!(
            matches!(hb.source_of(ProfileField::Default), Source::File(p) if p.ends_with("sw4rm.toml"))
        );
        let tool = set.resolved("tool_call").unwrap();
        assert_eq!(
            tool.streaming(),
            StreamingTimeoutPolicy {
                initial_timeout_ms: 10_000,
                message_gap_timeout_ms: 5_000,
                total_timeout_ms: 600_000,
                idle_timeout_ms: 0,
            }
        );
        assert_eq!(tool.source_of(ProfileField::Default), &Source::Standard);
        let batch = set.profile("batch").unwrap();
        assert_eq!(
            (batch.default_timeout_ms, batch.allow_infinite),
            (120_000, true)
        );
        assert_eq!(
            set.profile_for_path("/acme.batch.BatchService/Run").name,
            "batch"
        );
        assert_eq!(
            set.profile_for_path("/acme.reports.ReportService/Any").name,
            "workflow_status"
        );
        assert_eq!(
            set.profile_for_path("/sw4rm.router.RouterService/StreamIncoming")
                .name,
            "message_route"
        );
        assert_eq!(set.fallback().name, "universal");
        Ok(())
    });
}

/// Each field × each combination of levels: the most specific level wins, field by
/// field, and the result names its source.
#[test]
fn precedence_per_field() {
    // (field, standard, global, client); values chosen so every mix stays valid.
    let fields: [(&str, u32, u32, u32); 8] = [
        ("default_timeout_ms", 5_000, 6_000, 7_000),
        ("min_timeout_ms", 1_000, 1_500, 2_000),
        ("max_timeout_ms", 30_000, 25_000, 20_000),
        ("allow_infinite", 0, 1, 0),
        ("streaming.initial_timeout_ms", 0, 100, 200),
        ("streaming.message_gap_timeout_ms", 0, 50, 60),
        ("streaming.total_timeout_ms", 0, 1_000, 2_000),
        ("streaming.idle_timeout_ms", 0, 500, 700),
    ];
    for (field, standard, global, client) in fields {
        for (use_global, use_client) in [(false, false), (true, false), (false, true), (true, true)]
        {
            Jail::expect_with(|jail| {
                jail.clear_env();
                let var = format!(
                    "SW4RM_PROFILES__HEARTBEAT__{}",
                    field.replace('.', "__").to_uppercase()
                );
                if use_global {
                    let value = if field == "allow_infinite" {
                        (global == 1).to_string()
                    } else {
                        global.to_string()
                    };
                    jail.set_env(&var, value);
                }
                let mut builder = ProfileSet::builder();
                if use_client {
                    builder = match field {
                        "default_timeout_ms" => builder.default_timeout_ms("heartbeat", client),
                        "min_timeout_ms" => builder.min_timeout_ms("heartbeat", client),
                        "max_timeout_ms" => builder.max_timeout_ms("heartbeat", client),
                        "allow_infinite" => builder.allow_infinite("heartbeat", client == 1),
                        _ => {
                            let mut p = StreamingTimeoutPolicy::default();
                            match field {
                                "streaming.initial_timeout_ms" => p.initial_timeout_ms = client,
                                "streaming.message_gap_timeout_ms" => {
                                    p.message_gap_timeout_ms = client
                                }
                                "streaming.idle_timeout_ms" => p.idle_timeout_ms = client,
                                _ => p.total_timeout_ms = client,
                            }
                            // streaming() sets all four; keep the others at their lower level.
                            let set = builder.clone().build().unwrap();
                            let base = set.resolved("heartbeat").unwrap().streaming();
                            let merged = StreamingTimeoutPolicy {
                                initial_timeout_ms: if p.initial_timeout_ms != 0 {
                                    p.initial_timeout_ms
                                } else {
                                    base.initial_timeout_ms
                                },
                                message_gap_timeout_ms: if p.message_gap_timeout_ms != 0 {
                                    p.message_gap_timeout_ms
                                } else {
                                    base.message_gap_timeout_ms
                                },
                                total_timeout_ms: if p.total_timeout_ms != 0 {
                                    p.total_timeout_ms
                                } else {
                                    base.total_timeout_ms
                                },
                                idle_timeout_ms: if p.idle_timeout_ms != 0 {
                                    p.idle_timeout_ms
                                } else {
                                    base.idle_timeout_ms
                                },
                            };
                            builder.streaming("heartbeat", merged)
                        }
                    };
                }
                let set = builder
                    .build()
                    .unwrap_or_else(|e| panic!("{field} {use_global} {use_client}: {e}"));
                let hb = set.resolved("heartbeat").unwrap();
                let value = match field {
                    "default_timeout_ms" => hb.profile().default_timeout_ms,
                    "min_timeout_ms" => hb.profile().min_timeout_ms,
                    "max_timeout_ms" => hb.profile().max_timeout_ms,
                    "allow_infinite" => u32::from(hb.profile().allow_infinite),
                    "streaming.initial_timeout_ms" => hb.streaming().initial_timeout_ms,
                    "streaming.message_gap_timeout_ms" => hb.streaming().message_gap_timeout_ms,
                    "streaming.idle_timeout_ms" => hb.streaming().idle_timeout_ms,
                    _ => hb.streaming().total_timeout_ms,
                };
                let (want, want_source) = match (use_global, use_client) {
                    (_, true) => (client, Source::Client),
                    (true, false) => (global, Source::Env(var.clone().into())),
                    (false, false) => (standard, Source::Standard),
                };
                assert_eq!(
                    value, want,
                    "{field} global={use_global} client={use_client}"
                );
                assert_eq!(
                    hb.source_of(ProfileField::from_key(field).unwrap()),
                    &want_source,
                    "{field} global={use_global} client={use_client}"
                );
                Ok(())
            });
        }
    }
}

#[test]
fn client_changing_one_field_keeps_the_global_others() {
    Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file(
            "sw4rm.toml",
            "[profiles.heartbeat]\ndefault_timeout_ms = 4000\nmax_timeout_ms = 9000\n",
        )?;
        jail.set_env("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "12000");
        let set = ProfileSet::builder()
            .max_timeout_ms("heartbeat", 15_000)
            .build()
            .unwrap();
        let hb = set.resolved("heartbeat").unwrap();
        assert_eq!(
            (hb.profile().default_timeout_ms, hb.profile().max_timeout_ms),
            (4_000, 15_000)
        );
        assert!(matches!(
            hb.source_of(ProfileField::Default),
            Source::File(_)
        ));
        assert_eq!(hb.source_of(ProfileField::Max), &Source::Client);
        // Without the client, env beats the file.
        let hb2 = build_from_env()
            .unwrap()
            .resolved("heartbeat")
            .unwrap()
            .clone();
        assert_eq!(hb2.profile().max_timeout_ms, 12_000);
        // Opting out of global configuration ignores both.
        let plain = ProfileSet::builder().without_global().build().unwrap();
        assert_eq!(
            plain.profile("heartbeat").unwrap().default_timeout_ms,
            5_000
        );
        Ok(())
    });
}

#[test]
fn env_case_does_not_duplicate_profiles() {
    Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file("sw4rm.toml", "[profiles.Batch]\ndefault_timeout_ms = 100\nmin_timeout_ms = 1\nmax_timeout_ms = 1000\n")?;
        jail.set_env("SW4RM_PROFILES__BATCH__DEFAULT_TIMEOUT_MS", "200");
        jail.set_env("sw4rm_profiles__heartbeat__default_timeout_ms", "6000");
        let set = build_from_env().unwrap();
        assert_eq!(
            set.profiles()
                .filter(|p| p.profile().name == "batch")
                .count(),
            1
        );
        assert_eq!(set.profile("BATCH").unwrap().default_timeout_ms, 200);
        assert_eq!(
            set.profiles()
                .filter(|p| p.profile().name == "heartbeat")
                .count(),
            1
        );
        assert_eq!(set.profile("heartbeat").unwrap().default_timeout_ms, 6_000);
        assert_eq!(set.profiles().count(), 14);
        Ok(())
    });
}

/// One row per rule: configuration, and the text its error must contain.
#[test]
fn every_validation_rule_names_key_value_rule_and_source() {
    type Setup = fn(&mut Jail) -> figment::Result<()>;
    let rows: Vec<(Setup, &str)> = vec![
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__MIN_TIMEOUT_MS", "abc"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__MIN_TIMEOUT_MS=abc: must be a whole number of milliseconds, not text"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__MIN_TIMEOUT_MS", "-5"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__MIN_TIMEOUT_MS=-5: must not be negative"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "5000000000"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS=5000000000: exceeds the largest timeout, 4294967295 ms (u32)"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "1.5"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS=1.5: must be a whole number of milliseconds"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__MIN_TIMEOUT_MS", "0"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__MIN_TIMEOUT_MS=0: must be greater than 0"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__MIN_TIMEOUT_MS", "6000"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__MIN_TIMEOUT_MS=6000: must be <= default_timeout_ms (5000) (default_timeout_ms from standard)"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__DEFAULT_TIMEOUT_MS", "40000"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__DEFAULT_TIMEOUT_MS=40000: must be <= max_timeout_ms (30000, standard): raise max_timeout_ms too, or keep the default <= 30000"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__ALLOW_INFINITE", "yes"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__ALLOW_INFINITE=yes: must be true or false"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__MIN_TIMOUT_MS", "1"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__MIN_TIMOUT_MS=1: unknown key (did you mean `min_timeout_ms`?)"),
        (|j| { j.set_env("SW4RM_PROFILS__HEARTBEAT__MIN_TIMEOUT_MS", "1"); Ok(()) },
         "unknown key (did you mean `profiles`?)"),
        (|j| { j.set_env("SW4RM_PROFILES__TOOL_CALL__STREAMING__TOTAL_TIMEOUT_MS", "1000");
               j.set_env("SW4RM_PROFILES__TOOL_CALL__STREAMING__MESSAGE_GAP_TIMEOUT_MS", "5000"); Ok(()) },
         "SW4RM_PROFILES__TOOL_CALL__STREAMING__MESSAGE_GAP_TIMEOUT_MS=5000: message_gap_timeout_ms (5000) must be <= total_timeout_ms (1000) when both are set"),
        (|j| { j.set_env("SW4RM_PROFILES__TOOL_CALL__STREAMING__INITAL_TIMEOUT_MS", "5"); Ok(()) },
         "unknown key (did you mean `initial_timeout_ms`?)"),
        (|j| { j.set_env("SW4RM_PROFILES__BATCH__DEFAULT_TIMEOUT_MS", "5"); Ok(()) },
         "profiles.batch.min_timeout_ms: profile `batch` is not a standard profile, so it must set min_timeout_ms (set in global (env SW4RM_PROFILES__BATCH__DEFAULT_TIMEOUT_MS))"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__RETRY__MAX_ATTEMPTS", "9"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__RETRY__MAX_ATTEMPTS=9: must be 1 to 5 (1 = no retries)"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__RETRY__MAX_ATTEMPTS", "many"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__RETRY__MAX_ATTEMPTS=many: must be a whole number, not text"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__RETRY__ATTEMPT_TIMEOUT_MS", "500"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__RETRY__ATTEMPT_TIMEOUT_MS=500: must be 0 (none) or >= min_timeout_ms (min_timeout_ms 1000 from standard)"),
        (|j| { j.create_file("sw4rm.toml", "[profiles.heartbeat.retry]
initial_backoff_ms = 500
max_backoff_ms = 100
")?; Ok(()) },
         "sw4rm.toml: profiles.heartbeat.retry.max_backoff_ms = 100: must be >= retry.initial_backoff_ms (500 from global (file sw4rm.toml))"),
        (|j| { j.create_file("sw4rm.toml", "[profiles.heartbeat.retry]
max_attemps = 2
")?; Ok(()) },
         "unknown key (did you mean `max_attempts`?)"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__HEDGING__MAX_ATTEMPTS", "6"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__HEDGING__MAX_ATTEMPTS=6: must be 1 to 5 (1 = no hedging)"),
        (|j| { j.set_env("SW4RM_PROFILES__HEARTBEAT__HEDGING__PERCENTILE", "30"); Ok(()) },
         "SW4RM_PROFILES__HEARTBEAT__HEDGING__PERCENTILE=30: must be 50 to 99"),
        (|j| { j.create_file("sw4rm.toml", "[profiles.heartbeat.hedging]
min_delay_ms = 500
")?; j.set_env("SW4RM_PROFILES__HEARTBEAT__HEDGING__MAX_DELAY_MS", "100"); Ok(()) },
         "sw4rm.toml: profiles.heartbeat.hedging.min_delay_ms = 500: must be <= hedging.max_delay_ms (100 from global (env SW4RM_PROFILES__HEARTBEAT__HEDGING__MAX_DELAY_MS))"),
        (|j| { j.create_file("sw4rm.toml", "[profiles.heartbeat.hedging]
percentil = 90
")?; Ok(()) },
         "unknown key (did you mean `percentile`?)"),
        (|j| { j.create_file("sw4rm.toml", "[routes]
\"/a.B/C\" = { profile = \"tool_call\", idempotent = \"maybe\" }
")?; Ok(()) },
         "sw4rm.toml: routes./a.B/C.idempotent = maybe: must be true or false"),
        (|j| { j.set_env("SW4RM_FALLBACK_PROFILE", "heartbaet"); Ok(()) },
         "SW4RM_FALLBACK_PROFILE=heartbaet: no such profile (did you mean `heartbeat`?)"),
        (|j| { j.set_env("SW4RM_CONFIG", "/nonexistent/sw4rm.toml"); Ok(()) },
         "SW4RM_CONFIG=/nonexistent/sw4rm.toml: names a file that does not exist"),
        (|j| { j.create_file("sw4rm.toml", "[routes]\n\"/a.B/C\" = \"tool_cal\"\n")?; Ok(()) },
         "routes.\"/a.B/C\" = tool_cal: routes to a profile that does not exist (did you mean `tool_call`?)"),
        (|j| { j.create_file("sw4rm.toml", "[routes]\n\"a.B/C\" = \"tool_call\"\n")?; Ok(()) },
         "routes.\"a.B/C\" = tool_call: route pattern must be /package.Service/Method or /package.Service/*"),
        // A bad pattern and a missing profile in one route: both, in one pass.
        (|j| { j.create_file("sw4rm.toml", "[routes]\n\"a.B/C\" = \"tool_cal\"\n")?; Ok(()) },
         "routes.\"a.B/C\" = tool_cal: route pattern must be /package.Service/Method or /package.Service/*"),
        (|j| { j.create_file("sw4rm.toml", "[routes]\n\"a.B/C\" = \"tool_cal\"\n")?; Ok(()) },
         "routes.\"a.B/C\" = tool_cal: routes to a profile that does not exist (did you mean `tool_call`?)"),
        // A table where a number belongs is shown as one, not as a value.
        (|j| { j.create_file("sw4rm.toml", "[profiles.heartbeat.default_timeout_ms]\nx = 1\n")?; Ok(()) },
         "sw4rm.toml: profiles.heartbeat.default_timeout_ms = {…}: must be a number of milliseconds"),
        // A value that is missing, in a file: the file leads the line as on the others.
        (|j| { j.create_file("sw4rm.toml", "[profiles.batch]\ndefault_timeout_ms = 100\n")?; Ok(()) },
         "sw4rm.toml: profiles.batch.min_timeout_ms: profile `batch` is not a standard profile, so it must set min_timeout_ms"),
        (|j| { j.create_file("sw4rm.toml", "[profiles.heartbeat\n")?; Ok(()) },
         "sw4rm.toml: not valid TOML"),
        (|j| { j.create_file("sw4rm.toml", "[profiles.Heartbeat]\nmax_timeout_ms = 9000\n[profiles.heartbeat]\nmax_timeout_ms = 8000\n")?; Ok(()) },
         "(profile names are case-insensitive)"),
        (|j| { j.set_env("SW4RM_ROUTES__X", "tool_call"); Ok(()) },
         "routes cannot be set from the environment"),
    ];
    for (i, (setup, want)) in rows.into_iter().enumerate() {
        Jail::expect_with(|jail| {
            jail.clear_env();
            setup(jail)?;
            let err = build_from_env().expect_err(want);
            let text = err.to_string();
            assert!(text.contains(want), "row {i}: want {want:?} in\n{text}");
            Ok(())
        });
    }
}

/// Other SW4RM tools' variables share the prefix; they are not timeout settings.
#[test]
fn other_sw4rm_variables_are_left_alone() {
    Jail::expect_with(|jail| {
        jail.clear_env();
        jail.set_env("SW4RM_SECRETS_BACKEND", "file");
        jail.set_env("SW4RM_REGISTRY_URL", "http://registry:50051");
        jail.set_env("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "12000");
        let set = build_from_env().expect("foreign SW4RM_* variables are ignored");
        assert_eq!(set.profile("heartbeat").unwrap().max_timeout_ms, 12_000);
        Ok(())
    });
}

#[test]
fn all_problems_are_reported_at_once() {
    Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file(
            "sw4rm.toml",
            "[profiles.heartbeat]\nmin_timeout_ms = \"abc\"\n[routes]\n\"/a.B/C\" = \"nope\"\n",
        )?;
        jail.set_env("SW4RM_PROFILES__REGISTRATION__MAX_TIMEOUT_MS", "-1");
        jail.set_env("SW4RM_PROFILES__TASK_SUBMIT__MIN_TIMEOUT_MS", "0");
        let err = build_from_env().unwrap_err();
        assert_eq!(err.issues().len(), 4, "{err}");
        assert!(err
            .to_string()
            .starts_with("invalid SW4RM timeout configuration (4 problems):"));
        Ok(())
    });
}

#[test]
fn explain_shows_every_source() {
    Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file("sw4rm.toml", EXAMPLE)?;
        jail.set_env("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "25000");
        let set = ProfileSet::builder()
            .route("/acme.X/Y", "batch")
            .build()
            .unwrap();
        let text = set.to_string();
        let line = |needle: &str| {
            text.lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("{needle}\n{text}"))
                .to_owned()
        };
        assert!(line("max_timeout_ms").contains("25000"));
        assert!(
            text.contains("25000  global (env SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS)"),
            "{text}"
        );
        assert!(text.contains("3000  global (file "), "{text}");
        assert!(line("/acme.X/Y").contains("batch  client"));
        assert!(line("/acme.reports.ReportService/Export")
            .contains("workflow_status (streaming)  global (file"));
        assert!(line("/acme.events.EventService/Subscribe")
            .contains("message_route (long-lived stream)  global (file"));
        assert!(line("/sw4rm.router.RouterService/StreamIncoming")
            .contains("message_route (long-lived stream)  standard"));
        assert!(line("/acme.reports.ReportService/*").contains("workflow_status"));
        assert!(
            text.contains("Fallback (any other path): universal  global (file"),
            "{text}"
        );
        Ok(())
    });
}

#[test]
fn global_config_can_be_loaded_on_its_own() {
    Jail::expect_with(|jail| {
        jail.clear_env();
        jail.create_file(
            "custom.toml",
            "[profiles.heartbeat]\ndefault_timeout_ms = 2500\n",
        )?;
        jail.set_env("SW4RM_CONFIG", "custom.toml");
        let global = GlobalConfig::load().unwrap();
        assert_eq!(global.file().unwrap().to_str(), Some("custom.toml"));
        let set = ProfileSet::builder().global(global).build().unwrap();
        assert_eq!(set.profile("heartbeat").unwrap().default_timeout_ms, 2_500);
        Ok(())
    });
}

/// A global env override and a client override both reach the wire; a per-call
/// value still wins over both.
#[test]
fn overrides_change_what_the_server_receives() {
    Jail::expect_with(|jail| {
        jail.clear_env();
        jail.set_env("SW4RM_PROFILES__HEARTBEAT__DEFAULT_TIMEOUT_MS", "8000");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let server = common::server().await;
            let global_only = Sw4rm::connect(server.url()).await.unwrap();
            global_only
                .registry()
                .heartbeat(HeartbeatRequest::default())
                .await
                .unwrap();
            let layer = TimeoutProfileLayer::new(
                ProfileSet::builder()
                    .default_timeout_ms("heartbeat", 12_000)
                    .build()
                    .unwrap(),
            );
            let client = Sw4rm::connect_with(server.url(), layer).await.unwrap();
            client
                .registry()
                .heartbeat(HeartbeatRequest::default())
                .await
                .unwrap();
            let mut req = tonic::Request::new(HeartbeatRequest::default());
            req.set_timeout(Duration::from_secs(2));
            client.registry().heartbeat(req).await.unwrap();
            let seen: Vec<_> = server
                .calls()
                .into_iter()
                .map(|c| c.grpc_timeout.unwrap())
                .collect();
            assert_eq!(seen, ["8000000u", "12000000u", "2000000u"]);
        });
        Ok(())
    });
}

#[test]
fn retry_settings_at_every_level_with_their_sources() {
    use sw4rm_timeouts::{GlobalConfig, ProfileField, RetryPolicy, Source};
    let file = GlobalConfig::from_toml_str(
        "[profiles.workflow_status.retry]\nmax_attempts = 4\nattempt_timeout_ms = 2000\n\
         [routes]\n\"/acme.Batch/Get\" = { profile = \"workflow_status\", idempotent = true }\n",
        "deploy.toml",
    )
    .unwrap();
    let set = ProfileSet::builder()
        .global(file)
        .retry("heartbeat", RetryPolicy::off())
        .build()
        .unwrap();
    let ws = set.resolved("workflow_status").unwrap();
    assert_eq!(ws.retry().max_attempts(), 4);
    assert_eq!(
        ws.retry().attempt_timeout(),
        Some(std::time::Duration::from_secs(2))
    );
    assert!(matches!(
        ws.source_of(ProfileField::RetryMaxAttempts),
        Source::File(_)
    ));
    assert_eq!(
        ws.source_of(ProfileField::RetryInitialBackoff),
        &Source::Standard
    );
    assert!(!set.resolved("heartbeat").unwrap().retry().is_on());
    assert_eq!(
        set.resolved("heartbeat")
            .unwrap()
            .source_of(ProfileField::RetryMaxAttempts),
        &Source::Client
    );
    assert!(set.is_idempotent("/acme.Batch/Get"));
    assert!(!set.is_idempotent("/sw4rm.tool.ToolService/InvokeTool"));
    let text = set.to_string();
    assert!(text.contains("retry.max_attempts"), "{text}");
    assert!(text.contains("/acme.Batch/Get"), "{text}");
    assert!(text.contains("(idempotent)"), "{text}");

    let env =
        GlobalConfig::from_env_vars([("sw4rm_profiles__heartbeat__retry__max_backoff_ms", "250")])
            .unwrap();
    let set = ProfileSet::builder().global(env).build().unwrap();
    let hb = set.resolved("heartbeat").unwrap();
    assert_eq!(
        hb.retry().max_backoff(),
        std::time::Duration::from_millis(250)
    );
    assert_eq!(
        hb.source_of(ProfileField::RetryMaxBackoff).to_string(),
        "global (env sw4rm_profiles__heartbeat__retry__max_backoff_ms)"
    );
}

#[test]
fn hedging_settings_at_every_level_with_their_sources() {
    use std::time::Duration;
    use sw4rm_timeouts::{HedgingDelay, HedgingPolicy};
    let file = GlobalConfig::from_toml_str(
        "[profiles.workflow_status.hedging]\nmax_attempts = 3\nmin_delay_ms = 5\n\
         [profiles.negotiation_decision.hedging]\nmax_attempts = 2\ndelay_ms = 40\n",
        "deploy.toml",
    )
    .unwrap();
    let env = GlobalConfig::from_env_vars([(
        "SW4RM_PROFILES__WORKFLOW_STATUS__HEDGING__PERCENTILE",
        "90",
    )])
    .unwrap();
    let set = ProfileSet::builder()
        .global(file.merged_with(env))
        .hedging("heartbeat", HedgingPolicy::builder().build().unwrap())
        .build()
        .unwrap();
    let ws = set.resolved("workflow_status").unwrap();
    assert_eq!(ws.hedging().max_attempts(), 3);
    assert_eq!(
        ws.hedging().delay(),
        HedgingDelay::Learned {
            percentile: 90,
            min: Duration::from_millis(5),
            max: Duration::from_secs(1)
        }
    );
    assert!(matches!(
        ws.source_of(ProfileField::HedgeMaxAttempts),
        Source::File(_)
    ));
    assert_eq!(
        ws.source_of(ProfileField::HedgePercentile).to_string(),
        "global (env SW4RM_PROFILES__WORKFLOW_STATUS__HEDGING__PERCENTILE)"
    );
    assert_eq!(ws.source_of(ProfileField::HedgeMaxDelay), &Source::Standard);
    let nd = set.resolved("negotiation_decision").unwrap();
    assert_eq!(
        nd.hedging().delay(),
        HedgingDelay::Fixed(Duration::from_millis(40))
    );
    let hb = set.resolved("heartbeat").unwrap();
    assert!(hb.hedging().is_on());
    assert_eq!(
        hb.source_of(ProfileField::HedgeMaxAttempts),
        &Source::Client
    );
    // Standard: off everywhere else.
    assert!(!set.resolved("tool_call").unwrap().hedging().is_on());
    // The one-line table says who hedges and how.
    let explain = set.explain();
    let line = |name: &str| {
        explain
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(line("workflow_status").contains("3xp90"), "{explain}");
    assert!(line("negotiation_decision").contains("2x40ms"), "{explain}");
    assert!(line("tool_call").contains(" off "), "{explain}");
    // The service config: a fixed delay exports as gRPC's hedgingPolicy on the
    // profile's idempotent routes; a learned one has no form there.
    let json = set.service_config(sw4rm_timeouts::ServiceConfigMode::Default);
    let get_votes = json
        .lines()
        .find(|l| l.contains("\"GetVotes\""))
        .expect("GetVotes");
    assert!(
        get_votes.contains(r#""hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.04s", "nonFatalStatusCodes": ["UNAVAILABLE"]}"#),
        "{get_votes}"
    );
    assert!(!get_votes.contains("retryPolicy"), "{get_votes}");
    let status = json
        .lines()
        .find(|l| l.contains("\"GetTaskStatus\""))
        .expect("GetTaskStatus");
    assert!(
        !status.contains("hedgingPolicy") && status.contains("retryPolicy"),
        "{status}"
    );
}

#[test]
fn a_misspelt_profile_in_the_builder_gets_a_suggestion() {
    let err = ProfileSet::builder()
        .without_global()
        .max_timeout_ms("heartbaet", 10_000)
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("(did you mean `heartbeat`?)"),
        "{err}"
    );
}

#[test]
fn an_apps_own_file_section_and_env_compose() {
    use sw4rm_timeouts::GlobalConfig;
    let app = "[agent]\nname = \"planner\"\n[agent.timeouts.profiles.heartbeat]\nmax_timeout_ms = 9000\ndefault_timeout_ms = 4000\n";
    let file = GlobalConfig::from_toml_section(app, "agent.timeouts", "agent.toml").unwrap();
    let env = GlobalConfig::from_env_vars([("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "12000")])
        .unwrap();
    let set = ProfileSet::builder()
        .global(file.merged_with(env))
        .build()
        .unwrap();
    let hb = set.resolved("heartbeat").unwrap();
    assert_eq!(
        (hb.profile().default_timeout_ms, hb.profile().max_timeout_ms),
        (4_000, 12_000)
    );
    assert_eq!(
        hb.source_of(sw4rm_timeouts::ProfileField::Default)
            .to_string(),
        "global (file agent.toml)"
    );
    assert_eq!(
        hb.source_of(sw4rm_timeouts::ProfileField::Max).to_string(),
        "global (env SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS)"
    );
    // A missing section is no settings, not an error.
    let none = GlobalConfig::from_toml_section(app, "agent.nothing", "agent.toml").unwrap();
    assert_eq!(none, GlobalConfig::empty());
}

#[test]
fn an_explicit_file_with_the_environment_over_it() {
    Jail::expect_with(|j| {
        j.create_file(
            "deploy.toml",
            "[profiles.heartbeat]\nmax_timeout_ms = 9000\nmin_timeout_ms = 2000\n",
        )?;
        j.set_env("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "12000");
        let global = sw4rm_timeouts::GlobalConfig::from_file_and_env("deploy.toml").unwrap();
        let set = ProfileSet::builder().global(global).build().unwrap();
        let hb = set.profile("heartbeat").unwrap();
        assert_eq!((hb.min_timeout_ms, hb.max_timeout_ms), (2_000, 12_000));
        Ok(())
    });
}

#[test]
fn long_lived_routes_from_a_file_and_the_builder() {
    use sw4rm_timeouts::GlobalConfig;
    let file = GlobalConfig::from_toml_str(
        "[routes]\n\"/acme.Events/Subscribe\" = { profile = \"message_route\", long_lived = true }\n",
        "deploy.toml",
    )
    .unwrap();
    let set = ProfileSet::builder()
        .global(file)
        .long_lived_route("/acme.Feed/*", "workflow_status")
        .build()
        .unwrap();
    let shape = |pattern: &str| {
        let r = set.routes().find(|r| r.pattern == pattern).unwrap();
        (r.profile, r.streaming, r.long_lived)
    };
    assert_eq!(
        shape("/acme.Events/Subscribe"),
        ("message_route", true, true)
    );
    assert_eq!(shape("/acme.Feed/*"), ("workflow_status", true, true));
    // The standard inbox keeps its shape when a deployment only changes its profile.
    let moved = GlobalConfig::from_toml_str(
        "[routes]\n\"/sw4rm.router.RouterService/StreamIncoming\" = \"workflow_status\"\n",
        "deploy.toml",
    )
    .unwrap();
    let set = ProfileSet::builder().global(moved).build().unwrap();
    let inbox = set
        .routes()
        .find(|r| r.pattern.ends_with("/StreamIncoming"))
        .unwrap();
    assert_eq!((inbox.profile, inbox.long_lived), ("workflow_status", true));

    let bad = GlobalConfig::from_toml_str(
        "[routes]\n\"/a.B/C\" = { profile = \"message_route\", long_lived = \"yes\" }\n",
        "deploy.toml",
    )
    .and_then(|g| ProfileSet::builder().global(g).build())
    .unwrap_err()
    .to_string();
    assert!(bad.contains("routes./a.B/C.long_lived"), "{bad}");
}
