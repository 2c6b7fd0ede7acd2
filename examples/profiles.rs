//! Prints the effective timeout profiles, routes and fallback with the source of
//! every value, after loading the real global configuration (`SW4RM_CONFIG` or
//! `./sw4rm.toml`, and `SW4RM_*` variables). For operators debugging a deployment:
//!
//! ```text
//! SW4RM_CONFIG=sw4rm.example.toml SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS=25000 \
//!     cargo run --example profiles
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    match sw4rm_timeouts::ProfileSet::from_global() {
        Ok(set) => {
            println!("{set}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
