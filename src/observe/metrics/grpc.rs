//! gRPC's own client metrics, opt-in: per attempt (gRFC A66:
//! `grpc.client.attempt.started`, `grpc.client.attempt.duration`) and per call (gRFC
//! A96: `grpc.client.call.retries`, `.hedges`, `.transparent_retries`, `.retry_delay`),
//! with the attributes `grpc.method` (`package.Service/Method`) and `grpc.target` (the
//! endpoint the client connects to, `unknown` when it was not given), and
//! `grpc.status` on the attempt's duration.
//!
//! gRFC A121's call delay (`grpc.client.call.delay.duration`, `grpc.delay_type` =
//! `connecting`) is recorded with A96's, from the call's tally.
//!
//! A call's attempts are tallied in a [`CallTally`] the call record keeps (boxed, and
//! only while one of these families is on); the tally is pure bookkeeping, the
//! instruments record what it hands them.

use std::time::Duration;

use opentelemetry::metrics::{Counter, Histogram, Meter};
use opentelemetry::KeyValue;
use tokio::time::Instant;
use tonic::Code;

use super::buckets::{
    GRPC_LATENCY_BOUNDARIES_S, GRPC_RETRY_BOUNDARIES, GRPC_TRANSPARENT_RETRY_BOUNDARIES,
};
use crate::wire::status::code_name;

/// Name of gRFC A66's counter of attempts started.
pub const GRPC_ATTEMPT_STARTED: &str = "grpc.client.attempt.started";
/// Name of gRFC A66's attempt duration histogram (seconds).
pub const GRPC_ATTEMPT_DURATION: &str = "grpc.client.attempt.duration";
/// Name of gRFC A96's histogram of retries per call (not counting the first attempt
/// nor transparent retries; a call without any records nothing).
pub const GRPC_CALL_RETRIES: &str = "grpc.client.call.retries";
/// Name of gRFC A96's histogram of hedges per call.
pub const GRPC_CALL_HEDGES: &str = "grpc.client.call.hedges";
/// Name of gRFC A96's histogram of transparent retries per call: here, the attempts
/// resent because the one before provably never reached the server (connection
/// refused, `REFUSED_STREAM`).
pub const GRPC_CALL_TRANSPARENT_RETRIES: &str = "grpc.client.call.transparent_retries";
/// Name of gRFC A96's histogram of the time a call spent with no attempt in flight
/// (its retry backoffs), in seconds.
pub const GRPC_CALL_RETRY_DELAY: &str = "grpc.client.call.retry_delay";

/// Name of gRFC A121's histogram of the time a call waited before an attempt could be
/// sent (seconds), here with `grpc.delay_type` = `connecting`: the time the channel
/// had no connection while the call waited for one (a call that did not wait
/// records nothing).
pub const GRPC_CALL_DELAY_DURATION: &str = "grpc.client.call.delay.duration";

/// The most attempts a call has (gRPC's own limit on `maxAttempts`).
const MOST_ATTEMPTS: usize = 5;

/// gRFC A66's per-attempt instruments.
#[derive(Clone, Debug)]
pub(crate) struct AttemptInstruments {
    started: Counter<u64>,
    duration: Histogram<f64>,
}

/// gRFC A96's per-call instruments.
#[derive(Clone, Debug)]
pub(crate) struct RetryInstruments {
    retries: Histogram<u64>,
    hedges: Histogram<u64>,
    transparent: Histogram<u64>,
    delay: Histogram<f64>,
    connecting: Histogram<f64>,
}

impl AttemptInstruments {
    pub(crate) fn new(meter: &Meter) -> Self {
        AttemptInstruments {
            started: meter
                .u64_counter(GRPC_ATTEMPT_STARTED)
                .with_description("Number of client call attempts started (gRFC A66)")
                .with_unit("{attempt}")
                .build(),
            duration: meter
                .f64_histogram(GRPC_ATTEMPT_DURATION)
                .with_description(
                    "End-to-end time taken to complete a client call attempt (gRFC A66)",
                )
                .with_unit("s")
                .with_boundaries(GRPC_LATENCY_BOUNDARIES_S.to_vec())
                .build(),
        }
    }

    /// Counts `n` attempts started.
    pub(crate) fn started(&self, n: u64, call: &[KeyValue; 2]) {
        if n > 0 {
            self.started.add(n, call);
        }
    }

    /// Records one attempt that ended after `took` with `status`.
    pub(crate) fn ended(&self, took: Duration, status: Code, call: &[KeyValue; 2]) {
        let [method, target] = call;
        self.duration.record(
            took.as_secs_f64(),
            &[
                method.clone(),
                target.clone(),
                KeyValue::new("grpc.status", code_name(status)),
            ],
        );
    }
}

impl RetryInstruments {
    pub(crate) fn new(meter: &Meter) -> Self {
        let count =
            |name: &'static str, unit: &'static str, what: &'static str, buckets: &[f64]| {
                meter
                    .u64_histogram(name)
                    .with_description(what)
                    .with_unit(unit)
                    .with_boundaries(buckets.to_vec())
                    .build()
            };
        RetryInstruments {
            retries: count(
                GRPC_CALL_RETRIES,
                "{retry}",
                "Number of retry attempts made during the client call (gRFC A96)",
                &GRPC_RETRY_BOUNDARIES,
            ),
            hedges: count(
                GRPC_CALL_HEDGES,
                "{hedge}",
                "Number of hedges made during the client call (gRFC A96)",
                &GRPC_RETRY_BOUNDARIES,
            ),
            transparent: count(
                GRPC_CALL_TRANSPARENT_RETRIES,
                "{transparent_retry}",
                "Number of transparent retries made during the client call (gRFC A96)",
                &GRPC_TRANSPARENT_RETRY_BOUNDARIES,
            ),
            delay: meter
                .f64_histogram(GRPC_CALL_RETRY_DELAY)
                .with_description(
                    "Total time of delay while there is no active attempt during the client call (gRFC A96)",
                )
                .with_unit("s")
                .with_boundaries(GRPC_LATENCY_BOUNDARIES_S.to_vec())
                .build(),
            connecting: meter
                .f64_histogram(GRPC_CALL_DELAY_DURATION)
                .with_description(
                    "Time a client call waited before an attempt could be sent (gRFC A121)",
                )
                .with_unit("s")
                .with_boundaries(GRPC_LATENCY_BOUNDARIES_S.to_vec())
                .build(),
        }
    }

    /// Records one finished call's tally (each figure only when it is not 0).
    pub(crate) fn record(&self, tally: &CallTally, call: &[KeyValue; 2]) {
        for (n, histogram) in [
            (tally.retries, &self.retries),
            (tally.hedges, &self.hedges),
            (tally.transparent, &self.transparent),
        ] {
            if n > 0 {
                histogram.record(u64::from(n), call);
            }
        }
        if tally.delay > Duration::ZERO {
            self.delay.record(tally.delay.as_secs_f64(), call);
        }
        if tally.connecting > Duration::ZERO {
            let [method, target] = call;
            let connecting = KeyValue::new("grpc.delay_type", "connecting");
            let attrs = [method.clone(), target.clone(), connecting];
            self.connecting
                .record(tally.connecting.as_secs_f64(), &attrs);
        }
    }
}

/// One call's attempts, as gRPC's metrics count them.
#[derive(Debug, Default)]
pub(crate) struct CallTally {
    /// Attempts started (numbered from 1).
    pub(crate) started: u32,
    pub(crate) retries: u32,
    pub(crate) transparent: u32,
    pub(crate) hedges: u32,
    /// Time with no attempt in flight (backoffs).
    pub(crate) delay: Duration,
    /// Time the call waited for a connection (gRFC A121's `connecting`).
    pub(crate) connecting: Duration,
    /// When each attempt still in flight started, by number.
    open: [Option<Instant>; MOST_ATTEMPTS],
    /// The hedge that answered, if one did.
    winner: Option<u32>,
}

impl CallTally {
    /// Attempt `n` (from 1) started at `at`; once per attempt, however often told.
    pub(crate) fn started(&mut self, n: u32, at: Instant) -> bool {
        let Some(slot) = n.checked_sub(1).and_then(|i| self.open.get_mut(i as usize)) else {
            return false;
        };
        if n <= self.started {
            return false;
        }
        *slot = Some(at);
        self.started = n;
        true
    }

    /// A retry was decided after the attempt in flight ended (`not_sent`: it
    /// provably never reached the server); the next one starts after `backoff`.
    /// Returns how long the attempt that ended took.
    pub(crate) fn retried(
        &mut self,
        not_sent: bool,
        backoff: Duration,
        now: Instant,
    ) -> Option<Duration> {
        match not_sent {
            true => self.transparent += 1,
            false => self.retries += 1,
        }
        self.delay += backoff;
        let i = self.started.checked_sub(1)? as usize;
        let began = self.open.get_mut(i)?.take()?;
        Some(now.saturating_duration_since(began))
    }

    /// Attempt `n` ended at `now` while the call goes on (a hedged call's non-fatal
    /// answer): how long it took, once.
    pub(crate) fn attempt_ended(&mut self, n: u32, now: Instant) -> Option<Duration> {
        let i = n.checked_sub(1)? as usize;
        let began = self.open.get_mut(i)?.take()?;
        Some(now.saturating_duration_since(began))
    }

    /// A hedge was sent (it is started with [`started`](Self::started)).
    pub(crate) fn hedged(&mut self) {
        self.hedges += 1;
    }

    /// Hedge `n` answered first.
    pub(crate) fn won(&mut self, n: u32) {
        self.winner = Some(n);
    }

    /// The call ended with `code` at `now`: every attempt still in flight, with the
    /// status it ended with (the one that answered, `code`; the others, cancelled).
    pub(crate) fn ended(
        &mut self,
        code: Code,
        now: Instant,
    ) -> impl Iterator<Item = (Duration, Code)> + '_ {
        let answered = self.winner.unwrap_or(self.started);
        self.open
            .iter_mut()
            .zip(1u32..)
            .filter_map(move |(slot, n)| {
                let began = slot.take()?;
                let status = if n == answered { code } else { Code::Cancelled };
                Some((now.saturating_duration_since(began), status))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retried_call_ends_each_attempt_once() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut tally = CallTally::default();
        assert!(tally.started(1, t0));
        assert!(!tally.started(1, t0 + ms(1)), "told twice, counted once");
        assert_eq!(tally.retried(false, ms(25), t0 + ms(10)), Some(ms(10)));
        assert!(tally.started(2, t0 + ms(35)));
        assert_eq!(tally.retried(true, ms(5), t0 + ms(40)), Some(ms(5)));
        assert!(tally.started(3, t0 + ms(45)));
        let ended: Vec<_> = tally.ended(Code::Ok, t0 + ms(60)).collect();
        assert_eq!(ended, [(ms(15), Code::Ok)]);
        assert_eq!((tally.started, tally.retries, tally.transparent), (3, 1, 1));
        assert_eq!(tally.delay, ms(30));
        assert_eq!(tally.ended(Code::Ok, t0 + ms(70)).count(), 0, "ended once");
    }

    #[test]
    fn a_hedged_call_cancels_the_attempts_that_lost() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut tally = CallTally::default();
        tally.started(1, t0);
        tally.hedged();
        tally.started(2, t0 + ms(20));
        tally.hedged();
        tally.started(3, t0 + ms(40));
        tally.won(2);
        let ended: Vec<_> = tally.ended(Code::Ok, t0 + ms(50)).collect();
        assert_eq!(
            ended,
            [
                (ms(50), Code::Cancelled),
                (ms(30), Code::Ok),
                (ms(10), Code::Cancelled)
            ]
        );
        assert_eq!(
            (tally.hedges, tally.retries, tally.delay),
            (2, 0, Duration::ZERO)
        );
        // Past gRPC's limit of 5 attempts: not tallied.
        assert!(!tally.started(6, t0));
    }
}
