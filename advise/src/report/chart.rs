//! One route's chart, as a standalone SVG element: its successful calls' latency
//! on a log axis (bars of calls per decade, so wide and narrow buckets compare),
//! p50, p99 and p99.9 marked under the axis, the timeout in use, the profile's
//! minimum and maximum, and the proposal as vertical lines, and the share that timed
//! out. Every mark and line carries its value in `data-ms`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use super::axis::Axis;
use super::escape;
use crate::Finding;
use sw4rm_timeouts::observations::Resolution;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 262.0;
const LEFT: f64 = 48.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 56.0;
/// The axis line's height.
const BASE: f64 = 186.0;
/// In-process buckets are gathered into bars this many to a decade.
const BARS_PER_DECADE: f64 = 10.0;

/// The vertical lines of one chart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Lines {
    /// The timeout in use (the profile's default).
    pub(super) current: Duration,
    /// The profile's minimum and maximum.
    pub(super) min: Duration,
    pub(super) max: Duration,
    /// The proposal that applies to the route, and whether the overlay writes it.
    pub(super) proposal: Option<(Duration, bool)>,
}

/// The chart of `finding`'s calls with `lines`; `id` names it in the page.
pub(super) fn chart(id: &str, finding: &Finding, lines: &Lines) -> String {
    let bars = bars(finding);
    let quantiles = [
        ("p50", finding.p50),
        ("p99", finding.p99),
        ("p99.9", finding.p999),
    ];
    let limits = limits(lines);
    let axis = Axis::spanning(
        bars.iter()
            .flat_map(|(low, high, _)| [*low, *high])
            .chain(limits.iter().map(|(_, _, ms, _)| *ms)),
        LEFT,
        WIDTH - LEFT - RIGHT,
    );
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{id}" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="latency of {label}">"#,
        id = escape(id),
        label = escape(id),
    );
    draw_bars(&mut svg, &axis, &bars);
    draw_axis(&mut svg, &axis);
    draw_quantiles(&mut svg, &axis, &quantiles);
    draw_limits(&mut svg, &axis, &limits);
    draw_timed_out(&mut svg, finding);
    svg
}

/// The quantile marks under the axis, each labelled once.
fn draw_quantiles(svg: &mut String, axis: &Axis, quantiles: &[(&str, Option<Duration>); 3]) {
    // Labels one row each, below the tick labels, so that values close together stay
    // readable; quantiles of one value share one label ("p99, p99.9 2500 ms").
    let mut row = 0;
    for (i, (name, q)) in quantiles.iter().enumerate() {
        let Some(q) = *q else { continue };
        let (ms, x) = (millis(q), axis.x(millis(q)));
        let same_as_next = quantiles
            .get(i + 1)
            .is_some_and(|(_, next)| *next == Some(q));
        let _ = write!(
            svg,
            r#"<line class="mark {class}" data-ms="{ms}" x1="{x:.2}" x2="{x:.2}" y1="{BASE}" y2="{y2}"><title>{name} {ms} ms</title></line>"#,
            class = name.replace('.', ""),
            // A short mark: a longer one would cross the labels of values close by.
            y2 = BASE + 10.0,
        );
        if same_as_next {
            continue; // labelled with the next
        }
        let names: Vec<&str> = quantiles[..=i]
            .iter()
            .rev()
            .take_while(|(_, other)| *other == Some(q))
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let _ = write!(
            svg,
            r#"<text class="mark-label" x="{x:.2}" y="{ty}" text-anchor="{anchor}">{names} {value}</text>"#,
            anchor = anchor(x),
            names = names.join(", "),
            ty = BASE + 34.0 + 12.0 * row as f64,
            value = text_ms(q),
        );
        row += 1;
    }
}

/// The vertical lines of the timeout in use, the bounds and the proposal.
fn draw_limits(svg: &mut String, axis: &Axis, limits: &[(&'static str, &'static str, f64, bool)]) {
    for (row, (class, name, ms, dashed)) in limits.iter().enumerate() {
        let x = axis.x(*ms);
        let dash = if *dashed {
            r#" stroke-dasharray="5 3""#
        } else {
            ""
        };
        let _ = write!(
            svg,
            r#"<line class="limit {class}" data-ms="{ms}" x1="{x:.2}" x2="{x:.2}" y1="{y1}" y2="{BASE}"{dash}><title>{name} {ms} ms</title></line><text class="limit-label {class}" x="{x:.2}" y="{y}" text-anchor="{anchor}">{name} {value}</text>"#,
            anchor = anchor(x),
            y1 = TOP - 10.0 * row as f64,
            y = TOP - 3.0 - 10.0 * row as f64,
            value = text_ms(Duration::from_secs_f64(*ms / 1_000.0)),
        );
    }
}

/// The share of calls that timed out, as text and a meter.
fn draw_timed_out(svg: &mut String, finding: &Finding) {
    let share = finding.timed_out.clamp(0.0, 1.0);
    let _ = write!(
        svg,
        r#"<g class="timed-out" data-share="{share}"><text x="{LEFT}" y="{y}">timed out: {pct:.2} % of {calls} calls</text><rect x="{rx}" y="{ry}" width="120" height="8" class="meter"/><rect x="{rx}" y="{ry}" width="{w:.2}" height="8" class="meter-fill"/></g></svg>"#,
        y = HEIGHT - 4.0,
        pct = share * 100.0,
        calls = finding.calls,
        rx = LEFT + 240.0,
        ry = HEIGHT - 12.0,
        w = 120.0 * share,
    );
}

/// The lines to draw: CSS class, label, value in ms, dashed.
fn limits(lines: &Lines) -> Vec<(&'static str, &'static str, f64, bool)> {
    let mut out = vec![
        ("min", "min", millis(lines.min), true),
        ("current", "in use", millis(lines.current), false),
        ("max", "max", millis(lines.max), true),
    ];
    if let Some((p, written)) = lines.proposal {
        let (class, name) = if written {
            ("proposal written", "proposed")
        } else {
            ("proposal suggested", "suggested")
        };
        out.push((class, name, millis(p), !written));
    }
    out
}

/// The bars: `(low ms, high ms, calls)`. In-process buckets gathered ten to a
/// decade; a scrape's buckets as they are.
fn bars(finding: &Finding) -> Vec<(f64, f64, u64)> {
    let spans = finding.latency().spans().map(|(low, high, n)| {
        (
            low as f64 / 1_000.0,
            (high.saturating_add(1)) as f64 / 1_000.0,
            n,
        )
    });
    if finding.resolution == Resolution::Buckets {
        return spans.collect();
    }
    let mut gathered: BTreeMap<i64, u64> = BTreeMap::new();
    for (low, high, n) in spans {
        let middle = (low.max(0.001) * high).sqrt();
        *gathered
            .entry((middle.log10() * BARS_PER_DECADE).floor() as i64)
            .or_default() += n;
    }
    gathered
        .into_iter()
        .map(|(i, n)| {
            let at = |i: i64| 10f64.powf(i as f64 / BARS_PER_DECADE);
            (at(i), at(i + 1), n)
        })
        .collect()
}

fn draw_bars(svg: &mut String, axis: &Axis, bars: &[(f64, f64, u64)]) {
    let density = |(low, high, n): &(f64, f64, u64)| *n as f64 / Axis::decades(*low, *high);
    let top = bars.iter().map(density).fold(0.0, f64::max);
    if top <= 0.0 {
        return;
    }
    // The bars' scale: 0 at the axis, the tallest bar's calls per decade at its top.
    let _ = write!(
        svg,
        r#"<text class="bar-scale" x="{x}" y="{BASE}" text-anchor="end">0</text><text class="bar-scale" data-per-decade="{top:.0}" x="{x}" y="{ty}" text-anchor="end">{top:.0}</text><text class="bar-scale" x="{x}" y="{uy}" text-anchor="end">/decade</text>"#,
        x = LEFT - 4.0,
        ty = TOP + 8.0,
        uy = TOP + 18.0,
    );
    for bar in bars {
        let (x0, x1) = (axis.x(bar.0), axis.x(bar.1));
        let h = (BASE - TOP) * density(bar) / top;
        let _ = write!(
            svg,
            r#"<rect class="bar" x="{x0:.2}" y="{y:.2}" width="{w:.2}" height="{h:.2}"><title>{n} calls, {lo} to {hi} ms</title></rect>"#,
            y = BASE - h,
            w = (x1 - x0).max(0.5),
            n = bar.2,
            lo = round(bar.0),
            hi = round(bar.1),
        );
    }
}

fn draw_axis(svg: &mut String, axis: &Axis) {
    let _ = write!(
        svg,
        r#"<line class="axis" x1="{LEFT}" x2="{x2}" y1="{BASE}" y2="{BASE}"/>"#,
        x2 = WIDTH - RIGHT
    );
    for (ms, label) in axis.ticks() {
        let x = axis.x(ms);
        let _ = write!(
            svg,
            r#"<line class="tick" data-ms="{ms}" x1="{x:.2}" x2="{x:.2}" y1="{BASE}" y2="{y2}"/><text class="tick-label" x="{x:.2}" y="{ty}" text-anchor="middle">{label}</text>"#,
            y2 = BASE + 4.0,
            ty = BASE + 18.0,
        );
    }
}

/// A label's anchor at `x`: its end near the right edge, its start near the left,
/// else its middle, so that no label runs off the chart.
fn anchor(x: f64) -> &'static str {
    if x > WIDTH - RIGHT - 60.0 {
        "end"
    } else if x < LEFT + 40.0 {
        "start"
    } else {
        "middle"
    }
}

/// `1000 ms`, `12.5 ms`, as the rest of the advice writes values.
fn text_ms(d: Duration) -> String {
    escape(&crate::advice::ms(d))
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// Three significant figures, for a bar's title.
fn round(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 1.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.3}")
    }
}
