//! `sw4rm-timeouts`: the operator's view of a deployment's timeout configuration
//! (the `sw4rm-advise` crate's).
//!
//! ```text
//! sw4rm-timeouts explain [--config FILE]      effective profiles, one line each, with sources
//! sw4rm-timeouts check FILE                   validate a deployment file (and SW4RM_*)
//! sw4rm-timeouts routes [--config FILE]       path → profile, shape, idempotent
//! sw4rm-timeouts service-config [--mode default|max] [--config FILE]
//! sw4rm-timeouts advise METRICS_FILE|- [--config FILE] [--out FILE] [--report FILE.html]
//! sw4rm-timeouts advise --prometheus URL [--selector SEL] [--window 7d] [...]
//!                                             proposed profile values (TOML), and a page of charts
//! sw4rm-timeouts slo-rules [--objective PERCENT] [--config FILE]
//!                                             timeout SLOs as Prometheus rules
//! sw4rm-timeouts help [COMMAND] | --help | --version
//! ```
//!
//! Without `--config` the global configuration is read as the SDK reads it
//! (`SW4RM_CONFIG` or `./sw4rm.toml`, and `SW4RM_*`). Exit codes: 0 success, 1 an
//! invalid configuration or input (the problems on stderr), 2 a usage error, 3 (advise)
//! the overlay is written but holds proposals that do not dominate the table in use,
//! left as suggestions.
#![warn(clippy::too_many_lines)]

use std::process::ExitCode;

mod advise;

use sw4rm_timeouts::{ProfileSet, ServiceConfigMode};

/// One command: its name, synopsis and what it does.
const COMMANDS: [(&str, &str, &str); 6] = [
    (
        "explain",
        "explain [--config FILE]",
        "the effective profiles, one line each, naming the source of every value that is not standard",
    ),
    (
        "check",
        "check FILE",
        "validates a deployment file (and the SW4RM_* environment): every problem, one per line",
    ),
    (
        "routes",
        "routes [--config FILE]",
        "every route: path, profile, unary|streaming|long-lived, idempotent, source (tab-separated)",
    ),
    (
        "service-config",
        "service-config [--mode default|max] [--config FILE]",
        "the profile table as a gRPC service config (JSON) for clients in other languages",
    ),
    (
        "advise",
        "advise METRICS_FILE|- | --prometheus URL [--selector SEL] [--window 7d] \
         [--instance-label instance] [--tenant ID] [--bearer-token-file FILE | \
         --basic-auth-file FILE] [--timeout SECONDS] [--max-response-mb MB] [--at UNIX_TIME] \
         [--config FILE] [--out FILE.toml] [--report FILE.html]",
        "reads a Prometheus exposition of sw4rm_rpc_duration_ms and sw4rm_rpc_timeout_total \
         (a file, or - for stdin), or the whole fleet's over a window through Prometheus's \
         (or Thanos's, or Mimir's) query API (--prometheus: instances that ran another table \
         are named and left out, an instance whose p99 stands out 10× is named, the queries \
         are printed for Prometheus's own UI), and writes the profile values that fit what the calls took, \
         as a TOML overlay for the global configuration, each verdict as a comment above the \
         values it changes; each proposal is replayed on the calls, and one that does not \
         dominate the value in use (no more false timeouts, less detection time) is left a \
         suggestion, its lines led by `#? ` (exit code 3); --report also writes one \
         self-contained HTML page with a chart per route (latency on a log axis, p50, p99 \
         and p99.9, the timeout in use, the profile's min and max, the proposal, the share \
         that timed out); --out writes the overlay to a file whole or not at all (as \
         --report does its page), for a ConfigMap or a commit",
    ),
    (
        "slo-rules",
        "slo-rules [--objective PERCENT] [--config FILE]",
        "a timeout SLO per profile as Prometheus recording and alerting rules (YAML): \
         multiwindow, multi-burn-rate alerts on the share of calls that timed out, paging \
         at 14.4× over 1 h and 5 m or 6× over 6 h and 30 m, a ticket at 3× over 1 d and \
         2 h or 1× over 3 d and 6 h; --objective is the share of calls without a timeout, \
         in percent (default 99.9)",
    ),
];

fn usage() -> String {
    let mut out = String::from(
        "sw4rm-timeouts: the SW4-002 timeout configuration of a deployment\n\n\
         usage: sw4rm-timeouts COMMAND [OPTIONS]\n\ncommands:\n",
    );
    for (_, synopsis, what) in COMMANDS {
        out.push_str(&format!("  {synopsis}\n      {what}\n"));
    }
    out.push_str(
        "  help [COMMAND]\n      this text, or one command's\n\n\
         options:\n  -h, --help     this text\n  -V, --version  the version\n\n\
         Without --config the global configuration is read as the SDK reads it\n\
         (SW4RM_CONFIG or ./sw4rm.toml, and SW4RM_*). Exit codes: 0 success, 1 an invalid\n\
         configuration (the problems on stderr), 2 a usage error.\n\n\
         example: sw4rm-timeouts check sw4rm.example.toml\n",
    );
    out
}

/// What a usage error prints under its reason: the command's synopsis when the
/// command is known, else the commands, and where the whole help is. Short, so the
/// reason stays on screen.
fn short_usage(command: Option<&str>) -> String {
    match COMMANDS.iter().find(|(n, _, _)| Some(*n) == command) {
        Some((_, synopsis, _)) => format!(
            "usage: sw4rm-timeouts {synopsis}
(sw4rm-timeouts help {} for more)",
            command.unwrap_or_default()
        ),
        None => {
            let names: Vec<&str> = COMMANDS.iter().map(|(n, _, _)| *n).collect();
            format!(
                "usage: sw4rm-timeouts COMMAND [OPTIONS]   (commands: {}, help)\n\
                 (sw4rm-timeouts --help for what each does)",
                names.join(", ")
            )
        }
    }
}

/// `unknown command `x``, with the command it most likely meant.
fn unknown_command(word: &str) -> String {
    let names = COMMANDS.iter().map(|(n, _, _)| *n).chain(["help"]);
    match sw4rm_timeouts::did_you_mean(word, names) {
        Some(meant) => format!("unknown command `{word}` (did you mean `{meant}`?)"),
        None => format!("unknown command `{word}`"),
    }
}

/// One command's help, or `None` for a name that is no command.
fn command_help(name: &str) -> Option<String> {
    let (_, synopsis, what) = COMMANDS.iter().find(|(n, _, _)| *n == name)?;
    Some(format!("usage: sw4rm-timeouts {synopsis}\n\n{what}.\n"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Failure::Usage(why)) => {
            let command = args.first().map(String::as_str);
            eprintln!("sw4rm-timeouts: {why}\n{}", short_usage(command));
            ExitCode::from(2)
        }
        Err(Failure::Config(e)) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
        Err(Failure::Input(why)) => {
            eprintln!("{why}");
            ExitCode::from(1)
        }
        Err(Failure::Unproven { overlay, count }) => {
            print!("{overlay}");
            eprintln!(
                "sw4rm-timeouts: {count} proposal(s) do not dominate the table in use: left \
                 as suggestions (lines led by `#? `)"
            );
            ExitCode::from(3)
        }
    }
}

enum Failure {
    Usage(String),
    Config(sw4rm_timeouts::ConfigError),
    /// Input that cannot be read or is not what the command reads.
    Input(String),
    /// An overlay written with `count` proposals left as suggestions.
    Unproven {
        overlay: String,
        count: usize,
    },
}

/// What a command takes: the options it knows (each with a value) and its one
/// positional argument, if any (named as the usage names it).
struct Takes {
    options: &'static [&'static str],
    argument: Option<&'static str>,
    /// Whether the argument must be given (else the command checks what it needs).
    required: bool,
}

/// What each command takes; `None` for a name that is no command.
fn takes(command: &str) -> Option<Takes> {
    let (options, argument): (&'static [&'static str], _) = match command {
        "explain" | "routes" => (&["--config"], None),
        "check" => (&[], Some("a FILE")),
        "service-config" => (&["--mode", "--config"], None),
        "slo-rules" => (&["--objective", "--config"], None),
        "advise" => {
            return Some(Takes {
                options: advise::OPTIONS,
                argument: Some("a METRICS_FILE (or - for stdin), or --prometheus URL"),
                required: false,
            })
        }
        _ => return None,
    };
    Some(Takes {
        options,
        argument,
        required: true,
    })
}

/// A command's words, checked: every option known and given once with its value, the
/// positional argument there when the command needs one, nothing more.
struct Parsed<'a> {
    options: Vec<(&'static str, &'a str)>,
    argument: Option<&'a str>,
}

impl<'a> Parsed<'a> {
    /// The value given to `flag`, if any.
    fn option(&self, flag: &str) -> Option<&'a str> {
        self.options
            .iter()
            .find(|(f, _)| *f == flag)
            .map(|(_, v)| *v)
    }
}

/// Reads the words after `command` as it takes them: an unknown option or an extra
/// argument is a usage error naming it (with the option most likely meant).
fn parse<'a>(command: &str, words: &'a [String]) -> Result<Parsed<'a>, Failure> {
    let Some(takes) = takes(command) else {
        return Err(Failure::Usage(unknown_command(command)));
    };
    let mut parsed = Parsed {
        options: Vec::new(),
        argument: None,
    };
    let mut words = words.iter().map(String::as_str);
    while let Some(word) = words.next() {
        if word.starts_with('-') && word != "-" {
            let Some(flag) = takes.options.iter().copied().find(|f| *f == word) else {
                let meant = sw4rm_timeouts::did_you_mean(word, takes.options.iter().copied())
                    .map(|m| format!(" (did you mean `{m}`?)"))
                    .unwrap_or_default();
                return Err(Failure::Usage(format!(
                    "{command}: unknown option `{word}`{meant}"
                )));
            };
            let value = words
                .next()
                .filter(|v| !v.starts_with("--"))
                .ok_or_else(|| Failure::Usage(format!("{command}: {flag} needs a value")))?;
            if parsed.option(flag).is_some() {
                return Err(Failure::Usage(format!("{command}: {flag} given twice")));
            }
            parsed.options.push((flag, value));
        } else if takes.argument.is_some() && parsed.argument.is_none() {
            parsed.argument = Some(word);
        } else {
            return Err(Failure::Usage(format!(
                "{command}: unexpected argument `{word}`"
            )));
        }
    }
    match (takes.argument, parsed.argument) {
        (Some(what), None) if takes.required => {
            Err(Failure::Usage(format!("{command} needs {what}")))
        }
        _ => Ok(parsed),
    }
}

/// The profile table with the global level from `config` (else as the SDK finds it):
/// every problem of the file, the environment and the merged table at once.
fn profiles(config: Option<&str>) -> Result<ProfileSet, Failure> {
    let builder = match config {
        Some(path) => ProfileSet::builder().global_file(path),
        None => ProfileSet::builder(),
    };
    let set = builder.build().map_err(Failure::Config)?;
    for warning in set.warnings() {
        eprintln!("warning: {warning}");
    }
    Ok(set)
}

fn run(args: &[String]) -> Result<String, Failure> {
    let command = args.first().map(String::as_str);
    let wants_help = args.iter().skip(1).any(|a| a == "--help" || a == "-h");
    match (command, args.get(1).map(String::as_str)) {
        (None, _) => return Err(Failure::Usage("no command given".into())),
        (Some("--help" | "-h"), _) | (Some("help"), None) => return Ok(usage()),
        (Some("--version" | "-V"), _) => {
            return Ok(format!("sw4rm-timeouts {}\n", env!("CARGO_PKG_VERSION")))
        }
        (Some("help"), Some(name)) => {
            return command_help(name)
                .ok_or_else(|| Failure::Usage(format!("help: {}", unknown_command(name))))
        }
        (Some(name), _) if wants_help => {
            if let Some(help) = command_help(name) {
                return Ok(help);
            }
        }
        _ => {}
    }
    let Some(command) = command else {
        return Err(Failure::Usage("no command given".into()));
    };
    let parsed = parse(command, &args[1..])?;
    let config = parsed.option("--config");
    match command {
        "explain" => Ok(profiles(config)?.explain()),
        "check" => {
            let file = parsed.argument.unwrap_or_default();
            let set = profiles(Some(file))?;
            Ok(format!(
                "{file}: valid ({} profiles, {} routes)\n",
                set.profiles().count(),
                set.routes().count()
            ))
        }
        "routes" => Ok(routes(&profiles(config)?)),
        "service-config" => {
            let mode = match parsed.option("--mode") {
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
        "slo-rules" => {
            let rules = sw4rm_advise::SloRules::new(&profiles(config)?);
            let rules = match parsed.option("--objective") {
                None => rules,
                Some(text) => {
                    let percent = text.parse::<f64>().map_err(|_| {
                        Failure::Usage(format!("--objective {text}: a percentage, such as 99.9"))
                    })?;
                    rules
                        .objective_for_all(percent)
                        .map_err(|e| Failure::Usage(e.to_string()))?
                }
            };
            Ok(rules.to_yaml())
        }
        "advise" => advise::run(&parsed),
        other => Err(Failure::Usage(unknown_command(other))),
    }
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
