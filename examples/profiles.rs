//! Prints the effective timeout profiles, routes and fallback with the source of
//! every value, after loading the real global configuration (`SW4RM_CONFIG` or
//! `./sw4rm.toml`, and `SW4RM_*` variables). For operators debugging a deployment:
//!
//! ```text
//! SW4RM_CONFIG=sw4rm.example.toml SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS=25000 \
//!     cargo run --example profiles
//! ```
//!
//! To run it in a project of your own, make it `src/main.rs` with these dependencies:
//!
//! ```toml
//! sw4rm-timeouts = { version = "0.1", features = ["testing"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
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
