//! The one writer of an attempt's `grpc-timeout`: the first attempt's as the call plan
//! decided it ([`WireTimeout`]), and each later attempt's (a retry's, a hedge's) as
//! what remains for it, once, when it is sent.

use std::time::Duration;

use http::{HeaderMap, HeaderValue};

use crate::wire::grpc_timeout::{self, GRPC_TIMEOUT};

/// What to do with a request's `grpc-timeout` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WireTimeout {
    /// The caller's header already says the deadline: leave it.
    Keep,
    /// Send this value.
    Set(HeaderValue),
    /// No deadline on the wire (infinite calls, unlimited streams).
    Remove,
}

impl WireTimeout {
    /// The header for an attempt under `timeout` (`None`: no deadline on the wire).
    pub(crate) fn of(timeout: Option<Duration>) -> Self {
        match timeout {
            Some(t) => WireTimeout::Set(grpc_timeout::encode_unique(t)),
            None => WireTimeout::Remove,
        }
    }

    /// Writes it into an attempt's headers.
    #[inline]
    pub(crate) fn apply(self, headers: &mut HeaderMap) {
        match self {
            WireTimeout::Keep => {}
            WireTimeout::Set(v) => {
                headers.insert(GRPC_TIMEOUT, v);
            }
            WireTimeout::Remove => {
                headers.remove(GRPC_TIMEOUT);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_choice_writes_what_it_says() {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_static("9S"));
        WireTimeout::Keep.apply(&mut headers);
        assert_eq!(headers[GRPC_TIMEOUT], "9S");
        WireTimeout::of(Some(Duration::from_millis(1_500))).apply(&mut headers);
        assert_eq!(headers[GRPC_TIMEOUT], "1500000u");
        assert!(
            headers[GRPC_TIMEOUT].is_sensitive(),
            "unique to the call: never indexed"
        );
        WireTimeout::of(None).apply(&mut headers);
        assert!(headers.get(GRPC_TIMEOUT).is_none());
    }
}
