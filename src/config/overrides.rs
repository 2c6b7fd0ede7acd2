//! One configuration level's partial settings (global or client), field by field,
//! each value tagged with its [`Source`].

use std::collections::BTreeMap;

use crate::policy::source::Source;

pub(crate) use crate::policy::profile::ProfileField as Field;

/// A value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sourced<T> {
    pub(crate) value: T,
    pub(crate) source: Source,
}

/// Partial settings of one profile; `allow_infinite` is stored as 0/1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProfilePatch {
    pub(crate) fields: [Option<Sourced<u32>>; Field::COUNT],
}

impl ProfilePatch {
    pub(crate) fn set(&mut self, field: Field, value: u32, source: Source) {
        self.fields[field.index()] = Some(Sourced { value, source });
    }
}

/// A route from configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RouteSetting {
    pub(crate) pattern: String,
    pub(crate) profile: String,
    pub(crate) streaming: bool,
    /// A long-lived stream (`None`: the standard table says, else no).
    pub(crate) long_lived: Option<bool>,
    /// May be sent more than once (`None`: the standard table says, else no).
    pub(crate) idempotent: Option<bool>,
    pub(crate) source: Source,
}

/// One level's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Overrides {
    /// Keyed by lowercase profile name.
    pub(crate) profiles: BTreeMap<String, ProfilePatch>,
    pub(crate) routes: Vec<RouteSetting>,
    /// Idempotency marks on routes (pattern → idempotent), applied after the routes.
    pub(crate) idempotency: Vec<Sourced<(String, bool)>>,
    pub(crate) fallback: Option<Sourced<String>>,
}

impl Overrides {
    pub(crate) fn patch(&mut self, profile: &str) -> &mut ProfilePatch {
        self.profiles
            .entry(profile.to_ascii_lowercase())
            .or_default()
    }

    /// Lays `other` over `self`, field by field (`other` wins).
    pub(crate) fn merge(&mut self, other: &Overrides) {
        for (name, patch) in &other.profiles {
            let mine = self.profiles.entry(name.clone()).or_default();
            for (slot, theirs) in mine.fields.iter_mut().zip(&patch.fields) {
                if theirs.is_some() {
                    slot.clone_from(theirs);
                }
            }
        }
        self.routes.extend(other.routes.iter().cloned());
        self.idempotency.extend(other.idempotency.iter().cloned());
        if other.fallback.is_some() {
            self.fallback.clone_from(&other.fallback);
        }
    }
}
