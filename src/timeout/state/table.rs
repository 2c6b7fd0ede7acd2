//! Where a layer finds its state for each call: fixed when the layer is built, or
//! live — swapped by a [`crate::timeout::ReloadHandle`] while calls run. A call reads it once,
//! when it starts, and keeps what it read to the end, so a call in flight finishes on
//! the table it started with. Live, a service keeps the state it last read with the
//! cell's version, and a call reads one atomic (the version) unless a reload changed
//! it: no lock, no allocation, no reference count.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use arc_swap::ArcSwap;

use super::shared::{Settings, Shared};

/// One variant of a reloadable layer: its state, swapped whole on every reload.
#[derive(Debug)]
pub(crate) struct Cell {
    pub(crate) current: ArcSwap<Shared>,
    /// Bumped after every store: a service reads `current` again only when it moved.
    version: AtomicU64,
    /// Every variant of the layer, for the handle to swap them all.
    pub(crate) family: Arc<Family>,
}

impl Cell {
    fn new(shared: Arc<Shared>, family: Arc<Family>) -> Self {
        Cell {
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
    pub(crate) cells: Mutex<Vec<Weak<Cell>>>,
    /// Tables applied by the handle.
    pub(crate) applied: AtomicU64,
    /// Tables the handle refused (invalid).
    pub(crate) refused: AtomicU64,
    /// The last refusal, whole (the WARN carries it too).
    pub(crate) last_refusal: Mutex<Option<crate::config::ConfigError>>,
}

impl Family {
    /// The first variant still in use (the layer as built, unless it is gone).
    pub(crate) fn first(&self) -> Option<Arc<Cell>> {
        self.lock().iter().find_map(Weak::upgrade)
    }

    /// The cells, locked: variants cannot join while a reload swaps them.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<Weak<Cell>>> {
        match self.cells.lock() {
            Ok(cells) => cells,
            // A panic elsewhere while the list was held leaves it usable.
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// A layer's state: fixed, or live.
#[derive(Clone, Debug)]
pub(crate) enum Table {
    Fixed(Arc<Shared>),
    Live(Arc<Cell>),
}

/// A service's read of its layer's state: fixed, or live with the state it last read
/// and the cell's version then.
#[derive(Clone, Debug)]
pub(crate) enum Reader {
    Fixed(Arc<Shared>),
    Live {
        cell: Arc<Cell>,
        version: u64,
        shared: Arc<Shared>,
    },
}

impl Reader {
    pub(crate) fn new(table: Table) -> Self {
        match table {
            Table::Fixed(shared) => Reader::Fixed(shared),
            Table::Live(cell) => {
                let version = cell.version.load(Ordering::Acquire);
                let shared = cell.current.load_full();
                Reader::Live {
                    cell,
                    version,
                    shared,
                }
            }
        }
    }

    /// The state for a call starting now: live, one atomic load unless a reload
    /// happened since the last call.
    #[inline]
    pub(crate) fn current(&mut self) -> &Arc<Shared> {
        match self {
            Reader::Fixed(shared) => shared,
            Reader::Live {
                cell,
                version,
                shared,
            } => {
                let now = cell.version.load(Ordering::Acquire);
                if now != *version {
                    *shared = cell.current.load_full();
                    *version = now;
                }
                shared
            }
        }
    }

    /// The state now, kept (for handles read later: the profiles).
    pub(crate) fn full(&self) -> Arc<Shared> {
        match self {
            Reader::Fixed(shared) => shared.clone(),
            Reader::Live { cell, .. } => cell.current.load_full(),
        }
    }
}

impl Table {
    /// The state now, kept (for handles read later: observations, the profiles).
    pub(crate) fn full(&self) -> Arc<Shared> {
        match self {
            Table::Fixed(shared) => shared.clone(),
            Table::Live(cell) => cell.current.load_full(),
        }
    }

    /// The same table with other settings. A live table's variant joins its family:
    /// the handle swaps it too.
    pub(crate) fn variant(&self, settings: Settings) -> Table {
        match self {
            Table::Fixed(shared) => Table::Fixed(Arc::new(shared.variant(settings))),
            Table::Live(cell) => {
                let family = cell.family.clone();
                let mut cells = family.lock();
                // Under the family's lock: a reload cannot slip between reading the
                // table and joining the family.
                let shared = cell.current.load().variant(settings);
                let joined = Arc::new(Cell::new(Arc::new(shared), family.clone()));
                cells.push(Arc::downgrade(&joined));
                drop(cells);
                Table::Live(joined)
            }
        }
    }

    /// This table made live, in a family of its own (a live table stays as it is).
    pub(crate) fn live(&self) -> (Table, Arc<Family>) {
        match self {
            Table::Live(cell) => (self.clone(), cell.family.clone()),
            Table::Fixed(shared) => {
                let family = Arc::new(Family::default());
                let cell = Arc::new(Cell::new(shared.clone(), family.clone()));
                family.lock().push(Arc::downgrade(&cell));
                (Table::Live(cell), family)
            }
        }
    }
}
