//! What the core makes of SW4RM's messages: its profile and streaming policy to and
//! from their wire forms, the progress of the standard streams' messages, and a
//! handoff's `BudgetEnvelope` as the envelope arithmetic reads it.

use std::time::Duration;

use crate::policy::envelope::Envelope;
use crate::policy::profile::{ProfileError, TimeoutProfile};
use crate::policy::progress::{Heard, ProgressMessage};
use crate::policy::streaming::StreamingTimeoutPolicy;
use crate::proto::sw4rm;
use sw4rm::timeouts as pb;

impl From<&TimeoutProfile> for pb::TimeoutProfile {
    fn from(p: &TimeoutProfile) -> Self {
        pb::TimeoutProfile {
            profile_name: p.name.to_string(),
            default_timeout_ms: p.default_timeout_ms,
            min_timeout_ms: p.min_timeout_ms,
            max_timeout_ms: p.max_timeout_ms,
            allow_infinite: p.allow_infinite,
        }
    }
}

impl TryFrom<pb::TimeoutProfile> for TimeoutProfile {
    type Error = ProfileError;

    /// Validates the wire message like [`crate::TimeoutProfileBuilder::build`].
    fn try_from(m: pb::TimeoutProfile) -> Result<Self, Self::Error> {
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        TimeoutProfile::builder(m.profile_name)
            .default_timeout(ms(m.default_timeout_ms))
            .min_timeout(ms(m.min_timeout_ms))
            .max_timeout(ms(m.max_timeout_ms))
            .allow_infinite(m.allow_infinite)
            .build()
    }
}

impl From<pb::StreamingTimeoutPolicy> for StreamingTimeoutPolicy {
    fn from(m: pb::StreamingTimeoutPolicy) -> Self {
        StreamingTimeoutPolicy {
            initial_timeout_ms: m.initial_timeout_ms,
            message_gap_timeout_ms: m.message_gap_timeout_ms,
            total_timeout_ms: m.total_timeout_ms,
            idle_timeout_ms: m.idle_timeout_ms,
        }
    }
}

impl From<StreamingTimeoutPolicy> for pb::StreamingTimeoutPolicy {
    fn from(p: StreamingTimeoutPolicy) -> Self {
        pb::StreamingTimeoutPolicy {
            initial_timeout_ms: p.initial_timeout_ms,
            message_gap_timeout_ms: p.message_gap_timeout_ms,
            total_timeout_ms: p.total_timeout_ms,
            idle_timeout_ms: p.idle_timeout_ms,
        }
    }
}

impl ProgressMessage for sw4rm::tool::ToolFrame {
    /// A frame with data, a summary, or the final flag is progress, its `frame_no`
    /// the marker; an empty frame that is not final is a keep-alive.
    fn heard(&self) -> Heard {
        match self.data.is_empty() && self.summary.is_empty() && !self.r#final {
            true => Heard::KeepAlive,
            false => Heard::progress(Some(self.frame_no)),
        }
    }
}

impl ProgressMessage for sw4rm::router::StreamItem {
    /// An item carrying a message is progress, its `seq` the marker (a negative
    /// `seq` has none); an item without one is a keep-alive.
    ///
    /// ```
    /// use sw4rm_timeouts::{Heard, ProgressMessage};
    /// use sw4rm_timeouts::proto::sw4rm::router::StreamItem;
    /// assert_eq!(StreamItem { msg: None, seq: 3 }.heard(), Heard::KeepAlive);
    /// let item = StreamItem { msg: Some(Default::default()), seq: 3 };
    /// assert_eq!(item.heard(), Heard::progress(Some(3)));
    /// ```
    fn heard(&self) -> Heard {
        match self.msg {
            None => Heard::KeepAlive,
            Some(_) => Heard::progress(u64::try_from(self.seq).ok()),
        }
    }
}

impl From<&sw4rm::handoff::BudgetEnvelope> for Envelope {
    fn from(m: &sw4rm::handoff::BudgetEnvelope) -> Self {
        Envelope {
            tokens: m.token_budget_remaining,
            wall_ms: m.wall_time_remaining_ms,
            epoch_ms: m.deadline_epoch_ms,
            depth: m.current_depth,
            max_depth: m.max_delegation_depth,
        }
    }
}

impl From<Envelope> for sw4rm::handoff::BudgetEnvelope {
    fn from(e: Envelope) -> Self {
        sw4rm::handoff::BudgetEnvelope {
            token_budget_remaining: e.tokens,
            wall_time_remaining_ms: e.wall_ms,
            deadline_epoch_ms: e.epoch_ms,
            current_depth: e.depth,
            max_delegation_depth: e.max_depth,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::profile::{ProfileField, STANDARD_PROFILES};

    #[test]
    fn proto_round_trip_and_validation() {
        for p in STANDARD_PROFILES.iter() {
            let m = pb::TimeoutProfile::from(p);
            assert_eq!(&TimeoutProfile::try_from(m).unwrap(), p);
        }
        let bad = pb::TimeoutProfile {
            profile_name: "X".into(),
            default_timeout_ms: 1,
            min_timeout_ms: 0,
            max_timeout_ms: 1,
            allow_infinite: false,
        };
        assert_eq!(
            TimeoutProfile::try_from(bad).unwrap_err().violations[0].field,
            ProfileField::Min
        );
    }

    #[test]
    fn policy_proto_round_trip() {
        let p = StreamingTimeoutPolicy {
            initial_timeout_ms: 1,
            message_gap_timeout_ms: 2,
            total_timeout_ms: 3,
            idle_timeout_ms: 4,
        };
        assert_eq!(
            StreamingTimeoutPolicy::from(pb::StreamingTimeoutPolicy::from(p)),
            p
        );
    }
}
