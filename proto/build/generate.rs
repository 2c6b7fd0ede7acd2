//! The one way the generated code in `src/generated/` is made: the crate's `*.proto`
//! compiled with protox (pure Rust, no system `protoc`) into prost messages and tonic
//! clients, and servers behind the `server` feature. Used by `build.rs` (feature
//! `regenerate`) and by `tests/generated_code.rs`, which fails when the shipped code
//! is stale against the `.proto` files.

use std::path::Path;

/// The files compiled, in order.
pub const PROTOS: &[&str] = &[
    "common.proto",
    "registry.proto",
    "scheduler.proto",
    "negotiation_room.proto",
    "handoff.proto",
    "tool.proto",
    "timeout_profiles.proto",
    // The other upstream SW4RM services.
    "policy.proto",
    "scheduler_policy.proto",
    "negotiation.proto",
    "router.proto",
    "hitl.proto",
    "worktree.proto",
    "activity.proto",
    "connector.proto",
    "logging.proto",
    "reasoning.proto",
    // Upstream services newer than SW4RM 0.6.0.
    "workflow.proto",
];

/// Compiles `proto_dir`'s files into one `.rs` file per package in `out_dir`.
pub fn generate(proto_dir: &Path, out_dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let fds = protox::compile(PROTOS, [proto_dir])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Servers only with the `server` feature: most agents only call SW4RM.
        .server_mod_attribute(
            ".",
            "#[cfg(feature = \"server\")] #[cfg_attr(docsrs, doc(cfg(feature = \"server\")))]",
        )
        .emit_rerun_if_changed(false)
        .out_dir(out_dir)
        .compile_fds(fds)?;
    Ok(())
}
