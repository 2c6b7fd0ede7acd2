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
}

/// The three ids, each a path of field numbers from the message's root.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IdPaths {
    pub(crate) correlation: Option<&'static [u32]>,
    pub(crate) agent: Option<&'static [u32]>,
    pub(crate) task: Option<&'static [u32]>,
}

impl IdFields {
    /// Where each id is.
    pub(crate) fn paths(self) -> IdPaths {
        let (correlation, agent, task): (&[u32], &[u32], &[u32]) = match self {
            IdFields::Envelope => (&[1, 4], &[], &[]),
            IdFields::CorrelationFirst => (&[1], &[], &[]),
            IdFields::CorrelationSecond => (&[2], &[], &[]),
            IdFields::LogEvent => (&[2], &[3], &[]),
            IdFields::Agent => (&[], &[1], &[]),
            IdFields::AgentTask => (&[], &[1], &[2]),
            IdFields::Registration => (&[], &[1, 1], &[]),
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
            let got = IdFields::of(service, method).map(IdFields::paths);
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
                f.paths().correlation.is_some(),
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
