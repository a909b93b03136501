"""The locker's ShouldRateLimit over gRPC against envoyproxy/ratelimit's way
of deciding, one Redis script call per decision, on the same machine, from
the same client, in one run.

- "locker": ShouldRateLimit calls over gRPC to a locker serving
  envoyproxy/ratelimit's README examples (tests/rls/config), one
  descriptor each, fresh keys (a go each): the whole decision, gRPC
  included.
- "redis": one EVAL of a fixed-window script (INCRBY, then PEXPIRE on the
  first hit: what envoyproxy/ratelimit sends Redis for each descriptor) per
  decision, over the same number of connections, on a Redis started here:
  the Redis round trip alone, without the gRPC call that service also
  serves, so a bound it cannot beat;
- "grpc+redis": that service's path, emulated from the client: a gRPC call
  the locker answers without deciding (a descriptor no rule matches, so
  nothing reaches its loop), then the script call on Redis, in turn. Its
  latency is the two legs envoyproxy/ratelimit adds up for each decision
  (Envoy's gRPC call, its Redis round trip), with the locker's gRPC stack
  standing in for its Go one.

Both sides use the same Python asyncio client loop (grpc.aio; a raw RESP
connection per caller), so the client's cost weighs on both; rounds
alternate between the two, and each row is the median of ROUNDS. The ratio
is locker / grpc+redis: calls/s above 1 and p99 below 1 favour the locker.

    python3 benches/rls_redis.py [SECONDS_PER_ROUND] [ROUNDS]

Needs grpcio, grpcio-tools and redis-server; LOCKER_BIN names the binary
(target/release/locker by default). Loopback only; everything it starts is
stopped on exit.
"""

import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rls_grpc  # noqa: E402

SCRIPT = "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) if n == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], 60000) end return n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(*parts):
    out = [f"*{len(parts)}\r\n".encode()]
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
    return b"".join(out)


async def timed(concurrency, seconds, one):
    """Runs `one(caller, n)` from `concurrency` callers for `seconds`:
    calls/s and the latencies, sorted."""
    latencies = []
    end = time.perf_counter() + seconds

    async def caller(i):
        n = 0
        state = await one(i, None)
        while time.perf_counter() < end:
            start = time.perf_counter()
            await one(i, (state, n))
            latencies.append(time.perf_counter() - start)
            n += 1

    began = time.perf_counter()
    await asyncio.gather(*(caller(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - began
    latencies.sort()
    return len(latencies) / elapsed, latencies


async def locker_round(address, concurrency, seconds, tag):
    import grpc
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

    channel = grpc.aio.insecure_channel(address)
    stub = rls_pb2_grpc.RateLimitServiceStub(channel)

    async def one(i, call):
        if call is None:
            return None
        _, n = call
        request = rls_pb2.RateLimitRequest(domain="messaging")
        request.descriptors.add().entries.add(key="to_number", value=f"{tag}-{i}-{n}")
        reply = await stub.ShouldRateLimit(request)
        assert reply.overall_code == rls_pb2.RateLimitResponse.OK

    try:
        return await timed(concurrency, seconds, one)
    finally:
        await channel.close()


async def redis_round(port, sha, concurrency, seconds, tag, address=None):
    """One script call per decision; first a gRPC call the locker answers
    without deciding when `address` is given (the grpc+redis side)."""
    import grpc
    from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

    connections = {}
    channel = grpc.aio.insecure_channel(address) if address else None
    stub = rls_pb2_grpc.RateLimitServiceStub(channel) if channel else None

    async def one(i, call):
        if call is None:
            connections[i] = await asyncio.open_connection("127.0.0.1", port)
            return connections[i]
        (reader, writer), n = call
        if stub:
            request = rls_pb2.RateLimitRequest(domain="messaging")
            request.descriptors.add().entries.add(key="unmatched", value=f"{tag}-{i}-{n}")
            await stub.ShouldRateLimit(request)
        writer.write(resp("EVALSHA", sha, "1", f"ratelimit_messaging_to_number_{tag}-{i}-{n}_0", "1"))
        line = await reader.readline()
        assert line.startswith(b":"), line

    try:
        return await timed(concurrency, seconds, one)
    finally:
        for _, writer in connections.values():
            writer.close()
        if channel:
            await channel.close()


def start_redis(port, folder):
    """A Redis on `port` with the script loaded: the process and the script's sha."""
    redis = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", folder],
        stdout=subprocess.DEVNULL,
    )
    end = time.monotonic() + 10
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            break
        except OSError:
            if time.monotonic() > end:
                sys.exit("redis-server did not start")
            time.sleep(0.02)
    with s, s.makefile("rb") as replies:
        s.sendall(resp("SCRIPT", "LOAD", SCRIPT))
        head = replies.readline()
        assert head.startswith(b"$"), head
        sha = replies.readline().strip().decode()
    return redis, sha


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if not shutil.which("redis-server"):
        sys.exit("needs redis-server (Debian: redis-server)")
    locker, address = rls_grpc.start_locker()
    redis = None
    try:
        with tempfile.TemporaryDirectory() as out:
            port = free_port()
            redis, sha = start_redis(port, out)
            rls_grpc.stubs(out)
            print(f"{'in flight':>9} {'':10} {'calls/s':>9} {'p50 ms':>7} {'p99 ms':>7}   (median of {rounds} rounds of {seconds:g} s)")
            for concurrency in (1, 16):
                sides = ["locker", "grpc+redis", "redis"]
                rows = {side: [] for side in sides}
                for r in range(rounds):
                    for side in sides if r % 2 == 0 else sides[::-1]:
                        tag = f"{concurrency}-{r}"
                        if side == "locker":
                            rate, lat = asyncio.run(locker_round(address, concurrency, seconds, tag))
                        else:
                            via = address if side == "grpc+redis" else None
                            rate, lat = asyncio.run(redis_round(port, sha, concurrency, seconds, tag, via))
                        rows[side].append((rate, lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3))
                med = {k: [statistics.median(x[j] for x in v) for j in range(3)] for k, v in rows.items()}
                for side in sides:
                    rate, p50, p99 = med[side]
                    print(f"{concurrency:9} {side:10} {rate:9.0f} {p50:7.2f} {p99:7.2f}")
                vs = med["grpc+redis"]
                ratio = [med["locker"][0] / vs[0], med["locker"][1] / vs[1], med["locker"][2] / vs[2]]
                print(f"{concurrency:9} {'ratio':10} {ratio[0]:9.2f} {ratio[1]:7.2f} {ratio[2]:7.2f}   (locker / grpc+redis)")
    finally:
        locker.terminate()
        locker.wait()
        if redis:
            redis.terminate()
            redis.wait()


if __name__ == "__main__":
    main()
