//! Shared state of the embedded server: scripts in, call records out.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::script::{Script, ServedCall, ServedEnd};

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

/// How many call records a server keeps by default: the last 10,000 (a few MB: each
/// record is about 200 bytes and its request's bytes).
pub const DEFAULT_KEPT_CALLS: usize = 10_000;

/// The last calls (at most `keep`, the oldest dropped first), and how many calls each
/// RPC has had, so that a call knows which of its RPC's calls it is without an index
/// that grows with every call.
#[derive(Debug)]
pub(crate) struct Calls {
    pub(crate) kept: VecDeque<ServedCall>,
    /// The id of `kept[0]` (ids count every call, kept or not).
    first: usize,
    next: usize,
    by_path: HashMap<&'static str, usize>,
    keep: usize,
}

impl Default for Calls {
    fn default() -> Self {
        Calls {
            kept: VecDeque::new(),
            first: 0,
            next: 0,
            by_path: HashMap::new(),
            keep: DEFAULT_KEPT_CALLS,
        }
    }
}

impl Calls {
    /// The record of call `id`, while it is kept.
    fn get_mut(&mut self, id: usize) -> Option<&mut ServedCall> {
        let i = id.checked_sub(self.first)?;
        self.kept.get_mut(i)
    }

    /// The record of call `id`, while it is kept.
    pub(crate) fn get(&self, id: usize) -> Option<&ServedCall> {
        self.kept.get(id.checked_sub(self.first)?)
    }

    /// Drops the oldest records beyond `keep`.
    fn trim(&mut self) {
        while self.kept.len() > self.keep {
            self.kept.pop_front();
            self.first += 1;
        }
    }

    /// Lets go of every kept record (ids go on counting).
    fn forget(&mut self) -> VecDeque<ServedCall> {
        self.first = self.next;
        std::mem::take(&mut self.kept)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking test thread must not hide the records from the others.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl State {
    pub(crate) fn set_script(&self, path: &'static str, script: Script) {
        let since = lock(&self.calls).by_path.get(path).copied().unwrap_or(0);
        lock(&self.scripts).insert(path, (script, since));
    }

    /// The RPC's script, and how many of the RPC's calls came before it was set (the
    /// calls after it count from there).
    pub(crate) fn script(&self, path: &str) -> (Script, usize) {
        lock(&self.scripts).get(path).cloned().unwrap_or_default()
    }

    pub(crate) fn calls(&self) -> Vec<ServedCall> {
        lock(&self.calls).kept.iter().cloned().collect()
    }

    /// The kept records, taken away.
    pub(crate) fn take_calls(&self) -> Vec<ServedCall> {
        lock(&self.calls).forget().into()
    }

    /// Forgets the kept records.
    pub(crate) fn clear_calls(&self) {
        lock(&self.calls).forget();
    }

    /// Keeps the last `n` records from now on (the oldest beyond that dropped now).
    pub(crate) fn keep_calls(&self, n: usize) {
        let mut calls = lock(&self.calls);
        calls.keep = n;
        calls.trim();
        calls.kept.shrink_to(n);
    }

    /// Runs `f` over the kept records under the log's lock, copying nothing.
    pub(crate) fn with_calls<R>(&self, f: impl FnOnce(&Calls, &[ServedCall]) -> R) -> R {
        let mut calls = lock(&self.calls);
        calls.kept.make_contiguous();
        let calls = &*calls;
        f(calls, calls.kept.as_slices().0)
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
        let (id, nth_of_path) = {
            let mut calls = lock(&self.calls);
            let id = calls.next;
            calls.next += 1;
            let of_path = calls.by_path.entry(path).or_default();
            let nth_of_path = *of_path;
            *of_path += 1;
            calls.kept.push_back(ServedCall {
                id,
                path,
                grpc_timeout,
                deadline,
                metadata: custom,
                outcome: ServedEnd::Running,
                messages_sent: 0,
                request: request.get_ref().encode_to_vec().into(),
                previous_attempts,
            });
            calls.trim();
            (id, nth_of_path)
        };
        self.changed.notify_waiters();
        CallGuard {
            state: self.clone(),
            id,
            nth_of_path,
            finished: false,
        }
    }
}

/// Marks the call `Cancelled` when dropped before [`CallGuard::finish`].
#[derive(Debug)]
pub(crate) struct CallGuard {
    state: Arc<State>,
    id: usize,
    /// How many calls of the same RPC came before this one.
    nth_of_path: usize,
    finished: bool,
}

impl CallGuard {
    fn set(&self, outcome: ServedEnd) {
        if let Some(c) = lock(&self.state.calls).get_mut(self.id) {
            c.outcome = outcome;
        }
        self.state.changed.notify_waiters();
    }

    /// How many calls of the same RPC came before this one, counting from the RPC's
    /// call `since` (when its script was set).
    pub(crate) fn nth_of_path(&self, since: usize) -> usize {
        self.nth_of_path.saturating_sub(since)
    }

    pub(crate) fn sent_message(&self) {
        if let Some(c) = lock(&self.state.calls).get_mut(self.id) {
            c.messages_sent += 1;
        }
    }

    pub(crate) fn finish(mut self) {
        self.finished = true;
        self.set(ServedEnd::Completed);
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.set(ServedEnd::Cancelled);
        }
    }
}
