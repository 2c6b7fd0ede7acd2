//! [`Spare`]: the handle on the inner service that a call's attempts after the first
//! (retries, hedges) are sent through. A call's first attempt goes through the
//! layer's own handle, as a plain tonic call goes through its client's. A call that
//! may make other attempts keeps a share of the spare (one reference count), and takes
//! a handle of its own from it only when another attempt comes: over tonic's channel,
//! a tower `Buffer` whose clones allocate, a call answered by its first attempt clones
//! nothing.
//!
//! The spare is behind a lock so that a service that is `Send` but not `Sync` (a
//! `BoxCloneService`) can be shared by calls on other threads. The lock is taken only
//! to make an attempt after a call's first, for one clone.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// A share of the spare handle, held by a call that may make other attempts.
#[derive(Debug)]
pub(crate) struct Spare<S>(Arc<Mutex<S>>);

impl<S> Clone for Spare<S> {
    fn clone(&self) -> Self {
        Spare(Arc::clone(&self.0))
    }
}

impl<S: Clone> Spare<S> {
    /// A handle of an attempt's own, cloned from the spare.
    pub(crate) fn handle(&self) -> S {
        // A clone that panicked leaves the handle as it was: still a handle.
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The spare of one layered service and its clones: made from the service's own
/// handle the first time a call needs it.
#[derive(Debug)]
pub(crate) struct SpareSlot<S>(Arc<OnceLock<Spare<S>>>);

impl<S> Clone for SpareSlot<S> {
    fn clone(&self) -> Self {
        SpareSlot(Arc::clone(&self.0))
    }
}

impl<S> Default for SpareSlot<S> {
    fn default() -> Self {
        SpareSlot(Arc::new(OnceLock::new()))
    }
}

impl<S: Clone> SpareSlot<S> {
    /// A share of the spare, made from `inner` (the layered service's own handle) if
    /// there is none yet.
    pub(crate) fn share(&self, inner: &S) -> Spare<S> {
        self.0
            .get_or_init(|| Spare(Arc::new(Mutex::new(inner.clone()))))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A handle that counts its clones, and knows which service it is a handle on.
    #[derive(Debug)]
    struct Handle {
        service: &'static str,
        clones: Arc<AtomicUsize>,
    }

    impl Clone for Handle {
        fn clone(&self) -> Self {
            self.clones.fetch_add(1, Ordering::Relaxed);
            Handle {
                service: self.service,
                clones: self.clones.clone(),
            }
        }
    }

    #[test]
    fn the_spare_is_cloned_once_per_service_and_then_once_per_later_attempt() {
        let clones = Arc::new(AtomicUsize::new(0));
        let count = || clones.load(Ordering::Relaxed);
        let layer = |service| Handle {
            service,
            clones: clones.clone(),
        };
        let slot = SpareSlot::default();
        let copy = slot.clone();
        // Step by step: what is done, and the clones of the inner service made so far.
        let first = slot.share(&layer("a"));
        assert_eq!(count(), 1, "the first share makes the spare");
        let _second = copy.share(&layer("b"));
        assert_eq!(count(), 1, "a clone of the service shares it");
        let _third = first.clone();
        assert_eq!(count(), 1, "a call's share is a reference count");
        let handle = first.handle();
        assert_eq!(
            (count(), handle.service),
            (2, "a"),
            "an attempt's own handle"
        );
        // A slot made afresh (the service was handed out mutably) makes a new spare.
        let fresh = SpareSlot::default().share(&layer("c"));
        let handle = fresh.handle();
        assert_eq!((count(), handle.service), (4, "c"));
    }
}
