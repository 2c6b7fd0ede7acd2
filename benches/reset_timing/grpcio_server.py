"""A grpcio server that records its own calls with gRPC's OpenTelemetry plugin
(grpcio-observability), for benches/reset_timing.rs: which status a grpcio server
counts for a call whose client gives up at the deadline, or a little after it.

Serves /sw4rm.registry.RegistryService/Heartbeat, whose handler outlives any deadline
(it returns when the call is no longer active). Prints `listening PORT`; then, for
each line `report` on stdin, one line of JSON: `grpc.server.call.duration` counts by
`grpc.status` so far.
"""

import json
import sys
import time
from concurrent import futures

import grpc
import grpc_observability
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

METHOD = "/sw4rm.registry.RegistryService/Heartbeat"


def slow(request, context):
    end = time.monotonic() + 10
    while context.is_active() and time.monotonic() < end:
        time.sleep(0.002)
    return b""


def handler(details):
    if details.method != METHOD:
        return None
    return grpc.unary_unary_rpc_method_handler(slow)


class Handlers(grpc.GenericRpcHandler):
    def service(self, details):
        return handler(details)


def counts(reader):
    out = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name != "grpc.server.call.duration":
                    continue
                for point in metric.data.data_points:
                    status = point.attributes.get("grpc.status", "?")
                    out[status] = out.get(status, 0) + point.count
    return out


def main():
    reader = InMemoryMetricReader()
    plugin = grpc_observability.OpenTelemetryPlugin(
        meter_provider=MeterProvider(metric_readers=[reader])
    )
    plugin.register_global()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    server.add_generic_rpc_handlers((Handlers(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"listening {port}", flush=True)
    for line in sys.stdin:
        if line.strip() == "report":
            print(json.dumps(counts(reader)), flush=True)
    server.stop(0)


if __name__ == "__main__":
    main()
