//! Reading a request message's own timeout field (see [`crate::policy::message`] for
//! the rule) from protobuf bytes, and peeking it from a tonic request body without
//! consuming it.

use std::time::Duration;

use super::framing;
use super::reassembled::with_first_frame;
use crate::policy::message::MessageField;

impl MessageField {
    /// Reads the timeout from an encoded message (protobuf bytes); `None` when the
    /// field is absent, zero, negative or undecodable.
    ///
    /// ```
    /// use prost::Message;
    /// use sw4rm_timeouts::MessageField;
    /// use sw4rm_timeouts::proto::sw4rm::negotiation_room::WaitForDecisionRequest;
    /// let msg = WaitForDecisionRequest { timeout_seconds: 90, ..Default::default() }.encode_to_vec();
    /// assert_eq!(MessageField::WaitForDecisionSeconds.read(&msg), Some(std::time::Duration::from_secs(90)));
    /// ```
    pub fn read(self, msg: &[u8]) -> Option<Duration> {
        let d = match self {
            MessageField::WaitForDecisionSeconds => Duration::from_secs(find_varint(msg, 3)?),
            MessageField::HandoffTimeout => duration(find_bytes(msg, 8)?)?,
            MessageField::ToolCallPolicy => duration(find_bytes(find_bytes(msg, 6)?, 1)?)?,
            MessageField::InvokeToolPolicy => {
                duration(find_bytes(find_bytes(find_bytes(msg, 1)?, 6)?, 1)?)?
            }
        };
        (!d.is_zero()).then_some(d)
    }

    /// Reads the timeout from a gRPC-framed message (1 flag byte, 4 length bytes).
    pub(crate) fn read_framed(self, data: &[u8]) -> Option<Duration> {
        self.read(framing::first_message(data)?)
    }
}

/// Reads the message timeout from the request body without consuming it: the first
/// frame (if ready now) is read and put back in front of the rest.
pub(crate) fn peek(body: &mut tonic::body::Body, field: MessageField) -> Option<Duration> {
    with_first_frame(body, |first| {
        let found = first
            .as_ref()
            .ok()
            .and_then(|f| f.data_ref())
            .and_then(|d| field.read_framed(d));
        (first, found)
    })
    .flatten()
}

fn read_varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Walks the fields of a message, calling `f(field, value)` for varints and
/// length-delimited fields. Returns `None` on malformed input.
pub fn fields<'a>(mut buf: &'a [u8], mut f: impl FnMut(u32, Value<'a>)) -> Option<()> {
    while !buf.is_empty() {
        if let (field, Some(value)) = next_field(&mut buf)? {
            f(field, value);
        }
    }
    Some(())
}

/// Reads one field of a message and advances `buf` past it: its number and value
/// (`None` for fixed-width values, which nothing here reads); `None` on malformed
/// input.
pub fn next_field<'a>(buf: &mut &'a [u8]) -> Option<(u32, Option<Value<'a>>)> {
    let key = read_varint(buf)?;
    let field = u32::try_from(key >> 3).ok()?;
    let value = match key & 7 {
        0 => Some(Value::Varint(read_varint(buf)?)),
        1 => {
            *buf = buf.get(8..)?;
            None
        }
        2 => {
            let len = usize::try_from(read_varint(buf)?).ok()?;
            let bytes = buf.get(..len)?;
            *buf = buf.get(len..)?;
            Some(Value::Bytes(bytes))
        }
        5 => {
            *buf = buf.get(4..)?;
            None
        }
        _ => return None,
    };
    Some((field, value))
}

/// A field's value.
pub enum Value<'a> {
    /// A varint (wire type 0).
    Varint(u64),
    /// A length-delimited value (wire type 2).
    Bytes(&'a [u8]),
}

fn find_varint(msg: &[u8], wanted: u32) -> Option<u64> {
    let mut found = None;
    fields(msg, |field, v| {
        if let (true, Value::Varint(n)) = (field == wanted, v) {
            found = Some(n);
        }
    })?;
    found
}

/// The length-delimited value of field `wanted` (its last occurrence, as protobuf
/// reads a singular field sent twice).
pub(crate) fn find_bytes(msg: &[u8], wanted: u32) -> Option<&[u8]> {
    let mut found = None;
    fields(msg, |field, v| {
        if let (true, Value::Bytes(b)) = (field == wanted, v) {
            found = Some(b);
        }
    })?;
    found
}

/// `google.protobuf.Duration { int64 seconds = 1; int32 nanos = 2; }`; negative → `None`.
fn duration(msg: &[u8]) -> Option<Duration> {
    let secs = find_varint(msg, 1).unwrap_or(0) as i64;
    let nanos = find_varint(msg, 2).unwrap_or(0) as i64 as i32;
    if secs < 0 || !(0..1_000_000_000).contains(&nanos) {
        return None;
    }
    Some(Duration::new(secs as u64, nanos as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::sw4rm::{handoff, negotiation_room, tool};
    use proptest::prelude::*;
    use prost::Message;

    fn policy(secs: i64, nanos: i32) -> Option<tool::ExecutionPolicy> {
        Some(tool::ExecutionPolicy {
            timeout: Some(prost_types::Duration {
                seconds: secs,
                nanos,
            }),
            max_retries: 3,
            backoff: "exponential".into(),
            ..Default::default()
        })
    }

    fn call(secs: i64, nanos: i32) -> tool::ToolCall {
        tool::ToolCall {
            call_id: "c".into(),
            args: vec![7; 300],
            policy: policy(secs, nanos),
            ..Default::default()
        }
    }

    #[test]
    fn reads_each_field() {
        let wait = negotiation_room::WaitForDecisionRequest {
            artifact_id: "a".into(),
            timeout_seconds: 120,
            ..Default::default()
        };
        assert_eq!(
            MessageField::WaitForDecisionSeconds.read(&wait.encode_to_vec()),
            Some(Duration::from_secs(120))
        );
        let unset = negotiation_room::WaitForDecisionRequest::default();
        assert_eq!(
            MessageField::WaitForDecisionSeconds.read(&unset.encode_to_vec()),
            None
        );

        let h = handoff::HandoffRequest {
            request_id: "r".into(),
            timeout: Some(prost_types::Duration {
                seconds: 45,
                nanos: 500_000_000,
            }),
            ..Default::default()
        };
        assert_eq!(
            MessageField::HandoffTimeout.read(&h.encode_to_vec()),
            Some(Duration::from_millis(45_500))
        );

        assert_eq!(
            MessageField::ToolCallPolicy.read(&call(600, 0).encode_to_vec()),
            Some(Duration::from_secs(600))
        );
        assert_eq!(
            MessageField::ToolCallPolicy.read(&call(-5, 0).encode_to_vec()),
            None
        );
        assert_eq!(
            MessageField::ToolCallPolicy.read(&tool::ToolCall::default().encode_to_vec()),
            None
        );
        let invoke = tool::InvokeToolRequest {
            call: Some(call(90, 0)),
        };
        assert_eq!(
            MessageField::InvokeToolPolicy.read(&invoke.encode_to_vec()),
            Some(Duration::from_secs(90))
        );
    }

    #[test]
    fn framed_reading() {
        let msg = call(600, 0).encode_to_vec();
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        framed.extend_from_slice(&msg);
        assert_eq!(
            MessageField::ToolCallPolicy.read_framed(&framed),
            Some(Duration::from_secs(600))
        );
        framed[0] = 1; // compressed
        assert_eq!(MessageField::ToolCallPolicy.read_framed(&framed), None);
        assert_eq!(MessageField::ToolCallPolicy.read_framed(&[0, 0]), None);
    }

    proptest! {
        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            for f in [MessageField::WaitForDecisionSeconds, MessageField::HandoffTimeout, MessageField::ToolCallPolicy, MessageField::InvokeToolPolicy] {
                let _ = f.read(&bytes);
                let _ = f.read_framed(&bytes);
            }
        }

        #[test]
        fn agrees_with_prost(secs in 0i64..10_000_000, nanos in 0i32..1_000_000_000) {
            let want = Duration::new(secs as u64, nanos as u32);
            let got = MessageField::ToolCallPolicy.read(&call(secs, nanos).encode_to_vec());
            prop_assert_eq!(got, (!want.is_zero()).then_some(want));
        }
    }
}
