//! Why a read of Prometheus's query API gave no fleet: each names the URL, the query
//! and the fix.

use std::fmt;
use std::time::Duration;

use super::promql::QueryError;

/// At most this many bytes of anything the server sent are echoed in a message.
const ECHO: usize = 200;

/// Why the advisor could not read the fleet from Prometheus.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetError {
    /// The selector, window or instance label would not make a query.
    Query(QueryError),
    /// No connection (refused, no such host, TLS).
    Unreachable {
        /// The query API's URL.
        url: String,
        /// The PromQL.
        query: String,
        /// What the connection said.
        why: String,
    },
    /// No whole answer within the advisor's own timeout.
    TimedOut {
        /// The query API's URL.
        url: String,
        /// The PromQL.
        query: String,
        /// The timeout.
        after: Duration,
    },
    /// An HTTP status that is not the query API's answer (401, 403, 404, 5xx...).
    Status {
        /// The query API's URL.
        url: String,
        /// The PromQL.
        query: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body, as sent.
        body: String,
    },
    /// Prometheus answered with an error of its own (`"status": "error"`), such as its
    /// query timeout or a selector it cannot parse.
    Api {
        /// The query API's URL.
        url: String,
        /// The PromQL.
        query: String,
        /// Prometheus's `errorType` (`timeout`, `bad_data`, `execution`, ...).
        error_type: String,
        /// Prometheus's `error`.
        error: String,
    },
    /// The answer is larger than the advisor reads.
    TooLarge {
        /// The query API's URL.
        url: String,
        /// The PromQL.
        query: String,
        /// The limit, in bytes.
        limit: u64,
    },
    /// The answer is not the query API's JSON for an instant vector.
    NotPrometheus {
        /// The query API's URL.
        url: String,
        /// The PromQL.
        query: String,
        /// What is wrong with it.
        why: String,
    },
    /// A sample that is no count of calls (NaN, infinite, negative, or past 2^53).
    BadSample {
        /// The query API's URL.
        url: String,
        /// The PromQL.
        query: String,
        /// The series, as its labels.
        series: String,
        /// The value as sent.
        value: String,
    },
    /// The selector matches no series of the SDK's duration histogram in the window.
    NoSeries {
        /// The query API's URL.
        url: String,
        /// The PromQL.
        query: String,
    },
}

/// `text`, cut to [`ECHO`] bytes as the core cuts what a peer says (a server's words
/// are bounded before they are stored or echoed).
pub(super) fn cut(text: &str) -> String {
    sw4rm_timeouts::seams::cut(text, ECHO).to_string()
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FleetError::Query(e) => e.fmt(f),
            FleetError::Unreachable { url, query, why } => write!(
                f,
                "cannot reach Prometheus at {url} ({why}) for the query {query}: check the URL \
                 (scheme, host, port, and a path prefix such as Mimir's /prometheus) and that \
                 the server is up (its /-/ready answers)"
            ),
            FleetError::TimedOut { url, query, after } => write!(
                f,
                "Prometheus at {url} did not answer the query {query} within {} s (the \
                 advisor's --timeout): raise --timeout, or ask for less (a shorter --window, \
                 a narrower --selector)",
                after.as_secs_f64()
            ),
            FleetError::Status {
                url,
                query,
                status,
                body,
            } => {
                let fix = match status {
                    401 => "give credentials: --bearer-token-file FILE or --basic-auth-file FILE (user:password)",
                    403 => "the credentials given may not read these series: check them, and for Mimir the tenant (--tenant)",
                    404 => "no query API there: give the server's base URL, with its path prefix if it has one (such as http://mimir:8080/prometheus)",
                    _ => "see the server's own logs; try again when it answers",
                };
                write!(
                    f,
                    "{url} answered the query {query} with HTTP {status} ({body:?}): {fix}"
                )
            }
            FleetError::Api {
                url,
                query,
                error_type,
                error,
            } => {
                let fix = match error_type.as_str() {
                    "timeout" => "Prometheus gave up at its own query timeout (-query.timeout): ask for less, a shorter --window or a narrower --selector",
                    "bad_data" => "Prometheus cannot read the query: check --selector (label matchers in braces) and --window",
                    _ => "see the error above and the server's logs",
                };
                write!(
                    f,
                    "Prometheus at {url} refused the query {query} ({error_type}: {error}): {fix}"
                )
            }
            FleetError::TooLarge { url, query, limit } => write!(
                f,
                "the answer from {url} to the query {query} is over {limit} bytes: narrow \
                 --selector (fewer instances or routes) or raise --max-response-mb"
            ),
            FleetError::NotPrometheus { url, query, why } => write!(
                f,
                "{url} answered the query {query} with something that is not Prometheus's \
                 query API ({why}): give the server's base URL (the one whose /graph is \
                 Prometheus's UI)"
            ),
            FleetError::BadSample {
                url,
                query,
                series,
                value,
            } => write!(
                f,
                "{url} answered the query {query} with {value} for {series}: a count of calls \
                 is a finite number at least 0; check the exporter of that series (a reset \
                 written as a negative value, or a gauge of the same name)"
            ),
            FleetError::NoSeries { url, query } => write!(
                f,
                "no series at {url} for the query {query}: check --selector against the labels \
                 your scrape adds (what up{{...}} shows in Prometheus's UI), and --window (the \
                 agents must have run with the SDK's metrics in it)"
            ),
        }
    }
}

impl std::error::Error for FleetError {}

impl From<QueryError> for FleetError {
    fn from(e: QueryError) -> Self {
        FleetError::Query(e)
    }
}
