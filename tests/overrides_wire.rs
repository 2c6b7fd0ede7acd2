//! Per-call overrides over loopback: each SW4-002 §2.2 rule as the server sees it,
//! the clamp warnings, the infinite rules, and bad input.

mod common;

use std::time::Duration;

use common::{call, capture_events, connect, server, standard, Opts};
use sw4rm_timeouts::{CallTimeout, TimeoutProfileLayer};
use tower::{Service, ServiceBuilder, ServiceExt};

const HEARTBEAT: &str = "/sw4rm.registry.RegistryService/Heartbeat";
const WAIT_FOR_DECISION: &str = "/sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision";

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

#[tokio::test]
async fn override_rules_on_the_wire() {
    let server = server().await;
    let sw4rm = connect(&server, TimeoutProfileLayer::new(standard())).await;
    let set = |d| Opts {
        set_timeout: Some(d),
        ..Opts::default()
    };
    let ext = |t| Opts {
        call_timeout: Some(t),
        ..Opts::default()
    };
    // (rpc, per-call option, grpc-timeout the server must see, clamp bound logged)
    // (rpc, per-call option, grpc-timeout the server must see,
    //  logged clamp: (bound, requested_ms, effective_ms))
    type Row = (
        &'static str,
        Opts,
        Option<&'static str>,
        Option<(&'static str, &'static str, &'static str)>,
    );
    let table: [Row; 9] = [
        (
            HEARTBEAT,
            set(ms(200)),
            Some("1000000u"),
            Some(("min", "200", "1000")),
        ),
        (HEARTBEAT, set(ms(7_000)), Some("7000000u"), None),
        (
            HEARTBEAT,
            set(ms(60_000)),
            Some("30000000u"),
            Some(("max", "60000", "30000")),
        ),
        // Saturated, never wrapped: u64::MAX ms.
        (
            HEARTBEAT,
            ext(CallTimeout::After(Duration::MAX)),
            Some("30000000u"),
            Some(("max", "18446744073709551615", "30000")),
        ),
        // tonic writes 100 years as "52560000M".
        (
            HEARTBEAT,
            set(Duration::from_secs(100 * 365 * 24 * 3600)),
            Some("30000000u"),
            Some(("max", "3153600000000", "30000")),
        ),
        (
            HEARTBEAT,
            ext(CallTimeout::Infinite),
            Some("5000000u"),
            Some(("default", "0", "5000")),
        ),
        (WAIT_FOR_DECISION, ext(CallTimeout::Infinite), None, None),
        (
            WAIT_FOR_DECISION,
            set(ms(10)),
            Some("30000000u"),
            Some(("min", "10", "30000")),
        ),
        // The extension wins over set_timeout on the same request.
        (
            HEARTBEAT,
            Opts {
                set_timeout: Some(ms(9_000)),
                call_timeout: Some(CallTimeout::After(ms(2_000))),
            },
            Some("2000000u"),
            None,
        ),
    ];
    for (i, (rpc, opts, wire, bound)) in table.iter().enumerate() {
        let (events, _guard) = capture_events();
        call(&sw4rm, rpc, *opts)
            .await
            .unwrap_or_else(|s| panic!("row {i}: {s}"));
        let seen = &server.calls()[i];
        assert_eq!(seen.grpc_timeout.as_deref(), *wire, "row {i}");
        let warnings = events.with_message("clamped to the profile's bounds");
        match bound {
            None => assert!(warnings.is_empty(), "row {i}: unexpected {warnings:?}"),
            Some((bound, requested, effective)) => {
                assert_eq!(warnings.len(), 1, "row {i}");
                let w = &warnings[0];
                assert_eq!(w["level"], "WARN");
                assert_eq!(
                    (
                        w["bound"].as_str(),
                        w["requested_ms"].as_str(),
                        w["effective_ms"].as_str()
                    ),
                    (*bound, *requested, *effective),
                    "row {i}"
                );
                assert_eq!(w["source"], "per_call");
                assert_eq!(w["bound_source"], "standard");
                // Each says why, in words (a 0 names the missing allow_infinite).
                let why = match *bound {
                    "min" => "below the profile's min_timeout_ms",
                    "max" => "above the profile's max_timeout_ms",
                    _ => {
                        "0 asks for no deadline, and the profile does not allow infinite \
                          (allow_infinite = false): its default applies"
                    }
                };
                assert_eq!(w["rule"], why, "row {i}");
                let profile = if *rpc == HEARTBEAT {
                    "heartbeat"
                } else {
                    "negotiation_vote"
                };
                // Inside the call's (enabled) span, which names the profile once.
                assert_eq!(w["span.profile"], profile);
            }
        }
    }
}

/// The layer under raw HTTP requests: bad input gets a clear status, never a panic.
#[tokio::test]
async fn bad_requests_get_clear_statuses() {
    let server = server().await;
    let channel = tonic::transport::Endpoint::from_shared(server.url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut svc = ServiceBuilder::new()
        .layer(TimeoutProfileLayer::new(standard()))
        .service(channel);

    let raw = |path: &str, timeout: Option<&str>| {
        let mut b = http::Request::builder()
            .method("POST")
            .uri(format!("{}{path}", server.url()))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if let Some(t) = timeout {
            b = b.header("grpc-timeout", t);
        }
        b.body(tonic::body::Body::empty()).unwrap()
    };
    for (path, timeout, fragment) in [
        (
            HEARTBEAT,
            Some("abc"),
            "malformed grpc-timeout header \"abc\"",
        ),
        (HEARTBEAT, Some("123456789m"), "more than 8 digits"),
        ("/", None, "is not a gRPC path"),
        ("/NoMethod", None, "is not a gRPC path"),
    ] {
        let err = svc
            .ready()
            .await
            .unwrap()
            .call(raw(path, timeout))
            .await
            .unwrap_err();
        let status = tonic::Status::from_error(err);
        assert_eq!(
            status.code(),
            tonic::Code::InvalidArgument,
            "{path} {timeout:?}"
        );
        assert!(status.message().contains(fragment), "{}", status.message());
    }
    assert!(
        server.calls().is_empty(),
        "bad requests must not reach the server"
    );

    // An unknown service is routed to the fallback profile (30 s) and reaches the
    // server, which answers UNIMPLEMENTED.
    let resp = svc
        .ready()
        .await
        .unwrap()
        .call(raw("/acme.Unknown/Do", None))
        .await
        .unwrap();
    assert_eq!(
        resp.headers()
            .get("grpc-status")
            .map(|v| v.to_str().unwrap()),
        Some("12")
    );
}
