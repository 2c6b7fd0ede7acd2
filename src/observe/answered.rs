//! [`Answered`]: the deadline an answer came under, on the response's extensions for
//! a layer built [`with_answer_deadlines`](crate::TimeoutProfileLayer::with_answer_deadlines),
//! so a caller can say "answered in 1.2 s of 5 s (heartbeat, standard)" without a tracer.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::policy::source::Source;

/// The deadline an answer came under: the timeout in force and where it came from,
/// the attempts sent, how long the call took to its answer's headers and what was
/// left. On `tonic::Response::extensions()` (and the `http::Response`'s) of every
/// answer a layer built
/// [`with_answer_deadlines`](crate::TimeoutProfileLayer::with_answer_deadlines) returns.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
/// use sw4rm_timeouts::testing::TestServer;
/// use sw4rm_timeouts::{Answered, Source, Sw4rm, TimeoutProfileLayer};
/// let server = TestServer::start().await?;
/// let layer = TimeoutProfileLayer::standard().with_answer_deadlines();
/// let sw4rm = Sw4rm::connect_with(server.url(), layer).await?;
/// let answer = sw4rm.registry().heartbeat(HeartbeatRequest::default()).await?;
/// let under = answer.extensions().get::<Answered>().expect("the layer says");
/// assert_eq!(under.timeout(), Some(std::time::Duration::from_secs(5)));
/// assert_eq!((under.profile(), under.source(), under.attempts()), ("heartbeat", Some(&Source::Standard), 1));
/// println!("{under}"); // answered in 0.002 s of 5 s (heartbeat, standard)
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answered {
    pub(crate) profile: Arc<str>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) source: Option<Source>,
    pub(crate) attempts: u32,
    pub(crate) elapsed: Duration,
}

impl Answered {
    /// The profile the call ran under.
    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// The call's deadline, from its start (`None`: it had none).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Where that deadline came from.
    pub fn source(&self) -> Option<&Source> {
        self.source.as_ref()
    }

    /// The attempts sent, the answering one included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// From the call's start to its answer's headers.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// What was left of the deadline when the answer came (`None`: no deadline).
    pub fn left(&self) -> Option<Duration> {
        self.timeout.map(|t| t.saturating_sub(self.elapsed))
    }
}

impl fmt::Display for Answered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.elapsed.as_secs_f64();
        match (self.timeout, &self.source) {
            (Some(t), Some(source)) => write!(
                f,
                "answered in {secs:.3} s of {} s ({}, {source})",
                t.as_secs_f64(),
                self.profile
            ),
            _ => write!(f, "answered in {secs:.3} s, no deadline ({})", self.profile),
        }?;
        if self.attempts > 1 {
            write!(f, " after {} attempts", self.attempts)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_says_what_the_deadline_was_and_what_was_left() {
        let mut a = Answered {
            profile: "heartbeat".into(),
            timeout: Some(Duration::from_secs(5)),
            source: Some(Source::Standard),
            attempts: 1,
            elapsed: Duration::from_millis(1_200),
        };
        assert_eq!(
            a.to_string(),
            "answered in 1.200 s of 5 s (heartbeat, standard)"
        );
        assert_eq!(a.left(), Some(Duration::from_millis(3_800)));
        a.attempts = 2;
        a.source = Some(Source::PerCall);
        assert_eq!(
            a.to_string(),
            "answered in 1.200 s of 5 s (heartbeat, per_call) after 2 attempts"
        );
        a.timeout = None;
        a.source = None;
        assert_eq!(a.left(), None);
        assert_eq!(
            a.to_string(),
            "answered in 1.200 s, no deadline (heartbeat) after 2 attempts"
        );
        a.timeout = Some(Duration::from_secs(1));
        a.source = Some(Source::Client);
        assert_eq!(a.left(), Some(Duration::ZERO), "never below zero");
    }
}
