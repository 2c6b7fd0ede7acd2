//! [`Advice::html_report`](super::Advice::html_report): the advice as one
//! self-contained HTML page (inline CSS and SVG, nothing fetched from elsewhere):
//! per profile its verdict and replay, and per route a chart of what its calls took
//! (`chart.rs`, on the log axis of `axis.rs`).

mod axis;
mod chart;

use std::fmt::Write as _;

use super::advice::{ms, resolution_text, Advice, Finding, ProfileAdvice};
use super::overlay::Totals;
use super::rules::{Verdict, TIMEOUT_SHARE};
use sw4rm_timeouts::observations::Resolution;

const STYLE: &str =
    "body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:760px}\
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-top:1px solid #ddd;padding-top:12px}\
h3{font-size:13px;font-family:ui-monospace,monospace;margin:14px 0 2px}p{margin:4px 0}\
.figures{color:#555}.chart text{font-size:10px;fill:#333}.bar{fill:#7fa7d9}\
.axis,.tick{stroke:#444}.mark{stroke:#222;stroke-width:2}\
.limit{stroke-width:1.5}line.current{stroke:#c0392b}line.min,line.max{stroke:#888}\
line.written{stroke:#1e8449}line.suggested{stroke:#d68910}\
text.current{fill:#c0392b}text.min,text.max{fill:#666}text.written{fill:#1e8449}\
text.suggested{fill:#b9770e}.meter{fill:#eee}.meter-fill{fill:#c0392b}";

impl Advice {
    /// The advice as one self-contained HTML page (inline SVG, nothing fetched from
    /// elsewhere): per profile its verdict and replay, and per route a chart of its
    /// successful calls' latency on a log axis with p50, p99 and p99.9 marked, the
    /// timeout in use, the profile's min and max and the proposal as lines, and the
    /// share that timed out. `sw4rm-timeouts advise --report FILE.html` writes it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use sw4rm_advise::{Advice, LatencySnapshot, RouteLatency};
    /// use sw4rm_timeouts::ProfileSet;
    ///
    /// let mut latency = LatencySnapshot::default();
    /// for i in 0..1_000u64 {
    ///     latency.record(Duration::from_millis(15 + i % 10));
    /// }
    /// let route = RouteLatency::new("sw4rm.registry.RegistryService", "Heartbeat", "heartbeat", latency);
    /// let page = Advice::new(&ProfileSet::standard(), &[route]).html_report();
    /// assert!(page.starts_with("<!DOCTYPE html>"));
    /// assert_eq!(page.matches("<svg ").count(), 1);
    /// assert!(page.contains(r#"class="limit current" data-ms="5000""#));
    /// ```
    pub fn html_report(&self) -> String {
        page(self)
    }
}

/// The page.
fn page(advice: &Advice) -> String {
    let t = Totals::of(advice);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n\
         <title>SW4-002 timeout advice</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>SW4-002 timeout advice</h1>\n\
         <p>{} calls on {} routes. Quantiles: {}.</p>\n\
         <p>Each proposal was replayed on the observed calls beside the value in use; \
         {} of {} proposals dominate it (no more false timeouts, less \
         detection time) and are written as values, the others are suggestions.</p>\n\
         <p class=\"figures\">Bars: {bars}; a bar's height is its calls per decade of \
         latency (the scale at the left), so that wide and narrow bars compare; its \
         tooltip gives its calls. Under the axis: p50, p99, p99.9. Lines: the timeout \
         in use (red), the profile's min and max (grey, dashed), the proposal (green \
         when written, orange and dashed when only a suggestion).</p>\n",
        t.calls,
        t.routes,
        escape(resolution_text(advice.resolution())),
        t.written,
        t.offered,
        bars = match advice.resolution() {
            Resolution::Buckets => "the successful calls in each of the histogram's buckets",
            _ => "the successful calls in each tenth of a decade of latency (log axis)",
        },
    );
    if !advice.notes().is_empty() {
        out.push_str("<section class=\"source\">\n<h2>Where the data came from</h2>\n<ul>\n");
        for note in advice.notes() {
            let _ = writeln!(out, "<li><code>{}</code></li>", escape(note));
        }
        out.push_str("</ul>\n</section>\n");
    }
    for p in advice.profiles() {
        profile(&mut out, p);
    }
    out.push_str("</body>\n</html>\n");
    out
}

fn profile(out: &mut String, p: &ProfileAdvice) {
    let f = &p.finding;
    let _ = write!(
        out,
        "<section class=\"profile\" id=\"{id}\">\n<h2>{name}: {verdict}</h2>\n\
         <p>default {default} (min {min}, max {max}); {figures}{replay}</p>\n",
        id = escape(&format!("profile-{}", p.name)),
        name = escape(&p.name),
        verdict = escape(f.verdict.name()),
        default = ms(p.default),
        min = ms(p.min),
        max = ms(p.max),
        figures = escape(&f.figures()),
        replay = escape(&f.dominance_text()),
    );
    for (path, route) in &p.routes {
        // What the route would run under: its own profile where it does not fit, else
        // the profile's proposal.
        let applies = if matches!(route.verdict, Verdict::DoesNotFit { .. }) {
            route
        } else {
            f
        };
        let lines = chart::Lines {
            current: p.default,
            min: p.min,
            max: p.max,
            proposal: proposal(applies),
        };
        let _ = write!(
            out,
            "<h3>{path}</h3>\n<p class=\"figures\">{verdict}: {figures}{replay}</p>\n{why}{chart}\n",
            path = escape(path),
            verdict = escape(route.verdict.name()),
            figures = escape(&route.figures()),
            replay = escape(&route.dominance_text()),
            why = why_it_fits(route, p.default),
            chart = chart::chart(path, route, &lines),
        );
    }
    out.push_str("</section>\n");
}

/// Why a route that saw timeouts still fits, in a sentence (nothing when it saw
/// none, or has another verdict).
fn why_it_fits(f: &Finding, default: std::time::Duration) -> String {
    if !matches!(f.verdict, Verdict::Fits) || f.timed_out <= 0.0 {
        return String::new();
    }
    let pct = f.timed_out * 100.0;
    let text = if f.timed_out <= TIMEOUT_SHARE {
        format!(
            "{pct:.2} % timed out: rare enough (at most {:.0} %) to be the failures the \
             timeout is there to catch.",
            TIMEOUT_SHARE * 100.0
        )
    } else {
        let p99 = f.p99.map_or_else(|| "-".to_owned(), ms);
        format!(
            "{pct:.2} % timed out, and it still fits: the calls that answered stay far \
             below the timeout (p99 {p99} against {}), so those that timed out look like \
             calls that would not have answered at all (a peer down or unreachable); a \
             longer timeout would not have saved them, only noticed them later.",
            ms(default)
        )
    };
    format!("<p class=\"why\">{}</p>\n", escape(&text))
}

/// A finding's proposal and whether the overlay writes it.
fn proposal(f: &Finding) -> Option<(std::time::Duration, bool)> {
    f.evaluation
        .as_ref()
        .map(|e| (e.proposed.timeout, f.is_written()))
}

/// `s` safe inside XML text and attribute values.
pub(super) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
