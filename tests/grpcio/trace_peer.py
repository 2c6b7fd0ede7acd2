#!/usr/bin/env python3
"""A grpcio peer for W3C trace context across stacks (`tests/grpcio_trace.rs`): a
Registry server and a caller that know nothing of this crate but the wire.

- It serves `RegistryService/Heartbeat` on 127.0.0.1 and prints `listening PORT`,
  then `seen TRACEPARENT` (or `seen -`) for every call it serves: what a grpcio
  server reads of our client's trace context.
- For each line `call HOST:PORT TRACEPARENT` on its standard input it calls
  Heartbeat there with that `traceparent` in the metadata, as an instrumented grpcio
  caller would, and prints `called CODE`.

It ends when its standard input closes. Needs grpcio and grpcio-tools.
"""

import os
import sys
import tempfile
from concurrent import futures

import grpc
from grpc_tools import protoc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def compile_protos(out):
    """Python classes for registry.proto (and common.proto it imports), from this
    repository's own proto/."""
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    rc = protoc.main([
        "protoc",
        f"-I{os.path.join(ROOT, 'proto')}",
        f"-I{include}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        "registry.proto",
        "common.proto",
    ])
    if rc != 0:
        sys.exit(f"protoc failed on proto/registry.proto ({rc})")
    sys.path.insert(0, out)


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    out = tempfile.mkdtemp()
    compile_protos(out)
    import registry_pb2
    import registry_pb2_grpc

    class Registry(registry_pb2_grpc.RegistryServiceServicer):
        def Heartbeat(self, request, context):
            seen = dict(context.invocation_metadata()).get("traceparent", "-")
            say(f"seen {seen}")
            return registry_pb2.HeartbeatResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    registry_pb2_grpc.add_RegistryServiceServicer_to_server(Registry(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    say(f"listening {port}")

    for line in sys.stdin:
        words = line.split()
        if len(words) != 3 or words[0] != "call":
            continue
        _, target, traceparent = words
        with grpc.insecure_channel(target) as channel:
            stub = registry_pb2_grpc.RegistryServiceStub(channel)
            try:
                stub.Heartbeat(
                    registry_pb2.HeartbeatRequest(),
                    metadata=[("traceparent", traceparent)],
                    timeout=10,
                )
                say("called OK")
            except grpc.RpcError as e:
                say(f"called {e.code().name}")
    server.stop(grace=None)


if __name__ == "__main__":
    main()
