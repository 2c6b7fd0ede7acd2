//! Shared state of the embedded server: scripts in, call records out.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::script::{CallRecord, Outcome, Script};

#[derive(Debug, Default)]
pub(crate) struct State {
    /// Each RPC's script, and how many calls the server had seen when it was set.
    scripts: Mutex<HashMap<&'static str, (Script, usize)>>,
    calls: Mutex<Calls>,
    pub(crate) changed: Notify,
    /// The last `seq` given to an inbound message.
    last_seq: AtomicI64,
    /// Deliveries (agent, seq) sent and not yet acknowledged.
    pending: Mutex<HashSet<(String, i64)>>,
}

/// Every call, and each RPC's call ids in order (so that counting an RPC's calls
/// since its script was set is a binary search, not a scan of every call).
#[derive(Debug, Default)]
struct Calls {
    all: Vec<CallRecord>,
    by_path: HashMap<&'static str, Vec<usize>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not hide the records from the others.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl State {
    pub(crate) fn set_script(&self, path: &'static str, script: Script) {
        let since = lock(&self.calls).all.len();
        lock(&self.scripts).insert(path, (script, since));
    }

    /// The RPC's script, and the id from which its calls count (those made after it
    /// was set).
    pub(crate) fn script(&self, path: &str) -> (Script, usize) {
        lock(&self.scripts).get(path).cloned().unwrap_or_default()
    }

    pub(crate) fn calls(&self) -> Vec<CallRecord> {
        lock(&self.calls).all.clone()
    }

    /// A `seq` no inbound message of this server had (from 1).
    pub(crate) fn next_seq(&self) -> i64 {
        self.last_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// `seq` went out on `agent`'s inbound stream.
    pub(crate) fn delivered(&self, agent: &str, seq: i64) {
        lock(&self.pending).insert((agent.to_owned(), seq));
    }

    /// Acknowledges a delivery: true if it was pending (and is no longer).
    pub(crate) fn acknowledge(&self, agent: &str, seq: i64) -> bool {
        lock(&self.pending).remove(&(agent.to_owned(), seq))
    }

    pub(crate) fn begin(
        self: &Arc<Self>,
        path: &'static str,
        request: &tonic::Request<impl prost::Message>,
    ) -> CallGuard {
        let metadata = request.metadata();
        let grpc_timeout = metadata
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let deadline = grpc_timeout
            .as_deref()
            .and_then(|t| crate::wire::grpc_timeout::parse(t.as_bytes()).ok());
        let previous_attempts = metadata
            .get("grpc-previous-rpc-attempts")
            .and_then(|v| v.to_str().ok()?.parse().ok());
        let custom = metadata
            .iter()
            .filter_map(|entry| match entry {
                tonic::metadata::KeyAndValueRef::Ascii(k, v) => {
                    Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned()))
                }
                tonic::metadata::KeyAndValueRef::Binary(..) => None,
            })
            .filter(|(k, _)| {
                !k.starts_with("grpc-") && k != "te" && k != "content-type" && k != "user-agent"
            })
            .collect();
        let id = {
            let mut calls = lock(&self.calls);
            let id = calls.all.len();
            calls.by_path.entry(path).or_default().push(id);
            calls.all.push(CallRecord {
                id,
                path,
                grpc_timeout,
                deadline,
                metadata: custom,
                outcome: Outcome::Running,
                messages_sent: 0,
                request: request.get_ref().encode_to_vec().into(),
                previous_attempts,
            });
            id
        };
        self.changed.notify_waiters();
        CallGuard {
            state: self.clone(),
            id,
            finished: false,
        }
    }
}

/// Marks the call `Cancelled` when dropped before [`CallGuard::finish`].
#[derive(Debug)]
pub(crate) struct CallGuard {
    state: Arc<State>,
    id: usize,
    finished: bool,
}

impl CallGuard {
    fn set(&self, outcome: Outcome) {
        if let Some(c) = lock(&self.state.calls).all.get_mut(self.id) {
            c.outcome = outcome;
        }
        self.state.changed.notify_waiters();
    }

    /// How many calls of the same RPC came before this one, counting from call `since`
    /// (when its script was set).
    pub(crate) fn nth_of_path(&self, since: usize) -> usize {
        let calls = lock(&self.state.calls);
        let Some(ids) = calls
            .all
            .get(self.id)
            .and_then(|c| calls.by_path.get(c.path))
        else {
            return 0;
        };
        let before = |bound: usize| ids.partition_point(|&id| id < bound);
        before(self.id).saturating_sub(before(since))
    }

    pub(crate) fn sent_message(&self) {
        if let Some(c) = lock(&self.state.calls).all.get_mut(self.id) {
            c.messages_sent += 1;
        }
    }

    pub(crate) fn finish(mut self) {
        self.finished = true;
        self.set(Outcome::Completed);
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.set(Outcome::Cancelled);
        }
    }
}
