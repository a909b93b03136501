#!/usr/bin/env bash
# The locker against the transport's limit, in one run: starts the bare echo
# server (examples/echo_server.rs) and `locker serve` side by side, loads
# each with the same `locker bench` runs, alternating between the two to
# spread out the noise of a shared machine, and prints the median of each
# figure and of the per-round ratio locker/echo. Beside each figure it prints
# the CPU time the server process spent per request (user + system, from
# /proc), which other programs on the machine disturb far less than rates.
#
#   bash benches/compare.sh                 # about six minutes
#   ROUNDS=5 DURATION=3s bash benches/compare.sh
#   SERVER=/path/to/other/locker bash benches/compare.sh
#
# The last rows load the locker alone with batched asks (BATCH asks per
# message, 100 by default) from several load shapes (BATCH_SHAPES, by
# default 4 clients x 4 in flight, 2 x 4 and 1 x 8) and print decisions per
# second.
#
# KINDS (by default "bucket rolling") adds, for each counting kind besides
# the fixed window, a limit of that kind with its own KEYS live keys, a
# structured row against the echo and a batch row (the first shape).
#
# Load goes to 127.0.0.1 only. Both servers are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

# Many short rounds rather than a few long ones: the machine's background
# load changes slowly, so neighbouring runs see the same conditions. Both
# servers stay up across rounds and are warm after the prefill.
ROUNDS=${ROUNDS:-9}
DURATION=${DURATION:-1s}
KEYS=${KEYS:-1000000}
# More flags for `locker serve`, e.g. LOCKER_ARGS='--metrics-bind 127.0.0.1:0'.
LOCKER_ARGS=${LOCKER_ARGS:-}
KINDS=${KINDS-bucket rolling}

cargo build --release --quiet --bin locker --example echo_server
LOCKER=target/release/locker
# The locker that serves, by default this build. Another build (an earlier
# commit's, say) is measured by its ratios to the same echo under the same
# load generator, which stays this build's `locker bench`.
SERVER=${SERVER:-$LOCKER}
ECHO=target/release/examples/echo_server

PIDS=()
CONF=$(mktemp --suffix .toml)
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -f "$CONF"
}
trap cleanup EXIT

# One limit per kind in KINDS, as roomy as the default one.
algorithm_of() { case $1 in bucket) echo token-bucket ;; rolling) echo rolling-window ;; *) echo "$1" ;; esac; }
for kind in $KINDS; do
  printf '[[limits]]\nname = "%s"\nmax_requests = 1000000000\nin_seconds = 86400\nalgorithm = "%s"\n' \
    "$kind" "$(algorithm_of "$kind")" >>"$CONF"
done
NKINDS=$(($(wc -w <<<"$KINDS") + 1))

# Starts a server and sets ENDPOINT from the `listening on` line it prints once
# bound: waiting for that line, not for a fixed time, is how we know it is up.
start() {
  local fifo line
  fifo=$(mktemp -u)
  mkfifo "$fifo"
  "$@" >"$fifo" &
  PID=$!
  PIDS+=("$PID")
  exec {out}<"$fifo"
  rm "$fifo"
  read -r -t 30 -u "$out" line || { echo "$1 printed no endpoint" >&2; exit 1; }
  ENDPOINT=${line#listening on }
}

start "$ECHO" 'tcp://127.0.0.1:*'
ECHO_EP=$ENDPOINT
ECHO_PID=$PID
# One limit with room for every request of the run and a day-long slot, so
# all keys stay live while measured (slots are aligned to the Unix epoch: a
# run across midnight UTC would see them dropped, and the live-key count
# printed below would say so).
LOCKER_LOG=warn start "$SERVER" serve --bind 'tcp://127.0.0.1:*' --config "$CONF" \
  --max-requests 1000000000 --in-seconds 86400 --max-keys "$((NKINDS * KEYS + 1))" $LOCKER_ARGS
LOCKER_EP=$ENDPOINT
LOCKER_PID=$PID

# bench ENDPOINT ARGS... -> the report on stdout
bench() {
  local ep=$1
  shift
  "$LOCKER" bench --connect "$ep" --duration "$DURATION" --timeout 5s "$@"
}
rate() { awk '$1 == "requests/s" { print $2 }'; }
p99() { awk '$1 == "latency_us" { print $5 }'; }
count() { awk '$1 == "requests" { print $2 }'; }
# CPU clock ticks (user + system) a process has used so far.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
HZ=$(getconf CLK_TCK)

# measure SERVER ARGS... -> sets V (the scenario's figure) and CPU (server
# CPU microseconds per request)
measure() {
  local pid=$1 ep=$2 pick=$3 before report
  shift 3
  before=$(ticks "$pid")
  report=$(bench "$ep" "$@")
  V=$($pick <<<"$report")
  CPU=$(awk -v t="$(($(ticks "$pid") - before))" -v n="$(count <<<"$report")" -v hz="$HZ" \
    'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
}

# Every key once into the locker before anything is timed (and the same load
# into the echo server, so both runs see the same generator).
echo "prefilling $KEYS keys..." >&2
"$LOCKER" bench --connect "$ECHO_EP" --keys "$KEYS" --prefill --clients 4 --pipeline 64 --duration 100ms >/dev/null
REPLY=$("$LOCKER" bench --connect "$LOCKER_EP" --keys "$KEYS" --prefill --clients 4 --pipeline 64 --duration 100ms |
  awk '$1 == "reply_bytes" { printf "%.0f", $2 }')
for kind in $KINDS; do
  "$LOCKER" bench --connect "$LOCKER_EP" --limit "$kind" --keys "$KEYS" --prefill --clients 4 --pipeline 64 \
    --duration 100ms >/dev/null
done

# A second baseline for the structured form: the echo server answering with
# as many bytes as the locker's structured reply, which tells the transport's
# cost of the larger reply from the locker's own.
start "$ECHO" 'tcp://127.0.0.1:*' "$REPLY"
SIZED_EP=$ENDPOINT
SIZED_PID=$PID

# A third: the echo server on a ROUTER socket, as the locker serves, which
# tells that socket's own cost (its envelopes) from the locker's.
start "$ECHO" 'tcp://127.0.0.1:*' 2 router
ROUTER_EP=$ENDPOINT
ROUTER_PID=$PID

# A second locker with holding off (--max-parked 0): nothing can wait, so
# it serves on a REP socket, against the REP echo.
LOCKER_LOG=warn start "$SERVER" serve --bind 'tcp://127.0.0.1:*' --max-parked 0 \
  --max-requests 1000000000 --in-seconds 86400 $LOCKER_ARGS
REP_LOCKER_EP=$ENDPOINT
REP_LOCKER_PID=$PID

NAMES=("plain, 4 clients x 64 in flight (req/s)"
  "structured, ${KEYS} live keys, 4 x 64 (req/s)"
  "plain, 4 REQ clients: p99 latency (us)"
  "  the same vs an echo of ${REPLY}-byte replies"
  "plain, 4 x 64, vs an echo on a ROUTER socket"
  "plain, 4 x 64, holding off (REP socket) vs echo")
ARGS=("--plain --clients 4 --pipeline 64"
  "--keys $KEYS --clients 4 --pipeline 64"
  "--plain --clients 4 --pipeline 1"
  "--keys $KEYS --clients 4 --pipeline 64"
  "--plain --clients 4 --pipeline 64"
  "--plain --clients 4 --pipeline 64")
PICK=(rate rate p99 rate rate rate)
BASE_EP=("$ECHO_EP" "$ECHO_EP" "$ECHO_EP" "$SIZED_EP" "$ROUTER_EP" "$ECHO_EP")
BASE_PID=("$ECHO_PID" "$ECHO_PID" "$ECHO_PID" "$SIZED_PID" "$ROUTER_PID" "$ECHO_PID")
LOCK_EP=("$LOCKER_EP" "$LOCKER_EP" "$LOCKER_EP" "$LOCKER_EP" "$LOCKER_EP" "$REP_LOCKER_EP")
LOCK_PID=("$LOCKER_PID" "$LOCKER_PID" "$LOCKER_PID" "$LOCKER_PID" "$LOCKER_PID" "$REP_LOCKER_PID")
for kind in $KINDS; do
  NAMES+=("structured, ${KEYS} keys, 4 x 64, $(algorithm_of "$kind")")
  ARGS+=("--limit $kind --keys $KEYS --clients 4 --pipeline 64")
  PICK+=(rate)
  BASE_EP+=("$ECHO_EP")
  BASE_PID+=("$ECHO_PID")
  LOCK_EP+=("$LOCKER_EP")
  LOCK_PID+=("$LOCKER_PID")
done

declare -A ECHO_V LOCKER_V RATIO_V ECHO_C LOCKER_C CPU_RATIO
for round in $(seq "$ROUNDS"); do
  for i in "${!NAMES[@]}"; do
    # Alternate which server goes first, so a trend in the machine's load
    # does not favour one of them.
    order=(echo locker)
    ((round % 2)) || order=(locker echo)
    for server in "${order[@]}"; do
      # shellcheck disable=SC2086
      if [ "$server" = echo ]; then
        measure "${BASE_PID[$i]}" "${BASE_EP[$i]}" "${PICK[$i]}" ${ARGS[$i]}
        e=$V ec=$CPU
      else
        measure "${LOCK_PID[$i]}" "${LOCK_EP[$i]}" "${PICK[$i]}" ${ARGS[$i]}
        l=$V lc=$CPU
      fi
    done
    ECHO_V[$i]+="$e " LOCKER_V[$i]+="$l " RATIO_V[$i]+="$(ratio "$l" "$e") "
    ECHO_C[$i]+="$ec " LOCKER_C[$i]+="$lc " CPU_RATIO[$i]+="$(ratio "$lc" "$ec") "
    printf 'round %d  %-48s echo %10s (%6s us cpu)  locker %10s (%6s us cpu)\n' \
      "$round" "${NAMES[$i]}" "$e" "$ec" "$l" "$lc" >&2
  done
done

# Batched asks: decisions per second with batches of BATCH asks over all the
# live keys, for each load shape in BATCH_SHAPES (CLIENTSxIN_FLIGHT: client
# threads, batch messages in flight per client). The echo server cannot
# answer a batch, so these rows have no ratio; compare them with the
# criterion figure of `respond/batches of 100, 1M live keys`. Beside each:
# the server's CPU per decision, and the share of a core it used while
# timed, which tells whether the locker's core was the limit.
BATCH=${BATCH:-100}
BATCH_SHAPES=${BATCH_SHAPES:-4x4 2x4 1x8}
# Each row: a shape, and the limit it asks (the default: the fixed window).
ROWS=$BATCH_SHAPES
for kind in $KINDS; do ROWS+=" ${BATCH_SHAPES%% *}:$kind"; done
decisions() { awk '$1 == "decisions/s" { print $2 }'; }
declare -A BATCH_V BATCH_C BATCH_CORE
for round in $(seq "$ROUNDS"); do
  for row in $ROWS; do
    shape=${row%%:*}
    limit=()
    [ "$row" = "$shape" ] || limit=(--limit "${row#*:}")
    before=$(ticks "$LOCKER_PID")
    report=$(bench "$LOCKER_EP" "${limit[@]}" --keys "$KEYS" --batch "$BATCH" --clients "${shape%x*}" --pipeline "${shape#*x}")
    t=$(($(ticks "$LOCKER_PID") - before))
    v=$(decisions <<<"$report")
    n=$(awk '$1 == "decisions" { print $2 }' <<<"$report")
    secs=$(awk '$1 == "requests" { print $4 }' <<<"$report")
    c=$(awk -v t="$t" -v n="$n" -v hz="$HZ" 'BEGIN { printf "%.3f", t / hz * 1e6 / n }')
    core=$(awk -v t="$t" -v s="$secs" -v hz="$HZ" 'BEGIN { printf "%.2f", t / hz / s }')
    BATCH_V[$row]+="$v " BATCH_C[$row]+="$c " BATCH_CORE[$row]+="$core "
    printf 'round %d  %-48s locker %10s (%6s us cpu per decision, %s of a core)\n' \
      "$round" "batches of $BATCH, ${KEYS} live keys, $row" "$v" "$c" "$core" >&2
  done
done

med() { tr ' ' '\n' <<<"$1" | grep . | median; }
live=$("$LOCKER" stats --connect "$LOCKER_EP" --json | sed -n 's/.*"live_keys":\([0-9]*\).*/\1/p')
echo
echo "medians of $ROUNDS rounds of $DURATION each; locker live keys at the end: $live"
printf '%-48s %10s %10s %8s   %s\n' "scenario" "echo" "locker" "ratio" "server CPU us/request: echo, locker, ratio"
for i in "${!NAMES[@]}"; do
  printf '%-48s %10s %10s %8s   %6s %6s %6s\n' "${NAMES[$i]}" \
    "$(med "${ECHO_V[$i]}")" "$(med "${LOCKER_V[$i]}")" "$(med "${RATIO_V[$i]}")" \
    "$(med "${ECHO_C[$i]}")" "$(med "${LOCKER_C[$i]}")" "$(med "${CPU_RATIO[$i]}")"
done
# A batch row's ratio is against the echo's message rate (the plain row's
# echo): how many decisions one message of the transport carries.
ECHO_RATE=$(med "${ECHO_V[0]}")
for row in $ROWS; do
  v=$(med "${BATCH_V[$row]}")
  printf '%-48s %10s %10s %8s   %6s %6s   %s of a core\n' "batches of $BATCH, ${KEYS} live keys, $row (decisions/s)" \
    "$ECHO_RATE" "$v" "$(ratio "$v" "$ECHO_RATE")" "-" "$(med "${BATCH_C[$row]}")" "$(med "${BATCH_CORE[$row]}")"
done
