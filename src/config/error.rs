//! Configuration errors: every broken rule, each naming the key, the value, the rule
//! and where the value came from.

use std::fmt;

use crate::policy::quote::cut;
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

/// Most bytes of a key or a value a message quotes (a 10 MB string stays a short line).
const SHOWN_VALUE: usize = 200;
/// Most bytes of a rule a message gives (a parser's excerpt of a huge line included).
const SHOWN_RULE: usize = 1_000;
/// Most problems a [`ConfigError`] lists; the rest are counted.
const SHOWN_ISSUES: usize = 50;

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (key, value, rule) = (
            cut(&self.key, SHOWN_VALUE),
            cut(&self.value, SHOWN_VALUE),
            cut(&self.rule, SHOWN_RULE),
        );
        let value_is_empty = self.value.is_empty();
        let key_is_empty = self.key.is_empty();
        match &self.source {
            // A problem with the whole source (unreadable file, missing file).
            Source::File(path) if key_is_empty => write!(f, "{}: {rule}", path.display()),
            Source::Env(var) if key_is_empty => write!(f, "{}: {rule}", cut(var, SHOWN_VALUE)),
            // A value that should be there and is not: where the rest was set.
            Source::File(path) if value_is_empty => {
                write!(f, "{}: {key}: {rule}", path.display())
            }
            source if value_is_empty => write!(f, "{key}: {rule} (set in {source})"),
            Source::Env(var) => write!(f, "{}={value}: {rule}", cut(var, SHOWN_VALUE)),
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

    /// The same text on one line (problems joined by `; `, any line break inside a
    /// problem, such as a TOML parser's excerpt, folded to a space): for one log event
    /// per line. `Display` keeps one problem per line for people.
    ///
    /// ```
    /// use sw4rm_timeouts::ProfileSet;
    /// let err = ProfileSet::builder().without_global().min_timeout_ms("heartbeat", 0).max_timeout_ms("heartbeat", 1).build().unwrap_err();
    /// let line = err.one_line();
    /// assert!(!line.contains('\n'));
    /// assert!(line.starts_with("invalid SW4RM timeout configuration (2 problems): "), "{line}");
    /// ```
    pub fn one_line(&self) -> String {
        let text = self.to_string();
        let mut lines = text.lines();
        let head = lines.next().unwrap_or_default().trim_end_matches(':');
        let mut out = format!("{head}: ");
        let mut first = true;
        for line in lines {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match line.strip_prefix("- ") {
                Some(problem) => {
                    if !first {
                        out.push_str("; ");
                    }
                    out.push_str(problem);
                    first = false;
                }
                None => {
                    out.push(' ');
                    out.push_str(line);
                }
            }
        }
        out
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
        for issue in self.issues.iter().take(SHOWN_ISSUES) {
            write!(f, "\n  - {issue}")?;
        }
        if n > SHOWN_ISSUES {
            write!(f, "\n  - … and {} more", n - SHOWN_ISSUES)?;
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
    let len = word.chars().count();
    candidates
        .into_iter()
        // Lengths further apart than the distance allowed cannot be a typo: a huge
        // word is never compared character by character.
        .filter(|c| len.abs_diff(c.chars().count()) <= 2.max(c.len() / 3))
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

    #[test]
    fn messages_stay_short_whatever_the_input() {
        let huge = "x".repeat(10 << 20);
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        let many: String = (0..10_000).map(|i| format!("k{i} = 1\n")).collect();
        // (what the file holds, what the message must still say)
        let rows = [
            (
                format!("[profiles.heartbeat]\ndefault_timeout_ms = \"{huge}\"\n"),
                "default_timeout_ms",
            ),
            (
                format!("[profiles.heartbeat]\n{huge} = 1\n"),
                "bytes in all) = 1: unknown key",
            ),
            (
                format!("[profiles.heartbeat]\ndefault_timeout_ms = {deep}\n"),
                "t.toml",
            ),
            (format!("x = \"{huge}\n"), "t.toml"),
            (many, "… and 9950 more"),
        ];
        for (toml, says) in rows {
            let err = crate::config::GlobalConfig::from_toml_str(&toml, "t.toml").unwrap_err();
            let text = err.to_string();
            assert!(
                text.len() < 64 << 10,
                "{} bytes: {}",
                text.len(),
                cut(&text, 400)
            );
            assert!(text.contains(says), "{}", cut(&text, 2_000));
        }
    }
}
