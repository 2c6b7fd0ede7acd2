//! `HandoffRequest.budget` (field 100, SW4-004's `BudgetEnvelope`) in an encoded
//! request: read it, and write a new one in its place, in the message and in the
//! first frame of a tonic request body.

use bytes::{BufMut, Bytes, BytesMut};
use http_body::Frame;
use prost::Message;

use sw4rm_timeouts::proto::sw4rm::handoff::BudgetEnvelope;
use sw4rm_timeouts::seams::Envelope;
use sw4rm_timeouts::seams::{fields, first_message, next_field, with_first_frame, Value};

/// `HandoffRequest.budget`.
const BUDGET_FIELD: u32 = 100;
/// `HandoffRequest.request_id`.
const REQUEST_ID_FIELD: u32 = 1;

/// `HandoffRequest.request_id` in an encoded message (the last occurrence, as
/// protobuf reads a string); `None` when absent, empty or not UTF-8.
fn request_id(msg: &[u8]) -> Option<String> {
    let mut id = None;
    fields(msg, |field, value| {
        if let (REQUEST_ID_FIELD, Value::Bytes(bytes)) = (field, value) {
            id = std::str::from_utf8(bytes).ok().map(str::to_owned);
        }
    })?;
    id.filter(|s| !s.is_empty())
}

/// The envelope in an encoded `HandoffRequest` (`None` without one); `Err` for bytes
/// that are no message.
fn read(msg: &[u8]) -> Result<Option<Envelope>, ()> {
    // Occurrences of an embedded message merge, as protobuf reads them.
    let mut found: Option<BudgetEnvelope> = None;
    let mut bad = false;
    fields(msg, |field, value| {
        if let (BUDGET_FIELD, Value::Bytes(bytes)) = (field, value) {
            let merged = found.get_or_insert_with(BudgetEnvelope::default);
            bad |= merged.merge(bytes).is_err();
        }
    })
    .ok_or(())?;
    match bad {
        true => Err(()),
        false => Ok(found.as_ref().map(Envelope::from)),
    }
}

/// `msg` with `envelope` as its only field 100, every other field kept byte for byte
/// and in order.
fn rewrite(msg: &[u8], envelope: Envelope) -> Result<Vec<u8>, ()> {
    let mut out = Vec::with_capacity(msg.len() + 48);
    let mut rest = msg;
    while !rest.is_empty() {
        let before = rest;
        let (field, _) = next_field(&mut rest).ok_or(())?;
        if field != BUDGET_FIELD {
            out.extend_from_slice(&before[..before.len() - rest.len()]);
        }
    }
    prost::encoding::message::encode(BUDGET_FIELD, &BudgetEnvelope::from(envelope), &mut out);
    Ok(out)
}

/// What became of the body's envelope.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stamped<E> {
    /// The first message now carries the envelope `decide` returned.
    Written,
    /// The first message is not there yet, compressed, or not a message: left as is.
    Untouched,
    /// `decide` refused: the body is left as is.
    Refused(E),
}

/// Rewrites `HandoffRequest.budget` in the first message of a request body: `decide`
/// gets the envelope the caller wrote (if any) and returns the one to send. The
/// first frame is read if it is ready now, and put back (rewritten) in front of the
/// rest. `id` gets the handoff's `request_id` when the message was read.
pub(crate) fn stamp<E>(
    body: &mut tonic::body::Body,
    id: &mut Option<String>,
    decide: impl FnOnce(Option<Envelope>) -> Result<Envelope, E>,
) -> Stamped<E> {
    with_first_frame(body, |first| match first {
        Ok(frame) => match frame.into_data() {
            Ok(data) => {
                if let Some(msg) = first_message(&data) {
                    *id = request_id(msg);
                }
                let (data, outcome) = stamp_frame(data, decide);
                (Ok(Frame::data(data)), outcome)
            }
            Err(frame) => (Ok(frame), Stamped::Untouched),
        },
        Err(status) => (Err(status), Stamped::Untouched),
    })
    .unwrap_or(Stamped::Untouched)
}

/// The `request_id` of the `HandoffRequest` in the first frame of a request body, if
/// it is there now; the body is left as it was.
pub(crate) fn peek_request_id(body: &mut tonic::body::Body) -> Option<String> {
    with_first_frame(body, |first| match first {
        Ok(frame) => {
            let id = frame
                .data_ref()
                .and_then(|data| first_message(data))
                .and_then(request_id);
            (Ok(frame), id)
        }
        Err(status) => (Err(status), None),
    })
    .flatten()
}

/// One data frame holding (at least) the first gRPC message, stamped.
fn stamp_frame<E>(
    data: Bytes,
    decide: impl FnOnce(Option<Envelope>) -> Result<Envelope, E>,
) -> (Bytes, Stamped<E>) {
    let Some(msg) = first_message(&data) else {
        return (data, Stamped::Untouched);
    };
    let Ok(written) = read(msg) else {
        return (data, Stamped::Untouched);
    };
    let envelope = match decide(written) {
        Ok(e) => e,
        Err(e) => return (data, Stamped::Refused(e)),
    };
    let Ok(new) = rewrite(msg, envelope) else {
        return (data, Stamped::Untouched);
    };
    let Ok(len) = u32::try_from(new.len()) else {
        return (data, Stamped::Untouched);
    };
    let after = 5 + msg.len();
    let mut out = BytesMut::with_capacity(5 + new.len() + data.len() - after);
    out.put_u8(0);
    out.put_u32(len);
    out.put_slice(&new);
    out.put_slice(&data[after..]);
    (out.freeze(), Stamped::Written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sw4rm_timeouts::proto::sw4rm::handoff::HandoffRequest;

    fn request(budget: Option<BudgetEnvelope>) -> HandoffRequest {
        HandoffRequest {
            request_id: "r-1".into(),
            from_agent: "planner".into(),
            context_snapshot: vec![7; 200],
            timeout: Some(sw4rm_timeouts::prost_types::Duration {
                seconds: 90,
                nanos: 0,
            }),
            budget,
            ..Default::default()
        }
    }

    fn framed(msg: &impl Message) -> Bytes {
        let bytes = msg.encode_to_vec();
        let mut out = BytesMut::new();
        out.put_u8(0);
        out.put_u32(bytes.len() as u32);
        out.put_slice(&bytes);
        out.freeze()
    }

    fn envelope(wall_ms: u64, depth: u32) -> Envelope {
        Envelope {
            tokens: 9,
            wall_ms,
            epoch_ms: 0,
            depth,
            max_depth: 4,
        }
    }

    #[test]
    fn reads_and_replaces_the_envelope_keeping_every_other_field() {
        let written = BudgetEnvelope {
            wall_time_remaining_ms: 60_000,
            current_depth: 1,
            max_delegation_depth: 4,
            token_budget_remaining: 9,
            ..Default::default()
        };
        let msg = request(Some(written)).encode_to_vec();
        assert_eq!(read(&msg), Ok(Some(envelope(60_000, 1))));
        let new = rewrite(&msg, envelope(30_000, 2)).unwrap();
        let decoded = HandoffRequest::decode(new.as_slice()).unwrap();
        assert_eq!(
            decoded,
            request(Some(BudgetEnvelope::from(envelope(30_000, 2))))
        );
        // No envelope written: one is added.
        let bare = request(None).encode_to_vec();
        assert_eq!(read(&bare), Ok(None));
        let added = HandoffRequest::decode(rewrite(&bare, envelope(5, 1)).unwrap().as_slice());
        assert_eq!(
            added.unwrap(),
            request(Some(BudgetEnvelope::from(envelope(5, 1))))
        );
    }

    #[tokio::test]
    async fn stamps_the_first_frame_of_a_body() {
        let msg = request(None);
        let mut body = tonic::body::Body::new(http_body_util::Full::new(framed(&msg)));
        let seen = std::cell::Cell::new(None);
        let mut id = None;
        let outcome = stamp::<()>(&mut body, &mut id, |written| {
            seen.set(Some(written));
            Ok(envelope(1_000, 1))
        });
        assert_eq!(outcome, Stamped::Written);
        assert_eq!(seen.get(), Some(None));
        assert_eq!(
            id.as_deref(),
            Some("r-1"),
            "the handoff's request_id is read"
        );
        let bytes = http_body_util::BodyExt::collect(body)
            .await
            .unwrap()
            .to_bytes();
        let sent = HandoffRequest::decode(first_message(&bytes).unwrap()).unwrap();
        assert_eq!(sent.budget, Some(BudgetEnvelope::from(envelope(1_000, 1))));
        assert_eq!(sent.request_id, "r-1");

        // Refused: the body is as it was.
        let mut body = tonic::body::Body::new(http_body_util::Full::new(framed(&msg)));
        let mut id = None;
        assert_eq!(
            stamp(&mut body, &mut id, |_| Err("no")),
            Stamped::Refused("no")
        );
        let bytes = http_body_util::BodyExt::collect(body)
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(bytes, framed(&msg));

        // Read without a stamp: the body is as it was.
        let mut body = tonic::body::Body::new(http_body_util::Full::new(framed(&msg)));
        assert_eq!(peek_request_id(&mut body).as_deref(), Some("r-1"));
        let bytes = http_body_util::BodyExt::collect(body)
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(bytes, framed(&msg));
    }

    proptest! {
        /// Any message with any envelope: the rewrite decodes to the same message with
        /// the new envelope, and reads back as it.
        #[test]
        fn a_rewrite_changes_only_the_envelope(
            id in ".{0,20}",
            snapshot in proptest::collection::vec(any::<u8>(), 0..300),
            old in proptest::option::of((0u64..1 << 40, 0u32..9)),
            wall in 0u64..1 << 40,
            depth in 0u32..9,
        ) {
            let mut msg = request(old.map(|(w, d)| BudgetEnvelope {
                wall_time_remaining_ms: w,
                current_depth: d,
                ..Default::default()
            }));
            msg.request_id = id;
            msg.context_snapshot = snapshot;
            let new = rewrite(&msg.encode_to_vec(), envelope(wall, depth)).unwrap();
            msg.budget = Some(BudgetEnvelope::from(envelope(wall, depth)));
            prop_assert_eq!(HandoffRequest::decode(new.as_slice()).unwrap(), msg);
            prop_assert_eq!(read(&new), Ok(Some(envelope(wall, depth))));
        }

        #[test]
        fn garbage_is_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = read(&bytes);
            let _ = rewrite(&bytes, envelope(1, 1));
        }
    }
}
