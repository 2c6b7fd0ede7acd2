//! Configuration errors: every broken rule, each naming the key, the value, the rule
//! and where the value came from.

use std::fmt;

use crate::policy::source::Source;

/// One invalid configuration value.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigIssue {
    /// Dotted key (`profiles.heartbeat.min_timeout_ms`).
    pub key: String,
    /// The offending value as written (empty when the value is missing).
    pub value: String,
    /// The rule it breaks, with a hint where one helps.
    pub rule: String,
    /// Where the value came from.
    pub source: Source,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (key, value, rule) = (&self.key, &self.value, &self.rule);
        match &self.source {
            // A problem with the whole source (unreadable file, missing file).
            Source::File(path) if key.is_empty() => write!(f, "{}: {rule}", path.display()),
            Source::Env(var) if key.is_empty() => write!(f, "{var}: {rule}"),
            // A value that should be there and is not.
            source if value.is_empty() => write!(f, "{key}: {rule} (set in {source})"),
            Source::Env(var) => write!(f, "{var}={value}: {rule}"),
            Source::File(path) => write!(f, "{}: {key} = {value}: {rule}", path.display()),
            other => write!(f, "{other}: {key} = {value}: {rule}"),
        }
    }
}

/// All the problems found in a configuration, reported together.
///
/// ```
/// use sw4rm_timeouts::ProfileSet;
/// let err = ProfileSet::builder()
///     .without_global()
///     .min_timeout_ms("heartbeat", 0)
///     .max_timeout_ms("heartbeat", 1)
///     .build()
///     .unwrap_err();
/// assert_eq!(err.issues().len(), 2);
/// assert!(err.to_string().contains("profiles.heartbeat.min_timeout_ms = 0: must be greater than 0"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    issues: Vec<ConfigIssue>,
}

impl ConfigError {
    pub(crate) fn new(issues: Vec<ConfigIssue>) -> Self {
        ConfigError { issues }
    }

    /// Every problem found.
    pub fn issues(&self) -> &[ConfigIssue] {
        &self.issues
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.issues.len();
        write!(
            f,
            "invalid SW4RM timeout configuration ({n} problem{}):",
            if n == 1 { "" } else { "s" }
        )?;
        for issue in &self.issues {
            write!(f, "\n  - {issue}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// The closest candidate to `word` by edit distance, when close enough to be a typo.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|&(d, c)| d <= 2.max(c.len() / 3))
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// " (did you mean `x`?)" or nothing.
pub(crate) fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    did_you_mean(word, candidates)
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let keys = [
            "default_timeout_ms",
            "min_timeout_ms",
            "max_timeout_ms",
            "allow_infinite",
        ];
        assert_eq!(did_you_mean("min_timout_ms", keys), Some("min_timeout_ms"));
        assert_eq!(did_you_mean("allow_infinit", keys), Some("allow_infinite"));
        assert_eq!(did_you_mean("colour", keys), None);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
