"""Asks a locker's Envoy rate-limit service once, as Envoy would, and prints
the answer: one `ShouldRateLimit` call with one descriptor.

    python3 examples/rls_ask.py 127.0.0.1:8081 messaging message_type=marketing to_number=2061111111

prints `OK` or `OVER_LIMIT`, then each descriptor's status (its limit and
what is left), and exits 0 on OK, 1 on OVER_LIMIT, 2 on an error. The
client is generated at run time from Envoy's message definitions kept in
tests/rls/proto (needs `pip install grpcio grpcio-tools`), as the gRPC
tests and benches/rls_grpc.py do. Loopback or any address; one call.
"""

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stubs(out):
    """Generates the Python client of Envoy's RLS API into `out`."""
    import grpc_tools
    from grpc_tools import protoc

    includes = Path(grpc_tools.__file__).parent / "_proto"
    protos = [
        "envoy/service/ratelimit/v3/rls.proto",
        "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
        "envoy/config/core/v3/base.proto",
    ]
    args = ["protoc", f"-I{ROOT / 'tests' / 'rls' / 'proto'}", f"-I{includes}", f"--python_out={out}"]
    if protoc.main(args + [f"--grpc_python_out={out}"] + protos) != 0:
        sys.exit("could not generate the RLS client from tests/rls/proto")
    sys.path.insert(0, out)


def main(argv):
    if len(argv) < 3 or not all("=" in e for e in argv[2:]):
        sys.exit(__doc__)
    address, domain, entries = argv[0], argv[1], [e.split("=", 1) for e in argv[2:]]
    with tempfile.TemporaryDirectory() as out:
        stubs(out)
        import grpc
        from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

        request = rls_pb2.RateLimitRequest(domain=domain)
        descriptor = request.descriptors.add()
        for key, value in entries:
            descriptor.entries.add(key=key, value=value)
        with grpc.insecure_channel(address) as channel:
            try:
                reply = rls_pb2_grpc.RateLimitServiceStub(channel).ShouldRateLimit(request, timeout=5)
            except grpc.RpcError as e:
                print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
                return 2
        code = rls_pb2.RateLimitResponse.Code.Name(reply.overall_code)
        print(code)
        for status in reply.statuses:
            limit = status.current_limit
            unit = rls_pb2.RateLimitResponse.RateLimit.Unit.Name(limit.unit) if limit.requests_per_unit else "-"
            name = rls_pb2.RateLimitResponse.Code.Name(status.code)
            print(f"  {name}: {limit.requests_per_unit} per {unit}, {status.limit_remaining} left")
        return 0 if code == "OK" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
