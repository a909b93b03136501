#!/usr/bin/env bash
# The locker against the transport's limit, in one run: starts the bare echo
# server (examples/echo_server.rs) and `locker serve` side by side, loads
# each with the same `locker bench` runs, alternating between the two to
# spread out the noise of a shared machine, and prints the median of each
# figure and of the per-round ratio locker/echo.
#
#   bash benches/compare.sh                 # about two minutes
#   ROUNDS=5 DURATION=5s bash benches/compare.sh
#
# Load goes to 127.0.0.1 only. Both servers are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3s}
WARMUP=${WARMUP:-500ms}
KEYS=${KEYS:-1000000}

cargo build --release --quiet --bin locker --example echo_server
LOCKER=target/release/locker
ECHO=target/release/examples/echo_server

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# Starts a server and sets ENDPOINT from the `listening on` line it prints once
# bound: waiting for that line, not for a fixed time, is how we know it is up.
start() {
  local fifo line
  fifo=$(mktemp -u)
  mkfifo "$fifo"
  "$@" >"$fifo" &
  PIDS+=($!)
  exec {out}<"$fifo"
  rm "$fifo"
  read -r -t 30 -u "$out" line || { echo "$1 printed no endpoint" >&2; exit 1; }
  ENDPOINT=${line#listening on }
}

start "$ECHO" 'tcp://127.0.0.1:*'
ECHO_EP=$ENDPOINT
# One limit with room for every request of the run and a day-long slot, so
# all keys stay live while measured (slots are aligned to the Unix epoch: a
# run across midnight UTC would see them dropped, and the live-key count
# printed below would say so).
LOCKER_LOG=warn start "$LOCKER" serve --bind 'tcp://127.0.0.1:*' \
  --max-requests 1000000000 --in-seconds 86400 --max-keys "$((KEYS + 1))"
LOCKER_EP=$ENDPOINT

# bench ENDPOINT ARGS... -> the report on stdout
bench() {
  local ep=$1
  shift
  "$LOCKER" bench --connect "$ep" --duration "$DURATION" --warmup "$WARMUP" --timeout 5s "$@"
}
rate() { awk '$1 == "requests/s" { print $2 }'; }
p99() { awk '$1 == "latency_us" { print $5 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

NAMES=("plain, 4 clients x 64 in flight (req/s)"
  "structured, ${KEYS} live keys, 4 x 64 (req/s)"
  "plain, 4 REQ clients: p99 latency (us)")
ARGS=("--plain --clients 4 --pipeline 64"
  "--keys $KEYS --clients 4 --pipeline 64"
  "--plain --clients 4 --pipeline 1")
PICK=(rate rate p99)

# Every key once into the locker before anything is timed (and the same load
# into the echo server, so both runs see the same generator).
echo "prefilling $KEYS keys..." >&2
for ep in "$ECHO_EP" "$LOCKER_EP"; do
  "$LOCKER" bench --connect "$ep" --keys "$KEYS" --prefill --clients 4 --pipeline 64 --duration 100ms >/dev/null
done

declare -A ECHO_V LOCKER_V RATIO_V
for round in $(seq "$ROUNDS"); do
  for i in "${!NAMES[@]}"; do
    # Alternate which server goes first, so a trend in the machine's load
    # does not favour one of them.
    order=("$ECHO_EP" "$LOCKER_EP")
    ((round % 2)) || order=("$LOCKER_EP" "$ECHO_EP")
    for ep in "${order[@]}"; do
      # shellcheck disable=SC2086
      v=$(bench "$ep" ${ARGS[$i]} | ${PICK[$i]})
      if [ "$ep" = "$ECHO_EP" ]; then e=$v; else l=$v; fi
    done
    ECHO_V[$i]+="$e "
    LOCKER_V[$i]+="$l "
    RATIO_V[$i]+="$(awk -v l="$l" -v e="$e" 'BEGIN { printf "%.3f", l / e }') "
    printf 'round %d  %-48s echo %10s  locker %10s\n' "$round" "${NAMES[$i]}" "$e" "$l" >&2
  done
done

live=$("$LOCKER" stats --connect "$LOCKER_EP" --json | sed -n 's/.*"live_keys":\([0-9]*\).*/\1/p')
echo
echo "medians of $ROUNDS rounds of $DURATION each; locker live keys at the end: $live"
printf '%-48s %12s %12s %12s\n' "scenario" "echo" "locker" "locker/echo"
for i in "${!NAMES[@]}"; do
  printf '%-48s %12s %12s %12s\n' "${NAMES[$i]}" \
    "$(tr ' ' '\n' <<<"${ECHO_V[$i]}" | grep . | median)" \
    "$(tr ' ' '\n' <<<"${LOCKER_V[$i]}" | grep . | median)" \
    "$(tr ' ' '\n' <<<"${RATIO_V[$i]}" | grep . | median)"
done
