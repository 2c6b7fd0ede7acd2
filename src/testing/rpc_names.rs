//! The RPC names [`TestServer::script`](super::TestServer::script) and
//! [`TestServer::calls_to`](super::TestServer::calls_to) take: a path the embedded
//! server answers, or a method name only one of its services has.

use crate::policy::route::STANDARD_ROUTES;

/// [`TestServer::script`](super::TestServer::script) was given a name that is no RPC of the embedded server, or a
/// method name several of its services have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownRpc {
    name: String,
    /// The paths a method name matched (empty: it matched none).
    candidates: Vec<&'static str>,
}

impl UnknownRpc {
    /// The name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The paths the name matched when it is ambiguous (empty when it matched none).
    pub fn candidates(&self) -> &[&'static str] {
        &self.candidates
    }
}

impl std::fmt::Display for UnknownRpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.candidates.is_empty() {
            return write!(
                f,
                "the embedded SW4RM server has several RPCs named `{}`: give the path (`{}`)",
                self.name,
                self.candidates.join("`, `")
            );
        }
        let methods = served().flat_map(|p| [p, method_of(p)]);
        write!(
            f,
            "the embedded SW4RM server has no RPC `{}`{}",
            self.name,
            crate::config::hint(&self.name, methods)
        )
    }
}

impl std::error::Error for UnknownRpc {}

/// Every path the embedded server answers: the standard routes.
fn served() -> impl Iterator<Item = &'static str> {
    STANDARD_ROUTES.iter().map(|r| r.path)
}

fn method_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The one path `rpc` names: itself, or the one path whose method it is.
pub(super) fn resolve_rpc(rpc: &str) -> Result<&'static str, UnknownRpc> {
    if let Some(path) = served().find(|p| *p == rpc) {
        return Ok(path);
    }
    let mut candidates: Vec<&'static str> = Vec::new();
    if !rpc.starts_with('/') {
        candidates.extend(served().filter(|p| method_of(p) == rpc));
    }
    match candidates[..] {
        [path] => Ok(path),
        [] | [_, _, ..] => Err(UnknownRpc {
            name: rpc.to_owned(),
            candidates,
        }),
    }
}
