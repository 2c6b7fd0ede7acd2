//! The `sw4rm-timeouts` operator command: output and exit codes fit for scripts.

use std::process::Command;

#[path = "support/scrape.rs"]
mod exposition;

#[path = "support/command.rs"]
mod command;

use command::{cli, cli_env, ROOT};

#[test]
fn check_accepts_a_valid_file_and_rejects_an_invalid_one() {
    let (code, out, _) = cli(&["check", "sw4rm.example.toml"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("sw4rm.example.toml: valid"), "{out}");

    let dir = std::env::temp_dir().join(format!("sw4rm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[profiles.heartbeat]\nmin_timeout_ms = 0\n").unwrap();
    let (code, out, err) = cli(&["check", bad.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(
        err.contains("profiles.heartbeat.min_timeout_ms = 0: must be greater than 0"),
        "{err}"
    );

    let (code, _, err) = cli(&["check", "/nonexistent/sw4rm.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("no such file"), "{err}");
    std::fs::remove_dir_all(dir).ok();
}

/// The idle limit of long work: one above the cap is lowered to it with a warning
/// naming both values and their sources (the file is still valid); a negative one is
/// refused, naming the environment variable exactly as set; `explain` shows both.
#[test]
fn idle_limits_are_clamped_with_a_warning_and_negative_ones_refused() {
    let dir = std::env::temp_dir().join(format!("sw4rm-cli-idle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("long.toml");
    std::fs::write(
        &file,
        "[profiles.tool_call.streaming]\nidle_timeout_ms = 5000\ntotal_timeout_ms = 1000\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let (code, out, err) = cli(&["check", path]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(": valid"), "{out}");
    assert!(
        err.contains(&format!(
            "warning: {path}: profiles.tool_call.streaming.idle_timeout_ms = 5000: above \
             streaming.total_timeout_ms (1000, from global (file {path})), it could never \
             fire: clamped to 1000"
        )),
        "{err}"
    );
    let (code, out, _) = cli(&["explain", "--config", path]);
    assert_eq!(code, 0);
    let tool = out.lines().find(|l| l.starts_with("tool_call ")).unwrap();
    assert!(tool.contains(" 1000/1000 "), "{tool}");

    let var = "SW4RM_PROFILES__TOOL_CALL__STREAMING__IDLE_TIMEOUT_MS";
    let (code, _, err) = cli_env(&["explain"], &[(var, "-5")]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("{var}=-5: must not be negative")),
        "{err}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn explain_routes_and_service_config() {
    let (code, out, _) = cli(&["explain", "--config", "sw4rm.example.toml"]);
    assert_eq!(code, 0);
    let heartbeat = out.lines().find(|l| l.starts_with("heartbeat ")).unwrap();
    assert!(heartbeat.contains("3000"), "{heartbeat}");
    assert!(
        heartbeat.contains("default_timeout_ms=global (file sw4rm.example.toml)"),
        "{heartbeat}"
    );

    let (code, out, _) = cli(&["routes"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "/sw4rm.registry.RegistryService/Heartbeat\theartbeat\tunary\tidempotent\tstandard\n"
        ),
        "{out}"
    );
    assert!(out.ends_with("*\tuniversal\tunary\t-\tfallback\n"));

    let (code, out, _) = cli(&["service-config", "--mode", "max"]);
    assert_eq!(code, 0);
    assert!(out.contains("\"methodConfig\""));

    let (code, _, err) = cli(&["service-config", "--mode", "sometimes"]);
    assert_eq!(code, 2);
    assert!(err.contains("must be default or max"), "{err}");
    let (code, _, err) = cli(&[]);
    assert_eq!(code, 2);
    assert!(err.contains("usage:"), "{err}");
}

#[test]
fn help_version_and_no_command() {
    for args in [&["--help"][..], &["-h"], &["help"]] {
        let (code, out, err) = cli(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(
            out.contains("usage: sw4rm-timeouts COMMAND"),
            "{args:?}: {out}"
        );
        for command in [
            "explain",
            "check FILE",
            "routes",
            "service-config",
            "help [COMMAND]",
        ] {
            assert!(out.contains(command), "{args:?} lists {command}: {out}");
        }
    }
    for args in [&["help", "check"][..], &["check", "--help"]] {
        let (code, out, _) = cli(args);
        assert_eq!(code, 0, "{args:?}");
        assert!(
            out.starts_with("usage: sw4rm-timeouts check FILE\n"),
            "{args:?}: {out}"
        );
    }
    let (code, out, _) = cli(&["--version"]);
    assert_eq!(
        (code, out.trim()),
        (0, concat!("sw4rm-timeouts ", env!("CARGO_PKG_VERSION")))
    );

    // No command: usage on stderr, exit 2; the same for an unknown one.
    let (code, out, err) = cli(&[]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(
        err.starts_with("sw4rm-timeouts: no command given\n") && err.contains("usage:"),
        "{err}"
    );
    let (code, _, err) = cli(&["help", "explian"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "sw4rm-timeouts: help: unknown command `explian` (did you mean `explain`?)"
        ),
        "{err}"
    );
}

/// A mistyped command: "did you mean" and a short usage on stderr, exit 2 — not the
/// whole help scrolling the reason away.
#[test]
fn a_mistyped_command_says_what_was_meant_in_a_few_lines() {
    let (code, out, err) = cli(&["explian"]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err,
        "sw4rm-timeouts: unknown command `explian` (did you mean `explain`?)\n\
         usage: sw4rm-timeouts COMMAND [OPTIONS]   (commands: explain, check, routes, \
         service-config, advise, slo-rules, help)\n\
         (sw4rm-timeouts --help for what each does)\n"
    );
    let (code, _, err) = cli(&["servce-config"]);
    assert_eq!(code, 2);
    assert!(err.contains("(did you mean `service-config`?)"), "{err}");
    // Nothing close: no guess.
    let (_, _, err) = cli(&["frobnicate"]);
    assert!(
        err.starts_with("sw4rm-timeouts: unknown command `frobnicate`\n"),
        "{err}"
    );
    // A known command used wrongly: its own synopsis.
    let (code, _, err) = cli(&["check"]);
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "sw4rm-timeouts: check needs a FILE\nusage: sw4rm-timeouts check FILE\n\
         (sw4rm-timeouts help check for more)\n"
    );
}

/// The READMEs and the guide's chapters (the core's and this crate's), one after the
/// other.
fn docs() -> String {
    let own = env!("CARGO_MANIFEST_DIR");
    let mut text = std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    text.push_str(&std::fs::read_to_string(format!("{own}/README.md")).unwrap());
    let mut chapters: Vec<_> = std::fs::read_dir(format!("{ROOT}/docs/guide"))
        .unwrap()
        .chain(std::fs::read_dir(format!("{own}/docs")).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    for chapter in chapters {
        text.push_str(&std::fs::read_to_string(chapter).unwrap());
    }
    text
}

/// The command lines of the README and the guide run as written.
#[test]
fn the_readme_examples_run() {
    let readme = docs();
    let prefix = "cargo run -p sw4rm-advise --bin sw4rm-timeouts -- ";
    let lines: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .collect();
    assert!(lines.len() >= 4, "{lines:?}");
    for line in lines {
        let args: Vec<&str> = line.split('#').next().unwrap().split_whitespace().collect();
        let (code, _, err) = cli(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
}

/// The configuration mistakes a newcomer makes are named as written.
#[test]
fn mistakes_are_named_as_written() {
    // Single underscores: reported (not silently ignored), with the name it should have.
    let (code, _, err) = cli_env(
        &["explain"],
        &[("SW4RM_PROFILES_HEARTBEAT_DEFAULT_TIMEOUT_MS", "2000")],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("SW4RM_PROFILES_HEARTBEAT_DEFAULT_TIMEOUT_MS: malformed name")
            && err.contains("did you mean SW4RM_PROFILES__HEARTBEAT__DEFAULT_TIMEOUT_MS?"),
        "{err}"
    );

    // A zero default: the value written, and the rule it breaks.
    let dir = std::env::temp_dir().join(format!("sw4rm-cli-zero-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let zero = dir.join("zero.toml");
    std::fs::write(&zero, "[profiles.heartbeat]\ndefault_timeout_ms = 0\n").unwrap();
    let (code, _, err) = cli(&["check", zero.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        err.contains("profiles.heartbeat.default_timeout_ms = 0: must be greater than 0"),
        "{err}"
    );
    assert!(!err.contains("min_timeout_ms"), "{err}");
    std::fs::remove_dir_all(dir).ok();

    // The example file and the guide give a profile timeout's range alike.
    let example = std::fs::read_to_string(format!("{ROOT}/sw4rm.example.toml")).unwrap();
    for (file, text) in [("the docs", docs()), ("sw4rm.example.toml", example)] {
        assert!(text.contains("1 to 4294967295"), "{file}");
        assert!(!text.contains("0 to 4294967295"), "{file}");
    }
}

/// `advise` on `exposition` written to a file in a directory of its own (`tag`):
/// the directory, and the exit code, stdout and stderr.
fn advise_file(tag: &str, exposition: &str) -> (std::path::PathBuf, (i32, String, String)) {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let metrics = dir.join("metrics.txt");
    std::fs::write(&metrics, exposition).unwrap();
    let run = cli(&["advise", metrics.to_str().unwrap()]);
    (dir, run)
}

#[test]
fn advise_reads_an_exposition_and_writes_an_overlay() {
    let route = "method=\"Call\",profile=\"tool_call\",service=\"sw4rm.tool.ToolService\"";
    let exposition = format!(
        "# TYPE sw4rm_rpc_duration_ms histogram\n\
         sw4rm_rpc_duration_ms_bucket{{{route},le=\"100\"}} 900\n\
         sw4rm_rpc_duration_ms_bucket{{{route},le=\"250\"}} 1000\n\
         sw4rm_rpc_duration_ms_bucket{{{route},le=\"+Inf\"}} 1000\n\
         sw4rm_rpc_timeout_total{{{route}}} 0\n"
    );
    let (dir, (code, out, err)) = advise_file("sw4rm-cli-advise", &exposition);
    assert_eq!(code, 0, "{err}");
    // p99.9 in the 250 ms bucket: 4x its upper bound, rounded up, is 1 s.
    assert!(
        out.contains("[profiles.tool_call]\ndefault_timeout_ms = 1000\n"),
        "{out}"
    );
    assert!(
        out.contains("histogram buckets"),
        "says what bucket resolution costs: {out}"
    );
    // The overlay is a valid deployment file.
    let overlay = dir.join("overlay.toml");
    std::fs::write(&overlay, &out).unwrap();
    let (code, out, err) = cli(&["check", overlay.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("valid"), "{out}");
    let (code, out, _) = cli(&["explain", "--config", overlay.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        out.lines()
            .any(|l| l.starts_with("tool_call") && l.contains("1000")),
        "{out}"
    );

    // Foreign or unreadable input: exit 1, the reason on stderr.
    let foreign = dir.join("foreign.txt");
    std::fs::write(&foreign, "up 1\nprocess_cpu_seconds_total 3\n").unwrap();
    let (code, out, err) = cli(&["advise", foreign.to_str().unwrap()]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.contains("not a Prometheus exposition of the SW4RM SDK's metrics"),
        "{err}"
    );
    let (code, _, err) = cli(&["advise", dir.join("missing.txt").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("missing.txt: cannot read"), "{err}");
    let (code, _, err) = cli(&["advise"]);
    assert_eq!(code, 2, "{err}");

    // --report: the same overlay on stdout, and the page written beside it.
    let page = dir.join("advice.html");
    let (code, with_report, err) = cli(&[
        "advise",
        dir.join("metrics.txt").to_str().unwrap(),
        "--report",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (_, without, _) = cli(&["advise", dir.join("metrics.txt").to_str().unwrap()]);
    assert_eq!(with_report, without);
    let html = std::fs::read_to_string(&page).expect("the page is written");
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(
        html.contains(r#"id="/sw4rm.tool.ToolService/Call""#),
        "{html}"
    );
    let (code, _, err) = cli(&[
        "advise",
        dir.join("metrics.txt").to_str().unwrap(),
        "--report",
        dir.join("no-such-dir/advice.html").to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot write"), "{err}");
    let (code, _, err) = cli(&["advise", "-", "--report"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn advise_reads_stdin() {
    use std::io::Write;
    let route =
        "method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\"";
    let exposition = format!(
        "sw4rm_rpc_duration_ms_bucket{{{route},le=\"10\"}} 500\n\
         sw4rm_rpc_duration_ms_bucket{{{route},le=\"+Inf\"}} 500\n"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_sw4rm-timeouts"))
        .args(["advise", "-"])
        .env_remove("SW4RM_CONFIG")
        .current_dir(ROOT)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(exposition.as_bytes())
        .expect("written");
    let out = child.wait_with_output().expect("ends");
    assert_eq!(out.status.code(), Some(0));
    let out = String::from_utf8_lossy(&out.stdout);
    // 10 ms heartbeats under a 5 s default: held at the profile's 1 s minimum.
    assert!(
        out.contains("[profiles.heartbeat]\ndefault_timeout_ms = 1000\n"),
        "{out}"
    );
    assert!(
        out.contains("held at the profile's min_timeout_ms"),
        "{out}"
    );
}

/// A histogram cut short (no `+Inf` bucket) is refused with exit 1, not advised on.
#[test]
fn advise_refuses_a_histogram_without_its_inf_bucket() {
    let route = "method=\"Call\",profile=\"tool_call\",service=\"sw4rm.tool.ToolService\"";
    let exposition = format!(
        "sw4rm_rpc_duration_ms_bucket{{{route},le=\"100\"}} 900\n\
         sw4rm_rpc_duration_ms_bucket{{{route},le=\"250\"}} 1000\n"
    );
    let (dir, (code, out, err)) = advise_file("sw4rm-cli-noinf", &exposition);
    assert_eq!(code, 1, "{out}");
    assert!(out.is_empty(), "no overlay: {out}");
    assert!(
        err.contains(
            "sw4rm_rpc_duration_ms for /sw4rm.tool.ToolService/Call (profile tool_call) has \
             no le=\"+Inf\" bucket, only buckets up to 250 ms"
        ),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A file with five mistakes — two the file's reader sees (a value that is not a
/// number, a misspelt key) and three only the merged table shows (min above default, a
/// retry count out of range, a route to an unknown profile) — reports all five at once,
/// through `check`, `explain --config` and `SW4RM_CONFIG` alike.
#[test]
fn every_problem_of_a_file_at_once_through_every_door() {
    let dir = std::env::temp_dir().join(format!("sw4rm-cli-five-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("five.toml");
    std::fs::write(
        &file,
        "[profiles.heartbeat]\n\
         min_timeout_ms = 9000\n\
         [profiles.tool_call]\n\
         max_timeout_ms = \"an hour\"\n\
         [profiles.task_submit]\n\
         defualt_timeout_ms = 1000\n\
         [profiles.workflow_status.retry]\n\
         max_attempts = 9\n\
         [routes]\n\
         \"/acme.Batch/*\" = \"nightly\"\n",
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let problems = |err: &str| -> Vec<String> {
        err.lines()
            .filter(|l| l.contains(" = ") || l.contains(": "))
            .map(str::to_owned)
            .collect()
    };
    let (code, _, check) = cli(&["check", path]);
    assert_eq!(code, 1, "{check}");
    let (code, _, explain) = cli(&["explain", "--config", path]);
    assert_eq!(code, 1, "{explain}");
    let (code, _, env) = cli_env(&["explain"], &[("SW4RM_CONFIG", path)]);
    assert_eq!(code, 1, "{env}");
    for (door, err) in [("check", &check), ("explain", &explain), ("env", &env)] {
        for needle in [
            "profiles.heartbeat.min_timeout_ms",
            "profiles.tool_call.max_timeout_ms",
            "defualt_timeout_ms",
            "profiles.workflow_status.retry.max_attempts",
            "/acme.Batch/*",
        ] {
            assert!(err.contains(needle), "{door}: {needle} missing from\n{err}");
        }
    }
    assert_eq!(problems(&check), problems(&explain), "{check}\n{explain}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A proposal the replay cannot show is better (a longer default, for calls that
/// time out near it) is written as a suggestion, and the exit code says so.
#[test]
fn advise_exits_3_when_a_proposal_does_not_dominate() {
    let route =
        "method=\"Heartbeat\",profile=\"heartbeat\",service=\"sw4rm.registry.RegistryService\"";
    let exposition = format!(
        "sw4rm_rpc_duration_ms_bucket{{{route},le=\"2500\"}} 0\n\
         sw4rm_rpc_duration_ms_bucket{{{route},le=\"5000\"}} 950\n\
         sw4rm_rpc_duration_ms_bucket{{{route},le=\"10000\"}} 1000\n\
         sw4rm_rpc_duration_ms_bucket{{{route},le=\"+Inf\"}} 1000\n\
         sw4rm_rpc_timeout_total{{{route}}} 50\n"
    );
    let (dir, (code, out, err)) = advise_file("sw4rm-cli-advise3", &exposition);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("1 proposal(s) do not dominate"), "{err}");
    assert!(
        out.contains("#? [profiles.heartbeat]\n#? default_timeout_ms = "),
        "{out}"
    );
    assert!(out.contains("0 of 1 proposals written"), "{out}");
    // As written it changes nothing, and is a valid file.
    let overlay = dir.join("overlay.toml");
    std::fs::write(&overlay, &out).unwrap();
    let (code, out, err) = cli(&["explain", "--config", overlay.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("heartbeat") && l.contains("5000")),
        "{out}"
    );
    std::fs::remove_dir_all(dir).ok();
}

/// Every command refuses what it does not take — an unknown option, an extra
/// argument, an option without its value — with exit 2 and the word named on stderr,
/// never acting as if it were not there.
#[test]
fn every_command_refuses_what_it_does_not_take() {
    let example = "sw4rm.example.toml";
    // (the words, what stderr names)
    let rows: [(&[&str], &str); 14] = [
        (
            &["explain", "--confg", example],
            "explain: unknown option `--confg` (did you mean `--config`?)",
        ),
        (
            &["explain", "extra"],
            "explain: unexpected argument `extra`",
        ),
        (&["explain", "--config"], "explain: --config needs a value"),
        (&["routes", "--bogus"], "routes: unknown option `--bogus`"),
        (
            &["routes", "--config", example, "--config", example],
            "routes: --config given twice",
        ),
        (
            &["service-config", "--mod", "max"],
            "service-config: unknown option `--mod` (did you mean `--mode`?)",
        ),
        (
            &["service-config", "x"],
            "service-config: unexpected argument `x`",
        ),
        (
            &["check", example, "missing.toml"],
            "check: unexpected argument `missing.toml`",
        ),
        (
            &["check", "--bogus", example],
            "check: unknown option `--bogus`",
        ),
        (&["check"], "check needs a FILE"),
        (
            &["check", "--config", example],
            "check: unknown option `--config`",
        ),
        (
            &["advise", "m.txt", "--confg", example],
            "advise: unknown option `--confg` (did you mean `--config`?)",
        ),
        (
            &["advise", "m.txt", "--bogus"],
            "advise: unknown option `--bogus`",
        ),
        (
            &["advise", "a.txt", "b.txt"],
            "advise: unexpected argument `b.txt`",
        ),
    ];
    for (words, named) in rows {
        let (code, out, err) = cli(words);
        assert_eq!(code, 2, "{words:?}: {err}");
        assert!(err.contains(named), "{words:?}: {err}");
        assert!(out.is_empty(), "{words:?} acted: {out}");
    }
    // What each command does take still works.
    for words in [
        &["explain", "--config", example][..],
        &["routes", "--config", example],
        &["service-config", "--mode", "max", "--config", example],
        &["check", example],
    ] {
        let (code, _, err) = cli(words);
        assert_eq!(code, 0, "{words:?}: {err}");
    }
}

/// `advise` judges a scrape against the table the agent ran with, as the scrape says
/// it (`sw4rm_rpc_configured_timeout_ms`): heartbeat at 1000 ms with fast calls fits,
/// and nothing proposes the value already in use. A `--config` that disagrees with
/// the scrape is named value by value; a scrape without the gauge says which table
/// it was judged against.
#[test]
fn advise_judges_against_the_table_in_the_scrape() {
    let mut scrape = String::from(
        "sw4rm_rpc_configured_timeout_ms{bound=\"default\",profile=\"heartbeat\"} 1000\n\
         sw4rm_rpc_configured_timeout_ms{bound=\"min\",profile=\"heartbeat\"} 1000\n\
         sw4rm_rpc_configured_timeout_ms{bound=\"max\",profile=\"heartbeat\"} 10000\n",
    );
    scrape.push_str(&exposition::heartbeats());
    let (dir, (code, out, err)) = advise_file("scraped-table", &scrape);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("# heartbeat: fits (default 1000 ms;"), "{out}");
    assert!(
        !out.contains("default 5000 ms"),
        "judged against the standard table: {out}"
    );
    assert!(
        !out.contains("default_timeout_ms = 1000"),
        "proposes what is in use: {out}"
    );
    assert!(err.is_empty(), "{err}");

    // With a --config that says otherwise: each value that differs is named.
    let scrape_path = dir.join("metrics.txt");
    let standard = dir.join("standard.toml");
    std::fs::write(&standard, "# the standard table\n").unwrap();
    let (code, _, err) = cli(&[
        "advise",
        scrape_path.to_str().unwrap(),
        "--config",
        standard.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    // The file sets nothing: the values it is compared by are SW4-002's, and said so
    // (they were attributed to the file).
    let named = format!(
        "the scrape and --config {} disagree: heartbeat default_timeout_ms: 1000 ms in the \
         scrape, 5000 ms in SW4-002's standard table (--config {} does not set it)",
        standard.display(),
        standard.display()
    );
    assert!(err.contains(&named), "{err}");
    assert!(
        err.contains("heartbeat max_timeout_ms: 10000 ms in the scrape, 30000 ms"),
        "{err}"
    );
    // A value the file does set is the file's.
    let tuned = dir.join("tuned.toml");
    std::fs::write(&tuned, "[profiles.heartbeat]\nmax_timeout_ms = 20000\n").unwrap();
    let (code, _, err) = cli(&[
        "advise",
        scrape_path.to_str().unwrap(),
        "--config",
        tuned.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let named = format!(
        "heartbeat max_timeout_ms: 10000 ms in the scrape, 20000 ms in --config {} (",
        tuned.display()
    );
    assert!(err.contains(&named), "{err}");

    // Without the gauge: which table it fell back to, said.
    let bare: String = scrape
        .lines()
        .filter(|l| !l.starts_with("sw4rm_rpc_configured_timeout_ms"))
        .map(|l| format!("{l}\n"))
        .collect();
    let (_, (code, out, err)) = advise_file("scraped-bare", &bare);
    assert!(code == 0 || code == 3, "{err}");
    assert!(out.contains("default 5000 ms"), "{out}");
    assert!(
        err.contains("has no sw4rm_rpc_configured_timeout_ms") && err.contains("judged against"),
        "{err}"
    );
}

/// Configuration messages lead with the key that was set, say the fix, and one bad
/// value does not cascade into a second, false problem (verbatim).
#[test]
fn configuration_messages_lead_with_what_was_set_and_say_the_fix() {
    let dir = std::env::temp_dir().join(format!("sw4rm-cli-messages-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // (the file, the one problem it has, verbatim after the file's name)
    let rows = [
        (
            "[profiles.tool_call]\ndefault_timeout_ms = 500\n[routes]\n\"/acme.Stream/Watch\" = \"tool_call\"\n",
            "profiles.tool_call.default_timeout_ms = 500: must be >= min_timeout_ms (1000, \
             standard): lower min_timeout_ms too, or keep the default >= 1000",
        ),
        (
            "[profiles.tool_call]\ndefault_timeout_ms = 500\nmin_timeout_ms = 800\n",
            "profiles.tool_call.min_timeout_ms = 800: must be <= default_timeout_ms (500) \
             (default_timeout_ms from global (file FILE)): lower min_timeout_ms to 500 or \
             below, or raise the default to 800",
        ),
    ];
    for (i, (text, problem)) in rows.into_iter().enumerate() {
        let file = dir.join(format!("{i}.toml"));
        std::fs::write(&file, text).unwrap();
        let shown = file.display().to_string();
        let (code, _, err) = cli(&["check", &shown]);
        assert_eq!(code, 1, "{err}");
        let want = format!(
            "invalid SW4RM timeout configuration (1 problem):\n  - {shown}: {}\n",
            problem.replace("FILE", &shown)
        );
        assert_eq!(err, want);
    }
    std::fs::remove_dir_all(dir).ok();
}
