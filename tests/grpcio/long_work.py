#!/usr/bin/env python3
"""Long work seen by an independent caller: grpcio (Python) against the tool server
of `examples/long_tool.rs`, whose handlers run under `scope::LongWork` (idle limit
1 s, cap 60 s).

grpcio knows nothing of this crate: it sends a plain deadline (or none) and reads
what any gRPC stack reads. Each check asserts what it got:

  1. CallStream `steady` (progress every 250 ms for 3 s) runs past the 1 s idle
     limit and ends OK with all three results.
  2. CallStream `stuck` (stops after its 5th chunk) delivers what it sent, then
     DEADLINE_EXCEEDED: "no progress for 1000 ms (idle limit; ...)", with a
     google.rpc.ErrorInfo in grpc-status-details-bin (reason SW4RM_RPC_TIMEOUT,
     phase idle, idle_limit_ms 1000, detected_by server). With a 30 s deadline the
     cap is the inbound deadline (source inherited); with none, the guard's 60 s.
  3. InvokeTool `stuck` (unary): DEADLINE_EXCEEDED with the same details.
  4. A caller that cancels: the server is told the caller went away (CallerGone),
     never a timeout.

(Five checks in all: check 2 runs with a 30 s deadline and with none.)

Run from the repository root (needs `pip install grpcio grpcio-tools grpcio-status`):

    python3 tests/grpcio/long_work.py

It builds and starts `cargo run --example long_tool -- --serve 127.0.0.1:0` itself
(or the executable `SW4RM_LONG_TOOL` names, as `.ci/run` does with the one `cargo test`
built), or uses the server at `--addr HOST:PORT` (then check 5 reads nothing of the
server).
Exit 0 when every check holds; it prints one line per check.
"""

import argparse
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

import grpc
from grpc_status import rpc_status
from grpc_tools import protoc
from google.rpc import error_details_pb2

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def compile_protos(out):
    """Python classes for tool.proto, from this repository's own proto/."""
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    rc = protoc.main(
        [
            "protoc",
            f"-I{os.path.join(ROOT, 'proto')}",
            f"-I{include}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            "tool.proto",
        ]
    )
    if rc != 0:
        sys.exit(f"protoc failed on proto/tool.proto ({rc})")
    sys.path.insert(0, out)


class Server:
    """The example's tool server, its `server:` lines collected as they come."""

    def __init__(self):
        built = os.environ.get("SW4RM_LONG_TOOL")
        command = [built] if built else ["cargo", "run", "-q", "--example", "long_tool", "--"]
        self.proc = subprocess.Popen(
            command + ["--serve", "127.0.0.1:0"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = self.proc.stdout.readline().strip()
        if not first.startswith("listening on "):
            self.proc.kill()
            sys.exit(f"the example did not start: {first!r}")
        self.addr = first[len("listening on "):]
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def told(self, prefix, within=10.0):
        """The next `server:` line that starts with `prefix`."""
        end = time.monotonic() + within
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                break
            if line.startswith(prefix):
                return line
        return None

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def timeout_info(err):
    """The ErrorInfo our server attached, read with grpcio-status."""
    status = rpc_status.from_call(err)
    assert status is not None, "no grpc-status-details-bin"
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError(f"no ErrorInfo in {status}")


def check(name, fn):
    try:
        said = fn()
    except AssertionError as e:
        print(f"FAIL {name}: {e}")
        return False
    print(f"ok   {name}: {said}")
    return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--addr", help="a running `long_tool --serve` (default: start one)")
    args = parser.parse_args()
    out = tempfile.mkdtemp(prefix="sw4rm-grpcio-")
    compile_protos(out)
    import tool_pb2
    import tool_pb2_grpc

    server = None if args.addr else Server()
    addr = args.addr or server.addr
    channel = grpc.insecure_channel(addr)
    stub = tool_pb2_grpc.ToolServiceStub(channel)

    def steady():
        frames = list(stub.CallStream(tool_pb2.ToolCall(tool_name="steady"), timeout=30))
        results = [f.data.decode() for f in frames if f.data]
        assert results == ["rows 300-399", "rows 700-799", "rows 1100-1199"], results
        return f"OK after {len(frames)} frames ({len(results)} results, the rest progress)"

    def stuck(deadline, cap_source):
        def run():
            frames = []
            call = stub.CallStream(tool_pb2.ToolCall(tool_name="stuck"), timeout=deadline)
            try:
                for f in call:
                    frames.append(f)
                raise AssertionError("the stream ended OK")
            except grpc.RpcError as e:
                err = e
                assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED, err.code()
                assert "no progress for 1000 ms (idle limit; cap " in err.details(), err.details()
                info = timeout_info(err)
                m = dict(info.metadata)
                assert info.reason == "SW4RM_RPC_TIMEOUT", info.reason
                assert m["phase"] == "idle", m
                assert m["source"] == "server", m  # the guard's limit, not the caller's
                assert m["idle_limit_ms"] == "1000", m
                assert m["detected_by"] == "server", m
                assert m["method"] == "CallStream", m
                assert int(m["progress_count"]) == 5, m
                assert int(m["message_count"]) == len(frames), (m, len(frames))
                # The cap the guard ran under: the caller's deadline when it is the
                # smaller. gRPC core rounds the grpc-timeout it sends up (a 16-bit
                # value and a unit: 30 s less a moment goes out as 301 tenths of a
                # second), so the inherited cap is at most 30,100 ms.
                cap = int(m["cap_ms"])
                if cap_source == "inherited":
                    assert 25_000 < cap <= 30_100, m
                else:
                    assert cap == 60_000, cap
            results = [f.data.decode() for f in frames if f.data]
            assert results == ["rows 300-399"], results
            return f"{len(frames)} frames delivered, then DEADLINE_EXCEEDED: {err.details()}"

        return run

    def unary_stuck():
        call = tool_pb2.InvokeToolRequest(call=tool_pb2.ToolCall(tool_name="stuck"))
        try:
            stub.InvokeTool(call, timeout=30)
            raise AssertionError("answered OK")
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED, err.code()
            assert "no progress for 1000 ms (idle limit" in err.details(), err.details()
            m = dict(timeout_info(err).metadata)
            assert (m["phase"], m["method"], m["progress_count"]) == ("idle", "InvokeTool", "5"), m
            if server:
                told = server.told("server: InvokeTool stuck:")
                assert told and "Idle after 5 progress reports, 1 results produced" in told, told
            return f"DEADLINE_EXCEEDED: {err.details()}"

    def cancelled():
        call = stub.CallStream(tool_pb2.ToolCall(tool_name="steady"), timeout=30)
        first = next(call)
        call.cancel()
        assert call.code() == grpc.StatusCode.CANCELLED, call.code()
        if not server:
            return "cancelled (the server's side is not read with --addr)"
        told = server.told("server: CallStream steady:")
        assert told and "CallerGone" in told, told
        return f"after frame {first.frame_no}: {told}"

    try:
        results = [
            check("a working tool runs past its idle limit", steady),
            check("a stuck tool, 30 s deadline", stuck(30, "inherited")),
            check("a stuck tool, no deadline", stuck(None, "guard")),
            check("a stuck unary tool", unary_stuck),
            check("a caller that cancels", cancelled),
        ]
    finally:
        if server:
            server.stop()
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
