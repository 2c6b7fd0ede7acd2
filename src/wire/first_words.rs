//! What a connection's server said first ([`Heard`]): read by the client's plaintext
//! stream (`clients/sniff.rs`), waited on by an eager connect, and asked by the call
//! record of a lazily connected channel whose call could not connect (a TLS server
//! behind an `http://` URL is named as such).

use std::sync::atomic::{AtomicU8, Ordering};

/// What a connection's server said first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FirstWords {
    /// Nothing yet.
    Nothing = 0,
    /// Bytes that are not TLS (an HTTP/2 server's SETTINGS).
    Http2 = 1,
    /// A TLS record.
    Tls = 2,
    /// The connection ended (or failed) before a byte.
    Closed = 3,
}

/// What a connection's server said first, shared by the stream that reads it and the
/// connect that waits for it (an eager connect is done when the server has spoken).
#[derive(Debug, Default)]
pub(crate) struct Heard {
    words: AtomicU8,
    changed: tokio::sync::Notify,
}

impl Heard {
    /// Records the first connection's first words (later connections of the channel,
    /// its reconnects, do not change what the connect heard).
    pub(crate) fn set(&self, words: FirstWords) {
        let nothing = FirstWords::Nothing as u8;
        if self
            .words
            .compare_exchange(nothing, words as u8, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.changed.notify_waiters();
        }
    }

    pub(crate) fn get(&self) -> FirstWords {
        match self.words.load(Ordering::Acquire) {
            0 => FirstWords::Nothing,
            1 => FirstWords::Http2,
            2 => FirstWords::Tls,
            _ => FirstWords::Closed,
        }
    }

    /// Waits until the server has said something, or the connection ended.
    pub(crate) async fn first_words(&self) -> FirstWords {
        loop {
            let changed = self.changed.notified();
            match self.get() {
                FirstWords::Nothing => changed.await,
                words => return words,
            }
        }
    }
}
