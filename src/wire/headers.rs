//! [`find`]: a header of a head with few of them, found by comparing names.

use http::{HeaderMap, HeaderName, HeaderValue};

/// Heads with at most this many names are scanned; larger ones are looked up.
const SCANNED: usize = 8;

/// The first value of `name` in `headers`, as [`HeaderMap::get`] finds it. A
/// generated client's request and a gRPC response head carry a handful of headers,
/// most of them standard names (an enum): comparing the names alone, not the values
/// behind them, costs less than hashing `name` for a lookup, which every call would
/// pay. Only a head that has `name`, or more than a few names, is looked up.
///
/// `headers.get(name)` for a name that is not standard hashes it on every call (a
/// `grpc-timeout` or `grpc-status`, twelve and eleven bytes); this hashes nothing
/// when the name is absent.
#[inline]
pub(crate) fn find<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a HeaderValue> {
    if headers.keys_len() > SCANNED || headers.keys().any(|key| key == name) {
        return headers.get(name);
    }
    None
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The names a head is made of: standard ones, gRPC's own, and others.
    const NAMES: [&str; 7] = [
        "content-type",
        "te",
        "grpc-timeout",
        "grpc-status",
        "grpc-message",
        "x-agent",
        "user-agent",
    ];

    proptest! {
        /// Whatever the head (few names or many, a name twice or not at all), what
        /// is found is what a lookup finds.
        #[test]
        fn finds_what_a_lookup_finds(
            entries in proptest::collection::vec((0..NAMES.len(), 0u8..4), 0..24),
            asked in 0..NAMES.len(),
        ) {
            let mut headers = HeaderMap::new();
            for (i, (name, value)) in entries.iter().enumerate() {
                let value = HeaderValue::from(u32::from(*value) * 100 + i as u32);
                headers.append(HeaderName::from_static(NAMES[*name]), value);
            }
            // Names of their own past the scanned few: the lookup's way.
            if entries.len() > 12 {
                for n in 0..SCANNED {
                    headers.insert(HeaderName::try_from(format!("x-{n}")).unwrap(), HeaderValue::from(0));
                }
            }
            let name = HeaderName::from_static(NAMES[asked]);
            prop_assert_eq!(find(&headers, &name), headers.get(&name));
        }
    }
}
