//! The profile table as a gRPC service config (the JSON grpc-go, grpc-java, grpcio
//! and grpc-dotnet accept), for the swarm's agents in other languages.
//!
//! A service config's `timeout` is a cap as well as a default (gRPC uses the smaller
//! of it and the call's own deadline); it has no minimum, no "infinite" and no stream
//! timers, and gRPC retries (A6) have no attempt timeout. [`ServiceConfigMode`] picks
//! what the `timeout` stands for; the rest is lost in every mode (see the guide's `interop` chapter).

use std::fmt::Write;
use std::time::Duration;

use super::ProfileSet;
use crate::policy::hedge::{HedgingDelay, HedgingPolicy};
use crate::policy::retry::RetryPolicy;

/// What each method's `timeout` is in an exported service config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServiceConfigMode {
    /// The profile's default: calls that give no deadline get the SW4-002 default,
    /// but a longer per-call deadline is cut to it (gRPC takes the smaller).
    #[default]
    Default,
    /// The profile's maximum (none where the profile allows infinite): per-call
    /// deadlines up to the maximum pass, but a call that gives none waits up to the
    /// maximum instead of the default.
    Max,
}

/// A protobuf JSON duration: whole seconds and up to nine decimals, `"5s"`, `"0.05s"`.
fn json_duration(d: Duration) -> String {
    let nanos = d.subsec_nanos();
    if nanos == 0 {
        format!("\"{}s\"", d.as_secs())
    } else {
        let frac = format!("{nanos:09}");
        format!("\"{}.{}s\"", d.as_secs(), frac.trim_end_matches('0'))
    }
}

fn retry_policy_json(policy: &RetryPolicy) -> Option<String> {
    let codes: Vec<String> = crate::wire::status::CODE_NAMES
        .iter()
        .enumerate()
        .filter(|(n, _)| policy.retries_code(*n as i32))
        .map(|(_, name)| format!("\"{name}\""))
        .collect();
    // gRPC requires at least two attempts and one retryable code.
    if !policy.is_on() || codes.is_empty() {
        return None;
    }
    Some(format!(
        "{{\"maxAttempts\": {}, \"initialBackoff\": {}, \"maxBackoff\": {}, \"backoffMultiplier\": {}, \"retryableStatusCodes\": [{}]}}",
        policy.max_attempts(),
        json_duration(policy.initial_backoff()),
        json_duration(policy.max_backoff()),
        policy.backoff_multiplier(),
        codes.join(", ")
    ))
}

/// gRPC A6's `hedgingPolicy`, for a fixed delay only: a learned delay has no
/// service-config form (those routes keep their `retryPolicy`).
fn hedging_policy_json(policy: &HedgingPolicy) -> Option<String> {
    let HedgingDelay::Fixed(delay) = policy.delay() else {
        return None;
    };
    if !policy.is_on() {
        return None;
    }
    let codes: Vec<String> = policy
        .non_fatal_codes()
        .filter_map(|n| crate::wire::status::CODE_NAMES.get(n as usize))
        .map(|name| format!("\"{name}\""))
        .collect();
    Some(format!(
        "{{\"maxAttempts\": {}, \"hedgingDelay\": {}, \"nonFatalStatusCodes\": [{}]}}",
        policy.max_attempts(),
        json_duration(delay),
        codes.join(", ")
    ))
}

impl ProfileSet {
    /// The table as a gRPC service config: one `methodConfig` per route (exact
    /// routes, whole services, then the fallback as the default for every other
    /// method), each with its `timeout` as `mode` says, and a `retryPolicy` for the
    /// routes marked idempotent (a `hedgingPolicy` instead where their profile hedges
    /// unary calls with a fixed delay; a learned delay has no service-config form); `retryThrottling` as this crate's default retry
    /// budget (10 tokens, ratio 0.1). Streams get their total cap, if any.
    ///
    /// ```
    /// use sw4rm_timeouts::{ProfileSet, ServiceConfigMode};
    /// let json = ProfileSet::standard().service_config(ServiceConfigMode::Default);
    /// assert!(json.contains(r#"{"service": "sw4rm.registry.RegistryService", "method": "Heartbeat"}"#));
    /// assert!(json.contains(r#""timeout": "5s""#));
    /// ```
    pub fn service_config(&self, mode: ServiceConfigMode) -> String {
        let mut entries: Vec<String> = Vec::new();
        let mut entry = |names: String, route: &crate::policy::route::Route| {
            let profile = self.by_id(route.profile);
            let p = &profile.profile;
            let timeout = if route.streaming {
                let total = profile.streaming.total_timeout_ms;
                (total > 0).then(|| Duration::from_millis(u64::from(total)))
            } else {
                match mode {
                    ServiceConfigMode::Default => Some(p.default_timeout()),
                    ServiceConfigMode::Max if p.allow_infinite => None,
                    ServiceConfigMode::Max => Some(p.max_timeout()),
                }
            };
            let mut out = format!("    {{\"name\": [{names}]");
            if let Some(t) = timeout {
                let _ = write!(out, ", \"timeout\": {}", json_duration(t));
            }
            let hedging = (route.idempotent && !route.streaming)
                .then(|| hedging_policy_json(&profile.hedging))
                .flatten();
            if let Some(hedging) = hedging {
                let _ = write!(out, ", \"hedgingPolicy\": {hedging}");
            } else if route.idempotent {
                if let Some(retry) = retry_policy_json(&profile.retry) {
                    let _ = write!(out, ", \"retryPolicy\": {retry}");
                }
            }
            out.push('}');
            entries.push(out);
        };
        for (path, route) in &self.routes.exact {
            if let Some((service, method)) = crate::policy::route::split_path(path) {
                entry(
                    format!("{{\"service\": \"{service}\", \"method\": \"{method}\"}}"),
                    route,
                );
            }
        }
        let mut services: Vec<_> = self.routes.services().collect();
        services.sort_by_key(|(s, _)| *s);
        for (service, route) in services {
            entry(format!("{{\"service\": \"{service}\"}}"), route);
        }
        let fallback = crate::policy::route::Route {
            profile: self.fallback,
            streaming: false,
            long_lived: false,
            message_field: None,
            idempotent: false,
            source: self.fallback_source.clone(),
        };
        entry("{}".to_owned(), &fallback);
        format!(
            "{{\n  \"methodConfig\": [\n{}\n  ],\n  \"retryThrottling\": {{\"maxTokens\": 10, \"tokenRatio\": 0.1}}\n}}\n",
            entries.join(",\n")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_protobuf_json() {
        let table = [
            (Duration::from_secs(5), "\"5s\""),
            (Duration::from_millis(50), "\"0.05s\""),
            (Duration::from_millis(1_500), "\"1.5s\""),
            (Duration::from_nanos(1), "\"0.000000001s\""),
        ];
        for (d, want) in table {
            assert_eq!(json_duration(d), want);
        }
    }

    #[test]
    fn retry_policies_grpc_cannot_take_are_left_out() {
        assert_eq!(retry_policy_json(&RetryPolicy::off()), None);
        assert_eq!(hedging_policy_json(&HedgingPolicy::off()), None);
        let learned = HedgingPolicy::builder().learned_delay(95).build().unwrap();
        assert_eq!(
            hedging_policy_json(&learned),
            None,
            "no service-config form"
        );
        let fixed = HedgingPolicy::builder()
            .max_attempts(3)
            .delay(Duration::from_millis(40))
            .non_fatal_on(tonic::Code::ResourceExhausted)
            .build()
            .unwrap();
        assert_eq!(
            hedging_policy_json(&fixed).as_deref(),
            Some(
                r#"{"maxAttempts": 3, "hedgingDelay": "0.04s", "nonFatalStatusCodes": ["RESOURCE_EXHAUSTED", "UNAVAILABLE"]}"#
            )
        );
        let none = RetryPolicy::builder()
            .retry_only_on(Vec::<i32>::new())
            .build()
            .unwrap();
        assert_eq!(retry_policy_json(&none), None);
        assert_eq!(
            retry_policy_json(&RetryPolicy::standard()).as_deref(),
            Some("{\"maxAttempts\": 3, \"initialBackoff\": \"0.05s\", \"maxBackoff\": \"1s\", \"backoffMultiplier\": 2, \"retryableStatusCodes\": [\"UNAVAILABLE\"]}")
        );
    }
}
