#!/usr/bin/env bash
# One locker on Redis against the same locker on its embedded table, and
# against Redis doing the same work Envoy's way (one script call per
# decision), all in one run on one machine:
#
# - decisions/s of `locker serve` (embedded) and `locker serve --store
#   redis://…`, loaded by the same `locker bench` runs, alternating between
#   the two: single structured asks over KEYS keys, and batches of BATCH;
# - Redis commands per decision on the store, from `INFO commandstats`
#   (every EVAL call the lockers made, over every decision they answered);
# - `redis-benchmark` running a fixed-window script (INCRBY + PEXPIRE,
#   Envoy's ratelimit does this per decision) on the same Redis, pipelined,
#   over the same number of keys: the most decisions/s Redis gives that way.
#
#   bash benches/store.sh                   # about a minute
#   ROUNDS=5 DURATION=3s bash benches/store.sh
#   REPLICAS=1 bash benches/store.sh        # Redis with a replica, the store locker with --store-replicas 1
#
# Needs redis-server, redis-cli and redis-benchmark (Debian: redis-server,
# redis-tools). Load goes to 127.0.0.1 only; everything is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-2s}
KEYS=${KEYS:-1000}
BATCH=${BATCH:-100}
PORT=${PORT:-26379}
REPLICAS=${REPLICAS:-0}

cargo build --release --quiet --bin locker
LOCKER=target/release/locker

PIDS=()
DIR=$(mktemp -d)
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT

redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" >/dev/null &
PIDS+=($!)
until [ "$(redis-cli -p "$PORT" ping 2>/dev/null)" = PONG ]; do sleep 0.05; done
if ((REPLICAS > 0)); then
  # One replica is enough for WAIT 1 to have something to wait for.
  redis-server --port "$((PORT + 1))" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" \
    --replicaof 127.0.0.1 "$PORT" >/dev/null &
  PIDS+=($!)
  # Online, not only connected: WAIT counts no replica still syncing.
  until redis-cli -p "$PORT" info replication | grep -q '^slave0:.*state=online'; do sleep 0.05; done
fi

# Starts a server and sets ENDPOINT from the `listening on` line it prints
# once bound.
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

# Room for every request of the run in a day-long slot: steady traffic,
# every ask goes.
LIMIT=(--max-requests 1000000000 --in-seconds 86400)
LOCKER_LOG=warn start "$LOCKER" serve --bind 'tcp://127.0.0.1:*' "${LIMIT[@]}"
EMBEDDED=$ENDPOINT
LOCKER_LOG=warn start "$LOCKER" serve --bind 'tcp://127.0.0.1:*' "${LIMIT[@]}" --store "redis://127.0.0.1:$PORT" \
  --store-replicas "$REPLICAS"
STORE=$ENDPOINT

decisions() {
  # decisions/s of one bench run: requests/s, times the batch size.
  local ep=$1 per=$2
  shift 2
  "$LOCKER" bench --connect "$ep" --duration "$DURATION" --timeout 5s --keys "$KEYS" "$@" |
    awk -v per="$per" '$1 == "requests/s" { printf "%.0f", $2 * per }'
}
evals() { redis-cli -p "$PORT" info commandstats | awk -F'[:=,]' '$1 == "cmdstat_eval" { print $3 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Warm both: every key once.
"$LOCKER" bench --connect "$EMBEDDED" --keys "$KEYS" --prefill --clients 4 --pipeline 64 --duration 100ms >/dev/null
"$LOCKER" bench --connect "$STORE" --keys "$KEYS" --prefill --clients 4 --pipeline 64 --duration 100ms >/dev/null

NAMES=("single asks, 4 clients x 64 in flight" "batches of $BATCH, 4 clients x 4 in flight")
ARGS=("--clients 4 --pipeline 64" "--clients 4 --pipeline 4 --batch $BATCH")
PER=(1 "$BATCH")
declare -A E S R
STORE_DECISIONS=0
EVALS_BEFORE=$(evals)
for round in $(seq "$ROUNDS"); do
  for i in "${!NAMES[@]}"; do
    # shellcheck disable=SC2086
    if ((round % 2)); then
      e=$(decisions "$EMBEDDED" "${PER[$i]}" ${ARGS[$i]})
      s=$(decisions "$STORE" "${PER[$i]}" ${ARGS[$i]})
    else
      s=$(decisions "$STORE" "${PER[$i]}" ${ARGS[$i]})
      e=$(decisions "$EMBEDDED" "${PER[$i]}" ${ARGS[$i]})
    fi
    E[$i]+="$e "
    S[$i]+="$s "
    R[$i]+="$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.3f", a / b }') "
    STORE_DECISIONS=$(awk -v t="$STORE_DECISIONS" -v s="$s" -v d="${DURATION%s}" 'BEGIN { printf "%.0f", t + s * d }')
  done
done
EVALS=$(($(evals) - EVALS_BEFORE))

# Envoy's way on the same Redis: one fixed-window script per decision,
# pipelined 32 deep from 4 connections, over the same keys.
SCRIPT="local n = redis.call('INCRBY', KEYS[1], 1) if n == 1 then redis.call('PEXPIRE', KEYS[1], 86400000) end return n"
ENVOY=$(redis-benchmark -p "$PORT" -q -n 400000 -c 4 -P 32 -r "$KEYS" EVAL "$SCRIPT" 1 'envoy:__rand_int__' |
  awk '{ for (i = 1; i <= NF; i++) if ($(i + 1) ~ /^requests/) { printf "%.0f", $i; exit } }')

printf '%-44s %14s %14s %8s\n' "decisions/s (median of $ROUNDS)" embedded store ratio
for i in "${!NAMES[@]}"; do
  printf '%-44s %14s %14s %8s\n' "${NAMES[$i]}" \
    "$(tr ' ' '\n' <<<"${E[$i]}" | grep . | median)" \
    "$(tr ' ' '\n' <<<"${S[$i]}" | grep . | median)" \
    "$(tr ' ' '\n' <<<"${R[$i]}" | grep . | median)"
done
echo "store_replicas = $REPLICAS; the store locker's $("$LOCKER" stats --connect "$STORE" | grep '^store: ')"
echo "store: $EVALS EVAL calls for about $STORE_DECISIONS decisions:" \
  "$(awk -v e="$EVALS" -v d="$STORE_DECISIONS" 'BEGIN { printf "%.5f", e / d }') Redis commands per decision"
echo "Envoy's way (one script call per decision, redis-benchmark -c 4 -P 32): $ENVOY decisions/s"
