//! Reading a request's SW4-003 ids (see [`crate::policy::message_ids`] for which
//! fields and the bound) from its encoded message, peeking them from a tonic
//! request body without consuming it, and writing a served request's onto its
//! handler's span as the handler reads the body.

use crate::policy::message_ids::{bounded, DeclaredIds, IdFields, IdPaths};

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

/// The SW4-003 ids of a call's request, when its route's requests carry them (`ids`,
/// resolved through `declared`): the `correlation_id` always, `agent_id` and
/// `task_id` when `agents` (`with_agent_ids`). Only such a request's first frame is
/// read.
#[inline(always)]
pub(crate) fn read(
    ids: Option<IdFields>,
    agents: bool,
    declared: &DeclaredIds,
    body: &mut tonic::body::Body,
) -> Option<Box<CallIds>> {
    match ids {
        Some(ids) if agents || ids.has_correlation() => read_apart(ids, agents, declared, body),
        _ => None,
    }
}

/// [`read`]'s reading, out of line: off the common call's way.
#[inline(never)]
fn read_apart(
    ids: IdFields,
    agents: bool,
    declared: &DeclaredIds,
    body: &mut tonic::body::Body,
) -> Option<Box<CallIds>> {
    let mut paths = declared.paths(ids);
    if !agents {
        (paths.agent, paths.task) = (None, None);
    }
    peek(body, paths)
}

/// Reads the ids at `paths` from the request body without consuming it: the first
/// frame (if ready now, and not compressed) is read and put back in front of the rest.
fn peek(body: &mut tonic::body::Body, paths: IdPaths) -> Option<Box<CallIds>> {
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

/// A served request's body that writes the SW4-003 ids of its first message onto the
/// handler's span as the handler reads it (the span is made before any of the body
/// has arrived). Frames pass through as they are; the ids are read from the first
/// data frame only (a message split across frames, or compressed, gives none).
pub(crate) struct IdsOntoSpan {
    body: tonic::body::Body,
    /// The span and where the ids are, until the first data frame is read.
    pending: Option<(tracing::Span, IdPaths)>,
}

impl IdsOntoSpan {
    /// Puts the watch in front of `body`: the ids at `paths` go onto `span` when the
    /// first data frame is read. A body that has ended is left as it is.
    pub(crate) fn watch(body: &mut tonic::body::Body, span: tracing::Span, paths: IdPaths) {
        use http_body::Body as _;
        if body.is_end_stream() {
            return;
        }
        let watched = IdsOntoSpan {
            body: std::mem::take(body),
            pending: Some((span, paths)),
        };
        *body = super::reassembled::boxed(watched);
    }
}

impl http_body::Body for IdsOntoSpan {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, tonic::Status>>> {
        use std::task::Poll;
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.body).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Some((span, paths)) = this.pending.take() {
                        let ids =
                            framing::first_message(data).and_then(|m| CallIds::read(m, paths));
                        if let Some(ids) = ids {
                            ids.record_on(&span);
                        }
                    }
                }
            }
            Poll::Ready(_) => this.pending = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The length-delimited value at `path` (field numbers from the root).
fn at_path<'a>(msg: &'a [u8], path: &[u32]) -> Option<&'a [u8]> {
    path.iter()
        .try_fold(msg, |msg, &field| find_bytes(msg, field))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::message_ids::{DeclaredIds, IdFields};
    use crate::proto::sw4rm::{common, logging, registry, router, scheduler};
    use proptest::prelude::*;
    use prost::Message;

    fn read(fields: IdFields, msg: &impl Message) -> Option<CallIds> {
        CallIds::read(&msg.encode_to_vec(), DeclaredIds::default().paths(fields))
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

    /// Frames pass through [`IdsOntoSpan`] as they were (data, then trailers), and
    /// only the first data frame's ids are written onto the span.
    #[test]
    fn a_watched_body_passes_its_frames_and_names_the_first_messages_ids() {
        use std::sync::{Arc, Mutex};
        use std::task::{Context, Poll, Waker};

        use http_body::{Body as _, Frame};
        use tracing_subscriber::layer::SubscriberExt;

        /// Each value recorded onto a span, as `field = value`.
        #[derive(Clone, Default)]
        struct Recorded(Arc<Mutex<Vec<String>>>);
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Recorded {
            fn on_record(
                &self,
                _: &tracing::span::Id,
                values: &tracing::span::Record<'_>,
                _: tracing_subscriber::layer::Context<'_, S>,
            ) {
                struct Each<'a>(&'a mut Vec<String>);
                impl tracing::field::Visit for Each<'_> {
                    fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                        self.0.push(format!("{} = {v:?}", f.name()));
                    }
                }
                values.record(&mut Each(&mut self.0.lock().unwrap()));
            }
        }
        /// A body of these frames, in order.
        struct Frames(std::collections::VecDeque<Frame<bytes::Bytes>>);
        impl http_body::Body for Frames {
            type Data = bytes::Bytes;
            type Error = tonic::Status;
            fn poll_frame(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<bytes::Bytes>, tonic::Status>>> {
                Poll::Ready(self.0.pop_front().map(Ok))
            }
        }

        let framed = |agent: &str| {
            let msg = registry::HeartbeatRequest {
                agent_id: agent.into(),
                ..Default::default()
            }
            .encode_to_vec();
            let mut out = vec![0];
            out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
            out.extend_from_slice(&msg);
            bytes::Bytes::from(out)
        };
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-end", http::HeaderValue::from_static("1"));
        let sent = [framed("agent-1"), framed("agent-2")];
        let frames = sent.iter().cloned().map(Frame::data);
        let frames = frames.chain([Frame::trailers(trailers.clone())]).collect();

        let recorded = Recorded::default();
        let subscriber = tracing_subscriber::registry().with(recorded.clone());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("server", sw4rm.agent_id = tracing::field::Empty);
            let mut body = tonic::body::Body::new(Frames(frames));
            let paths = DeclaredIds::default().paths(IdFields::Agent);
            IdsOntoSpan::watch(&mut body, span, paths);
            let mut cx = Context::from_waker(Waker::noop());
            let mut got = Vec::new();
            while let Poll::Ready(Some(frame)) = std::pin::Pin::new(&mut body).poll_frame(&mut cx) {
                got.push(frame.unwrap());
            }
            let data: Vec<_> = got.iter().filter_map(|f| f.data_ref().cloned()).collect();
            assert_eq!(data, sent);
            assert_eq!(got.last().and_then(|f| f.trailers_ref()), Some(&trailers));
        });
        let seen = recorded.0.lock().unwrap().clone();
        assert_eq!(seen, ["sw4rm.agent_id = \"agent-1\""]);
    }

    proptest! {
        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            for fields in [IdFields::Envelope, IdFields::LogEvent, IdFields::AgentTask, IdFields::Registration] {
                let _ = CallIds::read(&bytes, DeclaredIds::default().paths(fields));
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
