//! Reading a request's SW4-003 ids (see [`crate::policy::message_ids`] for which
//! fields and the bound) from its encoded message, and peeking them from a tonic
//! request body without consuming it.

use crate::policy::message_ids::{bounded, IdPaths};

use super::framing;
use super::message_field::find_bytes;
use super::reassembled::with_first_frame;

/// The ids one request carried, each bounded before it was kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CallIds {
    pub(crate) correlation: Option<Box<str>>,
    pub(crate) agent: Option<Box<str>>,
    pub(crate) task: Option<Box<str>>,
}

impl CallIds {
    /// The ids at `paths` in the encoded message `msg`; `None` when it has none
    /// (absent, empty, not UTF-8, with a control character, or undecodable).
    pub(crate) fn read(msg: &[u8], paths: IdPaths) -> Option<CallIds> {
        let id = |path: Option<&[u32]>| {
            let bytes = at_path(msg, path?)?;
            let text = std::str::from_utf8(bytes).ok()?;
            bounded(text).map(Box::from)
        };
        let ids = CallIds {
            correlation: id(paths.correlation),
            agent: id(paths.agent),
            task: id(paths.task),
        };
        (ids != CallIds::default()).then_some(ids)
    }

    /// Writes the ids onto the call's span (`sw4rm.correlation_id`, `sw4rm.agent_id`,
    /// `sw4rm.task_id`; nothing when the span is off).
    pub(crate) fn record_on(&self, span: &tracing::Span) {
        for (field, id) in [
            ("sw4rm.correlation_id", &self.correlation),
            ("sw4rm.agent_id", &self.agent),
            ("sw4rm.task_id", &self.task),
        ] {
            if let Some(id) = id {
                span.record(field, &**id);
            }
        }
    }

    /// The call's correlation id, if its request had one.
    pub(crate) fn correlation(&self) -> Option<&str> {
        self.correlation.as_deref()
    }
}

/// Reads the ids at `paths` from the request body without consuming it: the first
/// frame (if ready now, and not compressed) is read and put back in front of the rest.
pub(crate) fn peek(body: &mut tonic::body::Body, paths: IdPaths) -> Option<Box<CallIds>> {
    with_first_frame(body, |first| {
        let found = first
            .as_ref()
            .ok()
            .and_then(|f| f.data_ref())
            .and_then(|d| framing::first_message(d))
            .and_then(|msg| CallIds::read(msg, paths));
        (first, found)
    })
    .flatten()
    .map(Box::new)
}

/// The length-delimited value at `path` (field numbers from the root).
fn at_path<'a>(msg: &'a [u8], path: &[u32]) -> Option<&'a [u8]> {
    path.iter()
        .try_fold(msg, |msg, &field| find_bytes(msg, field))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::message_ids::IdFields;
    use crate::proto::sw4rm::{common, logging, registry, router, scheduler};
    use proptest::prelude::*;
    use prost::Message;

    fn read(fields: IdFields, msg: &impl Message) -> Option<CallIds> {
        CallIds::read(&msg.encode_to_vec(), fields.paths())
    }

    fn ids(correlation: Option<&str>, agent: Option<&str>, task: Option<&str>) -> CallIds {
        CallIds {
            correlation: correlation.map(Box::from),
            agent: agent.map(Box::from),
            task: task.map(Box::from),
        }
    }

    #[test]
    fn reads_each_shape() {
        let envelope = router::SendMessageRequest {
            msg: Some(common::Envelope {
                message_id: "m-1".into(),
                producer_id: "agent-a".into(),
                correlation_id: "corr-7".into(),
                payload: vec![9; 300],
                ..Default::default()
            }),
        };
        assert_eq!(
            read(IdFields::Envelope, &envelope),
            Some(ids(Some("corr-7"), None, None))
        );
        let log = logging::LogEvent {
            correlation_id: "corr-8".into(),
            agent_id: "agent-b".into(),
            ..Default::default()
        };
        assert_eq!(
            read(IdFields::LogEvent, &log),
            Some(ids(Some("corr-8"), Some("agent-b"), None))
        );
        let task = scheduler::SubmitTaskRequest {
            agent_id: "agent-c".into(),
            task_id: "t-1".into(),
            ..Default::default()
        };
        assert_eq!(
            read(IdFields::AgentTask, &task),
            Some(ids(None, Some("agent-c"), Some("t-1")))
        );
        let register = registry::RegisterAgentRequest {
            agent: Some(registry::AgentDescriptor {
                agent_id: "agent-d".into(),
                ..Default::default()
            }),
        };
        assert_eq!(
            read(IdFields::Registration, &register),
            Some(ids(None, Some("agent-d"), None))
        );
        let none = router::SendMessageRequest::default();
        assert_eq!(read(IdFields::Envelope, &none), None);
        let forged = logging::LogEvent {
            correlation_id: "x\nlevel=ERROR forged".into(),
            ..Default::default()
        };
        assert_eq!(
            read(IdFields::LogEvent, &forged),
            None,
            "a control character"
        );
    }

    #[test]
    fn a_long_id_is_cut() {
        let log = logging::LogEvent {
            correlation_id: "c".repeat(10_000),
            ..Default::default()
        };
        let got = read(IdFields::LogEvent, &log).unwrap();
        assert_eq!(got.correlation().map(str::len), Some(128));
    }

    proptest! {
        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            for fields in [IdFields::Envelope, IdFields::LogEvent, IdFields::AgentTask, IdFields::Registration] {
                let _ = CallIds::read(&bytes, fields.paths());
            }
        }

        #[test]
        fn agrees_with_prost(correlation in "[a-z0-9-]{0,40}", agent in "[a-z0-9-]{0,40}") {
            let log = logging::LogEvent { correlation_id: correlation.clone(), agent_id: agent.clone(), ..Default::default() };
            let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
            let want = ids(some(&correlation).as_deref(), some(&agent).as_deref(), None);
            let got = read(IdFields::LogEvent, &log).unwrap_or_default();
            prop_assert_eq!(got, want);
        }
    }
}
