//! Where a layer finds its state for each call: fixed when the layer is built, or
//! live — swapped by a [`super::ReloadHandle`] while calls run. A call reads it once,
//! when it starts, and keeps what it read to the end, so a call in flight finishes on
//! the table it started with. Live, the read is one atomic load (`arc-swap`'s debt
//! slots: no lock, no allocation, no reference count unless the call keeps it).

use std::ops::Deref;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use arc_swap::{ArcSwap, Guard};

use super::shared::{Settings, Shared};

/// One variant of a reloadable layer: its state, swapped whole on every reload.
#[derive(Debug)]
pub(crate) struct Cell {
    pub(crate) current: ArcSwap<Shared>,
    /// Every variant of the layer, for the handle to swap them all.
    pub(crate) family: Arc<Family>,
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

/// The state one call reads when it starts.
pub(crate) enum Current<'a> {
    Fixed(&'a Arc<Shared>),
    Live(Guard<Arc<Shared>>),
}

impl Deref for Current<'_> {
    type Target = Arc<Shared>;

    #[inline]
    fn deref(&self) -> &Arc<Shared> {
        match self {
            Current::Fixed(shared) => shared,
            Current::Live(guard) => guard,
        }
    }
}

impl Table {
    /// The state for a call starting now.
    #[inline]
    pub(crate) fn load(&self) -> Current<'_> {
        match self {
            Table::Fixed(shared) => Current::Fixed(shared),
            Table::Live(cell) => Current::Live(cell.current.load()),
        }
    }

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
                let joined = Arc::new(Cell {
                    current: ArcSwap::from_pointee(shared),
                    family: family.clone(),
                });
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
                let cell = Arc::new(Cell {
                    current: ArcSwap::new(shared.clone()),
                    family: family.clone(),
                });
                family.lock().push(Arc::downgrade(&cell));
                (Table::Live(cell), family)
            }
        }
    }
}
