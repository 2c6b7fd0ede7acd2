"""An OTLP/gRPC receiver that is not the crate's code: the OpenTelemetry project's own
generated services (PyPI's `opentelemetry-proto`) served by grpcio.

It listens on 127.0.0.1 (port 0 unless one is given), prints `listening PORT`, then
one line per export it took: `traces JSON` or `metrics JSON`, the request decoded by
OpenTelemetry's generated protobuf classes and written with protobuf's own JSON
mapping. It runs until killed or its standard input closes.

    python3 tests/otlp/receiver.py [PORT]
"""

import sys
import threading
from concurrent import futures

import grpc
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

LOCK = threading.Lock()


def emit(kind, request):
    line = json_format.MessageToJson(request, indent=None)
    with LOCK:
        sys.stdout.write(f"{kind} {line}\n")
        sys.stdout.flush()


class Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, sink):
        self.sink = sink

    def Export(self, request, context):
        self.sink("traces", request)
        return trace_service_pb2.ExportTraceServiceResponse()


class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, sink):
        self.sink = sink

    def Export(self, request, context):
        self.sink("metrics", request)
        return metrics_service_pb2.ExportMetricsServiceResponse()


def serve(port, sink):
    """Starts the receiver on 127.0.0.1:`port`, giving each export to `sink(kind,
    request)`; returns the server and the port it is bound to."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(sink), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(sink), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, bound


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server, bound = serve(port, emit)
    with LOCK:
        sys.stdout.write(f"listening {bound}\n")
        sys.stdout.flush()
    # Ends when the test that started it closes our standard input (or dies).
    sys.stdin.read()
    server.stop(grace=None)


if __name__ == "__main__":
    main()
