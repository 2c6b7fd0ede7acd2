//! The delegation's `bytes-v1` idempotency token on the wire: the metadata key, and
//! the token every send carries, as printable ASCII.

use tonic::metadata::{MetadataMap, MetadataValue};

use crate::delegation::idempotency::{header_text, idempotency_token};
use sw4rm_timeouts::proto::sw4rm::handoff::HandoffRequest;

/// The metadata key of the `bytes-v1` idempotency token every send of a delegation
/// carries ([`crate::idempotency_token`] of the `from_agent`, the operation
/// `RequestHandoff` and the `request_id`), unless the caller set one.
///
/// gRPC allows only printable ASCII in a text header, so the value is the token
/// percent-encoded: every byte outside 0x20–0x7E, and `%`, as `%XX` (as gRPC writes
/// `grpc-message`). A token of ASCII ids is sent as it is; one of `λ-agent` is sent as
/// `%CE%BB-agent:RequestHandoff:…`. A gateway percent-decodes the value (any URL
/// decoder) before comparing it with `Envelope.idempotency_token`.
pub const IDEMPOTENCY_TOKEN_KEY: &str = "sw4rm-idempotency-token";

/// Adds the delegation's `bytes-v1` token unless `metadata` has one (or the ids
/// cannot make one: a line feed). It goes out as printable ASCII, percent-encoded
/// where the ids are not ([`header_text`]).
pub(super) fn insert_token(metadata: &mut MetadataMap, request: &HandoffRequest) {
    if metadata.contains_key(IDEMPOTENCY_TOKEN_KEY) {
        return;
    }
    let token = idempotency_token(
        &request.from_agent,
        "RequestHandoff",
        request.request_id.as_bytes(),
    );
    let text = token.ok().map(|t| header_text(&t));
    if let Some(value) = text.and_then(|t| MetadataValue::try_from(t).ok()) {
        metadata.insert(IDEMPOTENCY_TOKEN_KEY, value);
    }
}
