//! The global level (SW4-002 §2.3): an optional TOML file merged with `SW4RM_`
//! environment variables, read with figment.
//!
//! * File: the path in `SW4RM_CONFIG` (which must exist), otherwise `sw4rm.toml` in
//!   the working directory when present.
//! * Environment: `SW4RM_` + key path joined by `__`, for example
//!   `SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS=10000`. Environment values win over
//!   the file, field by field. Figment lowercases the keys; profile names are
//!   case-insensitive everywhere, so `Heartbeat` and `heartbeat` are one profile.
//!   Routes contain `/` and `.`, which variable names cannot carry, so they are set
//!   in the file (or the client builder) only. `SW4RM_*` variables of other SW4RM
//!   tools (e.g. `SW4RM_SECRETS_BACKEND`) are ignored unless their name is a near
//!   miss of a timeout key (`SW4RM_PROFILS__...`), which is reported as a typo.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::ffi::OsString;

use figment::providers::{Format, Toml};
use figment::value::Dict;
use figment::{Profile, Provider};

use super::env;
use super::error::{ConfigError, ConfigIssue};
use super::overrides::Overrides;
use super::walk::{walk_top, TOP_KEYS};
use crate::policy::source::Source;

/// Environment variable naming the configuration file.
pub const CONFIG_PATH_VAR: &str = "SW4RM_CONFIG";
/// File read from the working directory when `SW4RM_CONFIG` is not set.
pub const DEFAULT_CONFIG_FILE: &str = "sw4rm.toml";

/// Process-wide settings from the file and the environment, not yet validated
/// (validation happens when a [`crate::ProfileSet`] is built, against all levels).
///
/// ```
/// use sw4rm_timeouts::{GlobalConfig, ProfileSet};
/// let global = GlobalConfig::from_toml_str(
///     "[profiles.heartbeat]\nmax_timeout_ms = 10000\n",
///     "inline.toml",
/// ).unwrap();
/// let set = ProfileSet::builder().global(global).build().unwrap();
/// assert_eq!(set.profile("heartbeat").unwrap().max_timeout_ms, 10_000);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GlobalConfig {
    pub(crate) overrides: Overrides,
    file: Option<PathBuf>,
}

impl GlobalConfig {
    /// No global settings at all.
    pub fn empty() -> Self {
        GlobalConfig::default()
    }

    /// Reads the file (`SW4RM_CONFIG`, else `./sw4rm.toml` if present) and the
    /// `SW4RM_*` environment. Every problem is reported at once.
    pub fn load() -> Result<Self, ConfigError> {
        let (config, issues) = GlobalConfig::load_partial();
        finish(config, issues)
    }

    /// Like [`GlobalConfig::load`], but keeps what could be read beside the
    /// problems, so that validation can report everything at once.
    pub(crate) fn load_partial() -> (Self, Vec<ConfigIssue>) {
        let mut issues = Vec::new();
        let mut config = GlobalConfig::empty();
        match std::env::var_os(CONFIG_PATH_VAR) {
            Some(path) => {
                let path = PathBuf::from(path);
                if path.is_file() {
                    config.read_file(&path, &mut issues);
                } else {
                    issues.push(ConfigIssue {
                        key: CONFIG_PATH_VAR.into(),
                        value: path.display().to_string(),
                        rule: "names a file that does not exist".into(),
                        source: Source::Env(CONFIG_PATH_VAR.into()),
                    });
                }
            }
            None => {
                let path = Path::new(DEFAULT_CONFIG_FILE);
                if path.is_file() {
                    config.read_file(path, &mut issues);
                }
            }
        }
        config.read_env(&mut issues);
        (config, issues)
    }

    /// Reads one TOML file (no environment).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let mut issues = Vec::new();
        let mut config = GlobalConfig::empty();
        config.read_file(path.as_ref(), &mut issues);
        finish(config, issues)
    }

    /// Reads TOML text; `name` stands for the file in messages.
    pub fn from_toml_str(toml: &str, name: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let mut issues = Vec::new();
        let mut config = GlobalConfig::empty();
        let name = name.as_ref();
        config.read_data(Toml::string(toml).data(), name, &mut issues);
        finish(config, issues)
    }

    /// Reads `SW4RM_*` variables from a map instead of the process environment (for
    /// tests, or an app that keeps its settings elsewhere): no `unsafe` `set_var`.
    ///
    /// ```
    /// use sw4rm_timeouts::{GlobalConfig, ProfileSet};
    /// let global = GlobalConfig::from_env_vars([("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "12000")])?;
    /// let set = ProfileSet::builder().global(global).build()?;
    /// assert_eq!(set.profile("heartbeat").unwrap().max_timeout_ms, 12_000);
    ///
    /// let err = GlobalConfig::from_env_vars([("sw4rm_profiles__heartbeat__min_timeout_ms", "abc")]).unwrap_err();
    /// assert!(err.to_string().contains("sw4rm_profiles__heartbeat__min_timeout_ms=abc"), "{err}");
    /// # Ok::<(), sw4rm_timeouts::ConfigError>(())
    /// ```
    pub fn from_env_vars<K, V>(vars: impl IntoIterator<Item = (K, V)>) -> Result<Self, ConfigError>
    where
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let mut issues = Vec::new();
        let mut config = GlobalConfig::empty();
        config.read_vars(
            vars.into_iter().map(|(k, v)| (k.into(), v.into())),
            &mut issues,
        );
        finish(config, issues)
    }

    /// Reads the TOML file at `path` — the one your application chose — and the
    /// `SW4RM_*` environment over it (environment wins, field by field).
    ///
    /// ```no_run
    /// let global = sw4rm_timeouts::GlobalConfig::from_file_and_env("/etc/agent/timeouts.toml")?;
    /// # Ok::<(), sw4rm_timeouts::ConfigError>(())
    /// ```
    pub fn from_file_and_env(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let (config, issues) = GlobalConfig::file_and_env_partial(path.as_ref());
        finish(config, issues)
    }

    /// Like [`GlobalConfig::from_file_and_env`], but keeps what could be read beside
    /// the problems, so that validation can report everything at once.
    pub(crate) fn file_and_env_partial(path: &Path) -> (Self, Vec<ConfigIssue>) {
        let mut issues = Vec::new();
        let mut config = GlobalConfig::empty();
        config.read_file(path, &mut issues);
        config.read_env(&mut issues);
        (config, issues)
    }

    /// Like [`GlobalConfig::file_and_env_partial`], with the file's text as read.
    pub(crate) fn text_and_env_partial(text: &str, path: &Path) -> (Self, Vec<ConfigIssue>) {
        let mut issues = Vec::new();
        let mut config = GlobalConfig::empty();
        config.file = Some(path.to_path_buf());
        config.read_data(Toml::string(text).data(), path, &mut issues);
        config.read_env(&mut issues);
        (config, issues)
    }

    /// Reads our table from a section of a larger TOML document (your application's
    /// own configuration file): `section` is a dotted key path such as
    /// `"agent.timeouts"`; `name` stands for the file in messages. A missing section
    /// is no settings.
    ///
    /// ```
    /// use sw4rm_timeouts::{GlobalConfig, ProfileSet};
    /// let app = r#"
    /// [agent]
    /// name = "planner"
    /// [agent.timeouts.profiles.heartbeat]
    /// max_timeout_ms = 9000
    /// "#;
    /// let global = GlobalConfig::from_toml_section(app, "agent.timeouts", "agent.toml")?;
    /// let set = ProfileSet::builder().global(global).build()?;
    /// assert_eq!(set.profile("heartbeat").unwrap().max_timeout_ms, 9_000);
    ///
    /// let bad = GlobalConfig::from_toml_section("[agent.timeouts]\nprofils = 1\n", "agent.timeouts", "agent.toml");
    /// assert!(bad.unwrap_err().to_string().contains("did you mean `profiles`"));
    /// # Ok::<(), sw4rm_timeouts::ConfigError>(())
    /// ```
    pub fn from_toml_section(
        toml: &str,
        section: &str,
        name: impl AsRef<Path>,
    ) -> Result<Self, ConfigError> {
        let mut issues = Vec::new();
        let mut config = GlobalConfig::empty();
        let name = name.as_ref();
        let data = Toml::string(toml).data().map(|mut map| {
            let mut dict = map.remove(&Profile::Default).unwrap_or_default();
            for key in section.split('.').filter(|k| !k.is_empty()) {
                dict = match dict.remove(key) {
                    Some(figment::value::Value::Dict(_, inner)) => inner,
                    _ => Dict::new(),
                };
            }
            let mut out = figment::value::Map::new();
            out.insert(Profile::Default, dict);
            out
        });
        config.read_data(data, name, &mut issues);
        finish(config, issues)
    }

    /// Lays `over` on top of this configuration, field by field (`over` wins), as
    /// the environment lies over the file.
    ///
    /// ```
    /// use sw4rm_timeouts::{GlobalConfig, ProfileSet};
    /// let file = GlobalConfig::from_toml_str("[profiles.heartbeat]\nmax_timeout_ms = 9000\n", "a.toml")?;
    /// let env = GlobalConfig::from_env_vars([("SW4RM_PROFILES__HEARTBEAT__MAX_TIMEOUT_MS", "12000")])?;
    /// let set = ProfileSet::builder().global(file.merged_with(env)).build()?;
    /// assert_eq!(set.profile("heartbeat").unwrap().max_timeout_ms, 12_000);
    /// # Ok::<(), sw4rm_timeouts::ConfigError>(())
    /// ```
    pub fn merged_with(mut self, over: GlobalConfig) -> Self {
        self.overrides.merge(&over.overrides);
        if over.file.is_some() {
            self.file = over.file;
        }
        self
    }

    /// Reads only the `SW4RM_*` environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        let mut issues = Vec::new();
        let mut config = GlobalConfig::empty();
        config.read_env(&mut issues);
        finish(config, issues)
    }

    /// The file that was read, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    fn read_file(&mut self, path: &Path, issues: &mut Vec<ConfigIssue>) {
        if !path.is_file() {
            issues.push(ConfigIssue {
                key: String::new(),
                value: String::new(),
                rule: "no such file".into(),
                source: Source::File(Arc::from(path)),
            });
            return;
        }
        self.file = Some(path.to_path_buf());
        self.read_data(Toml::file_exact(path).data(), path, issues);
    }

    fn read_data(
        &mut self,
        data: Result<figment::value::Map<Profile, Dict>, figment::Error>,
        path: &Path,
        issues: &mut Vec<ConfigIssue>,
    ) {
        let file: Arc<Path> = Arc::from(path);
        match data {
            Ok(mut map) => {
                let dict = map.remove(&Profile::Default).unwrap_or_default();
                let source = |_: &[&str]| Source::File(file.clone());
                walk_top(&dict, &source, &mut self.overrides, issues);
            }
            Err(e) => issues.push(ConfigIssue {
                key: String::new(),
                value: String::new(),
                rule: format!("not valid TOML: {e}"),
                source: Source::File(file),
            }),
        }
    }

    fn read_env(&mut self, issues: &mut Vec<ConfigIssue>) {
        self.read_vars(std::env::vars_os(), issues);
    }

    fn read_vars(
        &mut self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
        issues: &mut Vec<ConfigIssue>,
    ) {
        let tree = env::read(vars, &TOP_KEYS, issues);
        let source = |path: &[&str]| tree.source(path);
        let mut env_overrides = Overrides::default();
        walk_top(&tree.dict, &source, &mut env_overrides, issues);
        self.overrides.merge(&env_overrides);
    }
}

fn finish(config: GlobalConfig, issues: Vec<ConfigIssue>) -> Result<GlobalConfig, ConfigError> {
    if issues.is_empty() {
        Ok(config)
    } else {
        Err(ConfigError::new(issues))
    }
}
