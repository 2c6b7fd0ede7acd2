//! [`ReloadHandle`]: swaps a layer's profile table while it serves calls. Calls that
//! start after a swap use the new table; calls in flight finish on the table they
//! started with (each call reads the table once, when it starts); no call fails
//! because of a swap. An invalid table is refused: the table in use stays, a WARN
//! names every problem (as `sw4rm-timeouts check` does) and a counter counts it.
//!
//! A reloadable layer's state is in a [`LiveCell`] per variant (the layer as built, and
//! each made from it with other settings), the variants in one [`Family`].

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::shared::Shared;
use crate::config::file_look::{FileLook, Look, MAX_CONFIG_BYTES};
use crate::config::{ConfigError, ProfileSet, ProfileSetBuilder};

/// One variant of a reloadable layer: its state, swapped whole on every reload.
#[derive(Debug)]
pub(crate) struct LiveCell {
    pub(crate) current: ArcSwap<Shared>,
    /// Bumped after every store: a service reads `current` again only when it moved.
    pub(super) version: AtomicU64,
    /// Every variant of the layer, for the handle to swap them all.
    pub(crate) family: Arc<Family>,
}

impl LiveCell {
    pub(super) fn new(shared: Arc<Shared>, family: Arc<Family>) -> Self {
        LiveCell {
            current: ArcSwap::new(shared),
            version: AtomicU64::new(0),
            family,
        }
    }

    /// Makes `shared` the state for calls that start from now on.
    pub(crate) fn store(&self, shared: Arc<Shared>) {
        self.current.store(shared);
        // After the store: a service that sees the new version reads the new state.
        self.version.fetch_add(1, Ordering::Release);
    }
}

/// The variants of one reloadable layer (the layer as built, and each made from it
/// with other settings), swapped together.
#[derive(Debug, Default)]
pub(crate) struct Family {
    pub(crate) cells: Mutex<Vec<Weak<LiveCell>>>,
    /// Tables applied by the handle.
    pub(crate) applied: AtomicU64,
    /// Tables the handle refused (invalid).
    pub(crate) refused: AtomicU64,
    /// The last refusal, whole (the WARN carries it too).
    pub(crate) last_refusal: Mutex<Option<crate::config::ConfigError>>,
}

impl Family {
    /// The first variant still in use (the layer as built, unless it is gone).
    pub(crate) fn first(&self) -> Option<Arc<LiveCell>> {
        self.members().iter().find_map(Weak::upgrade)
    }

    /// The cells, locked: variants cannot join while a reload swaps them.
    pub(crate) fn members(&self) -> MutexGuard<'_, Vec<Weak<LiveCell>>> {
        match self.cells.lock() {
            Ok(cells) => cells,
            // A panic elsewhere while the list was held leaves it usable.
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// Swaps the profile table of a layer made with
/// [`TimeoutProfileLayer::reloadable`](crate::timeout::TimeoutProfileLayer::reloadable), and of
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
        let mut cells = self.family.members();
        cells.retain(|c| c.strong_count() > 0);
        let live: Vec<Arc<LiveCell>> = cells.iter().filter_map(Weak::upgrade).collect();
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
        self.family.refused.load(Ordering::Acquire)
    }

    /// The last table refused, with every problem it had (`None` before any).
    ///
    /// ```
    /// use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
    /// let (_layer, handle) = TimeoutProfileLayer::standard().reloadable();
    /// assert!(handle.last_refusal().is_none());
    /// let bad = ProfileSet::builder().without_global().default_timeout_ms("heartbeat", 10);
    /// let err = handle.reload_from(&bad).unwrap_err();
    /// assert_eq!(handle.last_refusal(), Some(err));
    /// ```
    pub fn last_refusal(&self) -> Option<ConfigError> {
        self.family
            .last_refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many tables were applied so far.
    pub fn reloads(&self) -> u64 {
        self.family.applied.load(Ordering::Relaxed)
    }

    /// Watches the file `builder` reads (its [`global_file`], else `SW4RM_CONFIG` or
    /// `./sw4rm.toml`) and reloads when its content changes, within `every` (a
    /// quarter second with [`watch`](Self::watch)). A change that makes the table
    /// invalid is refused as [`reload_from`](Self::reload_from) refuses it: the table
    /// in use stays until the file is fixed.
    ///
    /// The watch runs on a thread of its own, never on a runtime worker (a FIFO or a
    /// hung network mount at the path blocks only that thread), and it looks at the
    /// file's metadata first: an unchanged file is not read again. Not handed on,
    /// each logged once and the table in use kept: an **empty** file (0 bytes, or
    /// only white space: the first state of a rewrite that is not a rename, such as a
    /// shell `>`; to go back to the standard table, write a file that holds only a
    /// comment), a file that changed while it was read (looked at again at the next
    /// tick), one larger than 1 MiB, and a path that is not a regular file. A path
    /// through symbolic links is followed at every look, so Kubernetes' update of a
    /// mounted ConfigMap (an atomic swap of its `..data` link) is one change. The
    /// watch logs to the `tracing` dispatcher in force where it was started, and runs
    /// until [`ConfigWatch::stop`] or until no layer made from this handle is left.
    ///
    /// Fails when the builder reads no file, or the thread cannot be started.
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
        let handle = self.clone();
        let every = every.max(Duration::from_millis(1));
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let (looked, first_look) = std::sync::mpsc::sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("sw4rm-config-watch".into())
            .spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    // The first look before the caller goes on: a change made after
                    // `watch` returns is one.
                    let mut file = FileLook::new(path);
                    match file.look() {
                        Look::Text(_) => {} // the text the table was built from
                        other => handle.answer(&file, other, &builder),
                    }
                    let _ = looked.send(());
                    loop {
                        std::thread::park_timeout(every);
                        // Stopped, or no layer made from the handle is left.
                        if stopped.load(Ordering::Acquire) || handle.family.first().is_none() {
                            return;
                        }
                        handle.look_at(&mut file, &builder);
                    }
                });
            })
            .map_err(|e| std::io::Error::other(format!("starting the file watch: {e}")))?;
        // Bounded: a path on a hung mount does not hold the caller up.
        let _ = first_look.recv_timeout(Duration::from_millis(500));
        Ok(ConfigWatch {
            stop,
            thread: thread.thread().clone(),
        })
    }

    /// One look of the file watch, and what follows from it.
    fn look_at(&self, file: &mut FileLook, builder: &ProfileSetBuilder) {
        let look = file.look();
        self.answer(file, look, builder);
    }

    /// What follows from a look at the watched file: a reload, or a line saying why not.
    fn answer(&self, file: &FileLook, look: Look, builder: &ProfileSetBuilder) {
        let shown = file.path().display().to_string();
        match look {
            Look::Unchanged | Look::Moving => {}
            Look::Text(text) => {
                tracing::debug!(file = %shown, "SW4RM configuration file changed");
                // A refusal is logged and counted; the watch goes on.
                let _ = self.reload_from(&builder.clone().with_file_text(text));
            }
            Look::Empty => tracing::info!(
                file = %shown,
                "SW4RM configuration file is empty (being written?): the table in use stays"
            ),
            Look::NotRegular => tracing::warn!(
                file = %shown,
                "SW4RM configuration file is not a regular file: not read, the table in use stays"
            ),
            Look::TooLarge(bytes) => tracing::warn!(
                file = %shown,
                bytes,
                limit = MAX_CONFIG_BYTES,
                "SW4RM configuration file is larger than any timeout table: not read, the \
                 table in use stays"
            ),
            Look::Unreadable(error) => tracing::warn!(
                file = %shown,
                %error,
                "SW4RM configuration file cannot be read: the table in use stays"
            ),
        }
    }

    /// [`watch_every`](Self::watch_every) a quarter second.
    ///
    /// ```no_run
    /// # async fn demo() -> std::io::Result<()> {
    /// use sw4rm_timeouts::{ProfileSet, TimeoutProfileLayer};
    /// let builder = ProfileSet::builder().global_file("/etc/sw4rm/timeouts.toml");
    /// let profiles = builder.clone().build().expect("valid at start");
    /// let (layer, handle) = TimeoutProfileLayer::new(profiles).reloadable();
    /// let watch = handle.watch(builder)?; // runs while the layer lives
    /// # watch.stop();
    /// # drop(layer); Ok(()) }
    /// ```
    pub fn watch(&self, builder: ProfileSetBuilder) -> std::io::Result<ConfigWatch> {
        self.watch_every(builder, Duration::from_millis(250))
    }

    /// Counts and logs a refused table.
    fn refuse(&self, err: &ConfigError) {
        // The refusal first: whoever sees the count sees what was refused.
        *self
            .family
            .last_refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(err.clone());
        self.family.refused.fetch_add(1, Ordering::Release);
        if let Some(instruments) = self.instruments() {
            instruments.reloaded(false);
        }
        // One line per event (log shippers read lines); the whole text, one problem
        // per line, is `last_refusal()`'s.
        tracing::warn!(
            error = %err.one_line(),
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

/// A running watch of a configuration file ([`ReloadHandle::watch`]). It goes on
/// while a layer made from the handle lives, until [`stop`](ConfigWatch::stop):
/// dropping this value (`let _ = handle.watch(..)?;` included) leaves the watch
/// running, as dropping a Tokio `JoinHandle` leaves its task.
#[derive(Debug)]
pub struct ConfigWatch {
    stop: Arc<AtomicBool>,
    thread: std::thread::Thread,
}

impl ConfigWatch {
    /// Stops the watch (its thread ends at once, or after the look in progress).
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.unpark();
    }
}
