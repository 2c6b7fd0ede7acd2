//! The advisor's proposal as a TOML overlay for the global configuration: each
//! verdict as a comment above the values it changes, each proposal's replay (does it
//! dominate the value in use?), and its values only where it does; the others stay
//! in the file as suggestions, commented out with the reason.

use std::fmt::Write as _;
use std::time::Duration;

use super::advice::{ms, resolution_text, Advice, Finding, ProfileAdvice};
use super::rules::{Bound, Verdict, HEADROOM};

/// How a suggestion's lines begin: `sed 's/^#? //'` applies every one.
pub const SUGGESTION: &str = "#? ";

/// What an overlay's (and a report's) header counts.
pub(super) struct Totals {
    pub(super) calls: u64,
    pub(super) routes: usize,
    /// Proposals written as values, of those made.
    pub(super) written: usize,
    pub(super) offered: usize,
}

impl Totals {
    pub(super) fn of(advice: &Advice) -> Self {
        let (offered, written) = advice.proposals().fold((0, 0), |(all, n), f| {
            (all + 1, n + usize::from(f.is_written()))
        });
        Totals {
            calls: advice.profiles().iter().map(|p| p.finding.calls).sum(),
            routes: advice.profiles().iter().map(|p| p.routes.len()).sum(),
            written,
            offered,
        }
    }
}

impl Advice {
    /// The proposal as a TOML overlay the global configuration accepts: each verdict
    /// as a comment above the values it changes. Check it with `sw4rm-timeouts check
    /// FILE`; see it applied with `sw4rm-timeouts explain --config FILE`.
    pub fn overlay(&self) -> String {
        write(self)
    }
}

/// The overlay of `advice`.
fn write(advice: &Advice) -> String {
    let t = Totals::of(advice);
    let mut out = format!(
        "# SW4-002 timeouts proposed by sw4rm-timeouts advise from {} calls on {} \
         routes.\n# Quantiles: {}.\n# A global configuration overlay: check it with \
         `sw4rm-timeouts check FILE`,\n# see it applied with `sw4rm-timeouts explain --config \
         FILE`.\n",
        t.calls,
        t.routes,
        resolution_text(advice.resolution())
    );
    let _ = writeln!(
        out,
        "# Each proposal was replayed against the observed calls: its values are written\n\
         # only where it dominates the value in use (no more false timeouts, less detection\n\
         # time), or, for a route's own profile, holds the route where it is; the others\n\
         # are suggestions, each line led by `{SUGGESTION}` (remove it to apply one anyway).\n\
         # {} of {} proposals written.",
        t.written, t.offered
    );
    for note in advice.notes() {
        // One comment line per line of a note: nothing a note says becomes a value.
        for line in note.lines() {
            let _ = writeln!(out, "# {line}");
        }
    }
    let mut new_routes = String::new();
    for p in advice.profiles() {
        profile_overlay(&mut out, p);
        for (path, finding) in &p.routes {
            route_overlay(&mut out, &mut new_routes, p, path, finding);
        }
    }
    if !new_routes.is_empty() {
        out.push_str("\n[routes]\n");
        out.push_str(&new_routes);
    }
    out
}

fn bound_text(bound: Option<Bound>) -> &'static str {
    match bound {
        Some(Bound::Min) => "; held at the profile's min_timeout_ms",
        Some(Bound::Max) => {
            "; the data asks for more than the profile's max_timeout_ms allows (a standard \
             profile's bounds are a MUST: give the routes a custom profile for more)"
        }
        _ => "",
    }
}

/// A profile's proposal, the bound that held it, and how it was reached.
fn proposal(f: &Finding) -> Option<(Duration, Option<Bound>, &'static str)> {
    match &f.verdict {
        Verdict::DetectionSlow { proposed, bound } => {
            Some((*proposed, *bound, "p99.9, rounded up"))
        }
        Verdict::FalseFailures { proposed, bound } => Some((
            *proposed,
            *bound,
            "p99.9 or twice the default, the larger, rounded up: re-measure after",
        )),
        _ => None,
    }
}

/// The profile a route that does not fit its own gets in the overlay.
fn own_profile(p: &ProfileAdvice, path: &str) -> String {
    let method = path.rsplit('/').next().unwrap_or_default();
    format!("{}_{}", p.name, snake(method))
}

impl Advice {
    /// What the overlay changes in the table in use, one line per value it writes
    /// (suggestions aside): `heartbeat.default_timeout_ms 5000 -> 1000`, and a route
    /// moved to a profile of its own. The diff to review before deploying it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_advise::{Advice, LatencySnapshot, RouteLatency};
    /// use sw4rm_timeouts::ProfileSet;
    /// let mut latency = LatencySnapshot::default();
    /// for i in 0..1_000u64 {
    ///     latency.record(Duration::from_millis(15 + i % 10));
    /// }
    /// let route = RouteLatency::new("sw4rm.registry.RegistryService", "Heartbeat", "heartbeat", latency);
    /// let advice = Advice::new(&ProfileSet::standard(), &[route]);
    /// assert_eq!(advice.changes(), ["heartbeat.default_timeout_ms 5000 -> 1000"]);
    /// ```
    pub fn changes(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in self.profiles() {
            let f = &p.finding;
            if let Some((proposed, _, _)) = proposal(f).filter(|_| f.is_written()) {
                out.push(format!(
                    "{}.default_timeout_ms {} -> {}",
                    p.name,
                    p.default.as_millis(),
                    proposed.as_millis()
                ));
            }
            for (path, f) in p.routes.iter().filter(|(_, f)| f.is_written()) {
                if let Verdict::DoesNotFit { proposed } = f.verdict {
                    out.push(format!(
                        "{path}: profile {} -> {} (default_timeout_ms {})",
                        p.name,
                        own_profile(p, path),
                        proposed.as_millis()
                    ));
                }
            }
        }
        out
    }
}

fn profile_overlay(out: &mut String, p: &ProfileAdvice) {
    let f = &p.finding;
    let proposal = proposal(f);
    let _ = write!(
        out,
        "\n# {}: {} (default {}; {})",
        p.name,
        f.verdict.name(),
        ms(p.default),
        f.figures()
    );
    match proposal {
        Some((proposed, bound, how)) => {
            let _ = writeln!(
                out,
                "\n# proposed: {} ({HEADROOM}x {how}{})",
                ms(proposed),
                bound_text(bound)
            );
            let lead = replayed(out, f);
            let _ = writeln!(
                out,
                "{lead}[profiles.{}]\n{lead}default_timeout_ms = {}",
                p.name,
                proposed.as_millis()
            );
        }
        None => out.push('\n'),
    }
}

/// Writes the replay's comment; the lead of the proposal's lines: none when it is
/// written, [`SUGGESTION`] when it is not.
fn replayed(out: &mut String, f: &Finding) -> &'static str {
    let (Some(e), Some(replayed)) = (&f.evaluation, f.replayed()) else {
        return "";
    };
    let (now, next) = (&e.current, &e.proposed);
    let _ = writeln!(
        out,
        "# replayed on these calls: detection {} -> {}, false timeouts {} ({:.3} %) -> at most \
         {} ({:.3} %): {replayed}",
        ms(now.detection),
        ms(next.detection),
        now.false_timeouts,
        now.false_timeout_rate * 100.0,
        next.false_timeouts,
        next.false_timeout_rate * 100.0,
    );
    if f.is_written() {
        ""
    } else {
        SUGGESTION
    }
}

fn route_overlay(
    out: &mut String,
    new_routes: &mut String,
    p: &ProfileAdvice,
    path: &str,
    f: &Finding,
) {
    let Verdict::DoesNotFit { proposed } = f.verdict else {
        let _ = writeln!(
            out,
            "#   {}: {} ({})",
            in_comment(path),
            f.verdict.name(),
            f.figures()
        );
        return;
    };
    let name = own_profile(p, path);
    let _ = writeln!(
        out,
        "#   {}: does not fit its profile ({}): a profile of its own",
        in_comment(path),
        f.figures(),
    );
    let lead = replayed(out, f);
    let _ = writeln!(
        out,
        "{lead}[profiles.{name}]\n{lead}default_timeout_ms = {}\n{lead}min_timeout_ms = {}\n\
         {lead}max_timeout_ms = {}",
        proposed.as_millis(),
        p.min.min(proposed).as_millis().max(1),
        p.max.max(proposed).as_millis(),
    );
    let _ = writeln!(new_routes, "{lead}{} = \"{name}\"", toml_string(path));
}

/// A path (from a scrape: peer input) in a comment: control characters, which could
/// end the comment and add lines of configuration, become `?`.
fn in_comment(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// A TOML basic string: quotes, backslashes and control characters escaped.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `GetToolSchema` → `get_tool_schema` (profile names use letters, digits and `_`).
fn snake(method: &str) -> String {
    let mut out = String::new();
    for (i, c) in method.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.push('_');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_input_cannot_add_lines_or_break_strings() {
        assert_eq!(in_comment("/a.B/C\n[profiles.x]"), "/a.B/C?[profiles.x]");
        assert_eq!(toml_string("/a\"b\\c\n"), "\"/a\\\"b\\\\c\\u000A\"");
    }

    #[test]
    fn method_names_become_profile_names() {
        assert_eq!(snake("GetToolSchema"), "get_tool_schema");
        assert_eq!(snake("Heartbeat"), "heartbeat");
    }
}
