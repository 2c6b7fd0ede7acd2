//! The PromQL the advisor asks a Prometheus (or Thanos, or Mimir) for: plain queries an
//! operator can paste into Prometheus's own UI, built from a label selector and a
//! window that are checked first.

use std::fmt;

/// The three instant queries, evaluated at the window's end.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Queries {
    /// Calls by duration bucket over the window, per instance and route (counter
    /// resets across restarts taken care of by `increase`).
    pub durations: String,
    /// Calls that timed out over the window, per instance and route.
    pub timeouts: String,
    /// The table each instance had in use: the last value of the configured-timeout
    /// gauge in the window.
    pub tables: String,
}

/// A selector or window the advisor will not send.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueryError {
    /// The selector is not `{label="value", ...}` (or empty).
    Selector(String),
    /// The window is not a Prometheus duration such as `7d` or `12h30m`.
    Window(String),
    /// The instance label is not a Prometheus label name.
    InstanceLabel(String),
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::Selector(s) => write!(
                f,
                "selector {s:?}: not a label selector; write it as Prometheus does, in \
                 braces, such as {{job=\"agents\"}} or {{namespace=~\"swarm-.*\"}}"
            ),
            QueryError::Window(w) => write!(
                f,
                "window {w:?}: not a Prometheus duration; write a number and a unit (ms, s, \
                 m, h, d, w, y), such as 7d or 12h30m"
            ),
            QueryError::InstanceLabel(l) => write!(
                f,
                "instance label {l:?}: not a label name (letters, digits and `_`, not \
                 starting with a digit), such as instance or pod"
            ),
        }
    }
}

impl std::error::Error for QueryError {}

/// The queries for the series `selector` picks (`""` for all) over `window`, told apart
/// by `instance` (the label that names one agent process: `instance`, `pod`, ...).
///
/// ```
/// use sw4rm_advise::fleet::queries;
/// let q = queries("{job=\"agents\"}", "7d", "instance")?;
/// assert_eq!(
///     q.timeouts,
///     "sum by (instance, service, method, profile) \
///      (increase(sw4rm_rpc_timeout_total{job=\"agents\"}[7d]))"
/// );
/// assert!(queries("job=agents", "7d", "instance").is_err());
/// # Ok::<(), sw4rm_advise::fleet::QueryError>(())
/// ```
pub fn queries(selector: &str, window: &str, instance: &str) -> Result<Queries, QueryError> {
    let selector = selector.trim();
    if !(selector.is_empty() || is_selector(selector)) {
        return Err(QueryError::Selector(selector.to_owned()));
    }
    if !is_duration(window) {
        return Err(QueryError::Window(window.to_owned()));
    }
    if !is_label_name(instance) {
        return Err(QueryError::InstanceLabel(instance.to_owned()));
    }
    let by = |more: &str| format!("{instance}, service, method, profile{more}");
    Ok(Queries {
        durations: format!(
            "sum by ({}) (increase(sw4rm_rpc_duration_ms_bucket{selector}[{window}]))",
            by(", le")
        ),
        timeouts: format!(
            "sum by ({}) (increase(sw4rm_rpc_timeout_total{selector}[{window}]))",
            by("")
        ),
        tables: format!(
            "max by ({instance}, profile, bound) \
             (last_over_time(sw4rm_rpc_configured_timeout_ms{selector}[{window}]))"
        ),
    })
}

/// `{...}` with balanced quotes and nothing that would end the selector early.
fn is_selector(s: &str) -> bool {
    let Some(body) = s.strip_prefix('{').and_then(|b| b.strip_suffix('}')) else {
        return false;
    };
    let mut quoted = false;
    let mut escaped = false;
    for c in body.chars() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => quoted = !quoted,
            (false, _, '{' | '}' | '[' | ']' | '(' | ')') => return false,
            _ => {}
        }
    }
    !quoted && !body.trim().is_empty()
}

/// Prometheus's duration syntax: one or more `<digits><unit>`, units in falling order.
fn is_duration(s: &str) -> bool {
    const UNITS: [&str; 7] = ["y", "w", "d", "h", "m", "s", "ms"];
    let mut rest = s;
    let mut last = None;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return false;
        }
        rest = &rest[digits..];
        let letters = rest.bytes().take_while(u8::is_ascii_lowercase).count();
        let Some(unit) = UNITS.iter().position(|u| *u == &rest[..letters]) else {
            return false;
        };
        if last.is_some_and(|l| unit <= l) {
            return false;
        }
        last = Some(unit);
        rest = &rest[letters..];
    }
    last.is_some()
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_windows_and_labels_as_prometheus_reads_them() {
        // (text, a selector?)
        let selectors = [
            ("{job=\"agents\"}", true),
            ("{job=\"agents\",namespace=~\"swarm-.*\"}", true),
            ("{path=\"a}b\"}", true),
            ("{job=\"a\\\"}\"}", true),
            ("job=\"agents\"", false),
            ("{}", false),
            ("{job=\"agents\"", false),
            ("{job=\"agents\"}[5m]", false),
            ("{job=\"x\"} or vector(1)", false),
            ("{job=\"x\"}) or (up{", false),
        ];
        for (text, ok) in selectors {
            assert_eq!(is_selector(text), ok, "{text}");
        }
        // (text, a duration?)
        let windows = [
            ("7d", true),
            ("12h30m", true),
            ("1w2d", true),
            ("90s", true),
            ("500ms", true),
            ("", false),
            ("7", false),
            ("d", false),
            ("30m12h", false),
            ("1h1h", false),
            ("7 d", false),
            ("1.5h", false),
            ("9999999999d", false),
        ];
        for (text, ok) in windows {
            assert_eq!(is_duration(text), ok, "{text}");
        }
        for (text, ok) in [
            ("instance", true),
            ("pod", true),
            ("_x1", true),
            ("1x", false),
            ("a-b", false),
            ("", false),
        ] {
            assert_eq!(is_label_name(text), ok, "{text}");
        }
    }

    #[test]
    fn the_queries_as_an_operator_would_paste_them() {
        let q = queries("", "1d", "pod").unwrap();
        assert_eq!(
            q.durations,
            "sum by (pod, service, method, profile, le) \
             (increase(sw4rm_rpc_duration_ms_bucket[1d]))"
        );
        assert_eq!(
            q.tables,
            "max by (pod, profile, bound) \
             (last_over_time(sw4rm_rpc_configured_timeout_ms[1d]))"
        );
        let e = queries("{job=\"a\"}", "1 day", "instance").unwrap_err();
        assert!(e.to_string().contains("such as 7d"), "{e}");
    }
}
