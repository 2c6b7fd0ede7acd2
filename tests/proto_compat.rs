//! Wire compatibility: every package, service, method, message, field (number,
//! type, label) and enum value of the upstream SW4RM protos exists identically in
//! ours, and the SW4-002 additions use new names and numbers only.

use std::collections::BTreeMap;
use std::path::Path;

use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};

const FILES: [&str; 6] = [
    "common.proto",
    "registry.proto",
    "scheduler.proto",
    "negotiation_room.proto",
    "handoff.proto",
    "tool.proto",
];

fn compile(dir: &Path) -> FileDescriptorSet {
    protox::compile(FILES, [dir]).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

#[derive(Default)]
struct Index {
    messages: BTreeMap<String, DescriptorProto>,
    enums: BTreeMap<String, EnumDescriptorProto>,
    methods: BTreeMap<String, (String, String, bool, bool)>,
}

fn index_message(prefix: &str, m: &DescriptorProto, idx: &mut Index) {
    let name = format!("{prefix}.{}", m.name());
    for nested in &m.nested_type {
        index_message(&name, nested, idx);
    }
    for e in &m.enum_type {
        idx.enums.insert(format!("{name}.{}", e.name()), e.clone());
    }
    idx.messages.insert(name, m.clone());
}

fn index(set: &FileDescriptorSet) -> Index {
    let mut idx = Index::default();
    for file in &set.file {
        if file.package().starts_with("google.") {
            continue;
        }
        let prefix = format!(".{}", file.package());
        for m in &file.message_type {
            index_message(&prefix, m, &mut idx);
        }
        for e in &file.enum_type {
            idx.enums
                .insert(format!("{prefix}.{}", e.name()), e.clone());
        }
        for s in &file.service {
            for m in &s.method {
                idx.methods.insert(
                    format!("{prefix}.{}/{}", s.name(), m.name()),
                    (
                        m.input_type().to_owned(),
                        m.output_type().to_owned(),
                        m.client_streaming(),
                        m.server_streaming(),
                    ),
                );
            }
        }
    }
    idx
}

#[test]
fn our_protos_are_wire_identical_to_upstream() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let upstream_dir = root.join("../shared/reference/upstream-protos");
    if !upstream_dir.is_dir() {
        // The reference protos live beside the repository in the project workspace.
        eprintln!("skipped: {} not found", upstream_dir.display());
        return;
    }
    let upstream = index(&compile(&upstream_dir));
    let ours = index(&compile(&root.join("proto")));
    assert!(upstream.messages.len() > 40, "upstream index looks empty");

    for (name, theirs) in &upstream.messages {
        let mine = ours
            .messages
            .get(name)
            .unwrap_or_else(|| panic!("missing message {name}"));
        for f in &theirs.field {
            let m = mine
                .field
                .iter()
                .find(|g| g.number() == f.number())
                .unwrap_or_else(|| panic!("{name}: missing field #{} {}", f.number(), f.name()));
            assert_eq!(
                (
                    m.name(),
                    m.r#type(),
                    m.type_name(),
                    m.label(),
                    m.oneof_index,
                    m.proto3_optional
                ),
                (
                    f.name(),
                    f.r#type(),
                    f.type_name(),
                    f.label(),
                    f.oneof_index,
                    f.proto3_optional
                ),
                "{name}.{}",
                f.name()
            );
        }
        assert_eq!(
            mine.field.len(),
            theirs.field.len(),
            "{name}: extra fields on an upstream message"
        );
    }
    for (name, theirs) in &upstream.enums {
        let mine = ours
            .enums
            .get(name)
            .unwrap_or_else(|| panic!("missing enum {name}"));
        let values = |e: &EnumDescriptorProto| {
            e.value
                .iter()
                .map(|v| (v.name().to_owned(), v.number()))
                .collect::<Vec<_>>()
        };
        assert_eq!(values(mine), values(theirs), "{name}");
    }
    for (name, theirs) in &upstream.methods {
        assert_eq!(ours.methods.get(name), Some(theirs), "{name}");
    }
    // The SW4-002 additions.
    for added in [
        ".sw4rm.scheduler.SchedulerService/CancelTask",
        ".sw4rm.scheduler.SchedulerService/GetTaskStatus",
        ".sw4rm.tool.ToolService/InvokeTool",
        ".sw4rm.tool.ToolService/DescribeTool",
    ] {
        assert!(
            ours.methods.contains_key(added) && !upstream.methods.contains_key(added),
            "{added}"
        );
    }
    assert_eq!(ours.methods.len(), 26);
}
