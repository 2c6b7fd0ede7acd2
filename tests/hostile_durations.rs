//! Every public setter that takes a `Duration` and runs something, given hostile
//! values (0, 1 ns, `Duration::MAX`, `u64::MAX` ms): no panic, in the SDK or below
//! it, and the work still ends (against the embedded server over loopback). The
//! connection builder, per-call timeouts, budgets and their pauses, retry and hedging
//! policies and the hedge cap, propagation, streaming policies per call and per
//! profile, long work and its wrap-up, and `Follow` (the cancel cascade and delegation
//! cancels: `sw4rm-swarm`'s tests). A
//! `Duration::MAX` is user input: a computed "time left", a value read from a file.

use std::time::Duration;

use sw4rm_timeouts::follow::{Follow, SchedulerTask};
use sw4rm_timeouts::proto::sw4rm::registry::HeartbeatRequest;
use sw4rm_timeouts::proto::sw4rm::scheduler::SubmitTaskRequest;
use sw4rm_timeouts::testing::TestServer;
use sw4rm_timeouts::{
    CallTimeout, OperationBudget, ProfileSet, RetryPolicy, Sw4rm, TimeoutProfileLayer,
};
use tonic::transport::Endpoint;

/// One of `Follow`'s duration setters.
type SetFollow = fn(Follow, Duration) -> Follow;

#[path = "common/hostile.rs"]
mod hostile;
use hostile::{no_panic, HOSTILE};

async fn heartbeat(sw4rm: &Sw4rm) -> Result<(), tonic::Status> {
    sw4rm
        .registry()
        .heartbeat(HeartbeatRequest::default())
        .await
        .map(drop)
}

fn endpoint(server: &TestServer) -> Endpoint {
    Endpoint::from_shared(server.url()).unwrap()
}

#[tokio::test]
async fn the_connection_builder_takes_hostile_durations() {
    let server = TestServer::start().await.unwrap();
    let bound = Duration::from_secs(20);
    for value in HOSTILE {
        let e = endpoint(&server);
        no_panic("Sw4rmBuilder::keepalive", value, bound, || async move {
            let sw4rm = Sw4rm::builder(e).keepalive(value, value).connect().await;
            // Connected or refused, a call on it answers; no panic in hyper's task.
            if let Ok(sw4rm) = sw4rm {
                let answer = heartbeat(&sw4rm).await;
                assert!(
                    answer
                        .as_ref()
                        .map_or_else(|s| s.code() != tonic::Code::Unknown, |_| true),
                    "{answer:?}"
                );
            }
        })
        .await;
        let e = endpoint(&server);
        no_panic(
            "Sw4rmBuilder::connect_timeout",
            value,
            bound,
            || async move {
                if let Ok(sw4rm) = Sw4rm::builder(e).connect_timeout(value).connect().await {
                    let _ = heartbeat(&sw4rm).await;
                }
            },
        )
        .await;
        let e = endpoint(&server);
        no_panic(
            "Sw4rmBuilder::reset_stream_memory",
            value,
            bound,
            || async move {
                let sw4rm = Sw4rm::builder(e)
                    .reset_stream_memory(10, value)
                    .connect()
                    .await
                    .unwrap();
                heartbeat(&sw4rm).await.unwrap();
            },
        )
        .await;
    }
}

#[tokio::test]
async fn calls_budgets_and_retries_take_hostile_durations() {
    let server = TestServer::start().await.unwrap();
    let sw4rm = Sw4rm::connect(server.url()).await.unwrap();
    let bound = Duration::from_secs(20);
    for value in HOSTILE {
        let s = sw4rm.clone();
        no_panic("CallTimeout::After", value, bound, || async move {
            let mut request = tonic::Request::new(HeartbeatRequest::default());
            CallTimeout::After(value).apply(&mut request);
            let _ = s.registry().heartbeat(request).await;
        })
        .await;
        let s = sw4rm.clone();
        no_panic("OperationBudget::new", value, bound, || async move {
            let budget = OperationBudget::new(value).with_max_pause(value);
            let _ = budget.run(heartbeat(&s)).await;
            let _ = budget.remaining();
        })
        .await;
        let url = server.url();
        no_panic(
            "RetryPolicy backoffs and attempt timeout",
            value,
            bound,
            || async move {
                let policy = RetryPolicy::builder()
                    .max_attempts(3)
                    .initial_backoff(value)
                    .max_backoff(value)
                    .attempt_timeout(value)
                    .build();
                // Refused with an error, or taken and used.
                if let Ok(policy) = policy {
                    let profiles = ProfileSet::builder().retry("heartbeat", policy).build();
                    if let Ok(profiles) = profiles {
                        let sw4rm = Sw4rm::connect_with(url, TimeoutProfileLayer::new(profiles))
                            .await
                            .unwrap();
                        let _ = heartbeat(&sw4rm).await;
                    }
                }
            },
        )
        .await;
    }
}

#[tokio::test]
async fn follow_takes_hostile_durations() {
    let server = TestServer::start().await.unwrap();
    let sw4rm = Sw4rm::connect(server.url()).await.unwrap();
    let bound = Duration::from_secs(20);
    let budget = || OperationBudget::new(Duration::from_millis(300));
    let task = |s: &Sw4rm| SchedulerTask::new(s.clone(), SubmitTaskRequest::default());
    for value in HOSTILE {
        let follows: [(&str, SetFollow); 6] = [
            ("Follow::poll_every", |f, d| f.poll_every(d)),
            ("Follow::poll_backoff", |f, d| f.poll_backoff(2.0, d)),
            ("Follow::submit_timeout", |f, d| f.submit_timeout(d)),
            ("Follow::limit", |f, d| f.limit(d)),
            ("Follow::cancel_timeout", |f, d| f.cancel_timeout(d)),
            ("Follow::not_found_settle", |f, d| f.not_found_settle(d)),
        ];
        for (setter, set) in follows {
            let mut task = task(&sw4rm);
            no_panic(setter, value, bound, || async move {
                let follow = set(Follow::new(), value);
                let _ = budget().run(follow.run(&mut task)).await;
            })
            .await;
        }
    }
}

#[tokio::test]
async fn hedging_propagation_streams_and_long_work_take_hostile_durations() {
    use sw4rm_timeouts::proto::sw4rm::tool::ToolCall;
    use sw4rm_timeouts::scope::LongWork;
    use sw4rm_timeouts::{
        CallStreamingPolicy, HedgeCap, HedgingPolicy, Propagation, StreamingTimeoutPolicy, WrapUp,
    };
    let server = TestServer::start().await.unwrap();
    let bound = Duration::from_secs(20);
    for value in HOSTILE {
        let url = server.url();
        no_panic(
            "HedgingPolicy delays, HedgeCap::per",
            value,
            bound,
            || async move {
                let policy = HedgingPolicy::builder()
                    .max_attempts(2)
                    .delay(value)
                    .min_delay(value)
                    .max_delay(value)
                    .build();
                if let Ok(policy) = policy {
                    let profiles = ProfileSet::builder().hedging("heartbeat", policy).build();
                    if let Ok(profiles) = profiles {
                        let layer = TimeoutProfileLayer::new(profiles)
                            .with_hedge_cap(HedgeCap::share(0.5).per(value));
                        let sw4rm = Sw4rm::connect_with(url, layer).await.unwrap();
                        let _ = heartbeat(&sw4rm).await;
                    }
                }
            },
        )
        .await;
        let url = server.url();
        no_panic("Propagation::with_*", value, bound, || async move {
            let propagation = Propagation::default()
                .with_hop_offset(value)
                .with_max_propagated(value)
                .with_floor(value);
            let layer = TimeoutProfileLayer::standard().with_propagation(propagation);
            let sw4rm = Sw4rm::connect_with(url, layer).await.unwrap();
            let budget = OperationBudget::new(Duration::from_secs(5));
            let _ = budget.run(heartbeat(&sw4rm)).await;
        })
        .await;
        let url = server.url();
        no_panic("CallStreamingPolicy::with_*", value, bound, || async move {
            let sw4rm = Sw4rm::connect(url).await.unwrap();
            let mut request = tonic::Request::new(ToolCall::default());
            CallStreamingPolicy::default()
                .with_initial(value)
                .with_message_gap(value)
                .with_idle(value)
                .with_total(value)
                .apply(&mut request);
            if let Ok(stream) = sw4rm.tool().call_stream(request).await {
                let mut stream = stream.into_inner();
                while let Ok(Some(_)) = stream.message().await {}
            }
        })
        .await;
        let url = server.url();
        no_panic(
            "ProfileSetBuilder::streaming",
            value,
            bound,
            || async move {
                let millis = u32::try_from(value.as_millis()).unwrap_or(u32::MAX);
                let policy = StreamingTimeoutPolicy {
                    initial_timeout_ms: millis,
                    message_gap_timeout_ms: millis,
                    total_timeout_ms: millis,
                    idle_timeout_ms: millis,
                };
                if let Ok(profiles) = ProfileSet::builder().streaming("tool_call", policy).build() {
                    let sw4rm = Sw4rm::connect_with(url, TimeoutProfileLayer::new(profiles))
                        .await
                        .unwrap();
                    if let Ok(stream) = sw4rm.tool().call_stream(ToolCall::default()).await {
                        let mut stream = stream.into_inner();
                        while let Ok(Some(_)) = stream.message().await {}
                    }
                }
            },
        )
        .await;
        no_panic(
            "LongWork limits, WrapUp::before_end",
            value,
            bound,
            || async move {
                let guard = LongWork::new()
                    .idle_limit(value)
                    .cap(value)
                    .caller_idle_limit(value)
                    .wrap_up(WrapUp::before_end(value));
                let budget = OperationBudget::new(Duration::from_millis(200))
                    .with_wrap_up(WrapUp::before_end(value));
                let outcome = budget
                    .run(guard.run(|out| async move {
                        out.push(1u8);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }))
                    .await;
                let _ = outcome.status();
            },
        )
        .await;
    }
}
