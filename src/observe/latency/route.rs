//! [`RouteLatency`]: what one layer observed of one route, as the advisor reads it.

use super::LatencySnapshot;

/// What was observed of one route: its path's parts, the profile it ran under, and
/// its latencies.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RouteLatency {
    /// The package-qualified service, `sw4rm.tool.ToolService`.
    pub service: String,
    /// The method, `Call`.
    pub method: String,
    /// The profile the route's calls ran under.
    pub profile: String,
    /// Its calls' latencies and timeouts.
    pub latency: LatencySnapshot,
}

impl RouteLatency {
    /// One route's observations.
    ///
    /// ```
    /// use sw4rm_timeouts::observations::{LatencySnapshot, RouteLatency};
    /// let r = RouteLatency::new("sw4rm.tool.ToolService", "Call", "tool_call", LatencySnapshot::default());
    /// assert_eq!(r.path(), "/sw4rm.tool.ToolService/Call");
    /// ```
    pub fn new(
        service: impl Into<String>,
        method: impl Into<String>,
        profile: impl Into<String>,
        latency: LatencySnapshot,
    ) -> Self {
        RouteLatency {
            service: service.into(),
            method: method.into(),
            profile: profile.into(),
            latency,
        }
    }

    /// `/service/method`.
    pub fn path(&self) -> String {
        format!("/{}/{}", self.service, self.method)
    }
}
