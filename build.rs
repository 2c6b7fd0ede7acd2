//! Compiles `proto/*.proto` with protox (pure Rust, no system `protoc`) and generates
//! prost messages plus tonic clients, and servers behind the `server` feature.

use std::path::Path;

const PROTOS: &[&str] = &[
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new("proto");
    for proto in PROTOS {
        println!("cargo:rerun-if-changed=proto/{proto}");
    }
    let fds = protox::compile(PROTOS, [dir])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Servers only with the `server` feature: most agents only call SW4RM.
        .server_mod_attribute(
            ".",
            "#[cfg(feature = \"server\")] #[cfg_attr(docsrs, doc(cfg(feature = \"server\")))]",
        )
        .emit_rerun_if_changed(false)
        .compile_fds(fds)?;
    Ok(())
}
