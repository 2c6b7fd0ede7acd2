//! What an endpoint's scheme asks of the connection, and whether this build can give
//! it: `http` is plaintext, `https` is TLS (never plaintext), anything else is refused.
//! A pure rule over the scheme and what was compiled in.

/// The TLS support compiled into this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TlsBuild {
    /// A crypto provider: feature `tls-ring` or `tls-aws-lc`.
    pub(crate) provider: bool,
    /// Trust roots: feature `tls-native-roots` or `tls-webpki-roots`.
    pub(crate) roots: bool,
}

impl TlsBuild {
    /// This build's TLS support.
    pub(crate) const COMPILED: TlsBuild = TlsBuild {
        provider: cfg!(any(feature = "tls-ring", feature = "tls-aws-lc")),
        roots: cfg!(any(
            feature = "tls-native-roots",
            feature = "tls-webpki-roots"
        )),
    };
}

/// Who configures TLS for an `https` endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TlsConfigBy {
    /// The SDK, with the compiled-in trust roots (`Sw4rm::connect`).
    Sdk,
    /// The caller, on their own `Endpoint` (`Sw4rm::builder`).
    Caller,
}

/// How to connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    Plaintext,
    Tls,
}

/// Why an endpoint cannot be connected to as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SchemeError {
    /// Neither `http` nor `https` (or no scheme at all: the empty string).
    Unsupported(String),
    /// `https` in a build without a TLS crypto provider (`by` whom TLS would be
    /// configured: the SDK needs roots too).
    NoProvider(TlsConfigBy),
    /// `https` through `Sw4rm::connect` in a build without trust roots.
    NoRoots,
}

/// What a build without a TLS provider needs, for an endpoint the caller configures
/// TLS for (`Sw4rm::builder`): a provider only.
pub(crate) const PROVIDER_FEATURES: &str =
    "a crypto provider, the feature `tls-ring` or `tls-aws-lc`";
/// What `Sw4rm::connect("https://…")` needs in a build without a provider: both kinds
/// of feature, or the way that needs no roots.
pub(crate) const PROVIDER_AND_ROOTS_FEATURES: &str = "a crypto provider (the feature \
    `tls-ring` or `tls-aws-lc`) and trust roots (`tls-native-roots` for the platform's, or \
    `tls-webpki-roots` for Mozilla's); for a server with a private CA, a provider and \
    `Sw4rm::builder(endpoint)` with your own `ClientTlsConfig` (CA and domain name) \
    instead of roots";
/// What `Sw4rm::connect("https://…")` needs in a build with a provider but no roots.
pub(crate) const ROOTS_FEATURES: &str = "trust roots, the feature `tls-native-roots` (the \
    platform's) or `tls-webpki-roots` (Mozilla's); for a server with a private CA, use \
    `Sw4rm::builder(endpoint)` with your own `ClientTlsConfig` (CA and domain name) \
    instead";

/// The transport `scheme` asks for, in a build with `tls`, when `by` configures TLS.
pub(crate) fn transport(
    scheme: Option<&str>,
    tls: TlsBuild,
    by: TlsConfigBy,
) -> Result<Transport, SchemeError> {
    match scheme {
        Some(s) if s.eq_ignore_ascii_case("http") => Ok(Transport::Plaintext),
        Some(s) if s.eq_ignore_ascii_case("https") => match (tls, by) {
            (
                TlsBuild {
                    provider: false, ..
                },
                by,
            ) => Err(SchemeError::NoProvider(by)),
            (TlsBuild { roots: false, .. }, TlsConfigBy::Sdk) => Err(SchemeError::NoRoots),
            _ => Ok(Transport::Tls),
        },
        other => Err(SchemeError::Unsupported(other.unwrap_or("").to_owned())),
    }
}

/// The port of `authority` (`host:port`, `[v6]:port`) when it is there and no port
/// number (1 to 65535): `http::Uri` then reports no port at all, and a connect would
/// go to the scheme's default port.
pub(crate) fn bad_port(authority: &str) -> Option<&str> {
    let (_, port) = authority.rsplit_once(':')?;
    if port.is_empty() || port.contains(']') {
        return None;
    }
    match port.parse::<u16>() {
        Ok(n) if n > 0 => None,
        _ => Some(port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: TlsBuild = TlsBuild {
        provider: false,
        roots: false,
    };
    const PROVIDER: TlsBuild = TlsBuild {
        provider: true,
        roots: false,
    };
    const FULL: TlsBuild = TlsBuild {
        provider: true,
        roots: true,
    };

    #[test]
    fn scheme_table() {
        use SchemeError::*;
        use TlsConfigBy::*;
        use Transport::*;
        let unsupported = |s: &str| Err(Unsupported(s.to_owned()));
        type Row = (
            Option<&'static str>,
            TlsBuild,
            TlsConfigBy,
            Result<Transport, SchemeError>,
        );
        let table: [Row; 14] = [
            (Some("http"), NONE, Sdk, Ok(Plaintext)),
            (Some("HTTP"), NONE, Caller, Ok(Plaintext)),
            (Some("http"), FULL, Sdk, Ok(Plaintext)),
            // https is TLS or nothing.
            (Some("https"), NONE, Sdk, Err(NoProvider(Sdk))),
            (Some("https"), NONE, Caller, Err(NoProvider(Caller))),
            (Some("https"), PROVIDER, Sdk, Err(NoRoots)),
            // The caller's own TLS configuration brings its own roots.
            (Some("https"), PROVIDER, Caller, Ok(Tls)),
            (Some("https"), FULL, Sdk, Ok(Tls)),
            (Some("HTTPS"), FULL, Caller, Ok(Tls)),
            (Some("grpc"), FULL, Sdk, unsupported("grpc")),
            (Some("grpcs"), FULL, Caller, unsupported("grpcs")),
            (Some("unix"), NONE, Sdk, unsupported("unix")),
            (Some(""), FULL, Sdk, unsupported("")),
            (None, FULL, Sdk, unsupported("")),
        ];
        for (scheme, tls, by, want) in table {
            assert_eq!(
                transport(scheme, tls, by),
                want,
                "{scheme:?} {tls:?} {by:?}"
            );
        }
    }

    #[test]
    fn a_port_that_is_no_port_number_is_told() {
        let table = [
            ("127.0.0.1:50051", None),
            ("127.0.0.1:99999", Some("99999")),
            ("127.0.0.1:0", Some("0")),
            ("127.0.0.1:-1", Some("-1")),
            ("host:http", Some("http")),
            ("host", None),
            ("host:", None),
            ("[::1]", None),
            ("[::1]:443", None),
            ("[::1]:70000", Some("70000")),
        ];
        for (authority, want) in table {
            assert_eq!(bad_port(authority), want, "{authority}");
        }
    }
}
