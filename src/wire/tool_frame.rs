//! `ToolService/CallStream`'s progress, read from a `ToolFrame`'s protobuf bytes
//! without decoding it (no copy of its `data`): the crate's standard progress rule
//! for that route, saying what `ToolFrame`'s own `ProgressMessage` reading says.

use super::message_field::{fields, Value};
use crate::policy::progress::Heard;

/// `ToolFrame` field numbers (`proto/tool.proto`).
const FRAME_NO: u32 = 2;
const FINAL: u32 = 3;
const DATA: u32 = 5;
const SUMMARY: u32 = 6;

/// A frame with data, a summary, or the final flag is progress, its `frame_no` the
/// marker; an empty frame that is not final is a keep-alive. Bytes that are no
/// `ToolFrame` count as progress (as a rule that cannot decode a message does).
pub(crate) fn heard(payload: &[u8]) -> Heard {
    let (mut frame_no, mut moved) = (0u64, false);
    let read = fields(payload, |field, value| match (field, value) {
        // The last value of a repeated scalar wins, as protobuf decodes it.
        (FRAME_NO, Value::Varint(n)) => frame_no = n,
        (FINAL, Value::Varint(n)) => moved |= n != 0,
        (DATA | SUMMARY, Value::Bytes(b)) => moved |= !b.is_empty(),
        _ => {}
    });
    match (read, moved) {
        (None, _) | (_, true) => Heard::progress(read.map(|()| frame_no)),
        (Some(()), false) => Heard::KeepAlive,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::progress::ProgressMessage;
    use crate::proto::sw4rm::tool::ToolFrame;
    use proptest::prelude::*;
    use prost::Message;

    #[test]
    fn reads_a_frame_as_its_own_reading_does() {
        let frame = |frame_no, data: &[u8], summary: &[u8], last| ToolFrame {
            frame_no,
            data: data.to_vec(),
            summary: summary.to_vec(),
            r#final: last,
            ..Default::default()
        };
        // (frame, heard)
        let table = [
            (frame(0, b"", b"", false), Heard::KeepAlive),
            (frame(7, b"", b"", false), Heard::KeepAlive),
            (frame(7, b"rows", b"", false), Heard::progress(Some(7))),
            (frame(8, b"", b"50%", false), Heard::progress(Some(8))),
            (frame(9, b"", b"", true), Heard::progress(Some(9))),
        ];
        for (frame, want) in table {
            assert_eq!(heard(&frame.encode_to_vec()), want, "{frame:?}");
            assert_eq!(frame.heard(), want);
        }
        // Not a ToolFrame: progress without a marker.
        assert_eq!(heard(&[0xff, 0xff]), Heard::progress(None));
    }

    proptest! {
        #[test]
        fn agrees_with_the_decoded_reading(
            frame_no in any::<u64>(),
            data in proptest::collection::vec(any::<u8>(), 0..8),
            summary in proptest::collection::vec(any::<u8>(), 0..8),
            last in any::<bool>(),
            call_id in "[a-z]{0,6}",
        ) {
            let frame = ToolFrame { call_id, frame_no, r#final: last, data, summary, ..Default::default() };
            prop_assert_eq!(heard(&frame.encode_to_vec()), frame.heard());
        }

        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = heard(&bytes);
        }
    }
}
