//! [`CallTimeout`]: the per-call timeout a caller asks for, a value the rules and the
//! replayed attempts carry (attached to a request by `timeout/per_call.rs`).

use std::time::Duration;

/// A per-call timeout override, clamped by the profile's bounds (SW4-002 §2.2).
///
/// Prefer it to `tonic::Request::set_timeout` for very large values: tonic panics on
/// `set_timeout(Duration::MAX)` before any layer runs, while
/// `CallTimeout::After(Duration::MAX)` is clamped to the profile's maximum.
///
/// ```
/// use std::time::Duration;
/// use sw4rm_timeouts::CallTimeout;
/// let mut req = tonic::Request::new(());
/// CallTimeout::Infinite.apply(&mut req);
/// assert_eq!(req.extensions().get::<CallTimeout>(), Some(&CallTimeout::Infinite));
/// assert_eq!(CallTimeout::After(Duration::from_secs(2)).requested(), Duration::from_secs(2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallTimeout {
    /// A deadline this long after the call starts. `Duration::ZERO` is below every
    /// profile's minimum, so the minimum applies (with the clamp warning): a
    /// computed "time left" that reaches zero never turns into "no deadline".
    After(Duration),
    /// The spec's "timeout = 0": no deadline where the profile allows infinite, the
    /// profile default (with a warning) where it does not. The only way a call asks
    /// for no deadline.
    Infinite,
}

impl CallTimeout {
    /// The requested value in SW4-002 terms (`Duration::ZERO` = infinite).
    pub fn requested(self) -> Duration {
        match self {
            CallTimeout::After(d) => d,
            CallTimeout::Infinite => Duration::ZERO,
        }
    }
}
