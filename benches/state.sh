#!/usr/bin/env bash
# The price of `--state`, in one run: two lockers with the same limits, one
# keeping a state file and one not, loaded alternately with the same
# `locker bench` runs (plain, and structured over 1M live keys); then the
# stateful one is killed with -9 and restarted, and the time until it
# answers again (restore of every live key included) is printed.
#
#   bash benches/state.sh                 # about two minutes
#   ROUNDS=5 DURATION=3s KEYS=100000 bash benches/state.sh
#
# Load goes to 127.0.0.1 only. Both lockers are stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-7}
DURATION=${DURATION:-2s}
KEYS=${KEYS:-1000000}
FSYNC=${FSYNC:-}

cargo build --release --quiet --bin locker
LOCKER=target/release/locker
DIR=$(mktemp -d)
STATE=$DIR/s.log

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT

# Starts a server and sets ENDPOINT from the `listening on` line it prints
# once bound (and, with --state, restored): that line, not a fixed wait, is
# how we know it is up.
start() {
  local fifo line
  fifo=$(mktemp -u)
  mkfifo "$fifo"
  "$@" >"$fifo" 2>>"$DIR/log" &
  PID=$!
  PIDS+=("$PID")
  exec {out}<"$fifo"
  rm "$fifo"
  read -r -t 120 -u "$out" line || { echo "$1 printed no endpoint" >&2; exit 1; }
  ENDPOINT=${line#listening on }
}

# A day-long slot with room for every request, so all keys stay live.
LIMITS=(--max-requests 1000000000 --in-seconds 86400 --max-keys "$((KEYS + 1))")
STATEFUL=(--state "$STATE")
[ -n "$FSYNC" ] && STATEFUL+=(--state-fsync "$FSYNC")
LOCKER_LOG=warn start "$LOCKER" serve --bind 'tcp://127.0.0.1:*' "${LIMITS[@]}"
PLAIN_EP=$ENDPOINT
PLAIN_PID=$PID
LOCKER_LOG=info start "$LOCKER" serve --bind 'tcp://127.0.0.1:*' "${LIMITS[@]}" "${STATEFUL[@]}"
STATE_EP=$ENDPOINT
STATE_PID=$PID

bench() {
  local ep=$1
  shift
  "$LOCKER" bench --connect "$ep" --duration "$DURATION" --timeout 5s "$@"
}
rate() { awk '$1 == "requests/s" { print $2 }'; }
count() { awk '$1 == "requests" { print $2 }'; }
# CPU clock ticks (user + system, every thread) a process has used so far.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

echo "prefilling $KEYS keys into both..." >&2
for ep in "$PLAIN_EP" "$STATE_EP"; do
  "$LOCKER" bench --connect "$ep" --keys "$KEYS" --prefill --clients 4 --pipeline 64 --duration 100ms >/dev/null
done

NAMES=("plain, 4 clients x 64 in flight (req/s)" "structured, ${KEYS} live keys, 4 x 64 (req/s)")
ARGS=("--plain --clients 4 --pipeline 64" "--keys $KEYS --clients 4 --pipeline 64")
declare -A WITHOUT WITH RATIO CPU_WITHOUT CPU_WITH CPU_RATIO
for round in $(seq "$ROUNDS"); do
  for i in "${!NAMES[@]}"; do
    order=(without with)
    ((round % 2)) || order=(with without)
    for which in "${order[@]}"; do
      ep=$PLAIN_EP pid=$PLAIN_PID
      [ "$which" = with ] && ep=$STATE_EP pid=$STATE_PID
      before=$(ticks "$pid")
      # shellcheck disable=SC2086
      report=$(bench "$ep" ${ARGS[$i]})
      v=$(rate <<<"$report")
      c=$(awk -v t="$(($(ticks "$pid") - before))" -v n="$(count <<<"$report")" -v hz="$HZ" \
        'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
      if [ "$which" = with ]; then s=$v sc=$c; else p=$v pc=$c; fi
    done
    WITHOUT[$i]+="$p " WITH[$i]+="$s " RATIO[$i]+="$(ratio "$s" "$p") "
    CPU_WITHOUT[$i]+="$pc " CPU_WITH[$i]+="$sc " CPU_RATIO[$i]+="$(ratio "$sc" "$pc") "
    printf 'round %d  %-48s without %10s (%5s us cpu)  with --state %10s (%5s us cpu)\n' \
      "$round" "${NAMES[$i]}" "$p" "$pc" "$s" "$sc" >&2
  done
done

med() { tr ' ' '\n' <<<"$1" | grep . | median; }
echo
echo "medians of $ROUNDS rounds of $DURATION each${FSYNC:+, --state-fsync $FSYNC}"
printf '%-48s %12s %14s %8s   %s\n' "scenario" "without" "with --state" "ratio" \
  "server CPU us/request: without, with, ratio"
for i in "${!NAMES[@]}"; do
  printf '%-48s %12s %14s %8s   %6s %6s %6s\n' "${NAMES[$i]}" "$(med "${WITHOUT[$i]}")" "$(med "${WITH[$i]}")" \
    "$(med "${RATIO[$i]}")" "$(med "${CPU_WITHOUT[$i]}")" "$(med "${CPU_WITH[$i]}")" "$(med "${CPU_RATIO[$i]}")"
done

live=$("$LOCKER" stats --connect "$STATE_EP" --json | sed -n 's/.*"live_keys":\([0-9]*\).*/\1/p')
size=$(stat -c %s "$STATE")
kill -9 "$STATE_PID"
wait "$STATE_PID" 2>/dev/null || true
t0=$(date +%s%N)
LOCKER_LOG=info start "$LOCKER" serve --bind 'tcp://127.0.0.1:*' "${LIMITS[@]}" "${STATEFUL[@]}"
t1=$(date +%s%N)
restored=$("$LOCKER" stats --connect "$ENDPOINT" --json | sed -n 's/.*"live_keys":\([0-9]*\).*/\1/p')
echo
echo "kill -9 with $live live keys (state file $((size / 1048576)) MiB), restart: answering after $(((t1 - t0) / 1000000)) ms, $restored keys live"
grep -E "state restored" "$DIR/log" | tail -1 | sed 's/\x1b\[[0-9;]*m//g'
