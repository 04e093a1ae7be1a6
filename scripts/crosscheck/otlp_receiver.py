"""A real OTLP/HTTP trace receiver for hookd's tracing test.

Listens on a free loopback port, says where on its first line, then decodes each
`POST /v1/traces` (protobuf, as the `opentelemetry-proto` package defines it) and prints one
JSON line per span: its name, trace and span ids, parent span id, and attributes.
"""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Traces(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            service = {
                a.key: value_of(a.value) for a in resource_spans.resource.attributes
            }.get("service.name")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    print(
                        json.dumps(
                            {
                                "service": service,
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "attributes": {
                                    a.key: value_of(a.value) for a in span.attributes
                                },
                            }
                        ),
                        flush=True,
                    )
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Traces)
print(f"OTLP receiver listening at http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
