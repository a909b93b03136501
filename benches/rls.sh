#!/usr/bin/env bash
# Envoy's rate-limit service (gRPC ShouldRateLimit) on the locker against
# Kuadrant's limitador-server (Rust, tonic, counters in memory), in one run on
# this machine: the same h2load load (nghttp2's HTTP/2 load generator sending
# unary gRPC) against each, the two alternating run by run and round by
# round, so a change in the machine's background load touches both alike.
# Prints, as medians over the rounds, each server's calls/s, its CPU per
# call (user + system of the whole server process from /proc/PID/stat,
# divided by the calls h2load completed) and its latency (the p50 of
# lockstep runs, h2load's mean of the others), and the
# per-round ratios locker / limitador with their ranges, for three loads:
#
#   (a) 4 connections x 16 streams, limit 1,000,000 a second: every call OK
#   (b) the same with a limit of 100 a second: nearly every call OVER_LIMIT
#   (c) lockstep, 1 connection x 1 stream (limit 1,000,000 a second)
#
# Every call is the same RateLimitRequest{domain "bench", descriptors
# [{user: alice}], hits_addend 1}; the locker reads envoyproxy/ratelimit's
# YAML (`domain: bench`, a `user` descriptor), limitador its own limits file
# (namespace bench, the counter qualified by descriptors[0].user). Each
# limit runs in its own server process (two per server, all four up for the
# whole run, started the same way, each warmed up once before timing).
# Before measuring, a real gRPC client (python grpcio, stubs generated from
# tests/rls/proto) checks that every server answers OK under (a)'s limit,
# OVER_LIMIT past (b)'s, and refuses a call of more hits than (a)'s limit
# holds (so the limit is really in force); it checks again at the end. h2load
# alone could not tell: it counts HTTP 200 even for a gRPC error. (The
# replies differ: the locker's carry a status per descriptor, with the limit
# and what is left, limitador's only the overall code.)
#
#   bash benches/rls.sh                      # about two and a half minutes
#   ROUNDS=5 DURATION=3 bash benches/rls.sh
#   LOCKER_BIN=/path/to/other/locker bash benches/rls.sh
#
# ROUNDS (10) rounds of six DURATION-second (2) h2load runs. LOCKER_BIN is
# the locker to measure (target/dist/locker when built, else target/release/locker; this script does
# not build it). LIMITADOR_BIN is limitador-server, by default
# ~/.cache/locker-bench/limitador/bin/limitador-server. When it is missing
# the script says how to build it and measures the locker alone; with
# LIMITADOR_BUILD=1 it builds it first (about 40 minutes on two cores):
# LIMITADOR_SRC is a checkout or a git URL (https://github.com/Kuadrant/limitador
# by default), built with its own release profile, needing protobuf-compiler,
# clang and libclang-dev (Debian), cargo and crates.io.
#
# Needs h2load (Debian: nghttp2-client; run as root, the script installs it
# with apt-get when missing) and python3 with grpcio, grpcio-tools and
# grpcio-health-checking. Load goes to 127.0.0.1 only. Every server is
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-2}
# The shipped build (`cargo build --profile dist`) when there is one.
if [ -z "${LOCKER_BIN:-}" ]; then
  LOCKER_BIN=$ROOT/target/release/locker
  [ -x "$ROOT/target/dist/locker" ] && LOCKER_BIN=$ROOT/target/dist/locker
fi
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/locker-bench
LIMITADOR_BIN=${LIMITADOR_BIN:-$CACHE/limitador/bin/limitador-server}
LIMITADOR_SRC=${LIMITADOR_SRC:-https://github.com/Kuadrant/limitador}
OK_LIMIT=1000000
OVER_LIMIT=100
METHOD=/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit

say() { echo "$*" >&2; }
die() { say "rls.sh: $*"; exit 1; }

[ -x "$LOCKER_BIN" ] || die "no locker at $LOCKER_BIN (cargo build --release, or set LOCKER_BIN)"

if ! command -v h2load >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing h2load (nghttp2-client)..."
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nghttp2-client >/dev/null
  else
    die "h2load is missing: sudo apt-get install nghttp2-client"
  fi
fi
python3 -c 'import grpc, grpc_tools, grpc_health' 2>/dev/null ||
  die "python3 needs grpcio, grpcio-tools and grpcio-health-checking (pip install grpcio grpcio-tools grpcio-health-checking)"

build_hint() {
  cat >&2 <<EOF
limitador-server not found at $LIMITADOR_BIN; measuring the locker alone.
To build it (about 40 minutes on two cores), either run this script with
LIMITADOR_BUILD=1 [LIMITADOR_SRC=checkout-or-git-url], or by hand:
  sudo apt-get install protobuf-compiler clang libclang-dev
  git clone https://github.com/Kuadrant/limitador $CACHE/limitador-src
  cd $CACHE/limitador-src && CARGO_TARGET_DIR=$CACHE/limitador/target \\
    nice -n 15 cargo build --release -p limitador-server
  mkdir -p $CACHE/limitador/bin && cp $CACHE/limitador/target/release/limitador-server $CACHE/limitador/bin/
EOF
}

build_limitador() {
  local src=$LIMITADOR_SRC
  if [ ! -d "$src" ]; then
    src=$CACHE/limitador-src
    [ -d "$src/.git" ] || git clone "$LIMITADOR_SRC" "$src"
  fi
  if ! command -v protoc >/dev/null || ! command -v clang >/dev/null; then
    [ "$(id -u)" = 0 ] || die "the build needs: sudo apt-get install protobuf-compiler clang libclang-dev"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler clang libclang-dev >/dev/null
  fi
  say "building limitador-server from $src ($(git -C "$src" rev-parse HEAD 2>/dev/null || echo '?')), log in $CACHE/limitador/build.log..."
  mkdir -p "$CACHE/limitador/bin"
  (cd "$src" && CARGO_TARGET_DIR=$CACHE/limitador/target nice -n 15 cargo build --release -p limitador-server) \
    >"$CACHE/limitador/build.log" 2>&1 || die "the limitador build failed, see $CACHE/limitador/build.log"
  cp "$CACHE/limitador/target/release/limitador-server" "$LIMITADOR_BIN"
}

if [ ! -x "$LIMITADOR_BIN" ] && [ "${LIMITADOR_BUILD:-0}" = 1 ]; then build_limitador; fi
PEER=1
if [ ! -x "$LIMITADOR_BIN" ]; then
  build_hint
  PEER=0
fi

PIDS=()
DIR=$(mktemp -d)
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT

# The request body: a gRPC frame (0, then the length as 4 bytes big-endian)
# around RateLimitRequest, hand-encoded (field numbers in src/rls/proto.rs):
# domain (1) "bench", descriptors (2) [entries (1) [key (1) "user", value
# (2) "alice"]], hits_addend (3) 1.
BODY=$DIR/body
python3 - "$BODY" <<'EOF'
import sys
def field(n, data): return bytes([n << 3 | 2, len(data)]) + data
entry = field(1, b"user") + field(2, b"alice")
request = field(1, b"bench") + field(2, field(1, entry)) + bytes([3 << 3 | 0, 1])
open(sys.argv[1], "wb").write(b"\0" + len(request).to_bytes(4, "big") + request)
EOF

# The checking client: stubs from Envoy's definitions in tests/rls/proto.
python3 - "$DIR/stubs" "$ROOT/tests/rls/proto" <<'EOF'
import sys
from pathlib import Path
import grpc_tools
from grpc_tools import protoc
out, proto = sys.argv[1], sys.argv[2]
Path(out).mkdir()
includes = Path(grpc_tools.__file__).parent / "_proto"
files = ["envoy/service/ratelimit/v3/rls.proto", "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
         "envoy/config/core/v3/base.proto"]
assert protoc.main(["protoc", f"-I{proto}", f"-I{includes}", f"--python_out={out}", f"--grpc_python_out={out}"] + files) == 0
EOF
cat >"$DIR/check.py" <<'EOF'
"""check.py STUBS ADDRESS ready|ok|over LIMIT: exits 0 when the server at
ADDRESS answers as the mode expects, printing what it saw."""
import sys
import time

sys.path.insert(0, sys.argv[1])
import grpc
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

address, mode, limit = sys.argv[2], sys.argv[3], int(sys.argv[4])
stub = rls_pb2_grpc.RateLimitServiceStub(grpc.insecure_channel(address))
Code = rls_pb2.RateLimitResponse.Code


def ask(user, hits=1):
    request = rls_pb2.RateLimitRequest(domain="bench", hits_addend=hits)
    request.descriptors.add().entries.add(key="user", value=user)
    return stub.ShouldRateLimit(request, timeout=5)


def describe(reply):
    s = Code.Name(reply.overall_code)
    for status in reply.statuses:
        s += f" [{Code.Name(status.code)} limit {status.current_limit.requests_per_unit} left {status.limit_remaining}]"
    return s


if mode == "ready":
    # Polls until a call is answered (another user than the measured one).
    deadline = time.monotonic() + 30
    while True:
        try:
            ask("probe")
            sys.exit(0)
        except grpc.RpcError as e:
            if time.monotonic() > deadline:
                sys.exit(f"{address}: no answer in 30 s: {e}")
            time.sleep(0.05)
elif mode == "ok":
    # The measured call is OK, and a call of more hits than the limit holds
    # (another user's counter, and refused, so it takes nothing) is not.
    reply = ask("alice")
    if reply.overall_code != Code.OK or any(s.code != Code.OK for s in reply.statuses):
        sys.exit(f"{address}: expected OK, got {describe(reply)}")
    big = ask("probe-big", limit + 1)
    if big.overall_code != Code.OVER_LIMIT:
        sys.exit(f"{address}: {limit + 1} hits at once should be OVER_LIMIT, got {describe(big)}")
    print(f"OK: {describe(reply)}; {limit + 1} hits at once: {describe(big)}")
elif mode == "over":
    # Calls until one is OVER_LIMIT, which must come soon after LIMIT.
    for n in range(1, 20 * limit + 1):
        reply = ask("alice")
        if reply.overall_code == Code.OVER_LIMIT:
            print(f"OVER_LIMIT at call {n}: {describe(reply)}")
            sys.exit(0)
        if reply.overall_code != Code.OK:
            sys.exit(f"{address}: expected OK or OVER_LIMIT, got {describe(reply)}")
    sys.exit(f"{address}: no OVER_LIMIT in {20 * limit} calls under a limit of {limit} a second")
EOF
check() { python3 "$DIR/check.py" "$DIR/stubs" "$@"; }

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Configs: one per limit, per server.
for limit in $OK_LIMIT $OVER_LIMIT; do
  mkdir -p "$DIR/locker-$limit"
  cat >"$DIR/locker-$limit/bench.yaml" <<EOF
domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: $limit
EOF
  cat >"$DIR/limitador-$limit.yaml" <<EOF
---
- namespace: bench
  max_value: $limit
  seconds: 1
  conditions: []
  variables:
    - descriptors[0].user
EOF
done

# start NAME LIMIT: starts that server with that limit on a free port, sets
# PID and PORT, and polls until it answers.
start() {
  local name=$1 limit=$2
  PORT=$(free_port)
  if [ "$name" = locker ]; then
    LOCKER_LOG=warn "$LOCKER_BIN" serve --bind 'tcp://127.0.0.1:*' --rls-bind "127.0.0.1:$PORT" \
      --rls-config "$DIR/locker-$limit" >"$DIR/$name-$limit.out" 2>"$DIR/$name-$limit.err" &
  else
    env -u RUST_LOG "$LIMITADOR_BIN" --rls-ip 127.0.0.1 --rls-port "$PORT" --http-ip 127.0.0.1 \
      --http-port "$(free_port)" "$DIR/limitador-$limit.yaml" memory >"$DIR/$name-$limit.out" 2>"$DIR/$name-$limit.err" &
  fi
  PID=$!
  PIDS+=("$PID")
  if ! check "127.0.0.1:$PORT" ready "$limit"; then
    cat "$DIR/$name-$limit.err" >&2
    return 1
  fi
}

SERVERS=(locker)
[ "$PEER" = 1 ] && SERVERS+=(limitador)
declare -A SPID SPORT
for server in "${SERVERS[@]}"; do
  for limit in $OK_LIMIT $OVER_LIMIT; do
    if start "$server" "$limit"; then
      SPID[$server-$limit]=$PID SPORT[$server-$limit]=$PORT
    elif [ "$server" = limitador ]; then
      say "limitador-server did not start; measuring the locker alone"
      SERVERS=(locker)
      break
    else
      die "the locker did not start"
    fi
  done
done

# sanity WHEN: each server answers as its limit says, with a real client.
sanity() {
  local server out
  for server in "${SERVERS[@]}"; do
    out=$(check "127.0.0.1:${SPORT[$server-$OK_LIMIT]}" ok "$OK_LIMIT") || die "$server, limit $OK_LIMIT, $1: $out"
    say "$1: $server, limit $OK_LIMIT/s: $out"
    out=$(check "127.0.0.1:${SPORT[$server-$OVER_LIMIT]}" over "$OVER_LIMIT") || die "$server, limit $OVER_LIMIT, $1: $out"
    say "$1: $server, limit $OVER_LIMIT/s: $out"
  done
}
sanity before

HZ=$(getconf CLK_TCK)
# CPU clock ticks (user + system, every thread) a process has used so far.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# h2load PORT CLIENTS STREAMS SECONDS [LOG] -> its report; with LOG=1 a
# per-call log in $DIR/calls. The log costs h2load a write per call, which
# under many streams made h2load itself the bottleneck, so only lockstep
# runs keep one (for the p50); the others report h2load's mean.
h2() {
  local log=()
  rm -f "$DIR/calls" # h2load appends to its log
  [ "${5:-0}" = 1 ] && log=(--log-file="$DIR/calls")
  timeout $(($4 + 60)) h2load -t 1 -c "$2" -m "$3" -D "$4" "${log[@]}" -d "$BODY" \
    -H 'content-type: application/grpc' -H 'te: trailers' "http://127.0.0.1:$1$METHOD"
}

# Every server warm, its connections' and counters' first costs paid, once.
for server in "${SERVERS[@]}"; do
  for limit in $OK_LIMIT $OVER_LIMIT; do h2 "${SPORT[$server-$limit]}" 4 16 1 >/dev/null; done
done

# measure SERVER LIMIT CLIENTS STREAMS -> sets RATE (calls/s), CPU (server
# us per call), P50 (ms: the median of lockstep runs, h2load's mean of the
# others)
measure() {
  local pid=${SPID[$1-$2]} port=${SPORT[$1-$2]} before report t n lockstep=0
  [ "$3 $4" = "1 1" ] && lockstep=1
  before=$(ticks "$pid")
  report=$(h2 "$port" "$3" "$4" "$DURATION" "$lockstep") || die "h2load failed against $1: $report"
  t=$(($(ticks "$pid") - before))
  # requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout
  read -r n bad <<<"$(awk '$1 == "requests:" { print $8, $10 + $12 + $14 }' <<<"$report")"
  ok2xx=$(awk '$1 == "status" && $2 == "codes:" { print $3 }' <<<"$report")
  [ -n "$n" ] && [ "$n" -gt 0 ] && [ "$bad" = 0 ] && [ "$ok2xx" = "$n" ] ||
    die "h2load against $1 saw failures: $report"
  RATE=$(awk '$1 == "finished" { sub(",", "", $4); printf "%.0f", $4 }' <<<"$report")
  CPU=$(awk -v t="$t" -v n="$n" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
  if [ "$lockstep" = 1 ]; then
    P50=$(cut -f3 "$DIR/calls" | sort -n | awk '{ v[NR] = $1 } END { printf "%.3f", v[int((NR + 1) / 2)] / 1000 }')
  else
    # time for request:  MIN MAX MEAN SD +/-SD, each with its unit
    P50=$(awk '$1 == "time" && $3 == "request:" { m = $6; f = 1
      if (m ~ /us$/) f = 0.001; else if (m ~ /ms$/) f = 1; else if (m ~ /s$/) f = 1000
      sub(/[a-z]+$/, "", m); printf "%.3f", m * f }' <<<"$report")
  fi
}

# median VALUES [FORMAT], range VALUES [FORMAT]: of space-separated values
median() {
  tr ' ' '\n' <<<"$1" | grep . | sort -g |
    awk -v f="${2:-%.3f}" '{ v[NR] = $1 } END { printf f, (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
range() {
  tr ' ' '\n' <<<"$1" | grep . | sort -g |
    awk -v f="${2:-%.2f}" 'NR == 1 { lo = $1 } { hi = $1 } END { printf f "-" f, lo, hi }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

ROWS=(a b c)
declare -A NAME LIMIT SHAPE
NAME[a]="(a) 4 conns x 16 streams, all OK"
NAME[b]="(b) 4 x 16, limit 100/s, ~all OVER_LIMIT"
NAME[c]="(c) lockstep 1 x 1"
LIMIT[a]=$OK_LIMIT LIMIT[b]=$OVER_LIMIT LIMIT[c]=$OK_LIMIT
SHAPE[a]="4 16" SHAPE[b]="4 16" SHAPE[c]="1 1"

declare -A V_RATE V_CPU V_P50 R_RATE R_CPU R_P50
began=$(date +%s)
for round in $(seq "$ROUNDS"); do
  for row in "${ROWS[@]}"; do
    # Alternate which server goes first, so a trend in the machine's load
    # favours neither.
    order=("${SERVERS[@]}")
    if ((round % 2 == 0)) && [ "${#SERVERS[@]}" = 2 ]; then order=(limitador locker); fi
    line="round $round  ${NAME[$row]}:"
    for server in "${order[@]}"; do
      # shellcheck disable=SC2086
      measure "$server" "${LIMIT[$row]}" ${SHAPE[$row]}
      V_RATE[$server-$row]+="$RATE " V_CPU[$server-$row]+="$CPU " V_P50[$server-$row]+="$P50 "
      declare "last_rate_$server=$RATE" "last_cpu_$server=$CPU" "last_p50_$server=$P50"
      line+="  $server $RATE calls/s, $CPU us cpu/call, latency $P50 ms"
    done
    if [ "${#SERVERS[@]}" = 2 ]; then
      R_RATE[$row]+="$(ratio "$last_rate_locker" "$last_rate_limitador") "
      R_CPU[$row]+="$(ratio "$last_cpu_locker" "$last_cpu_limitador") "
      R_P50[$row]+="$(ratio "$last_p50_locker" "$last_p50_limitador") "
    fi
    say "$line"
  done
done
took=$(($(date +%s) - began))

sanity after

echo
echo "locker: $LOCKER_BIN"
[ "${#SERVERS[@]}" = 1 ] || echo "limitador: $LIMITADOR_BIN ($("$LIMITADOR_BIN" --version 2>/dev/null | head -1 || true))"
echo "$ROUNDS rounds of ${DURATION}s h2load runs (h2load 1 thread), ${took}s measuring; $(nproc) cores"
echo "latency: the p50 of every call in lockstep runs; h2load's mean under 4 x 16, run without its per-call log"
echo
echo "Absolute figures, medians over rounds (server CPU = utime + stime of the whole process per completed call):"
printf '| %-42s | %-9s | %8s | %11s | %7s |\n' load server calls/s "us CPU/call" "lat. ms"
printf '|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..44})" "-----------" "----------" "-------------" "---------"
for row in "${ROWS[@]}"; do
  for server in "${SERVERS[@]}"; do
    printf '| %-42s | %-9s | %8s | %11s | %7s |\n' "${NAME[$row]}" "$server" \
      "$(median "${V_RATE[$server-$row]}" %.0f)" "$(median "${V_CPU[$server-$row]}" %.1f)" "$(median "${V_P50[$server-$row]}")"
  done
done
if [ "${#SERVERS[@]}" = 2 ]; then
  echo
  echo "Locker / limitador: median of the per-round ratios [their range over rounds]:"
  printf '| %-42s | %-28s | %-33s | %-40s |\n' load "locker calls/s ÷ limitador's" "locker CPU per call ÷ limitador's" "latency: locker, limitador: ÷"
  printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..44})" "$(printf -- '-%.0s' {1..30})" "$(printf -- '-%.0s' {1..35})" "$(printf -- '-%.0s' {1..42})"
  for row in "${ROWS[@]}"; do
    printf '| %-42s | %-28s | %-33s | %-40s |\n' "${NAME[$row]}" \
      "$(median "${R_RATE[$row]}" %.2f) [$(range "${R_RATE[$row]}")]" \
      "$(median "${R_CPU[$row]}" %.2f) [$(range "${R_CPU[$row]}")]" \
      "$(median "${V_P50[locker-$row]}") ms, $(median "${V_P50[limitador-$row]}") ms: $(median "${R_P50[$row]}" %.2f) [$(range "${R_P50[$row]}")]"
  done
else
  echo
  echo "(limitador-server was not available: the locker's own figures only)"
fi
