//! Runs the `sw4rm-timeouts` command as a script would, from the workspace's root
//! (where the docs' command lines run and the example configuration is), with no
//! `SW4RM_CONFIG` of the environment's. `#[path]`-included by the tests that run it.

use std::process::Command;

/// The workspace's root.
#[allow(dead_code)] // not every test that includes this file reads files there
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The exit code, stdout and stderr of the command run with `args`.
pub fn cli(args: &[&str]) -> (i32, String, String) {
    cli_env(args, &[])
}

/// [`cli`] with `vars` set in its environment.
pub fn cli_env(args: &[&str], vars: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sw4rm-timeouts"))
        .args(args)
        .env_remove("SW4RM_CONFIG")
        .envs(vars.iter().copied())
        .current_dir(ROOT)
        .output()
        .expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
