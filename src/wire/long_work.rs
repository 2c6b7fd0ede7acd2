//! What a timeout of long work adds to its details: the idle limit and the cap, and
//! how far the work had come (progress messages, time since the last, its marker).

use std::collections::HashMap;
use std::fmt;

/// The long-work part of [`crate::TimeoutDetails`]: present when the call ran under an
/// idle limit (a stream with `idle_timeout_ms`, or a handler under
/// `scope::LongWork`, feature `long-work`).
///
/// ```
/// use sw4rm_timeouts::{Phase, TimeoutDetails};
/// # fn check(status: &tonic::Status) {
/// if let Some(d) = TimeoutDetails::from_status(status) {
///     if let (Phase::Idle, Some(w)) = (d.phase(), d.long_work()) {
///         println!("stuck: no progress for {} ms (cap {:?}), {} progress messages, last marker {:?}",
///             w.idle_limit_ms(), w.cap_ms(), w.progress_count(), w.progress_marker());
///     }
/// }
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongWorkDetails {
    pub(crate) idle_limit_ms: u64,
    pub(crate) cap_ms: Option<u64>,
    pub(crate) progress_count: u64,
    pub(crate) since_progress_ms: u64,
    pub(crate) progress_marker: Option<u64>,
}

impl LongWorkDetails {
    /// The idle limit: the longest time allowed without progress, in ms.
    pub fn idle_limit_ms(&self) -> u64 {
        self.idle_limit_ms
    }

    /// The hard cap (wall clock), in ms; `None` when there was none.
    pub fn cap_ms(&self) -> Option<u64> {
        self.cap_ms
    }

    /// How many progress reports (messages that were progress) there were.
    pub fn progress_count(&self) -> u64 {
        self.progress_count
    }

    /// Time from the last progress (or the start, when there was none) to the end, in
    /// ms.
    pub fn since_progress_ms(&self) -> u64 {
        self.since_progress_ms
    }

    /// The last progress marker (`ToolFrame.frame_no`, `StreamItem.seq`), where the
    /// progress has one.
    pub fn progress_marker(&self) -> Option<u64> {
        self.progress_marker
    }

    pub(crate) fn write(&self, metadata: &mut HashMap<String, String>) {
        metadata.insert("idle_limit_ms".to_owned(), self.idle_limit_ms.to_string());
        if let Some(cap) = self.cap_ms {
            metadata.insert("cap_ms".to_owned(), cap.to_string());
        }
        metadata.insert("progress_count".to_owned(), self.progress_count.to_string());
        metadata.insert(
            "since_progress_ms".to_owned(),
            self.since_progress_ms.to_string(),
        );
        if let Some(marker) = self.progress_marker {
            metadata.insert("progress_marker".to_owned(), marker.to_string());
        }
    }

    pub(crate) fn read(metadata: &HashMap<String, String>) -> Option<LongWorkDetails> {
        let num = |k: &str| metadata.get(k).and_then(|v| v.parse::<u64>().ok());
        Some(LongWorkDetails {
            idle_limit_ms: num("idle_limit_ms")?,
            cap_ms: num("cap_ms"),
            progress_count: num("progress_count").unwrap_or(0),
            since_progress_ms: num("since_progress_ms").unwrap_or(0),
            progress_marker: num("progress_marker"),
        })
    }
}

/// The cap in words: "cap 600000 ms" or "no cap".
pub(crate) struct CapWords(pub(crate) Option<u64>);

impl fmt::Display for CapWords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(ms) => write!(f, "cap {ms} ms"),
            None => f.write_str("no cap"),
        }
    }
}

/// "37 messages" / "1 message".
pub(crate) struct Count(pub(crate) u64, pub(crate) &'static str);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Count(n, what) = *self;
        write!(f, "{n} {what}{}", if n == 1 { "" } else { "s" })
    }
}
