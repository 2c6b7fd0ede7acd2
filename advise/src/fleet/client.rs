//! One instant query of Prometheus's HTTP API (`GET /api/v1/query`), as Prometheus,
//! Thanos and Mimir serve it: credentials, Mimir's tenant header, a timeout of its own
//! and a bound on the answer's size. Blocking (a command line's client: call it from
//! `spawn_blocking` in async code).

use std::time::Duration;

use super::answer::{self, Sample};
use super::error::{cut, FleetError};

/// How long one query may take, unless [`Prometheus::timeout`] says otherwise.
pub const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// How large one answer may be, unless [`Prometheus::max_response_bytes`] says
/// otherwise (an answer is read whole, then parsed).
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 64 << 20;

/// A Prometheus-compatible query API (Prometheus, Thanos Query, Mimir) and how to ask it.
///
/// ```no_run
/// use std::time::Duration;
/// use sw4rm_advise::fleet::Prometheus;
/// let prometheus = Prometheus::new("http://mimir:8080/prometheus")
///     .tenant("agents")
///     .bearer_token("s3cret")
///     .timeout(Duration::from_secs(60));
/// let fleet = prometheus.read_fleet("{job=\"agents\"}", "7d", "instance")?;
/// println!("{} instances", fleet.instances().len());
/// # Ok::<(), sw4rm_advise::fleet::FleetError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Prometheus {
    base: String,
    tenant: Option<String>,
    authorization: Option<String>,
    timeout: Duration,
    max_bytes: u64,
    at: Option<f64>,
}

impl Prometheus {
    /// The server at `base` (`http://prometheus:9090`, or with a path prefix such as
    /// Mimir's `http://mimir:8080/prometheus`); `/api/v1/query` is added to it.
    pub fn new(base: &str) -> Self {
        Prometheus {
            base: base.trim_end_matches('/').to_owned(),
            tenant: None,
            authorization: None,
            timeout: DEFAULT_QUERY_TIMEOUT,
            max_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            at: None,
        }
    }

    /// Mimir's tenant (`X-Scope-OrgID`).
    #[must_use]
    pub fn tenant(mut self, tenant: &str) -> Self {
        self.tenant = Some(tenant.to_owned());
        self
    }

    /// A bearer token (`Authorization: Bearer ...`).
    #[must_use]
    pub fn bearer_token(mut self, token: &str) -> Self {
        self.authorization = Some(format!("Bearer {}", token.trim()));
        self
    }

    /// HTTP basic authentication.
    #[must_use]
    pub fn basic_auth(mut self, user: &str, password: &str) -> Self {
        let pair = format!("{user}:{password}");
        self.authorization = Some(format!("Basic {}", base64(pair.as_bytes())));
        self
    }

    /// How long one query may take, connection included ([`DEFAULT_QUERY_TIMEOUT`]).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The largest answer read ([`DEFAULT_MAX_RESPONSE_BYTES`]); a larger one is refused.
    #[must_use]
    pub fn max_response_bytes(mut self, limit: u64) -> Self {
        self.max_bytes = limit;
        self
    }

    /// Evaluates at `unix_seconds` (the window's end) instead of the server's now.
    #[must_use]
    pub fn at(mut self, unix_seconds: f64) -> Self {
        self.at = Some(unix_seconds);
        self
    }

    /// The query API's URL.
    pub fn url(&self) -> String {
        format!("{}/api/v1/query", self.base)
    }

    /// The instant vector `promql` evaluates to.
    pub fn query(&self, promql: &str) -> Result<Vec<Sample>, FleetError> {
        let url = self.url();
        let fail = |why: String| FleetError::Unreachable {
            url: url.clone(),
            query: promql.to_owned(),
            why,
        };
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(self.timeout))
            .http_status_as_error(false)
            .user_agent(concat!("sw4rm-advise/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        let mut request = agent.get(&url).query("query", promql);
        if let Some(at) = self.at {
            request = request.query("time", format!("{at:.3}"));
        }
        if let Some(tenant) = &self.tenant {
            request = request.header("X-Scope-OrgID", tenant);
        }
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut response = request
            .call()
            .map_err(|e| self.error(&url, promql, e, fail))?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(self.max_bytes)
            .read_to_string();
        let body = match body {
            Ok(body) => body,
            Err(e) => return Err(self.error(&url, promql, e, fail)),
        };
        // The API answers its own errors as JSON with 400, 422 or 503: read those.
        let json = body.trim_start().starts_with('{');
        if status == 200 && !json {
            return Err(FleetError::NotPrometheus {
                url,
                query: promql.to_owned(),
                why: format!("an answer that is not JSON: {:?}", cut(body.trim())),
            });
        }
        if !(json && matches!(status, 200 | 400 | 422 | 503)) {
            return Err(FleetError::Status {
                url,
                query: promql.to_owned(),
                status,
                body: cut(body.trim()),
            });
        }
        answer::samples(&body).map_err(|e| e.at(&url, promql))
    }

    fn error(
        &self,
        url: &str,
        query: &str,
        e: ureq::Error,
        fail: impl FnOnce(String) -> FleetError,
    ) -> FleetError {
        match e {
            ureq::Error::Timeout(_) => FleetError::TimedOut {
                url: url.to_owned(),
                query: query.to_owned(),
                after: self.timeout,
            },
            ureq::Error::BodyExceedsLimit(limit) => FleetError::TooLarge {
                url: url.to_owned(),
                query: query.to_owned(),
                limit,
            },
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                FleetError::TimedOut {
                    url: url.to_owned(),
                    query: query.to_owned(),
                    after: self.timeout,
                }
            }
            other => fail(cut(&other.to_string())),
        }
    }
}

/// Standard base64 with padding (RFC 4648), for basic authentication.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ABC[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_as_rfc_4648_gives_it() {
        // RFC 4648 §10's vectors, and a basic-auth pair.
        let rows = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
            ("Aladdin:open sesame", "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
        ];
        for (text, want) in rows {
            assert_eq!(base64(text.as_bytes()), want, "{text:?}");
        }
    }

    #[test]
    fn the_url_takes_a_path_prefix() {
        assert_eq!(
            Prometheus::new("http://mimir:8080/prometheus/").url(),
            "http://mimir:8080/prometheus/api/v1/query"
        );
    }
}
