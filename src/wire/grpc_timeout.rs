//! The `grpc-timeout` header: formatting a deadline for the wire and parsing the one a
//! caller (for example `tonic::Request::set_timeout`) already put on a request.
//!
//! Format (gRPC over HTTP/2): 1 to 8 ASCII digits followed by a unit, one of
//! `H` hours, `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds,
//! `n` nanoseconds.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use http::HeaderValue;

/// The header name.
pub const GRPC_TIMEOUT: http::HeaderName = http::HeaderName::from_static("grpc-timeout");

const MAX_DIGITS: usize = 8;
const MAX_VALUE: u128 = 99_999_999;

/// Why a `grpc-timeout` value could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrpcTimeoutError {
    /// The value as received (lossy UTF-8).
    pub value: String,
    /// The rule it breaks.
    pub rule: &'static str,
}

impl fmt::Display for GrpcTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed grpc-timeout header {:?}: {}",
            self.value, self.rule
        )
    }
}

impl std::error::Error for GrpcTimeoutError {}

/// Parses a `grpc-timeout` value.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::wire::grpc_timeout::parse;
/// assert_eq!(parse(b"200000u").unwrap(), Duration::from_millis(200));
/// assert_eq!(parse(b"5S").unwrap(), Duration::from_secs(5));
/// assert!(parse(b"5").is_err());
/// ```
pub fn parse(value: &[u8]) -> Result<Duration, GrpcTimeoutError> {
    let err = |rule| GrpcTimeoutError {
        value: String::from_utf8_lossy(value).into_owned(),
        rule,
    };
    let Some((&unit, digits)) = value.split_last() else {
        return Err(err("empty value"));
    };
    if digits.is_empty() {
        return Err(err("no digits before the unit"));
    }
    if digits.len() > MAX_DIGITS {
        return Err(err("more than 8 digits"));
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(err(
                "value must be ASCII digits followed by one of H M S m u n",
            ));
        }
        n = n * 10 + u64::from(d - b'0');
    }
    Ok(match unit {
        b'H' => Duration::from_secs(n * 3_600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return Err(err("unit must be one of H M S m u n")),
    })
}

/// Formats a deadline as a `grpc-timeout` value: the finest unit whose value fits in
/// 8 digits, rounded *up* so the server never sees a deadline shorter than ours.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::wire::grpc_timeout::encode;
/// assert_eq!(encode(Duration::from_secs(5)), "5000000u");
/// assert_eq!(encode(Duration::from_secs(3_600)), "3600000m");
/// ```
pub fn encode(d: Duration) -> HeaderValue {
    let mut buf = [0u8; MAX_DIGITS + 1];
    let len = encode_into(d, &mut buf);
    // Only ASCII digits and a unit letter were written.
    HeaderValue::from_bytes(&buf[..len]).unwrap_or(HeaderValue::from_static("99999999H"))
}

/// The header for a value unique to one call (what remains of a deadline, a per-call
/// timeout), formatted as [`encode`] does and marked sensitive: h2 then sends it as a
/// literal never indexed, so it does not push `content-type`, `te` or `:authority`
/// out of the connection's 4 KiB HPACK table (grpc-go measured 9–23 % less
/// header-encoding time from the same). A profile's default ([`encode_kept`]) stays
/// indexable: it repeats call after call.
pub(crate) fn encode_unique(d: Duration) -> HeaderValue {
    let mut value = encode(d);
    value.set_sensitive(true);
    value
}

/// Distinct values [`encode_kept`] keeps for the life of the process.
const KEPT_VALUES: usize = 256;

/// The header for a value sent on many calls (a profile's default timeout), formatted
/// as [`encode`] does. Its text is kept for the life of the process, so that a clone
/// per call copies a pointer instead of counting a shared reference. At most
/// `KEPT_VALUES` distinct values are kept (a few bytes each); beyond them the header is
/// an ordinary shared one.
pub(crate) fn encode_kept(d: Duration) -> HeaderValue {
    static KEPT: Mutex<Vec<(Duration, &'static str)>> = Mutex::new(Vec::new());
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&(_, text)) = kept.iter().find(|(v, _)| *v == d) {
        return HeaderValue::from_static(text);
    }
    if kept.len() >= KEPT_VALUES {
        return encode(d);
    }
    let mut buf = [0u8; MAX_DIGITS + 1];
    let len = encode_into(d, &mut buf);
    let Ok(text) = std::str::from_utf8(&buf[..len]) else {
        return encode(d);
    };
    // Only ASCII digits and a unit letter were written, which `from_static` accepts.
    let text: &'static str = Box::leak(text.into());
    kept.push((d, text));
    HeaderValue::from_static(text)
}

fn encode_into(d: Duration, buf: &mut [u8; MAX_DIGITS + 1]) -> usize {
    // Every deadline a call sends fits `u64` nanoseconds (584 years); only a longer one
    // takes the 128-bit way, whose divisions cost a hundred instructions each.
    let nanos = d
        .as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(u64::from(d.subsec_nanos())));
    let (value, unit) = match nanos {
        Some(nanos) => value_and_unit(nanos),
        None => value_and_unit_wide(d.as_nanos()),
    };
    let mut digits = [0u8; MAX_DIGITS];
    let mut v = value;
    let mut i = MAX_DIGITS;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let n = MAX_DIGITS - i;
    buf[..n].copy_from_slice(&digits[i..]);
    buf[n] = unit;
    n + 1
}

/// The units `grpc-timeout` has, finest first, in nanoseconds.
const UNITS: [(u64, u8); 6] = [
    (1, b'n'),
    (1_000, b'u'),
    (1_000_000, b'm'),
    (1_000_000_000, b'S'),
    (60_000_000_000, b'M'),
    (3_600_000_000_000, b'H'),
];

/// The finest unit whose count (rounded up) fits 8 digits, and that count.
fn value_and_unit(nanos: u64) -> (u32, u8) {
    UNITS
        .iter()
        .map(|&(per, unit)| (nanos.div_ceil(per), unit))
        .find(|&(v, _)| v <= MAX_VALUE as u64)
        .map_or((MAX_VALUE as u32, b'H'), |(v, unit)| (v as u32, unit))
}

/// [`value_and_unit`] for a duration beyond `u64` nanoseconds.
fn value_and_unit_wide(nanos: u128) -> (u32, u8) {
    UNITS
        .iter()
        .map(|&(per, unit)| (nanos.div_ceil(u128::from(per)), unit))
        .find(|&(v, _)| v <= MAX_VALUE)
        .map_or((MAX_VALUE as u32, b'H'), |(v, unit)| (v as u32, unit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parse_table() {
        let ok: [(&[u8], Duration); 8] = [
            (b"1H", Duration::from_secs(3600)),
            (b"2M", Duration::from_secs(120)),
            (b"5S", Duration::from_secs(5)),
            (b"5000m", Duration::from_secs(5)),
            (b"200000u", Duration::from_millis(200)),
            (b"99999999n", Duration::from_nanos(99_999_999)),
            (b"0n", Duration::ZERO),
            (b"00000001m", Duration::from_millis(1)),
        ];
        for (v, want) in ok {
            assert_eq!(parse(v).unwrap(), want, "{}", String::from_utf8_lossy(v));
        }
        let bad: [(&[u8], &str); 7] = [
            (b"", "empty value"),
            (b"m", "no digits before the unit"),
            (b"123456789m", "more than 8 digits"),
            (b"12x", "unit must be one of H M S m u n"),
            (
                b"1 2m",
                "value must be ASCII digits followed by one of H M S m u n",
            ),
            (
                b"-5m",
                "value must be ASCII digits followed by one of H M S m u n",
            ),
            (b"5", "no digits before the unit"),
        ];
        for (v, rule) in bad {
            assert_eq!(
                parse(v).unwrap_err().rule,
                rule,
                "{}",
                String::from_utf8_lossy(v)
            );
        }
    }

    #[test]
    fn a_kept_value_is_formatted_as_encode_does_and_kept_once() {
        for d in [
            Duration::from_millis(1),
            Duration::from_secs(5),
            Duration::from_secs(3_600),
            Duration::MAX,
        ] {
            let kept = encode_kept(d);
            assert_eq!(kept, encode(d), "{d:?}");
            // The same text again, not a second copy.
            let again = encode_kept(d);
            assert_eq!(kept.as_bytes().as_ptr(), again.as_bytes().as_ptr(), "{d:?}");
        }
    }

    #[test]
    fn encode_table() {
        let table = [
            (Duration::from_millis(1), "1000000n"),
            (Duration::from_millis(100), "100000u"),
            (Duration::from_secs(5), "5000000u"),
            (Duration::from_secs(30), "30000000u"),
            (Duration::from_secs(300), "300000m"),
            (Duration::from_secs(3_600), "3600000m"),
            (Duration::from_millis(u64::from(u32::MAX)), "4294968S"),
            (Duration::MAX, "99999999H"),
            // Past u64 nanoseconds (584 years): the wide way, in hours.
            (Duration::from_secs(1_000 * 365 * 86_400), "8760000H"),
            (Duration::from_nanos(u64::MAX), "5124096H"),
            (
                Duration::new(u64::MAX / 1_000_000_000, 999_999_999),
                "5124096H",
            ),
        ];
        for (d, want) in table {
            assert_eq!(encode(d), want, "{d:?}");
        }
    }

    proptest! {
        #[test]
        fn round_trip_never_shortens(nanos in 0u64..u64::MAX) {
            let d = Duration::from_nanos(nanos);
            let v = encode(d);
            prop_assert!(v.len() <= 9);
            let back = parse(v.as_bytes()).unwrap();
            prop_assert!(back >= d);
        }

        /// The `u64` way and the 128-bit way agree wherever both can go.
        #[test]
        fn the_narrow_and_the_wide_way_agree(nanos in any::<u64>()) {
            prop_assert_eq!(value_and_unit(nanos), value_and_unit_wide(u128::from(nanos)));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let _ = parse(&bytes);
        }
    }
}
