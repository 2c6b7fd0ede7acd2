//! gRPC message framing (1 flag byte, 4 length bytes, payload): counting complete
//! messages across arbitrarily split data frames, and reading the first message of
//! a frame.

use bytes::Buf;

/// The payload of the first, uncompressed, whole message in `data`; `None` when it is
/// compressed or not all there.
pub fn first_message(data: &[u8]) -> Option<&[u8]> {
    let (&flag, rest) = data.split_first()?;
    if flag != 0 || rest.len() < 4 {
        return None; // compressed, or not a whole prefix
    }
    let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    rest[4..].get(..len)
}

/// Counts complete gRPC messages (5-byte prefix + payload) across data frames, and,
/// when asked to ([`MessageCounter::reading`]), keeps each message's payload for a
/// reader (one buffer per stream, reused from message to message).
#[derive(Debug, Default)]
pub(crate) struct MessageCounter {
    /// Complete messages seen.
    pub(crate) complete: u64,
    /// Prefix bytes collected for the current message.
    prefix: [u8; 5],
    prefix_len: usize,
    /// Payload bytes still to come for the current message.
    remaining: u64,
    /// The current message's payload so far, when payloads are read.
    payload: Option<Vec<u8>>,
}

/// What the first payload reservation may take on the peer's word (a length prefix
/// says up to 4 GiB); the buffer grows past it as bytes really arrive.
const RESERVE_AT_MOST: usize = 64 * 1024;

/// One complete message, as [`MessageCounter::feed_with`] hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Message<'a> {
    /// The payload, when payloads are read.
    pub(crate) payload: Option<&'a [u8]>,
    /// The message is compressed (flag byte 1): its payload is not protobuf.
    pub(crate) compressed: bool,
}

impl MessageCounter {
    /// A counter that also keeps every payload for [`MessageCounter::feed_with`].
    pub(crate) fn reading() -> Self {
        MessageCounter {
            payload: Some(Vec::new()),
            ..MessageCounter::default()
        }
    }

    /// Feeds one data frame; returns how many messages it completed.
    #[cfg(test)]
    pub(crate) fn feed<D: Buf>(&mut self, data: &D) -> u64 {
        self.feed_with(data, |_| {})
    }

    /// Feeds one data frame, calling `each` for every message it completes, in order;
    /// returns how many it completed.
    pub(crate) fn feed_with<D: Buf>(&mut self, data: &D, mut each: impl FnMut(Message<'_>)) -> u64 {
        let before = self.complete;
        let mut bytes = data.chunk();
        // `Buf` may be split across chunks; tonic/hyper data is one contiguous chunk.
        let mut left = data.remaining();
        while left > 0 && !bytes.is_empty() {
            if self.prefix_len < 5 {
                let take = (5 - self.prefix_len).min(bytes.len());
                self.prefix[self.prefix_len..self.prefix_len + take]
                    .copy_from_slice(&bytes[..take]);
                self.prefix_len += take;
                bytes = &bytes[take..];
                left -= take;
                if self.prefix_len == 5 {
                    self.remaining = u64::from(u32::from_be_bytes([
                        self.prefix[1],
                        self.prefix[2],
                        self.prefix[3],
                        self.prefix[4],
                    ]));
                    if let Some(buf) = self.payload.as_mut() {
                        buf.clear();
                        buf.reserve((self.remaining as usize).min(RESERVE_AT_MOST));
                    }
                    if self.remaining == 0 {
                        self.complete_one(&mut each);
                    }
                }
            } else {
                let take = (self.remaining as usize).min(bytes.len());
                if let Some(buf) = self.payload.as_mut() {
                    buf.extend_from_slice(&bytes[..take]);
                }
                bytes = &bytes[take..];
                left -= take;
                self.remaining -= take as u64;
                if self.remaining == 0 {
                    self.complete_one(&mut each);
                }
            }
        }
        self.complete - before
    }

    fn complete_one(&mut self, each: &mut impl FnMut(Message<'_>)) {
        self.complete += 1;
        self.prefix_len = 0;
        each(Message {
            payload: self.payload.as_deref(),
            compressed: self.prefix[0] != 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::{first_message, MessageCounter};
    use bytes::Bytes;
    use proptest::prelude::*;

    fn framed(sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        for &n in sizes {
            out.push(0);
            out.extend_from_slice(&(n as u32).to_be_bytes());
            out.extend(std::iter::repeat_n(7u8, n));
        }
        out
    }

    #[test]
    fn counts_messages_in_one_frame() {
        let mut c = MessageCounter::default();
        assert_eq!(c.feed(&Bytes::from(framed(&[3, 0, 10]))), 3);
        assert_eq!(c.complete, 3);
        // A byte at a time: only the last byte of each message completes one.
        let mut c = MessageCounter::default();
        let done: Vec<u64> = framed(&[2])
            .iter()
            .map(|b| c.feed(&Bytes::copy_from_slice(&[*b])))
            .collect();
        assert_eq!(done, [0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn first_message_table() {
        assert_eq!(first_message(&framed(&[2])), Some(&[7u8, 7][..]));
        assert_eq!(first_message(&[1, 0, 0, 0, 0]), None, "compressed");
        assert_eq!(first_message(&[0, 0, 0]), None, "short prefix");
        assert_eq!(first_message(&[0, 0, 0, 0, 3, 1]), None, "short payload");
    }

    #[test]
    fn reads_payloads_split_anywhere() {
        let mut all = framed(&[3, 0]);
        all.extend_from_slice(&[1, 0, 0, 0, 1, 9]); // one compressed message
        let mut c = MessageCounter::reading();
        let mut seen = Vec::new();
        for b in &all {
            c.feed_with(&Bytes::copy_from_slice(&[*b]), |m| {
                seen.push((m.payload.map(<[u8]>::to_vec), m.compressed));
            });
        }
        assert_eq!(
            seen,
            [
                (Some(vec![7, 7, 7]), false),
                (Some(vec![]), false),
                (Some(vec![9]), true)
            ]
        );
        // Counting only: no payloads.
        let mut c = MessageCounter::default();
        let mut payloads = 0;
        c.feed_with(&Bytes::from(framed(&[4])), |m| {
            payloads += usize::from(m.payload.is_some());
        });
        assert_eq!((c.complete, payloads), (1, 0));
    }

    proptest! {
        #[test]
        fn counts_across_any_split(sizes in proptest::collection::vec(0usize..40, 0..8), cuts in proptest::collection::vec(1usize..17, 0..40)) {
            let all = framed(&sizes);
            let mut c = MessageCounter::default();
            let mut at = 0;
            for cut in cuts.iter().chain(std::iter::repeat(&17)) {
                if at >= all.len() { break; }
                let end = (at + cut).min(all.len());
                c.feed(&Bytes::copy_from_slice(&all[at..end]));
                at = end;
            }
            prop_assert_eq!(c.complete, sizes.len() as u64);
        }
    }
}
