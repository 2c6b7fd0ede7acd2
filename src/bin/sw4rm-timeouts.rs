//! `sw4rm-timeouts`: the operator's view of a deployment's timeout configuration
//! (feature `cli`).
//!
//! ```text
//! sw4rm-timeouts explain [--config FILE]      effective profiles, one line each, with sources
//! sw4rm-timeouts check FILE                   validate a deployment file (and SW4RM_*)
//! sw4rm-timeouts routes [--config FILE]       path → profile, shape, idempotent
//! sw4rm-timeouts service-config [--mode default|max] [--config FILE]
//! ```
//!
//! Without `--config` the global configuration is read as the SDK reads it
//! (`SW4RM_CONFIG` or `./sw4rm.toml`, and `SW4RM_*`). Exit codes: 0 success, 1 an
//! invalid configuration (the problems on stderr), 2 a usage error.

use std::process::ExitCode;

use sw4rm_timeouts::{GlobalConfig, ProfileField, ProfileSet, ServiceConfigMode, Source};

const USAGE: &str = "usage: sw4rm-timeouts <explain|check FILE|routes|service-config [--mode default|max]> [--config FILE]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(why)) => {
            eprintln!("{why}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Config(e)) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

enum Failure {
    Usage(String),
    Config(sw4rm_timeouts::ConfigError),
}

/// The value after `flag`, if the flag is there.
fn option<'a>(args: &'a [String], flag: &str) -> Result<Option<&'a str>, Failure> {
    match args.iter().position(|a| a == flag) {
        None => Ok(None),
        Some(i) => args
            .get(i + 1)
            .map(|v| Some(v.as_str()))
            .ok_or_else(|| Failure::Usage(format!("{flag} needs a value"))),
    }
}

fn profiles(config: Option<&str>) -> Result<ProfileSet, Failure> {
    let builder = match config {
        Some(path) => ProfileSet::builder()
            .global(GlobalConfig::from_file_and_env(path).map_err(Failure::Config)?),
        None => ProfileSet::builder(),
    };
    builder.build().map_err(Failure::Config)
}

fn run(args: &[String]) -> Result<String, Failure> {
    let command = args.first().map(String::as_str);
    let config = option(args, "--config")?;
    match command {
        Some("explain") => Ok(explain(&profiles(config)?)),
        Some("check") => {
            let file = args
                .get(1)
                .filter(|a| !a.starts_with("--"))
                .ok_or_else(|| Failure::Usage("check needs a FILE".into()))?;
            let set = profiles(Some(file))?;
            Ok(format!(
                "{file}: valid ({} profiles, {} routes)\n",
                set.profiles().count(),
                set.routes().count()
            ))
        }
        Some("routes") => Ok(routes(&profiles(config)?)),
        Some("service-config") => {
            let mode = match option(args, "--mode")? {
                None | Some("default") => ServiceConfigMode::Default,
                Some("max") => ServiceConfigMode::Max,
                Some(other) => {
                    return Err(Failure::Usage(format!(
                        "--mode {other}: must be default or max"
                    )))
                }
            };
            Ok(profiles(config)?.service_config(mode))
        }
        Some(other) => Err(Failure::Usage(format!("unknown command `{other}`"))),
        None => Err(Failure::Usage("no command".into())),
    }
}

/// One line per profile; the fields not from the standard table name their source.
fn explain(set: &ProfileSet) -> String {
    let mut out = format!(
        "{:<22} {:>10} {:>9} {:>10} {:>4} {:>8}  {}\n",
        "profile", "default_ms", "min_ms", "max_ms", "inf", "attempts", "set by"
    );
    for p in set.profiles() {
        let t = p.profile();
        let changed: Vec<String> = ProfileField::ALL
            .iter()
            .filter(|f| p.source_of(**f) != &Source::Standard)
            .map(|f| format!("{}={}", f.key(), p.source_of(*f)))
            .collect();
        out.push_str(&format!(
            "{:<22} {:>10} {:>9} {:>10} {:>4} {:>8}  {}\n",
            t.name,
            t.default_timeout_ms,
            t.min_timeout_ms,
            t.max_timeout_ms,
            if t.allow_infinite { "yes" } else { "no" },
            p.retry().max_attempts(),
            if changed.is_empty() {
                "standard".to_owned()
            } else {
                changed.join(", ")
            }
        ));
    }
    out
}

/// Tab-separated: pattern, profile, unary|streaming|long-lived, idempotent|-, source.
fn routes(set: &ProfileSet) -> String {
    let mut out = String::new();
    for route in set.routes() {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            route.pattern,
            route.profile,
            match (route.streaming, route.long_lived) {
                (_, true) => "long-lived",
                (true, false) => "streaming",
                (false, false) => "unary",
            },
            if route.idempotent { "idempotent" } else { "-" },
            route.source
        ));
    }
    out.push_str(&format!("*\t{}\tunary\t-\tfallback\n", set.fallback().name));
    out
}
