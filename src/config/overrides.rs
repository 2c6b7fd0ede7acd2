//! One configuration level's partial settings (global or client), field by field,
//! each value tagged with its [`Source`].

use std::collections::BTreeMap;

use crate::source::Source;

/// A settable field of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Field {
    Default,
    Min,
    Max,
    AllowInfinite,
    Initial,
    Gap,
    Total,
}

impl Field {
    pub(crate) const ALL: [Field; 7] = [
        Field::Default,
        Field::Min,
        Field::Max,
        Field::AllowInfinite,
        Field::Initial,
        Field::Gap,
        Field::Total,
    ];

    /// The key as written in configuration, relative to the profile.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Field::Default => "default_timeout_ms",
            Field::Min => "min_timeout_ms",
            Field::Max => "max_timeout_ms",
            Field::AllowInfinite => "allow_infinite",
            Field::Initial => "streaming.initial_timeout_ms",
            Field::Gap => "streaming.message_gap_timeout_ms",
            Field::Total => "streaming.total_timeout_ms",
        }
    }

    /// The field written as `key` (`max_timeout_ms`, `streaming.total_timeout_ms`).
    pub(crate) fn from_key(key: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.key() == key)
    }

    /// The field's key inside the `streaming` table, for the streaming fields.
    pub(crate) fn streaming_key(self) -> Option<&'static str> {
        self.key().strip_prefix("streaming.")
    }

    pub(crate) fn is_bool(self) -> bool {
        self == Field::AllowInfinite
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// A value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sourced<T> {
    pub(crate) value: T,
    pub(crate) source: Source,
}

/// Partial settings of one profile; `allow_infinite` is stored as 0/1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProfilePatch {
    pub(crate) fields: [Option<Sourced<u32>>; 7],
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
    pub(crate) source: Source,
}

/// One level's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Overrides {
    /// Keyed by lowercase profile name.
    pub(crate) profiles: BTreeMap<String, ProfilePatch>,
    pub(crate) routes: Vec<RouteSetting>,
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
        if other.fallback.is_some() {
            self.fallback.clone_from(&other.fallback);
        }
    }
}
