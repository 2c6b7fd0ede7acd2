//! SW4RM's portable idempotency token, profile `bytes-v1`: what every upstream SDK puts
//! in `Envelope.idempotency_token`, so that a receiver can tell a mutation sent again
//! on purpose (a delegation retried after `OVERLOADED`, a redirected handoff, a
//! retried `SendMessage`) from a new one. The token is
//! `producer_id:operation:h`, `h` the first 16 lowercase hex digits of
//! SHA-256(`producer_id` LF `operation` LF the caller's canonical bytes).

use std::fmt;

use sha2::{Digest, Sha256};

/// Why no token could be made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdempotencyError {
    /// A line feed inside `producer_id` or `operation` (named by `field`): it is the
    /// profile's field separator, so two different inputs would share a token.
    LineFeed {
        /// `producer_id` or `operation`.
        field: &'static str,
    },
}

impl fmt::Display for IdempotencyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdempotencyError::LineFeed { field } => write!(
                f,
                "{field} holds a line feed, the bytes-v1 idempotency token's field \
                 separator: two different requests could share a token; remove it"
            ),
        }
    }
}

impl std::error::Error for IdempotencyError {}

/// The `bytes-v1` idempotency token of a request: `canonical` is the caller's own
/// canonical encoding of what makes two requests the same (keep it stable across
/// retries; the order of fields is yours to fix). Keep the token with the request and
/// send it again, unchanged, on every retry of the same mutation.
///
/// ```
/// use sw4rm_swarm::idempotency_token;
/// let token = idempotency_token("agent", "work", br#"{"a":1,"b":2}"#)?;
/// assert_eq!(token, "agent:work:f65efee16e55e693");
/// assert!(idempotency_token("agent\nx", "work", b"").is_err());
/// # Ok::<(), sw4rm_swarm::IdempotencyError>(())
/// ```
pub fn idempotency_token(
    producer_id: &str,
    operation: &str,
    canonical: &[u8],
) -> Result<String, IdempotencyError> {
    if producer_id.contains('\n') {
        return Err(IdempotencyError::LineFeed {
            field: "producer_id",
        });
    }
    if operation.contains('\n') {
        return Err(IdempotencyError::LineFeed { field: "operation" });
    }
    let digest = Sha256::new()
        .chain_update(producer_id.as_bytes())
        .chain_update(b"\n")
        .chain_update(operation.as_bytes())
        .chain_update(b"\n")
        .chain_update(canonical)
        .finalize();
    let mut token = format!("{producer_id}:{operation}:");
    for byte in &digest[..8] {
        let _ = fmt::Write::write_fmt(&mut token, format_args!("{byte:02x}"));
    }
    Ok(token)
}
/// The token as a text header carries it: gRPC limits text metadata to printable
/// ASCII, and an id such as `λ-agent` is not, so every byte outside 0x20–0x7E, and
/// `%` itself, is written `%XX` (uppercase hex), as gRPC writes `grpc-message`. A
/// token of printable ASCII (the usual case) is written unchanged; any URL
/// percent-decoder gives the token back.
pub(crate) fn header_text(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    for &byte in token.as_bytes() {
        match byte {
            b'%' => out.push_str("%25"),
            0x20..=0x7e => out.push(char::from(byte)),
            _ => {
                let _ = fmt::Write::write_fmt(&mut out, format_args!("%{byte:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_written_as_printable_ascii_and_reads_back() {
        let table = [
            ("agent:RequestHandoff:0011", "agent:RequestHandoff:0011"),
            ("\u{3bb}-agent:op:ab", "%CE%BB-agent:op:ab"),
            ("50%:op:ab", "50%25:op:ab"),
            ("a\tb", "a%09b"),
        ];
        for (token, want) in table {
            let text = header_text(token);
            assert_eq!(text, want);
            assert!(text.bytes().all(|b| (0x20..=0x7e).contains(&b)));
            assert!(http::HeaderValue::from_str(&text).is_ok());
            // Percent-decoding gives the token back.
            let (raw, mut bytes, mut i) = (text.as_bytes(), Vec::new(), 0);
            while i < raw.len() {
                if raw[i] == b'%' {
                    bytes.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap());
                    i += 3;
                } else {
                    bytes.push(raw[i]);
                    i += 1;
                }
            }
            assert_eq!(String::from_utf8(bytes).unwrap(), token);
        }
    }
}
