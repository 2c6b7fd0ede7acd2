//! The `sw4rm-timeouts` operator command: output and exit codes fit for scripts.

use std::process::Command;

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sw4rm-timeouts"))
        .args(args)
        .env_remove("SW4RM_CONFIG")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

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
