//! Request path → profile: the SW4-002 routing table of the SW4RM services, custom
//! routes for exact paths and whole services, and the fallback for everything else.
//! A lookup borrows the path and never allocates.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::message::MessageField;
use super::message_ids::IdFields;
use super::source::Source;
pub use super::standard_routes::{StandardRoute, STANDARD_ROUTES};

/// Splits `/package.Service/Method` into service and method; `None` when the path is
/// not of that form (empty, no leading `/`, empty service or method).
///
/// ```
/// use sw4rm_timeouts::route::split_path;
/// assert_eq!(split_path("/sw4rm.registry.RegistryService/Heartbeat"),
///            Some(("sw4rm.registry.RegistryService", "Heartbeat")));
/// assert_eq!(split_path(""), None);
/// assert_eq!(split_path("/OnlyService"), None);
/// ```
pub fn split_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix('/')?;
    // Exactly one more `/`. A plain byte loop: paths are short, and a general
    // substring search costs more to set up than it saves on them.
    let slash = rest.bytes().position(|b| b == b'/')?;
    let (service, method) = (rest.get(..slash)?, rest.get(slash + 1..)?);
    (!service.is_empty() && !method.is_empty() && !method.bytes().any(|b| b == b'/'))
        .then_some((service, method))
}

/// A path already known to be `/service/method`, split where its method starts
/// (no scan).
fn split_at_method(path: &str, method_at: usize) -> Option<(&str, &str)> {
    Some((
        path.get(1..method_at.checked_sub(1)?)?,
        path.get(method_at..)?,
    ))
}

/// A custom route pattern: one method, or every method of a service.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RoutePattern {
    /// `/package.Service/Method`.
    Exact(String),
    /// `/package.Service/*`: the service's full name.
    Service(String),
}

impl RoutePattern {
    /// Parses `/pkg.Service/Method` or `/pkg.Service/*`.
    ///
    /// ```
    /// use sw4rm_timeouts::route::RoutePattern;
    /// assert_eq!(RoutePattern::parse("/a.B/*"), Ok(RoutePattern::Service("a.B".into())));
    /// assert!(RoutePattern::parse("a.B/C").is_err());
    /// ```
    pub fn parse(pattern: &str) -> Result<Self, String> {
        match split_path(pattern) {
            Some((service, "*")) => Ok(RoutePattern::Service(service.to_owned())),
            Some((_, method)) if method.contains('*') => {
                Err("`*` may only stand for the whole method: /package.Service/*".into())
            }
            Some(_) if !pattern.contains('*') => Ok(RoutePattern::Exact(pattern.to_owned())),
            _ => Err("must be /package.Service/Method or /package.Service/*".into()),
        }
    }
}

/// Index of a profile inside a [`crate::ProfileSet`].
pub(crate) type ProfileId = usize;

/// A resolved route.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    pub(crate) profile: ProfileId,
    pub(crate) streaming: bool,
    /// A long-lived stream: no idle timer unless configured.
    pub(crate) long_lived: bool,
    pub(crate) message_field: Option<MessageField>,
    pub(crate) idempotent: bool,
    pub(crate) source: Source,
}

/// How a path was matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Matched {
    /// Index into the exact routes.
    Exact(usize),
    /// A whole-service route.
    Service,
    /// Nothing matched: the fallback profile.
    Fallback,
}

/// The result of a lookup, borrowing the path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lookup<'a> {
    pub(crate) matched: Matched,
    pub(crate) profile: ProfileId,
    pub(crate) streaming: bool,
    pub(crate) long_lived: bool,
    pub(crate) message_field: Option<MessageField>,
    pub(crate) idempotent: bool,
    /// The SW4-003 ids the path's requests carry, by the RPC's name (whatever
    /// profile it runs under); set where the layer finds a call's path, `None` from
    /// the table alone.
    pub(crate) ids: Option<IdFields>,
    pub(crate) service: &'a str,
    pub(crate) method: &'a str,
}

/// A lookup without the path it borrows: what a routed path keeps, to be laid back
/// onto the same path for each call without routing it again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Routed {
    /// The lookup with empty names.
    lookup: Lookup<'static>,
}

impl Lookup<'_> {
    /// The lookup without `path`, which it must have split; `None` otherwise.
    pub(crate) fn routed(&self, path: &str) -> Option<Routed> {
        if split_path(path)? != (self.service, self.method) {
            return None;
        }
        Some(Routed {
            lookup: self.named("", ""),
        })
    }

    /// The same lookup under other names.
    fn named<'b>(&self, service: &'b str, method: &'b str) -> Lookup<'b> {
        Lookup {
            matched: self.matched,
            profile: self.profile,
            streaming: self.streaming,
            long_lived: self.long_lived,
            message_field: self.message_field,
            idempotent: self.idempotent,
            ids: self.ids,
            service,
            method,
        }
    }
}

impl Routed {
    /// The profile the path routes to.
    pub(crate) fn profile(&self) -> ProfileId {
        self.lookup.profile
    }

    /// The lookup of the path this was made from, under the `service` and `method`
    /// that path splits into (split once, when the path was first routed: a call
    /// slices nothing).
    #[inline]
    pub(crate) fn named<'a>(&self, service: &'a str, method: &'a str) -> Lookup<'a> {
        self.lookup.named(service, method)
    }
}

/// The immutable routing table of a [`crate::ProfileSet`].
#[derive(Clone, Debug, Default)]
pub(crate) struct RouteTable {
    /// Exact path → its index in `exact`, and where its method starts (so that a hit
    /// needs no scan of the path).
    exact_index: HashMap<Box<str>, (usize, usize), BuildHasherDefault<PathHasher>>,
    pub(crate) exact: Vec<(Box<str>, Route)>,
    services: HashMap<Box<str>, Route, BuildHasherDefault<PathHasher>>,
}

impl RouteTable {
    /// Adds or replaces an exact route.
    pub(crate) fn insert_exact(&mut self, path: &str, route: Route) {
        match self.exact_index.get(path) {
            Some(&(i, _)) => self.exact[i].1 = route,
            None => {
                let method_at = path.rfind('/').map_or(path.len(), |slash| slash + 1);
                self.exact_index
                    .insert(path.into(), (self.exact.len(), method_at));
                self.exact.push((path.into(), route));
            }
        }
    }

    /// Adds or replaces a whole-service route.
    pub(crate) fn insert_service(&mut self, service: &str, route: Route) {
        self.services.insert(service.into(), route);
    }

    /// The exact route of a path, to change it.
    pub(crate) fn route_mut(&mut self, path: &str) -> Option<&mut Route> {
        let &(i, _) = self.exact_index.get(path)?;
        self.exact.get_mut(i).map(|(_, r)| r)
    }

    /// The route of a whole service, to change it.
    pub(crate) fn service_mut(&mut self, service: &str) -> Option<&mut Route> {
        self.services.get_mut(service)
    }

    /// Whole-service routes, for display.
    pub(crate) fn services(&self) -> impl Iterator<Item = (&str, &Route)> {
        self.services.iter().map(|(k, v)| (k.as_ref(), v))
    }

    /// Exact match first, then the service, then the fallback. `None` when the path
    /// is not a gRPC path.
    pub(crate) fn lookup<'a>(&self, path: &'a str, fallback: ProfileId) -> Option<Lookup<'a>> {
        let exact = self.exact_index.get(path).and_then(|&(i, method_at)| {
            // A stored exact path is a valid gRPC path: split where it was split.
            let (service, method) = split_at_method(path, method_at)?;
            Some((i, service, method))
        });
        let (matched, route, service, method) = match exact {
            Some((i, service, method)) => (
                Matched::Exact(i),
                self.exact.get(i).map(|e| &e.1),
                service,
                method,
            ),
            None => {
                let (service, method) = split_path(path)?;
                match self.services.get(service) {
                    Some(route) => (Matched::Service, Some(route), service, method),
                    None => (Matched::Fallback, None, service, method),
                }
            }
        };
        Some(Lookup {
            matched,
            profile: route.map_or(fallback, |r| r.profile),
            streaming: route.is_some_and(|r| r.streaming),
            long_lived: route.is_some_and(|r| r.long_lived),
            message_field: route.and_then(|r| r.message_field),
            idempotent: route.is_some_and(|r| r.idempotent),
            // Set where a call's path is found (`timeout/state/shared.rs`).
            ids: None,
            service,
            method,
        })
    }
}

/// A fast word-at-a-time hash (the Fx construction) for the routing table's short
/// path keys. Not DoS-resistant, and it needs not be: only configuration inserts
/// keys; request paths are only looked up.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PathHasher(u64);

impl PathHasher {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }
}

impl Hasher for PathHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let (words, rest) = bytes.as_chunks::<8>();
        for word in words {
            self.add(u64::from_le_bytes(*word));
        }
        // What is left after whole words: the last eight bytes as one word,
        // overlapping the words before it (a load, where copying a remainder of any
        // length calls `memcpy`), or, in a path shorter than a word, its bytes.
        let tail = match (rest.is_empty(), bytes.last_chunk::<8>()) {
            (true, _) => 0,
            (false, Some(last)) => u64::from_le_bytes(*last),
            (false, None) => {
                let mut word = [0u8; 8];
                word[..rest.len()].copy_from_slice(rest);
                u64::from_le_bytes(word)
            }
        };
        self.add(tail ^ ((rest.len() as u64) << 56));
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn standard_routes_are_unique_and_well_formed() {
        let mut seen = std::collections::HashSet::new();
        for route in STANDARD_ROUTES.iter() {
            assert!(seen.insert(route.path), "duplicate {}", route.path);
            assert!(split_path(route.path).is_some(), "{}", route.path);
            assert!(
                crate::policy::profile::TimeoutProfile::standard_named(route.profile).is_some()
            );
        }
    }

    /// A standard profile that no standard route uses is a profile nobody gets.
    #[test]
    fn every_standard_profile_has_a_standard_route() {
        let unused: Vec<&str> = crate::policy::profile::STANDARD_PROFILES
            .iter()
            .map(|p| p.name.as_ref())
            .filter(|name| !STANDARD_ROUTES.iter().any(|r| r.profile == *name))
            .collect();
        assert_eq!(
            unused,
            Vec::<&str>::new(),
            "standard profiles without a route"
        );
    }

    #[test]
    fn split_table() {
        let table = [
            ("/a.B/C", Some(("a.B", "C"))),
            ("/a.B/C/", None),
            ("", None),
            ("/", None),
            ("//C", None),
            ("/a.B/", None),
            ("a.B/C", None),
            ("/a/b/C", None),
        ];
        for (path, want) in table {
            assert_eq!(split_path(path), want, "{path:?}");
        }
    }

    #[test]
    fn pattern_table() {
        assert_eq!(
            RoutePattern::parse("/a.B/C"),
            Ok(RoutePattern::Exact("/a.B/C".into()))
        );
        assert_eq!(
            RoutePattern::parse("/a.B/*"),
            Ok(RoutePattern::Service("a.B".into()))
        );
        for bad in ["", "/a.B", "/a.B/C*", "/*/C", "a.B/*", "/a.B/*/x"] {
            assert!(RoutePattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lookup_precedence() {
        let route = |profile| Route {
            profile,
            streaming: false,
            long_lived: false,
            message_field: None,
            idempotent: false,
            source: Source::Client,
        };
        let mut t = RouteTable::default();
        t.insert_exact("/a.B/C", route(1));
        t.insert_service("a.B", route(2));
        assert_eq!(t.lookup("/a.B/C", 9).unwrap().profile, 1);
        assert_eq!(t.lookup("/a.B/D", 9).unwrap().profile, 2);
        let other = t.lookup("/x.Y/Z", 9).unwrap();
        assert_eq!(
            (other.profile, other.matched, other.service, other.method),
            (9, Matched::Fallback, "x.Y", "Z")
        );
        assert!(t.lookup("", 9).is_none());
        t.insert_exact("/a.B/C", route(3));
        assert_eq!(t.lookup("/a.B/C", 9).unwrap().profile, 3);
    }

    /// Every byte of a path counts in its hash, the last ones too, at every length
    /// (the remainder after whole words read as an overlapping word from eight bytes).
    #[test]
    fn every_byte_of_a_path_moves_its_hash() {
        let hash = |path: &[u8]| {
            let mut hasher = PathHasher::default();
            hasher.write(path);
            hasher.finish()
        };
        for len in 1..=41 {
            let path = vec![b'a'; len];
            for at in 0..len {
                let mut other = path.clone();
                other[at] = b'b';
                assert_ne!(hash(&path), hash(&other), "length {len}, byte {at}");
            }
            assert_ne!(hash(&path), hash(&path[..len - 1]), "length {len}");
        }
    }

    proptest! {
        #[test]
        fn lookup_never_panics(path in ".{0,64}") {
            let t = RouteTable::default();
            let _ = t.lookup(&path, 0);
        }

        /// A gRPC path is `/`, a service, `/`, a method: both non-empty, no other `/`.
        #[test]
        fn split_finds_exactly_the_grpc_paths(path in "[a./]{0,12}") {
            let parts: Vec<&str> = path.split('/').collect();
            let want = match parts[..] {
                ["", service, method] if !service.is_empty() && !method.is_empty() => {
                    Some((service, method))
                }
                _ => None,
            };
            prop_assert_eq!(split_path(&path), want);
        }

        /// A lookup kept without its path and laid back onto the same path is the
        /// same lookup, for every kind of match; it is kept only for that path.
        #[test]
        fn a_routed_lookup_lays_back_onto_its_own_path(
            path in "/[ab.]{0,4}/[ab.]{0,4}",
            other in "[ab./]{0,10}",
        ) {
            let route = |profile| Route {
                profile,
                streaming: profile == 1,
                long_lived: false,
                message_field: None,
                idempotent: profile == 2,
                source: Source::Client,
            };
            let mut t = RouteTable::default();
            t.insert_exact("/a.b/a", route(1));
            t.insert_service("b.a", route(2));
            let Some(want) = t.lookup(&path, 9) else { return Ok(()) };
            let routed = want.routed(&path).expect("its own path");
            let (service, method) = split_path(&path).expect("a routed path splits");
            let got = routed.named(service, method);
            prop_assert_eq!(
                (got.matched, got.profile, got.streaming, got.idempotent, got.service, got.method),
                (want.matched, want.profile, want.streaming, want.idempotent, want.service, want.method)
            );
            prop_assert_eq!(want.routed(&other).is_some(), other == path);
        }
    }
}
