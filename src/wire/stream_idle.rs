//! `sw4rm-stream-idle-ms`: how long a caller accepts a server stream going quiet (the
//! shorter of its gap timer and its idle limit), in milliseconds. Our client layer
//! sends it on a streaming call that has either; a server's long-work guard
//! (`scope::LongWork::stream`, feature `long-work`) sends a progress message at least every half
//! of it, so a working tool is never cut by its caller's own timer. Another gRPC
//! stack neither sends nor needs it.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};

/// The header's name.
pub const STREAM_IDLE_HEADER: HeaderName = HeaderName::from_static("sw4rm-stream-idle-ms");

/// Writes `limit` (whole milliseconds, at least 1).
pub(crate) fn write(headers: &mut HeaderMap, limit: Duration) {
    let ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1);
    headers.insert(STREAM_IDLE_HEADER, HeaderValue::from(ms));
}

/// Reads the limit a caller sent: `None` when absent, not a number of milliseconds
/// (at most 8 digits: a peer's value is bounded before it is used), or 0.
#[cfg(any(feature = "long-work", test))]
pub(crate) fn read(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(STREAM_IDLE_HEADER)?.as_bytes();
    if text.is_empty() || text.len() > 8 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let ms = std::str::from_utf8(text).ok()?.parse::<u64>().ok()?;
    (ms > 0).then(|| Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_and_read_back_and_anything_else_is_none() {
        let mut headers = HeaderMap::new();
        write(&mut headers, Duration::from_millis(30_000));
        assert_eq!(headers[STREAM_IDLE_HEADER], "30000");
        assert_eq!(read(&headers), Some(Duration::from_millis(30_000)));
        write(&mut headers, Duration::from_micros(10));
        assert_eq!(
            read(&headers),
            Some(Duration::from_millis(1)),
            "at least 1 ms"
        );
        // (what a peer sent, read as)
        let rows = [
            ("", None),
            ("0", None),
            ("-5", None),
            ("1e3", None),
            ("123456789", None),
            ("99999999", Some(99_999_999)),
        ];
        for (sent, want) in rows {
            headers.insert(STREAM_IDLE_HEADER, HeaderValue::from_static(sent));
            assert_eq!(read(&headers), want.map(Duration::from_millis), "{sent:?}");
        }
    }
}
