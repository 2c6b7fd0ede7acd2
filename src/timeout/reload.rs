//! [`ReloadHandle`]: swaps a layer's profile table while it serves calls. Calls that
//! start after a swap use the new table; calls in flight finish on the table they
//! started with (each call reads the table once, when it starts); no call fails
//! because of a swap. An invalid table is refused: the table in use stays, a WARN
//! names every problem (as `sw4rm-timeouts check` does) and a counter counts it.

use std::ops::Deref;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::shared::Shared;
use super::table::{Cell, Family};
use crate::config::{ConfigError, ProfileSet, ProfileSetBuilder};

/// Swaps the profile table of a layer made with
/// [`TimeoutProfileLayer::reloadable`](super::TimeoutProfileLayer::reloadable), and of
/// every layer, service and client made from it. Cheap to clone; `Send` and `Sync`.
///
/// ```
/// use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
/// let (layer, handle) = TimeoutProfileLayer::standard().reloadable();
/// let lower = ProfileSet::builder().without_global().default_timeout_ms("heartbeat", 2_000).build()?;
/// let reloaded = handle.reload(lower);
/// assert_eq!(reloaded.changes(), ["heartbeat.default_timeout_ms 5000 -> 2000"]);
/// assert_eq!(layer.profiles().profile("heartbeat").unwrap().default_timeout_ms, 2_000);
/// # Ok::<(), sw4rm_timeouts::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct ReloadHandle {
    pub(crate) family: Arc<Family>,
}

/// What a reload changed ([`ReloadHandle::reload`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reloaded {
    changes: Vec<String>,
}

impl Reloaded {
    /// One line per value changed ([`ProfileSet::changes_since`]); empty when the new
    /// table times every call as the old one did.
    pub fn changes(&self) -> &[String] {
        &self.changes
    }
}

/// The profile table a layer uses now, kept alive as long as this is held (a reload
/// swaps the layer's table, not this one). Dereferences to [`ProfileSet`].
///
/// ```
/// let layer = sw4rm_timeouts::TimeoutProfileLayer::standard();
/// let profiles = layer.profiles();
/// assert_eq!(profiles.profile("heartbeat").unwrap().default_timeout_ms, 5_000);
/// ```
#[derive(Clone, Debug)]
pub struct CurrentProfiles(pub(crate) Arc<Shared>);

impl Deref for CurrentProfiles {
    type Target = ProfileSet;

    fn deref(&self) -> &ProfileSet {
        &self.0.profiles
    }
}

impl AsRef<ProfileSet> for CurrentProfiles {
    fn as_ref(&self) -> &ProfileSet {
        &self.0.profiles
    }
}

impl ReloadHandle {
    /// Uses `profiles` for every call that starts from now on. Logs the change at
    /// INFO, naming each value changed (nothing when no value did).
    pub fn reload(&self, profiles: ProfileSet) -> Reloaded {
        let mut cells = self.family.lock();
        cells.retain(|c| c.strong_count() > 0);
        let live: Vec<Arc<Cell>> = cells.iter().filter_map(Weak::upgrade).collect();
        let mut changes = None;
        // The first variant's new state; the others share its path table, and its
        // observations and learned windows, as they did before.
        let mut first: Option<Arc<Shared>> = None;
        for cell in &live {
            let old = cell.current.load_full();
            let changed = changes.get_or_insert_with(|| profiles.changes_since(&old.profiles));
            if changed.is_empty() {
                break;
            }
            let new = match &first {
                None => Arc::new(old.reloaded(profiles.clone())),
                Some(first) => Arc::new(first.variant(old.settings.clone())),
            };
            first.get_or_insert_with(|| new.clone());
            cell.store(new);
        }
        drop(cells);
        let changes = changes.unwrap_or_default();
        self.family.applied.fetch_add(1, Ordering::Relaxed);
        if let Some(instruments) = self.instruments() {
            instruments.reloaded(true);
        }
        match changes.is_empty() {
            true => tracing::info!("SW4RM timeout table reloaded: nothing changed"),
            false => tracing::info!(
                changes = %changes.join("; "),
                "SW4RM timeout table reloaded: {} value(s) changed",
                changes.len()
            ),
        }
        Reloaded { changes }
    }

    /// Builds `builder` and uses the table for every call that starts from now on;
    /// an invalid table is refused, with every problem named: the table in use stays,
    /// a WARN says why and [`refusals`](Self::refusals) counts it (as does
    /// `sw4rm_config_reloads_total{outcome="refused"}` when the layer records
    /// metrics).
    ///
    /// ```
    /// use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
    /// let (layer, handle) = TimeoutProfileLayer::standard().reloadable();
    /// let bad = ProfileSet::builder().without_global().default_timeout_ms("heartbeat", 10);
    /// let err = handle.reload_from(&bad).unwrap_err();
    /// assert!(err.to_string().contains("heartbeat"), "{err}");
    /// assert_eq!(handle.refusals(), 1);
    /// assert_eq!(layer.profiles().profile("heartbeat").unwrap().default_timeout_ms, 5_000);
    /// ```
    pub fn reload_from(&self, builder: &ProfileSetBuilder) -> Result<Reloaded, ConfigError> {
        match builder.clone().build() {
            Ok(profiles) => Ok(self.reload(profiles)),
            Err(err) => {
                self.refuse(&err);
                Err(err)
            }
        }
    }

    /// The table in use now.
    pub fn profiles(&self) -> Option<CurrentProfiles> {
        Some(CurrentProfiles(self.family.first()?.current.load_full()))
    }

    /// How many tables were refused so far.
    pub fn refusals(&self) -> u64 {
        self.family.refused.load(Ordering::Relaxed)
    }

    /// How many tables were applied so far.
    pub fn reloads(&self) -> u64 {
        self.family.applied.load(Ordering::Relaxed)
    }

    /// Watches the file `builder` reads (its [`global_file`], else `SW4RM_CONFIG` or
    /// `./sw4rm.toml`) and reloads when its content changes, within `every` (a
    /// quarter second with [`watch`](Self::watch)). A change that makes the table
    /// invalid is refused as [`reload_from`](Self::reload_from) refuses it: the table
    /// in use stays until the file is fixed. Write the file whole (a rename over it):
    /// a half-written file is refused, then read again. Runs on the Tokio runtime it
    /// is called in until the returned [`ConfigWatch`] is dropped.
    ///
    /// Fails when the builder reads no file or there is no Tokio runtime.
    ///
    /// [`global_file`]: ProfileSetBuilder::global_file
    pub fn watch_every(
        &self,
        builder: ProfileSetBuilder,
        every: Duration,
    ) -> std::io::Result<ConfigWatch> {
        let Some(path) = builder.file() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the builder reads no file (it was given its global level, or none): \
                 give it global_file(PATH)",
            ));
        };
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| std::io::Error::other(format!("watching {}: {e}", path.display())))?;
        let handle = self.clone();
        let every = every.max(Duration::from_millis(1));
        // Read now, not when the task first runs: a change made before then is one.
        let mut seen = std::fs::read(&path).ok();
        let task = runtime.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let now = std::fs::read(&path).ok();
                if now == seen {
                    continue;
                }
                seen = now;
                tracing::debug!(file = %path.display(), "SW4RM configuration file changed");
                // A refusal is logged and counted; the watch goes on.
                let _ = handle.reload_from(&builder);
            }
        });
        Ok(ConfigWatch { task })
    }

    /// [`watch_every`](Self::watch_every) a quarter second.
    ///
    /// ```no_run
    /// # async fn demo() -> std::io::Result<()> {
    /// use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
    /// let builder = ProfileSet::builder().global_file("/etc/sw4rm/timeouts.toml");
    /// let profiles = builder.clone().build().expect("valid at start");
    /// let (layer, handle) = TimeoutProfileLayer::new(profiles).reloadable();
    /// let _watch = handle.watch(builder)?; // keep it: dropping it stops the watch
    /// # drop(layer); Ok(()) }
    /// ```
    pub fn watch(&self, builder: ProfileSetBuilder) -> std::io::Result<ConfigWatch> {
        self.watch_every(builder, Duration::from_millis(250))
    }

    /// Counts and logs a refused table.
    fn refuse(&self, err: &ConfigError) {
        self.family.refused.fetch_add(1, Ordering::Relaxed);
        if let Some(instruments) = self.instruments() {
            instruments.reloaded(false);
        }
        tracing::warn!(
            error = %err,
            "SW4RM timeout table reload refused: the table in use stays"
        );
    }

    /// The instruments of the layer as built (the first variant still in use).
    fn instruments(&self) -> Option<crate::observe::metrics::Instruments> {
        let first = self.family.first()?;
        let current = first.current.load();
        current.settings.instruments.clone()
    }
}

/// A running watch of a configuration file ([`ReloadHandle::watch`]); dropping it
/// stops the watch.
#[derive(Debug)]
pub struct ConfigWatch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ConfigWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
