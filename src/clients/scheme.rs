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
    /// `https` in a build without a TLS crypto provider.
    NoProvider,
    /// `https` through `Sw4rm::connect` in a build without trust roots.
    NoRoots,
}

/// The features that give a build a TLS crypto provider.
pub(crate) const PROVIDER_FEATURES: &str = "`tls-ring` or `tls-aws-lc`";
/// The features that give a build trust roots.
pub(crate) const ROOTS_FEATURES: &str = "`tls-native-roots` or `tls-webpki-roots`";

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
                _,
            ) => Err(SchemeError::NoProvider),
            (TlsBuild { roots: false, .. }, TlsConfigBy::Sdk) => Err(SchemeError::NoRoots),
            _ => Ok(Transport::Tls),
        },
        other => Err(SchemeError::Unsupported(other.unwrap_or("").to_owned())),
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
            (Some("https"), NONE, Sdk, Err(NoProvider)),
            (Some("https"), NONE, Caller, Err(NoProvider)),
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
}
