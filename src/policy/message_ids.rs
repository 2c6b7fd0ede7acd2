//! The SW4-003 ids a request message carries (`correlation_id`, `agent_id`,
//! `task_id`): which field of which SW4RM request holds each, and the bound an id is
//! cut to before the layer stores or logs it.
//!
//! Rule: a call's `correlation_id` is read from its request wherever the request has
//! one (SW4-003 §4.3: it is in every log line the layer writes for the call, and on
//! the call's span); `agent_id` and `task_id` are read for the span when the layer
//! asks for them (`with_agent_ids`), since the busiest RPC there is, the heartbeat,
//! has one. An id is text from the caller's message: it is cut to [`ID_LIMIT`] bytes
//! on a character boundary, and one with a control character (a forged log line) or
//! none at all is not read.

use super::route::{split_path, Lookup, RoutePattern};

/// At most this many bytes of an id are kept.
pub(crate) const ID_LIMIT: usize = 128;

/// The shape of a request that carries SW4-003 ids (which fields, from the message's
/// root, hold each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IdFields {
    /// `SendMessageRequest.msg.correlation_id` (fields 1 → 4).
    Envelope,
    /// `correlation_id = 1` (`CancelDelegation`).
    CorrelationFirst,
    /// `correlation_id = 2` (`NegotiationOpen`).
    CorrelationSecond,
    /// `LogEvent`: `correlation_id = 2`, `agent_id = 3`.
    LogEvent,
    /// `agent_id = 1` (a heartbeat, most requests that name the agent).
    Agent,
    /// `agent_id = 1`, `task_id = 2` (a task's requests).
    AgentTask,
    /// `RegisterAgentRequest.agent.agent_id` (fields 1 → 1).
    Registration,
    /// The ids a layer was told of for the route ([`MessageIds`]): the `at`th of
    /// its [`DeclaredIds`], and whether they name a `correlation_id`.
    Declared { at: u32, correlation: bool },
}

/// The three ids, each a path of field numbers from the message's root.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IdPaths {
    pub(crate) correlation: Option<&'static [u32]>,
    pub(crate) agent: Option<&'static [u32]>,
    pub(crate) task: Option<&'static [u32]>,
}

impl IdFields {
    /// Where each id of a SW4RM shape is; a declared shape's are in its layer's
    /// table, read through [`DeclaredIds::paths`] (the one way the layer reads any).
    fn standard(self) -> IdPaths {
        let (correlation, agent, task): (&[u32], &[u32], &[u32]) = match self {
            IdFields::Envelope => (&[1, 4], &[], &[]),
            IdFields::CorrelationFirst => (&[1], &[], &[]),
            IdFields::CorrelationSecond => (&[2], &[], &[]),
            IdFields::LogEvent => (&[2], &[3], &[]),
            IdFields::Agent => (&[], &[1], &[]),
            IdFields::AgentTask => (&[], &[1], &[2]),
            IdFields::Registration => (&[], &[1, 1], &[]),
            // Not a SW4RM shape: `DeclaredIds::paths` reads it from its table.
            IdFields::Declared { .. } => (&[], &[], &[]),
        };
        let some = |path: &'static [u32]| (!path.is_empty()).then_some(path);
        IdPaths {
            correlation: some(correlation),
            agent: some(agent),
            task: some(task),
        }
    }

    /// Whether the request carries a `correlation_id` (read on every call).
    #[inline(always)]
    pub(crate) fn has_correlation(self) -> bool {
        matches!(
            self,
            IdFields::Envelope
                | IdFields::CorrelationFirst
                | IdFields::CorrelationSecond
                | IdFields::LogEvent
                | IdFields::Declared {
                    correlation: true,
                    ..
                }
        )
    }

    /// The ids the requests of `service`'s `method` carry, for the SW4RM RPCs whose
    /// requests have any.
    pub(crate) fn of(service: &str, method: &str) -> Option<IdFields> {
        let ids = match (service, method) {
            ("sw4rm.router.RouterService", "SendMessage") => IdFields::Envelope,
            ("sw4rm.handoff.HandoffService", "CancelDelegation") => IdFields::CorrelationFirst,
            ("sw4rm.negotiation.NegotiationService", "Open") => IdFields::CorrelationSecond,
            ("sw4rm.logging.LoggingService", "Ingest") => IdFields::LogEvent,
            ("sw4rm.registry.RegistryService", "RegisterAgent") => IdFields::Registration,
            ("sw4rm.registry.RegistryService", "Heartbeat" | "DeregisterAgent")
            | ("sw4rm.router.RouterService", "StreamIncoming" | "AckDelivery")
            | ("sw4rm.handoff.HandoffService", "GetPendingHandoffs")
            | (
                "sw4rm.scheduler.SchedulerService",
                "ShutdownAgent" | "PollActivityBuffer" | "PurgeActivity",
            )
            | ("sw4rm.worktree.WorktreeService", "Bind" | "Unbind" | "RequestSwitch" | "Status") => {
                IdFields::Agent
            }
            (
                "sw4rm.scheduler.SchedulerService",
                "SubmitTask" | "RequestPreemption" | "CancelTask" | "GetTaskStatus",
            ) => IdFields::AgentTask,
            _ => return None,
        };
        Some(ids)
    }
}

/// Where the request message of an RPC carries SW4-003's ids, each as the protobuf
/// field numbers that lead to it from the message's root (`&[1, 4]`: field 4 of the
/// message in field 1): for RPCs of your own, or to read other fields of SW4RM's.
/// Each field is a string (or bytes holding text); a number no field has reads
/// nothing. Given to [`crate::TimeoutProfileLayer::with_message_ids`] and to
/// [`crate::scope::InboundDeadlineLayer::with_message_ids`] for its server span.
///
/// ```
/// use sw4rm_timeouts::MessageIds;
/// // message RunRequest { Header header = 1; string task_id = 2; }
/// // message Header { string agent_id = 1; string correlation_id = 3; }
/// let ids = MessageIds::new().correlation_id(&[1, 3]).agent_id(&[1, 1]).task_id(&[2]);
/// assert_ne!(ids, MessageIds::new());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct MessageIds(IdPaths);

impl MessageIds {
    /// No ids: given for a route, the layer reads none there.
    pub const fn new() -> Self {
        MessageIds(IdPaths {
            correlation: None,
            agent: None,
            task: None,
        })
    }

    /// The `correlation_id`'s field numbers: read on every call of the route, named
    /// in the layer's log lines for the call and on its span.
    pub const fn correlation_id(mut self, fields: &'static [u32]) -> Self {
        self.0.correlation = path(fields);
        self
    }

    /// The `agent_id`'s field numbers: read for the span when the layer reads
    /// agent ids (`with_agent_ids`; a server span always).
    pub const fn agent_id(mut self, fields: &'static [u32]) -> Self {
        self.0.agent = path(fields);
        self
    }

    /// The `task_id`'s field numbers, read as the `agent_id` is.
    pub const fn task_id(mut self, fields: &'static [u32]) -> Self {
        self.0.task = path(fields);
        self
    }
}

/// A path of field numbers, `None` when empty.
const fn path(fields: &'static [u32]) -> Option<&'static [u32]> {
    match fields.is_empty() {
        true => None,
        false => Some(fields),
    }
}

/// The ids a layer was told of, by route ([`MessageIds`]): they replace what the
/// layer knows of SW4RM's RPCs on the same route; an exact route wins over a whole
/// service.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeclaredIds(Vec<(Declared, IdPaths)>);

/// A route ids were declared for: a service's name, and the method's (`None` for
/// every method of the service), split once so that a call compares names.
type Declared = (Box<str>, Option<Box<str>>);

impl DeclaredIds {
    /// Sets the ids of `route`, replacing those set before.
    pub(crate) fn set(&mut self, route: RoutePattern, ids: MessageIds) {
        let route: Declared = match &route {
            RoutePattern::Service(service) => (service.as_str().into(), None),
            // A path that does not split (made without `RoutePattern::parse`) keeps an
            // empty method, which no call has.
            RoutePattern::Exact(path) => match split_path(path) {
                Some((service, method)) => (service.into(), Some(method.into())),
                None => (path.as_str().into(), Some("".into())),
            },
        };
        self.0.retain(|(r, _)| *r != route);
        self.0.push((route, ids.0));
    }

    /// The ids of `service`'s `method`: those declared for it, else SW4RM's own.
    /// Nothing is looked up when none were declared.
    #[inline(always)]
    pub(crate) fn of(
        &self,
        service: &str,
        method: &str,
        known: Option<IdFields>,
    ) -> Option<IdFields> {
        match self.0.is_empty() {
            true => known,
            false => self.declared(service, method).unwrap_or(known),
        }
    }

    /// [`of`](Self::of) the route a call was found on.
    #[inline(always)]
    pub(crate) fn of_route(&self, route: &Lookup<'_>) -> Option<IdFields> {
        self.of(route.service, route.method, route.ids)
    }

    /// The declared ids of `service`'s `method`: `Some(None)` when the route was
    /// declared to carry none.
    #[inline(never)]
    fn declared(&self, service: &str, method: &str) -> Option<Option<IdFields>> {
        let on = |(s, m): &Declared, want: Option<&str>| **s == *service && m.as_deref() == want;
        let at = (self.0.iter().position(|(r, _)| on(r, Some(method))))
            .or_else(|| self.0.iter().position(|(r, _)| on(r, None)))?;
        let ids = self.0[at].1;
        let none = ids == IdPaths::default();
        let at = u32::try_from(at).ok()?;
        let correlation = ids.correlation.is_some();
        Some((!none).then_some(IdFields::Declared { at, correlation }))
    }

    /// Where each of `ids`' fields is.
    pub(crate) fn paths(&self, ids: IdFields) -> IdPaths {
        match ids {
            IdFields::Declared { at, .. } => {
                let found = self.0.get(at as usize);
                found.map(|(_, paths)| *paths).unwrap_or_default()
            }
            standard => standard.standard(),
        }
    }
}

/// `id` as the layer keeps it: cut to [`ID_LIMIT`] bytes on a character boundary;
/// `None` when it is empty or holds a control character.
pub(crate) fn bounded(id: &str) -> Option<&str> {
    if id.is_empty() || id.chars().any(char::is_control) {
        return None;
    }
    let end = (0..=ID_LIMIT.min(id.len()))
        .rev()
        .find(|&i| id.is_char_boundary(i))
        .unwrap_or(0);
    Some(&id[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Declared ids: none declared reads SW4RM's own; an exact route wins over its
    /// service; a route declared with none reads none; a second declaration of a
    /// route replaces the first.
    #[test]
    fn declared_ids_replace_the_known_ones() {
        let route = |p: &str| RoutePattern::parse(p).unwrap();
        let mut declared = DeclaredIds::default();
        let heartbeat = ("sw4rm.registry.RegistryService", "Heartbeat");
        let known = IdFields::of(heartbeat.0, heartbeat.1);
        assert_eq!(declared.of(heartbeat.0, heartbeat.1, known), known);

        declared.set(
            route("/acme.Tools/*"),
            MessageIds::new().correlation_id(&[9]),
        );
        declared.set(
            route("/acme.Tools/Run"),
            MessageIds::new().correlation_id(&[2, 5]).task_id(&[1]),
        );
        declared.set(
            route("/sw4rm.registry.RegistryService/Heartbeat"),
            MessageIds::new(),
        );
        declared.set(route("/acme.Other/Go"), MessageIds::new().agent_id(&[3]));
        declared.set(route("/acme.Other/Go"), MessageIds::new().agent_id(&[4]));
        // Not a path (made without `parse`): kept, matching no call.
        declared.set(
            RoutePattern::Exact("acme.Other".into()),
            MessageIds::new().task_id(&[7]),
        );
        let paths = |service: &str, method: &str| {
            let known = IdFields::of(service, method);
            declared
                .of(service, method, known)
                .map(|ids| (ids.has_correlation(), declared.paths(ids)))
        };
        let p = |c: Option<&'static [u32]>,
                 a: Option<&'static [u32]>,
                 t: Option<&'static [u32]>| IdPaths {
            correlation: c,
            agent: a,
            task: t,
        };
        type Row<'a> = ((&'a str, &'a str), Option<(bool, IdPaths)>);
        let rows: [Row<'_>; 6] = [
            (
                ("acme.Tools", "Run"),
                Some((true, p(Some(&[2, 5]), None, Some(&[1])))),
            ),
            (
                ("acme.Tools", "Stop"),
                Some((true, p(Some(&[9]), None, None))),
            ),
            (heartbeat, None),
            (
                ("acme.Other", "Go"),
                Some((false, p(None, Some(&[4]), None))),
            ),
            (("acme.Other", "Stop"), None),
            (
                ("sw4rm.router.RouterService", "SendMessage"),
                Some((true, IdFields::Envelope.standard())),
            ),
        ];
        for ((service, method), want) in rows {
            assert_eq!(paths(service, method), want, "{service}/{method}");
        }
    }

    #[test]
    fn each_shape_names_its_fields() {
        let rows: [(&str, &str, Option<IdPaths>); 6] = [
            (
                "sw4rm.router.RouterService",
                "SendMessage",
                Some(IdPaths {
                    correlation: Some(&[1, 4]),
                    ..IdPaths::default()
                }),
            ),
            (
                "sw4rm.logging.LoggingService",
                "Ingest",
                Some(IdPaths {
                    correlation: Some(&[2]),
                    agent: Some(&[3]),
                    task: None,
                }),
            ),
            (
                "sw4rm.registry.RegistryService",
                "Heartbeat",
                Some(IdPaths {
                    agent: Some(&[1]),
                    ..IdPaths::default()
                }),
            ),
            (
                "sw4rm.scheduler.SchedulerService",
                "SubmitTask",
                Some(IdPaths {
                    correlation: None,
                    agent: Some(&[1]),
                    task: Some(&[2]),
                }),
            ),
            (
                "sw4rm.registry.RegistryService",
                "RegisterAgent",
                Some(IdPaths {
                    agent: Some(&[1, 1]),
                    ..IdPaths::default()
                }),
            ),
            ("sw4rm.tool.ToolService", "Call", None),
        ];
        for (service, method, want) in rows {
            let got = IdFields::of(service, method).map(IdFields::standard);
            assert_eq!(got, want, "{service}/{method}");
        }
    }

    #[test]
    fn the_correlation_routes_are_the_four_with_a_correlation_id() {
        let with: Vec<_> = [
            IdFields::Envelope,
            IdFields::CorrelationFirst,
            IdFields::CorrelationSecond,
            IdFields::LogEvent,
            IdFields::Agent,
            IdFields::AgentTask,
            IdFields::Registration,
        ]
        .into_iter()
        .filter(|f| {
            assert_eq!(
                f.has_correlation(),
                f.standard().correlation.is_some(),
                "{f:?}"
            );
            f.has_correlation()
        })
        .collect();
        assert_eq!(with.len(), 4);
    }

    #[test]
    fn ids_are_bounded() {
        let long = "é".repeat(100);
        let rows = [
            ("corr-7", Some("corr-7")),
            ("", None),
            ("a\nfake log line", None),
            ("tab\there", None),
            (long.as_str(), Some(&long[..128])),
        ];
        for (id, want) in rows {
            assert_eq!(bounded(id), want, "{id:?}");
        }
    }

    proptest! {
        #[test]
        fn a_bounded_id_is_a_prefix_within_the_limit(id in ".{0,200}") {
            if let Some(kept) = bounded(&id) {
                prop_assert!(kept.len() <= ID_LIMIT);
                prop_assert!(id.starts_with(kept));
                prop_assert!(!kept.chars().any(char::is_control));
            }
        }
    }
}
