//! `sw4rm-timeouts advise`: from one scrape (a file or stdin) or from the fleet through
//! Prometheus's query API, the overlay (stdout, or `--out` written whole or not at all)
//! and the page (`--report`, the same).

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use sw4rm_advise::fleet::{Prometheus, DEFAULT_MAX_RESPONSE_BYTES};
use sw4rm_timeouts::ProfileSet;

use crate::{profiles, Failure, Parsed};

/// The options `advise` takes: those of every source first, then those that only
/// mean something with `--prometheus` (from `--selector` on).
pub(crate) const OPTIONS: &[&str] = &[
    "--config",
    "--report",
    "--out",
    "--prometheus",
    "--selector",
    "--window",
    "--instance-label",
    "--tenant",
    "--bearer-token-file",
    "--basic-auth-file",
    "--timeout",
    "--max-response-mb",
    "--at",
];

/// Options that only mean something with `--prometheus`.
const FLEET_ONLY: &[&str] = OPTIONS.split_at(4).1;

/// The command, as parsed.
pub(crate) fn run(parsed: &Parsed<'_>) -> Result<String, Failure> {
    let config = parsed.option("--config");
    let (text, source, notes, what) = match (parsed.argument, parsed.option("--prometheus")) {
        (Some(_), Some(_)) => {
            return Err(Failure::Usage(
                "advise: a METRICS_FILE or --prometheus URL, not both".into(),
            ))
        }
        (None, None) => {
            return Err(Failure::Usage(
                "advise needs a METRICS_FILE (or - for stdin), or --prometheus URL".into(),
            ))
        }
        (Some(file), None) => {
            if let Some(flag) = FLEET_ONLY.iter().find(|f| parsed.option(f).is_some()) {
                return Err(Failure::Usage(format!(
                    "advise: {flag} reads the fleet through --prometheus URL, not a file"
                )));
            }
            (read_file(file)?, file.to_owned(), Vec::new(), "the scrape")
        }
        (None, Some(url)) => {
            let (text, notes) = read_fleet(parsed, url)?;
            (text, url.to_owned(), notes, "the fleet's table")
        }
    };
    let routes = sw4rm_advise::from_exposition(&text)
        .map_err(|e| Failure::Input(format!("{source}: {e}")))?;
    let set = table_in_use(&text, &source, what, config)?;
    let advice = sw4rm_advise::Advice::new(&set, &routes).with_notes(notes);
    // The diff against the table in use, to review before deploying the overlay.
    for change in &advice.changes() {
        eprintln!("sw4rm-timeouts: change: {change}");
    }
    if let Some(path) = parsed.option("--report") {
        write_whole(Path::new(path), advice.html_report().as_bytes())
            .map_err(|e| Failure::Input(format!("--report {path}: cannot write: {e}")))?;
    }
    let mut overlay = advice.overlay();
    if let Some(path) = parsed.option("--out") {
        write_whole(Path::new(path), overlay.as_bytes())
            .map_err(|e| Failure::Input(format!("--out {path}: cannot write: {e}")))?;
        eprintln!("sw4rm-timeouts: the overlay is written to {path}");
        overlay.clear();
    }
    match advice.suggestions() {
        0 => Ok(overlay),
        count => Err(Failure::Unproven { overlay, count }),
    }
}

fn read_file(source: &str) -> Result<String, Failure> {
    match source {
        "-" => std::io::read_to_string(std::io::stdin())
            .map_err(|e| Failure::Input(format!("stdin: cannot read: {e}"))),
        path => std::fs::read_to_string(path)
            .map_err(|e| Failure::Input(format!("{path}: cannot read: {e}"))),
    }
}

/// The fleet's exposition, and the notes on it (the queries, who is left out, who
/// stands out), each note also on stderr.
fn read_fleet(parsed: &Parsed<'_>, url: &str) -> Result<(String, Vec<String>), Failure> {
    let mut prometheus = Prometheus::new(url);
    if let Some(tenant) = parsed.option("--tenant") {
        prometheus = prometheus.tenant(tenant);
    }
    match (
        parsed.option("--bearer-token-file"),
        parsed.option("--basic-auth-file"),
    ) {
        (Some(_), Some(_)) => {
            return Err(Failure::Usage(
                "advise: --bearer-token-file or --basic-auth-file, not both".into(),
            ))
        }
        (Some(file), None) => prometheus = prometheus.bearer_token(&secret(file)?),
        (None, Some(file)) => {
            let pair = secret(file)?;
            let Some((user, password)) = pair.split_once(':') else {
                return Err(Failure::Input(format!(
                    "--basic-auth-file {file}: not `user:password` on one line"
                )));
            };
            prometheus = prometheus.basic_auth(user, password);
        }
        (None, None) => {}
    }
    if let Some(text) = parsed.option("--timeout") {
        let secs = number(text, "--timeout", "seconds, such as 30")?;
        let timeout = Duration::try_from_secs_f64(secs)
            .map_err(|_| Failure::Usage(format!("--timeout {text}: seconds, such as 30")))?;
        prometheus = prometheus.timeout(timeout);
    }
    let limit = match parsed.option("--max-response-mb") {
        Some(text) => {
            (number(text, "--max-response-mb", "megabytes, such as 64")? * 1_048_576.0) as u64
        }
        None => DEFAULT_MAX_RESPONSE_BYTES,
    };
    prometheus = prometheus.max_response_bytes(limit);
    if let Some(text) = parsed.option("--at") {
        prometheus = prometheus.at(number(text, "--at", "a Unix time in seconds")?);
    }
    let selector = parsed.option("--selector").unwrap_or("");
    let window = parsed.option("--window").unwrap_or("7d");
    let instance = parsed.option("--instance-label").unwrap_or("instance");
    let fleet = prometheus
        .read_fleet(selector, window, instance)
        .map_err(|e| Failure::Input(e.to_string()))?;
    let q = fleet.queries();
    let mut notes = vec![
        format!("read from {} over {window}:", prometheus.url()),
        format!("query: {}", q.durations),
        format!("query: {}", q.timeouts),
        format!("query: {}", q.tables),
    ];
    notes.extend(fleet.notes());
    for note in &notes {
        eprintln!("sw4rm-timeouts: {note}");
    }
    Ok((fleet.exposition(), notes))
}

/// A finite number at least 0 given to `flag`.
fn number(text: &str, flag: &str, what: &str) -> Result<f64, Failure> {
    text.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| Failure::Usage(format!("{flag} {text}: {what}")))
}

/// A credential file's first line (so a token never sits in the process's arguments).
fn secret(path: &str) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Input(format!("{path}: cannot read: {e}")))?;
    Ok(text.lines().next().unwrap_or("").trim().to_owned())
}

/// The table `what` (the scrape, the fleet's table) says was in use (the
/// configured-timeout gauge), laid over the
/// configuration (`config`, else as the SDK finds it); where the two disagree, each
/// value is named on stderr; data without the gauge says which table it was judged
/// against.
fn table_in_use(
    text: &str,
    source: &str,
    what: &str,
    config: Option<&str>,
) -> Result<ProfileSet, Failure> {
    let base = profiles(config)?;
    let named = match config {
        Some(path) => format!("--config {path}"),
        None => "the configuration found here (SW4RM_CONFIG or ./sw4rm.toml, SW4RM_*, \
                 else SW4-002's standard table)"
            .to_owned(),
    };
    let scraped = sw4rm_advise::ScrapedTable::from_exposition(text);
    if scraped.is_empty() {
        eprintln!(
            "sw4rm-timeouts: {source} has no sw4rm_rpc_configured_timeout_ms (the layer's \
             MetricFamily::ConfiguredTimeouts): judged against {named}, which may not be \
             the table the agent ran with"
        );
        return Ok(base);
    }
    if config.is_some() {
        for difference in scraped.differences(&base, &named) {
            eprintln!("sw4rm-timeouts: {what} and {named} disagree: {difference}");
        }
    }
    let builder = match config {
        Some(path) => ProfileSet::builder().global_file(path),
        None => ProfileSet::builder(),
    };
    scraped
        .apply(builder, &base)
        .build()
        .map_err(Failure::Config)
}

/// Writes `bytes` to `path` whole or not at all: into a new file beside it, flushed to
/// disk, then renamed over it (a reader, such as a live reload, sees the old file or
/// the new one, never half of one).
pub(crate) fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name"))?;
    let temporary = dir.join(format!(
        ".{}.{}.partial",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_write_replaces_the_file_and_leaves_nothing_beside_it() {
        let dir = std::env::temp_dir().join(format!("sw4rm-whole-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("overlay.toml");
        std::fs::write(&path, "old").unwrap();
        write_whole(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["overlay.toml"]);
        // Into a folder that is not there: an error, nothing written.
        assert!(write_whole(&dir.join("no/such/x.toml"), b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
