"""ShouldRateLimit calls per second and their latency, over gRPC, against a
locker serving envoyproxy/ratelimit's README examples (tests/rls/config).

A rough first figure, not the issue's bench: the client is Python's asyncio
gRPC on the same machine, so it measures the two together. Each call asks
fresh keys (a go each). Needs grpcio and grpcio-tools; LOCKER_BIN names the
binary (target/release/locker by default).

    python3 benches/rls_grpc.py [SECONDS]
"""

import asyncio
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKER = os.environ.get("LOCKER_BIN", str(ROOT / "target" / "release" / "locker"))


def stubs(out):
    import grpc_tools
    from grpc_tools import protoc

    includes = Path(grpc_tools.__file__).parent / "_proto"
    protos = [
        "envoy/service/ratelimit/v3/rls.proto",
        "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
        "envoy/config/core/v3/base.proto",
    ]
    args = ["protoc", f"-I{ROOT / 'tests' / 'rls' / 'proto'}", f"-I{includes}", f"--python_out={out}"]
    assert protoc.main(args + [f"--grpc_python_out={out}"] + protos) == 0
    sys.path.insert(0, out)


async def run(address, concurrency, seconds, descriptors):
    import grpc
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

    channel = grpc.aio.insecure_channel(address)
    stub = rls_pb2_grpc.RateLimitServiceStub(channel)
    latencies = []
    end = time.perf_counter() + seconds

    async def caller(i):
        n = 0
        while time.perf_counter() < end:
            request = rls_pb2.RateLimitRequest(domain="messaging")
            for d in range(descriptors):
                request.descriptors.add().entries.add(key="to_number", value=f"{i}-{n}-{d}")
            start = time.perf_counter()
            await stub.ShouldRateLimit(request)
            latencies.append(time.perf_counter() - start)
            n += 1

    began = time.perf_counter()
    await asyncio.gather(*(caller(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - began
    await channel.close()
    latencies.sort()
    p50, p99 = (latencies[int(len(latencies) * q)] * 1e3 for q in (0.5, 0.99))
    print(f"{concurrency:3} in flight, {descriptors:2} descriptors: {len(latencies) / elapsed:8.0f} calls/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms")


def start_locker():
    """A locker serving the README examples over gRPC on a free port: the
    process and the gRPC address."""
    config = ROOT / "tests" / "rls" / "config"
    args = ["serve", "--bind", "tcp://127.0.0.1:*", "--rls-bind", "127.0.0.1:0", "--rls-config", str(config)]
    locker = subprocess.Popen([LOCKER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in locker.stderr:
        found = re.search(r"over grpc address=(\S+)", line)
        if found:
            break
    else:
        locker.kill()
        sys.exit("the locker did not start")
    # Its log keeps being read, so that it never waits on a full pipe.
    threading.Thread(target=lambda: [None for _ in locker.stderr], daemon=True).start()
    return locker, found.group(1)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    locker, address = start_locker()
    try:
        with tempfile.TemporaryDirectory() as out:
            stubs(out)
            for concurrency, descriptors in [(1, 1), (16, 1), (64, 1), (16, 10)]:
                asyncio.run(run(address, concurrency, seconds, descriptors))
    finally:
        locker.terminate()
        locker.wait()


if __name__ == "__main__":
    main()
