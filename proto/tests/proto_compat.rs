//! Wire compatibility with upstream SW4RM: every package, service, method, message,
//! field (number, name, type, label) and enum value of every upstream file exists
//! identically in ours, and the SW4-002 additions use new methods, or field numbers
//! 50–59 (reserved for SW4-002 by upstream's SW4-004, Appendix A), only.
//!
//! The upstream contract is kept as a plain-text wire listing in
//! `tests/golden/upstream_wire.txt`, so the check runs wherever the repository is cloned.
//! Where the upstream `.proto` files sit beside the repository
//! (`../shared/reference/upstream-protos` from the repository's root), the listing is also checked against them
//! (`SW4RM_BLESS=1` rewrites it from them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};

/// The methods SW4-002 adds to upstream services, in listing order.
const ADDED_METHODS: [&str; 4] = [
    ".sw4rm.scheduler.SchedulerService/CancelTask",
    ".sw4rm.scheduler.SchedulerService/GetTaskStatus",
    ".sw4rm.tool.ToolService/DescribeTool",
    ".sw4rm.tool.ToolService/InvokeTool",
];

/// Field numbers upstream reserves for SW4-002 additions on its messages.
const RESERVED_FOR_SW4_002: std::ops::RangeInclusive<i32> = 50..=59;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn proto_files(dir: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.ends_with(".proto").then_some(name)
        })
        .collect();
    files.sort();
    files
}

fn compile(dir: &Path) -> FileDescriptorSet {
    protox::compile(proto_files(dir), [dir]).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// One item of the wire contract, ordered and printable as one line.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Wire {
    Message(String),
    Field {
        message: String,
        number: i32,
        rest: String,
    },
    EnumValue {
        enumeration: String,
        number: i32,
        name: String,
    },
    Method {
        path: String,
        shape: String,
    },
}

impl Wire {
    fn line(&self) -> String {
        match self {
            Wire::Message(name) => format!("message {name}"),
            Wire::Field {
                message,
                number,
                rest,
            } => format!("field {message} #{number} {rest}"),
            Wire::EnumValue {
                enumeration,
                number,
                name,
            } => format!("enum {enumeration} {name} = {number}"),
            Wire::Method { path, shape } => format!("rpc {path} {shape}"),
        }
    }
}

fn message_items(prefix: &str, m: &DescriptorProto, out: &mut BTreeSet<Wire>) {
    let name = format!("{prefix}.{}", m.name());
    for nested in &m.nested_type {
        message_items(&name, nested, out);
    }
    for e in &m.enum_type {
        enum_items(&format!("{name}.{}", e.name()), e, out);
    }
    for f in &m.field {
        let label = Label::try_from(f.label.unwrap_or_default()).map_or("?", |l| l.as_str_name());
        let ty = Type::try_from(f.r#type.unwrap_or_default()).map_or("?", |t| t.as_str_name());
        let mut rest = format!("{} {label} {ty}", f.name());
        if !f.type_name().is_empty() {
            rest.push(' ');
            rest.push_str(f.type_name());
        }
        if let Some(oneof) = f.oneof_index {
            let oneof = m.oneof_decl.get(oneof as usize).map_or("?", |o| o.name());
            rest.push_str(&format!(" oneof {oneof}"));
        }
        if f.proto3_optional() {
            rest.push_str(" proto3_optional");
        }
        out.insert(Wire::Field {
            message: name.clone(),
            number: f.number(),
            rest,
        });
    }
    out.insert(Wire::Message(name));
}

fn enum_items(name: &str, e: &prost_types::EnumDescriptorProto, out: &mut BTreeSet<Wire>) {
    for v in &e.value {
        out.insert(Wire::EnumValue {
            enumeration: name.to_owned(),
            number: v.number(),
            name: v.name().to_owned(),
        });
    }
}

fn wire(set: &FileDescriptorSet) -> BTreeSet<Wire> {
    let mut out = BTreeSet::new();
    for file in set
        .file
        .iter()
        .filter(|f| !f.package().starts_with("google."))
    {
        let prefix = format!(".{}", file.package());
        for m in &file.message_type {
            message_items(&prefix, m, &mut out);
        }
        for e in &file.enum_type {
            enum_items(&format!("{prefix}.{}", e.name()), e, &mut out);
        }
        for s in &file.service {
            for m in &s.method {
                let stream = |yes: bool| if yes { "stream " } else { "" };
                out.insert(Wire::Method {
                    path: format!("{prefix}.{}/{}", s.name(), m.name()),
                    shape: format!(
                        "({}{}) returns ({}{})",
                        stream(m.client_streaming()),
                        m.input_type(),
                        stream(m.server_streaming()),
                        m.output_type()
                    ),
                });
            }
        }
    }
    out
}

fn listing(items: &BTreeSet<Wire>) -> String {
    items.iter().map(|w| w.line() + "\n").collect()
}

fn golden_path() -> PathBuf {
    root().join("tests/golden/upstream_wire.txt")
}

fn upstream_dir() -> Option<PathBuf> {
    let dir = root().join("../../shared/reference/upstream-protos");
    dir.is_dir().then_some(dir)
}

/// The upstream contract as lines of the golden listing.
fn upstream_lines() -> BTreeSet<String> {
    let text = std::fs::read_to_string(golden_path())
        .unwrap_or_else(|e| panic!("{}: {e}", golden_path().display()));
    text.lines().map(str::to_owned).collect()
}

#[test]
fn the_golden_listing_is_upstreams_contract() {
    let Some(dir) = upstream_dir() else {
        // Only the listing travels with the repository; the other test checks it.
        return;
    };
    let actual = listing(&wire(&compile(&dir)));
    if std::env::var_os("SW4RM_BLESS").is_some() {
        std::fs::write(golden_path(), &actual).unwrap();
    }
    let expected = std::fs::read_to_string(golden_path()).unwrap();
    assert_eq!(
        actual, expected,
        "upstream protos changed: review, then SW4RM_BLESS=1"
    );
    // One listing covers every upstream file.
    let files = proto_files(&dir);
    assert_eq!(files.len(), 17, "{files:?}");
}

#[test]
fn our_protos_are_wire_identical_to_upstream() {
    let upstream = upstream_lines();
    assert!(upstream.len() > 300, "the upstream listing looks empty");
    let ours_items = wire(&compile(root()));
    let ours: BTreeSet<String> = ours_items.iter().map(Wire::line).collect();

    let missing: Vec<&String> = upstream.difference(&ours).collect();
    assert!(
        missing.is_empty(),
        "upstream items missing or different in proto/:\n{missing:#?}"
    );

    // What ours adds to upstream's messages, enums and services.
    let upstream_messages: BTreeSet<&str> = upstream
        .iter()
        .filter_map(|l| l.strip_prefix("message "))
        .collect();
    let upstream_enums: BTreeSet<&str> = upstream
        .iter()
        .filter_map(|l| l.strip_prefix("enum "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let mut added_methods = Vec::new();
    for item in &ours_items {
        if upstream.contains(&item.line()) {
            continue;
        }
        match item {
            Wire::Field {
                message, number, ..
            } => assert!(
                !upstream_messages.contains(message.as_str())
                    || RESERVED_FOR_SW4_002.contains(number),
                "{}: a new field on an upstream message must use 50–59",
                item.line()
            ),
            Wire::EnumValue { enumeration, .. } => assert!(
                !upstream_enums.contains(enumeration.as_str()),
                "{}: a new value on an upstream enum",
                item.line()
            ),
            Wire::Method { path, .. } => added_methods.push(path.as_str()),
            Wire::Message(_) => {}
        }
    }
    assert_eq!(added_methods, ADDED_METHODS, "methods ours adds");
}

#[test]
fn every_upstream_service_has_a_generated_client() {
    // The generated module of each upstream package, by service: a missing file in
    // `build.rs` fails to compile here.
    use sw4rm_proto::sw4rm;
    let clients: BTreeMap<&str, &str> = BTreeMap::from([
        ("RegistryService", std::any::type_name::<sw4rm::registry::registry_service_client::RegistryServiceClient<()>>()),
        ("SchedulerService", std::any::type_name::<sw4rm::scheduler::scheduler_service_client::SchedulerServiceClient<()>>()),
        ("SchedulerPolicyService", std::any::type_name::<sw4rm::scheduler::scheduler_policy_service_client::SchedulerPolicyServiceClient<()>>()),
        ("NegotiationRoomService", std::any::type_name::<sw4rm::negotiation_room::negotiation_room_service_client::NegotiationRoomServiceClient<()>>()),
        ("NegotiationService", std::any::type_name::<sw4rm::negotiation::negotiation_service_client::NegotiationServiceClient<()>>()),
        ("HandoffService", std::any::type_name::<sw4rm::handoff::handoff_service_client::HandoffServiceClient<()>>()),
        ("ToolService", std::any::type_name::<sw4rm::tool::tool_service_client::ToolServiceClient<()>>()),
        ("RouterService", std::any::type_name::<sw4rm::router::router_service_client::RouterServiceClient<()>>()),
        ("HitlService", std::any::type_name::<sw4rm::hitl::hitl_service_client::HitlServiceClient<()>>()),
        ("WorktreeService", std::any::type_name::<sw4rm::worktree::worktree_service_client::WorktreeServiceClient<()>>()),
        ("ActivityService", std::any::type_name::<sw4rm::activity::activity_service_client::ActivityServiceClient<()>>()),
        ("ConnectorService", std::any::type_name::<sw4rm::connector::connector_service_client::ConnectorServiceClient<()>>()),
        ("LoggingService", std::any::type_name::<sw4rm::logging::logging_service_client::LoggingServiceClient<()>>()),
        ("ReasoningProxy", std::any::type_name::<sw4rm::reasoning::reasoning_proxy_client::ReasoningProxyClient<()>>()),
        ("WorkflowService", std::any::type_name::<sw4rm::workflow::workflow_service_client::WorkflowServiceClient<()>>()),
    ]);
    let services: BTreeSet<String> = upstream_lines()
        .iter()
        .filter_map(|l| l.strip_prefix("rpc ."))
        .filter_map(|l| l.split('/').next())
        .filter_map(|s| s.rsplit('.').next())
        .map(str::to_owned)
        .collect();
    let named: BTreeSet<String> = clients.keys().map(|s| (*s).to_owned()).collect();
    assert_eq!(named, services, "every upstream service, and only those");
    for (service, client) in clients {
        assert!(
            client.ends_with(&format!("{service}Client<()>")),
            "{client}"
        );
    }
}

/// prost keeps no unknown fields: an agent that relays an `Envelope` or registers an
/// `AgentDescriptor` keeps upstream's SW4-004/005 fields only because our types have
/// them. The bytes are written by hand from the field numbers, as a peer on upstream's
/// protos sends them.
#[test]
fn upstreams_newer_fields_survive_a_decode_and_re_encode() {
    use prost::Message;
    use sw4rm_proto::sw4rm::common::{Envelope, EnvelopeState, ErrorCode};
    use sw4rm_proto::sw4rm::registry::{AgentDescriptor, RegistrationType};

    let envelope_bytes: &[u8] = &[
        0x0a, 0x01, b'm', // #1 message_id = "m"
        0x80, 0x01, 0x07, // #16 state = ENVELOPE_STATE_TIMED_OUT (7)
        0xa2, 0x06, 0x01, b'p', // #100 parent_correlation_id = "p"
    ];
    let envelope = Envelope::decode(envelope_bytes).unwrap();
    assert_eq!(envelope.state(), EnvelopeState::TimedOut);
    assert_eq!(envelope.parent_correlation_id, "p");
    assert_eq!(envelope.encode_to_vec(), envelope_bytes);

    let descriptor_bytes: &[u8] = &[
        0x0a, 0x01, b'a', // #1 agent_id = "a"
        0xa0, 0x06, 0x02, // #100 registration_type = SWARM_GATEWAY (2)
        0xa8, 0x06, 0xac, 0x02, // #101 max_concurrent_delegations = 300
    ];
    let descriptor = AgentDescriptor::decode(descriptor_bytes).unwrap();
    assert_eq!(
        descriptor.registration_type(),
        RegistrationType::SwarmGateway
    );
    assert_eq!(descriptor.max_concurrent_delegations, 300);
    assert_eq!(descriptor.encode_to_vec(), descriptor_bytes);

    // The new error codes have their upstream numbers.
    for (code, number) in [
        (ErrorCode::DuplicateDetected, 14),
        (ErrorCode::AlreadyInProgress, 15),
        (ErrorCode::Overloaded, 16),
        (ErrorCode::Redirect, 20),
    ] {
        assert_eq!(code as i32, number, "{code:?}");
    }
}
