"""A run of the quickstart (`examples/quickstart.rs`) exporting over OTLP to a receiver
that is not the crate's code (`receiver.py`: OpenTelemetry's generated services served
by grpcio), and what that receiver decoded:

- the four client spans, named by OpenTelemetry's RPC conventions (`rpc.method`, fully
  qualified), kind CLIENT, `rpc.system.name` grpc, each on the `sw4rm-quickstart`
  resource; the slow tool call marked DEADLINE_EXCEEDED with an error status;
- `sw4rm_rpc_timeout_total` at 1 for the tool call (profile `tool_call`), at 0 for
  the other two routes;
- `sw4rm_rpc_duration_ms`, a histogram counting the four calls.

    SW4RM_QUICKSTART=target/debug/examples/quickstart python3 tests/otlp/quickstart.py
"""

import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import receiver  # noqa: E402

TOOL_CALL = "sw4rm.tool.ToolService/Call"


def attrs(obj):
    out = {}
    for kv in obj.attributes:
        v = kv.value
        out[kv.key] = getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None
    return out


def main():
    got = {"traces": [], "metrics": []}
    lock = threading.Lock()

    def sink(kind, request):
        with lock:
            got[kind].append(request)

    server, port = receiver.serve(0, sink)
    exe = os.environ.get("SW4RM_QUICKSTART", "target/debug/examples/quickstart")
    env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    run = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=120)
    server.stop(grace=None)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Spans and metrics sent to the OTLP endpoint." in run.stdout, run.stdout

    spans = []
    for export in got["traces"]:
        for rs in export.resource_spans:
            service = attrs(rs.resource).get("service.name")
            for ss in rs.scope_spans:
                spans.extend((service, s) for s in ss.spans)
    client = [(svc, s) for svc, s in spans if s.kind == s.SPAN_KIND_CLIENT]
    names = sorted(s.name for _, s in client)
    assert names == sorted([
        "sw4rm.registry.RegistryService/Heartbeat",
        "sw4rm.registry.RegistryService/Heartbeat",
        "sw4rm.negotiation_room.NegotiationRoomService/WaitForDecision",
        TOOL_CALL,
    ]), names
    for svc, s in client:
        a = attrs(s)
        assert svc == "sw4rm-quickstart", svc
        assert a["rpc.system.name"] == "grpc", a
        assert a["rpc.method"] == s.name, a
    (tool,) = [s for _, s in client if s.name == TOOL_CALL]
    assert attrs(tool)["error.type"] == "DEADLINE_EXCEEDED", attrs(tool)
    assert tool.status.code == tool.status.STATUS_CODE_ERROR, tool.status
    assert attrs(tool)["profile"] == "tool_call", attrs(tool)

    # Cumulative metrics: the last export of each holds the totals.
    last = {}
    for export in got["metrics"]:
        for rm in export.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    last[m.name] = m
    # One point per route called (the layer starts each at 0), 1 for the tool call.
    timeouts = last["sw4rm_rpc_timeout_total"].sum.data_points
    counted = sorted((attrs(p)["profile"], p.as_int) for p in timeouts)
    expected = [("heartbeat", 0), ("negotiation_vote", 0), ("tool_call", 1)]
    assert counted == expected, counted
    durations = last["sw4rm_rpc_duration_ms"].histogram.data_points
    assert sum(p.count for p in durations) == 4, durations
    print(f"quickstart over OTLP: {len(spans)} spans, {len(last)} metrics received")


if __name__ == "__main__":
    main()
