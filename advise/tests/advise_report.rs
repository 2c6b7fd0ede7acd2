//! `Advice::html_report` (and `sw4rm-timeouts advise --report`): one self-contained
//! page, one chart per route, every line where its value lies on the log axis.

use std::time::Duration;

#[path = "support/scrape.rs"]
mod exposition;

use roxmltree::{Document, Node, ParsingOptions};
use sw4rm_advise::{Advice, LatencySnapshot, RouteLatency};
use sw4rm_timeouts::ProfileSet;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// Heartbeats of 15-24 ms (a written proposal: the 1 s minimum), tool calls close
/// to their 30 s default with 5 % timing out (a suggestion to raise it), and
/// registrations of about 100 ms.
fn advice() -> Advice {
    let mut heartbeat = LatencySnapshot::default();
    for i in 0..1_000 {
        heartbeat.record(ms(15 + i % 10));
    }
    let mut tool = LatencySnapshot::default();
    for i in 0..950 {
        tool.record(ms(20_000 + i * 10));
    }
    tool.record_timeouts(50);
    let mut register = LatencySnapshot::default();
    for i in 0..200 {
        register.record(ms(90 + i % 20));
    }
    Advice::new(
        &ProfileSet::standard(),
        &[
            RouteLatency::new(
                "sw4rm.registry.RegistryService",
                "Heartbeat",
                "heartbeat",
                heartbeat,
            ),
            RouteLatency::new("sw4rm.tool.ToolService", "Call", "tool_call", tool),
            RouteLatency::new(
                "sw4rm.registry.RegistryService",
                "RegisterAgent",
                "registration",
                register,
            ),
        ],
    )
}

/// The page as XML (its `<!DOCTYPE html>` allowed).
fn parse(page: &str) -> Result<Document<'_>, roxmltree::Error> {
    let options = ParsingOptions {
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    Document::parse_with_options(page, options)
}

fn class_is(n: &Node, class: &str) -> bool {
    n.attribute("class") == Some(class)
}

fn number(n: &Node, attr: &str) -> f64 {
    n.attribute(attr)
        .unwrap_or_else(|| panic!("{attr} on {n:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{attr} on {n:?}: {e}"))
}

/// The chart's own log scale, read off two of its ticks: where `ms` should lie.
fn scale(chart: Node) -> impl Fn(f64) -> f64 {
    let ticks: Vec<(f64, f64)> = chart
        .descendants()
        .filter(|n| class_is(n, "tick"))
        .map(|n| (number(&n, "data-ms"), number(&n, "x1")))
        .collect();
    assert!(ticks.len() >= 2, "a chart has at least two ticks");
    let ((ms0, x0), (ms1, x1)) = (ticks[0], ticks[1]);
    assert!((ms1 / ms0 - 10.0).abs() < 1e-9, "ticks are a decade apart");
    move |ms: f64| x0 + (ms / ms0).log10() * (x1 - x0)
}

/// The one element of `class` in `chart`: its value and where it is drawn.
fn line(chart: Node, class: &str) -> (f64, f64) {
    let found: Vec<Node> = chart.descendants().filter(|n| class_is(n, class)).collect();
    assert_eq!(found.len(), 1, "one `{class}`");
    let n = found[0];
    assert_eq!(
        n.attribute("x1"),
        n.attribute("x2"),
        "`{class}` is vertical"
    );
    (number(&n, "data-ms"), number(&n, "x1"))
}

fn chart<'a>(doc: &'a Document, path: &str) -> Node<'a, 'a> {
    doc.descendants()
        .find(|n| n.tag_name().name() == "svg" && n.attribute("id") == Some(path))
        .unwrap_or_else(|| panic!("a chart for {path}"))
}

#[test]
fn one_well_formed_chart_per_route_with_its_lines_where_they_belong() {
    let page = advice().html_report();
    let doc = parse(&page).expect("the page is well-formed XML");
    let charts: Vec<Node> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "svg")
        .collect();
    assert_eq!(charts.len(), 3, "one chart per route");
    for c in &charts {
        assert_eq!(c.tag_name().namespace(), Some("http://www.w3.org/2000/svg"));
    }

    // Heartbeat: in use 5 s, bounds 1 s and 30 s, proposal 1 s written.
    let hb = chart(&doc, "/sw4rm.registry.RegistryService/Heartbeat");
    let x = scale(hb);
    for (class, want) in [
        ("limit current", 5_000.0),
        ("limit min", 1_000.0),
        ("limit max", 30_000.0),
        ("limit proposal written", 1_000.0),
    ] {
        let (value, at) = line(hb, class);
        assert_eq!(value, want, "{class}");
        assert!(
            (at - x(want)).abs() < 0.01,
            "{class} at {at}, not {}",
            x(want)
        );
    }
    // The quantiles of 15-24 ms calls, each where its value lies.
    for (class, low, high) in [
        ("mark p50", 19.0, 21.0),
        ("mark p99", 23.0, 25.0),
        ("mark p999", 23.0, 25.0),
    ] {
        let (value, at) = line(hb, class);
        assert!((low..=high).contains(&value), "{class}: {value}");
        assert!((at - x(value)).abs() < 0.01, "{class}");
    }
    // Bars: every call drawn, in the tenths of a decade that hold 15 to 24 ms
    // (12.6 ms to 25.1 ms).
    let bars: Vec<Node> = hb.descendants().filter(|n| class_is(n, "bar")).collect();
    let drawn: u64 = bars
        .iter()
        .map(|b| {
            let title = b
                .children()
                .find(|c| c.tag_name().name() == "title")
                .and_then(|t| t.text())
                .unwrap_or("");
            title
                .split(' ')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(drawn, 1_000);
    for b in &bars {
        let (from, to) = (number(b, "x"), number(b, "x") + number(b, "width"));
        assert!(from >= x(12.5) && to <= x(25.2), "a bar at {from}..{to}");
        assert!(number(b, "height") > 0.0);
    }
    let share = hb
        .descendants()
        .find(|n| class_is(n, "timed-out"))
        .expect("the share");
    assert_eq!(number(&share, "data-share"), 0.0);

    // Tool calls: 5 % timed out, a raise left as a suggestion: the larger of twice
    // the default and 4 x p99.9 (29.5 s), rounded up to 150 s.
    let tool = chart(&doc, "/sw4rm.tool.ToolService/Call");
    let x = scale(tool);
    let (value, at) = line(tool, "limit proposal suggested");
    assert_eq!(value, 150_000.0);
    assert!((at - x(150_000.0)).abs() < 0.01);
    assert_eq!(line(tool, "limit current").0, 30_000.0);
    assert_eq!(line(tool, "limit max").0, 3_600_000.0);
    assert!(tool
        .descendants()
        .all(|n| !class_is(&n, "limit proposal written")));
    let share = tool
        .descendants()
        .find(|n| class_is(n, "timed-out"))
        .expect("the share");
    assert!((number(&share, "data-share") - 0.05).abs() < 1e-12);
    assert!(share
        .descendants()
        .any(|n| n.text().is_some_and(|t| t.contains("5.00 % of 1000 calls"))));
}

#[test]
fn the_page_fetches_nothing() {
    let page = advice().html_report();
    for fetch in [
        "src=", "href=", "url(", "@import", "<script", "<link", "<img",
    ] {
        assert!(!page.contains(fetch), "`{fetch}` in the page");
    }
    // The only address is the SVG namespace, which is a name, not a fetch.
    assert_eq!(
        page.matches("http").count(),
        page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
}

#[test]
fn names_are_escaped() {
    let mut latency = LatencySnapshot::default();
    for _ in 0..200 {
        latency.record(ms(10));
    }
    let advice = Advice::new(
        &ProfileSet::standard(),
        &[RouteLatency::new(
            "acme.<Svc>&\"x\"",
            "M'",
            "heartbeat",
            latency,
        )],
    );
    let page = advice.html_report();
    let doc = parse(&page).expect("well-formed with odd names");
    assert!(
        doc.descendants()
            .any(|n| n.tag_name().name() == "svg"
                && n.attribute("id") == Some("/acme.<Svc>&\"x\"/M'"))
    );
}

/// The advice page from a scrape: the legend says the bars are the histogram's
/// buckets, the bars have a scale, quantiles of one value share one label set below
/// the tick labels, and a route that fits despite its timeouts says why.
#[test]
fn a_scrapes_page_says_what_its_bars_and_labels_are() {
    let mut scrape = exposition::heartbeats();
    // Registrations whose p99 and p99.9 share a bucket.
    let shared = [("5", 6_000), ("2500", 7_293), ("+Inf", 7_293)];
    scrape.push_str(&exposition::route(
        "RegisterAgent",
        "registration",
        &shared,
        0,
    ));
    let routes = sw4rm_advise::from_exposition(&scrape).unwrap();
    let set = ProfileSet::builder()
        .without_global()
        .default_timeout_ms("heartbeat", 1_000)
        .build()
        .unwrap();
    let page = Advice::new(&set, &routes).html_report();
    let doc = parse(&page).unwrap();
    assert!(
        page.contains("Bars: the successful calls in each of the histogram's buckets"),
        "{page}"
    );
    assert!(!page.contains("successful calls per decade"), "{page}");
    assert!(
        page.contains("3.32 % timed out, and it still fits: the calls that answered stay far below the timeout (p99"),
        "{page}"
    );
    let chart = chart(&doc, "/sw4rm.registry.RegistryService/RegisterAgent");
    let texts = |class: &str| -> Vec<(String, f64)> {
        chart
            .descendants()
            .filter(|n| class_is(n, class))
            .map(|n| (n.text().unwrap_or_default().to_owned(), number(&n, "y")))
            .collect()
    };
    let marks = texts("mark-label");
    let ticks = texts("tick-label");
    // Each label on a row of its own, below every tick label.
    let tick_y = ticks.iter().map(|(_, y)| *y).fold(0.0, f64::max);
    for (i, (_, y)) in marks.iter().enumerate() {
        assert!(*y >= tick_y + 12.0, "{marks:?} {ticks:?}");
        for (_, other) in &marks[i + 1..] {
            assert!((other - y).abs() >= 12.0, "{marks:?}");
        }
    }
    // Quantiles of one value share one label; every quantile keeps its line.
    let labels: Vec<&str> = marks.iter().map(|(t, _)| t.as_str()).collect();
    let lines = chart
        .descendants()
        .filter(|n| {
            n.tag_name().name() == "line"
                && n.attribute("class").is_some_and(|c| c.starts_with("mark "))
        })
        .count();
    assert_eq!(lines, 3, "{labels:?}");
    assert!(
        labels.iter().any(|l| l.starts_with("p99, p99.9 ")),
        "{labels:?}"
    );
    // The bars' scale.
    assert!(
        chart
            .descendants()
            .any(|n| class_is(&n, "bar-scale") && n.attribute("data-per-decade").is_some()),
        "no scale"
    );
}
