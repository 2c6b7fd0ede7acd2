//! Which messages of a stream are progress (the idle limit of long work): a rule on
//! the decoded message, or a trait the message type implements. By default every
//! message is progress.

use std::fmt;
use std::sync::Arc;

use super::route::{split_path, RoutePattern};

/// What one message of a stream says about the work behind it.
///
/// ```
/// use sw4rm_timeouts::Heard;
/// assert!(Heard::progress(Some(7)).is_progress());
/// assert_eq!(Heard::progress(Some(7)).marker(), Some(7));
/// assert!(!Heard::KeepAlive.is_progress());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Heard {
    /// The work moved: the idle limit starts again. `marker` is the message's own
    /// position in the work when it has one (`ToolFrame.frame_no`, `StreamItem.seq`),
    /// reported in a timeout's details.
    Progress {
        /// The message's progress marker.
        marker: Option<u64>,
    },
    /// The peer is alive but the work did not move (a keep-alive): resets the gap
    /// timer, not the idle limit.
    KeepAlive,
}

impl Heard {
    /// Progress, with the message's marker if it has one.
    pub fn progress(marker: Option<u64>) -> Self {
        Heard::Progress { marker }
    }

    /// Whether the message is progress.
    pub fn is_progress(self) -> bool {
        matches!(self, Heard::Progress { .. })
    }

    /// The progress marker, if the message is progress and has one.
    pub fn marker(self) -> Option<u64> {
        match self {
            Heard::Progress { marker } => marker,
            Heard::KeepAlive => None,
        }
    }
}

/// A message type that says by itself whether it is progress; the crate implements it
/// for `ToolFrame` (`ToolService/CallStream`) and `StreamItem`
/// (`RouterService/StreamIncoming`). Use it with [`ProgressRule::of`].
///
/// ```
/// use sw4rm_timeouts::{Heard, ProgressMessage};
/// use sw4rm_timeouts::proto::sw4rm::tool::ToolFrame;
/// let work = ToolFrame { frame_no: 4, data: b"rows 300-400".to_vec(), ..Default::default() };
/// assert_eq!(work.heard(), Heard::progress(Some(4)));
/// // No data, no summary, not final: a keep-alive.
/// assert_eq!(ToolFrame { frame_no: 4, ..Default::default() }.heard(), Heard::KeepAlive);
/// ```
pub trait ProgressMessage: prost::Message + Default + 'static {
    /// What this message says about progress.
    fn heard(&self) -> Heard;
}

/// Which messages of a stream are progress: a rule applied once to each complete
/// message the layer receives (decoded with `prost`, so it costs one decode of the
/// message more; no rule costs nothing). A message the rule cannot decode, and a
/// compressed one, count as progress: the idle limit never cuts a stream for what it
/// cannot see into.
///
/// Set it per route with [`crate::TimeoutProfileLayer::with_progress`] or per call with
/// [`crate::CallProgress`]; without one every message is progress.
///
/// ```
/// use sw4rm_timeouts::{Heard, ProgressRule};
/// use sw4rm_timeouts::proto::sw4rm::tool::ToolFrame;
/// use prost::Message;
/// // The crate's own reading of ToolFrame...
/// let rule = ProgressRule::of::<ToolFrame>();
/// // ...or your own: only frames with data are progress.
/// let mine = ProgressRule::decoded(|f: &ToolFrame| match f.data.is_empty() {
///     true => Heard::KeepAlive,
///     false => Heard::progress(Some(f.frame_no)),
/// });
/// let summary = ToolFrame { frame_no: 2, summary: b"50%".to_vec(), ..Default::default() }.encode_to_vec();
/// assert_eq!(rule.read(&summary), Heard::progress(Some(2)));
/// assert_eq!(mine.read(&summary), Heard::KeepAlive);
/// ```
#[derive(Clone)]
pub struct ProgressRule(Arc<ReadFn>);

/// A rule as the layer calls it: on one message's protobuf bytes.
type ReadFn = dyn Fn(&[u8]) -> Heard + Send + Sync;

impl ProgressRule {
    /// The message type's own [`ProgressMessage`] reading.
    pub fn of<M: ProgressMessage>() -> Self {
        ProgressRule::decoded(M::heard)
    }

    /// A rule on the decoded message `M`.
    pub fn decoded<M, F>(rule: F) -> Self
    where
        M: prost::Message + Default,
        F: Fn(&M) -> Heard + Send + Sync + 'static,
    {
        ProgressRule(Arc::new(move |payload: &[u8]| match M::decode(payload) {
            Ok(message) => rule(&message),
            Err(_) => Heard::progress(None),
        }))
    }

    /// A rule on the message's protobuf bytes themselves (the crate's standard
    /// rules, which read a field or two without decoding the message).
    pub(crate) fn raw(rule: fn(&[u8]) -> Heard) -> Self {
        ProgressRule(Arc::new(rule))
    }

    /// What the rule says of one message's protobuf bytes.
    pub fn read(&self, payload: &[u8]) -> Heard {
        (self.0)(payload)
    }
}

impl fmt::Debug for ProgressRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressRule(..)")
    }
}

impl PartialEq for ProgressRule {
    /// The same rule (one `Arc`), not two rules that happen to agree.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ProgressRule {}

/// The layer's progress rules by route: an exact method wins over its service, and
/// any rule set wins over the crate's standard ones.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProgressRoutes {
    set: Vec<(RoutePattern, ProgressRule)>,
    standard: Vec<(RoutePattern, ProgressRule)>,
}

/// No rules (every message of every stream is progress).
pub(crate) static NO_PROGRESS_RULES: ProgressRoutes = ProgressRoutes {
    set: Vec::new(),
    standard: Vec::new(),
};

impl ProgressRoutes {
    /// These rules, with `rule` as the standard one of `pattern`: used where no rule
    /// set with [`set`](Self::set) applies.
    pub(crate) fn with_standard(mut self, pattern: RoutePattern, rule: ProgressRule) -> Self {
        self.standard.push((pattern, rule));
        self
    }

    /// Sets the rule of `pattern`, replacing one set before.
    pub(crate) fn set(&mut self, pattern: RoutePattern, rule: ProgressRule) {
        self.set.retain(|(p, _)| *p != pattern);
        self.set.push((pattern, rule));
    }

    /// The rule for `service`/`method`, if any.
    pub(crate) fn find<'a>(&'a self, service: &str, method: &str) -> Option<&'a ProgressRule> {
        let exact = |p: &str| split_path(p).is_some_and(|(s, m)| s == service && m == method);
        let find = |rules: &'a [(RoutePattern, ProgressRule)]| {
            let pick = |want: &dyn Fn(&RoutePattern) -> bool| {
                rules.iter().find(|(p, _)| want(p)).map(|(_, rule)| rule)
            };
            pick(&|p| matches!(p, RoutePattern::Exact(path) if exact(path)))
                .or_else(|| pick(&|p| matches!(p, RoutePattern::Service(s) if s == service)))
        };
        find(&self.set).or_else(|| find(&self.standard))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undecodable_messages_are_progress() {
        let rule = ProgressRule::decoded(|_: &prost_types::Duration| Heard::KeepAlive);
        assert_eq!(rule.read(&[0xff, 0xff]), Heard::progress(None));
        assert_eq!(rule.read(&[]), Heard::KeepAlive);
        assert_eq!(rule, rule.clone());
        assert_ne!(
            rule,
            ProgressRule::decoded(|_: &prost_types::Duration| Heard::KeepAlive)
        );
    }

    #[test]
    fn an_exact_route_wins_over_its_service() {
        let keep = ProgressRule::decoded(|_: &prost_types::Duration| Heard::KeepAlive);
        let every = ProgressRule::decoded(|_: &prost_types::Duration| Heard::progress(None));
        let mut routes = ProgressRoutes::default();
        routes.set(RoutePattern::Service("a.B".into()), every.clone());
        routes.set(RoutePattern::Exact("/a.B/Watch".into()), keep.clone());
        assert_eq!(routes.find("a.B", "Watch"), Some(&keep));
        assert_eq!(routes.find("a.B", "Other"), Some(&every));
        assert_eq!(routes.find("a.C", "Watch"), None);
        // Set again: replaced, not added.
        routes.set(RoutePattern::Exact("/a.B/Watch".into()), every.clone());
        assert_eq!(routes.find("a.B", "Watch"), Some(&every));
        assert_eq!(NO_PROGRESS_RULES.find("a.B", "Watch"), None);
        // A standard rule applies only where no rule set does, its service's included.
        let standard = ProgressRule::raw(|_| Heard::KeepAlive);
        let routes = ProgressRoutes::default()
            .with_standard(RoutePattern::Exact("/a.C/Watch".into()), standard.clone());
        assert_eq!(routes.find("a.C", "Watch"), Some(&standard));
        let mut mine = routes.clone();
        mine.set(RoutePattern::Service("a.C".into()), every.clone());
        assert_eq!(mine.find("a.C", "Watch"), Some(&every));
    }
}
