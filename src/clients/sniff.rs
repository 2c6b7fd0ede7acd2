//! What a connection's server says first. An eager connect is done when the server
//! has spoken: an HTTP/2 server's SETTINGS completes it; a TLS record on a plaintext
//! (`http://`) connection fails it with `ConnectError::ServerSpeaksTls` (before, the
//! connect succeeded and the first call failed as "operation was canceled", naming
//! neither the endpoint nor the cause); a peer that closes first fails it too. A TLS
//! record also ends the connection with [`ServerSpeaksTls`]. The first bytes are looked
//! at once; every read after them costs one comparison.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(crate) use crate::wire::first_words::{FirstWords, Heard};
use crate::wire::status::SERVER_SPEAKS_TLS;

/// The server of a plaintext connection answered with a TLS record.
#[derive(Debug)]
pub(crate) struct ServerSpeaksTls;

impl fmt::Display for ServerSpeaksTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SERVER_SPEAKS_TLS)
    }
}

impl std::error::Error for ServerSpeaksTls {}

/// Whether `bytes`, the first a server sent, open a TLS record (an alert or a
/// handshake, TLS 1.x). An HTTP/2 server's first frame is a small SETTINGS frame,
/// whose length starts with a zero byte.
fn is_tls_record(bytes: &[u8]) -> bool {
    matches!(bytes, [0x15 | 0x16, 0x03, ..])
}

/// A plaintext stream whose first bytes are looked at (see the module's doc).
#[derive(Debug)]
pub(crate) struct Sniffed<T> {
    inner: T,
    first: bool,
    heard: Arc<Heard>,
}

impl<T> Sniffed<T> {
    pub(crate) fn new(inner: T, heard: Arc<Heard>) -> Self {
        Sniffed {
            inner,
            first: true,
            heard,
        }
    }

    /// Looks at nothing: a stream under TLS (whose first words are TLS's, as they
    /// should be; the handshake done, the server has spoken).
    pub(crate) fn stop(&mut self) {
        self.first = false;
        self.heard.set(FirstWords::Http2);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Sniffed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if !self.first || polled.is_pending() {
            return polled;
        }
        self.first = false;
        let read = &buf.filled()[before..];
        let words = match (&polled, read.is_empty()) {
            (Poll::Ready(Ok(())), false) if is_tls_record(read) => FirstWords::Tls,
            (Poll::Ready(Ok(())), false) => FirstWords::Http2,
            _ => FirstWords::Closed,
        };
        self.heard.set(words);
        if words == FirstWords::Tls {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                ServerSpeaksTls,
            )));
        }
        polled
    }
}

impl<T: AsyncRead + Unpin> Sniffed<T> {
    /// A write failed before the server said anything: the peer closed the
    /// connection first. What it sent before closing, if it is still there to read
    /// (a TLS server's alert), says why.
    fn wrote<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if self.first && matches!(polled, Poll::Ready(Err(_))) {
            self.first = false;
            let mut bytes = [0u8; 8];
            let mut buf = ReadBuf::new(&mut bytes);
            let words = match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if is_tls_record(buf.filled()) => FirstWords::Tls,
                _ => FirstWords::Closed,
            };
            self.heard.set(words);
        }
        polled
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Sniffed<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(cx, polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.wrote(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_records_are_told_from_http2_frames() {
        let table: [(&[u8], bool); 6] = [
            (&[0x15, 0x03, 0x03, 0x00, 0x02], true), // alert, TLS 1.2
            (&[0x16, 0x03, 0x01], true),             // handshake
            (&[0x00, 0x00, 0x06, 0x04], false),      // HTTP/2 SETTINGS
            (&[0x15], false),                        // too short to say
            (&[0x16, 0x02], false),                  // not TLS 1.x
            (b"HTTP/1.1 400", false),                // an HTTP/1 server
        ];
        for (bytes, want) in table {
            assert_eq!(is_tls_record(bytes), want, "{bytes:?}");
        }
    }
}
