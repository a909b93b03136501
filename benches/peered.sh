#!/usr/bin/env bash
# A lone locker against one member of a peered trio (three lockers on
# 127.0.0.1, each peered with the other two), in one run on this machine,
# under the project's own load generator, `locker bench`. Every figure is a
# ratio of the two taken within a round, so the machine's noise touches both
# alike. Two parts:
#
# 1. Cost. For each scenario, `locker bench` against the lone locker and
#    against trio member A, back to back, the order alternating round by
#    round, each run preceded by an untimed prefill of its keys (`--prefill`,
#    200 ms). Around each timed run the script reads every server's CPU
#    (utime + stime of the whole process, fields 14 and 15 of
#    /proc/PID/stat, in clock ticks) and, for the trio, the bytes acked on
#    the TCP connections of each member's peer PUB port (`ss -tinH 'sport =
#    :PORT'`). It prints, as medians over the rounds (ratios: the median of
#    the per-round ratios, with their range):
#      - member ratio: (A's CPU / decisions A served) ÷ (lone's CPU /
#        decisions the lone served)                           [target ≤ 1.3]
#      - peers ratio: ((B + C)'s CPU / decisions A served) ÷ (lone's CPU /
#        decisions the lone served)                           [target ≤ 0.3]
#      - decisions/s of each and their ratio; bytes sent on the peer links
#        by A, and by B + C, per decision of A.
#    The lone locker keeps a --state file, as each member does (a peered
#    group needs one to serve its first slot), so the ratios are peering's
#    own cost. The same ratios against a second lone locker without a state
#    file ("bare", the cheapest way to serve the limits; a state file costs
#    a lone locker up to half its rate in batches here) come beside them.
#    The limits never refuse (1,000,000,000 per 1 s). Scenarios: a fixed
#    window over 1, 1,000 and 100,000 keys, each as single asks
#    (`--pipeline 64`) and as batches (`--batch 100 --pipeline 8`); the
#    rolling window and the token bucket (burst 1,000,000,000) over 1,000
#    keys as single asks.
#
# 2. Reach. A limit of 30 per 10 s of each shared kind (fixed window,
#    rolling window, token bucket with burst 30 refilled 30 per 10 s), over
#    100,000 keys and over 1 key, all demand on A: the go A grants in a run
#    of 8 s (most of its 10 s slot) against the go the lone locker grants in the same run (`locker
#    bench --keys K --batch 100 --pipeline 8 --json`, its `go`), ratio
#    [target ≥ 0.9]. Slots are aligned to wall time, so every run starts
#    just after a slot boundary (epoch seconds divisible by 10) and has one
#    whole slot to itself; lone and trio take turns slot by slot, and each
#    limit is asked by a locker at least a slot after that locker last
#    asked it, so a rolling window has emptied and a bucket refilled. The
#    members' own stats show what each granted in the run: B and C should
#    grant nothing, and the trio no more than the limit. A lone locker that did
#    not spend the limit in the run (too few asks on a busy machine) is
#    flagged: its ratio then mixes reach with throughput.
#
#   bash benches/peered.sh                     # about 7 minutes
#   ROUNDS=3 DURATION=1 REACH=0 bash benches/peered.sh       # about a minute
#   LOCKER_BIN=/path/to/other/locker OUT=/tmp/peered.json bash benches/peered.sh
#
# ROUNDS (4) rounds of DURATION-second (2) timed runs, CLIENTS (4) bench
# clients. KEYS_LIST ("1 1000 100000") and SHAPES ("single batch") of the
# fixed window, SINGLE ("--pipeline 64") and BATCH ("--batch 100 --pipeline
# 8") the bench flags of each shape; KINDS ("fixed-window rolling-window
# token-bucket") the other kinds measured at KINDS_KEYS (1000) keys and
# the kinds of the reach part; BARE (1; 0 leaves out the lone locker
# without a state file); COST (1; 0 leaves out the first part). REACH (1;
# 0 leaves out the second part), REACH_ROUNDS (1), REACH_KEYS_LIST ("100000
# 1"), REACH_DURATION (8, at most 8), REACH_BENCH ("--batch 100 --pipeline 8").
# PORT_BASE (27400): eight fixed ports from there on, the first block of
# eight free ones below the kernel's ephemeral range. OUT=path writes every
# run and the summary as JSON. KEEP_DIR=1 keeps the temporary folder
# (config, logs, state files).
#
# LOCKER_BIN is the locker to measure, run as both lone lockers and as all
# three members (target/dist/locker when built, else target/release/locker;
# this script does not build it); BENCH_BIN the `locker bench` client
# (LOCKER_BIN by default). About 7 minutes by default: 8 cost scenarios x 4
# rounds x 3 runs of about 2.6 s, then 12 reach runs of one 10 s slot each.
# Needs ss (iproute2), getconf and python3 (stdlib only; the arithmetic and
# the tables are in benches/peered.py). Load goes to 127.0.0.1 only. Every
# locker is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ROUNDS=${ROUNDS:-4}
DURATION=${DURATION:-2}
CLIENTS=${CLIENTS:-4}
KEYS_LIST=${KEYS_LIST:-1 1000 100000}
SHAPES=${SHAPES:-single batch}
SINGLE=${SINGLE:---pipeline 64}
BATCH=${BATCH:---batch 100 --pipeline 8}
KINDS=${KINDS:-fixed-window rolling-window token-bucket}
KINDS_KEYS=${KINDS_KEYS:-1000}
COST=${COST:-1}
REACH=${REACH:-1}
REACH_ROUNDS=${REACH_ROUNDS:-1}
REACH_KEYS_LIST=${REACH_KEYS_LIST:-100000 1}
REACH_DURATION=${REACH_DURATION:-8}
REACH_BENCH=${REACH_BENCH:---batch 100 --pipeline 8}
REACH_MAX=30
REACH_SECONDS=10
BARE=${BARE:-1}
PORT_BASE=${PORT_BASE:-27400}
OUT=${OUT:-}
# The shipped build (`cargo build --profile dist`) when there is one.
if [ -z "${LOCKER_BIN:-}" ]; then
  LOCKER_BIN=$ROOT/target/release/locker
  [ -x "$ROOT/target/dist/locker" ] && LOCKER_BIN=$ROOT/target/dist/locker
fi
BENCH_BIN=${BENCH_BIN:-$LOCKER_BIN}
BIG=1000000000
HZ=$(getconf CLK_TCK)
PY=$ROOT/benches/peered.py

say() { echo "$*" >&2; }
die() { say "peered.sh: $*"; exit 1; }

[ -x "$LOCKER_BIN" ] || die "no locker at $LOCKER_BIN (cargo build --release, or set LOCKER_BIN)"
[ -x "$BENCH_BIN" ] || die "no bench client at $BENCH_BIN"
command -v ss >/dev/null || die "ss is missing (Debian: apt-get install iproute2)"
command -v python3 >/dev/null || die "python3 is missing"
((DURATION > 0 && ROUNDS > 0)) || die "ROUNDS and DURATION must be positive whole numbers"
((REACH_DURATION <= REACH_SECONDS - 2)) || die "REACH_DURATION must leave time in its ${REACH_SECONDS} s slot"

PIDS=()
DIR=$(mktemp -d /tmp/peered.XXXXXX)
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "${KEEP_DIR:-0}" = 1 ]; then say "kept $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Eight ports in a row, none in use: lone, a, b, c, a, b, c's peer ports, bare.
ephemeral_low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range)
port_used() { [ -n "$(ss -tanH "( sport = :$1 )")" ]; }
base=$PORT_BASE
while :; do
  ((base + 8 < ephemeral_low)) || die "no eight free ports from $PORT_BASE below the ephemeral range ($ephemeral_low)"
  free=1
  for p in $(seq "$base" $((base + 7))); do port_used "$p" && { free=0; break; }; done
  ((free)) && break
  base=$((base + 10))
done
declare -A PORT PPORT PID
PORT[lone]=$base PORT[a]=$((base + 1)) PORT[b]=$((base + 2)) PORT[c]=$((base + 3))
PPORT[a]=$((base + 4)) PPORT[b]=$((base + 5)) PPORT[c]=$((base + 6)) PORT[bare]=$((base + 7))
LONES=(lone)
[ "$BARE" = 1 ] && LONES+=(bare)

# One config for all four lockers.
CONF=$DIR/limits.toml
{
  for kind in fixed-window rolling-window token-bucket; do
    printf '[[limits]]\nname = "cost-%s"\nalgorithm = "%s"\nmax_requests = %d\nin_seconds = 1.0\n' "$kind" "$kind" "$BIG"
    [ "$kind" = token-bucket ] && printf 'burst = %d\n' "$BIG"
    echo
    for keys in $REACH_KEYS_LIST; do
      printf '[[limits]]\nname = "reach-%s-k%s"\nalgorithm = "%s"\nmax_requests = %d\nin_seconds = %d.0\n' \
        "$kind" "$keys" "$kind" "$REACH_MAX" "$REACH_SECONDS"
      [ "$kind" = token-bucket ] && printf 'burst = %d\n' "$REACH_MAX"
      echo
    done
  done
} >"$CONF"
"$LOCKER_BIN" check-config "$CONF" >/dev/null || die "the config does not check: $CONF"

# start NAME: starts that locker in the background: lone (with a state file
# as the members have), bare (a lone one without), or a trio member peered
# with the other two.
start() {
  local name=$1 args=(serve --config "$CONF" --bind "tcp://127.0.0.1:${PORT[$1]}")
  if [ "$name" = lone ]; then
    args+=(--state "$DIR/lone.state")
  elif [ "$name" != bare ]; then
    args+=(--peer-bind "tcp://127.0.0.1:${PPORT[$name]}" --node-id "$name" --state "$DIR/$name.state")
    for other in a b c; do
      [ "$other" = "$name" ] || args+=(--peer "tcp://127.0.0.1:${PPORT[$other]}")
    done
  fi
  "$LOCKER_BIN" "${args[@]}" >"$DIR/$name.out" 2>"$DIR/$name.err" &
  PID[$name]=$!
  PIDS+=("$!")
}
# wait_ready NAME: polls (30 s at most) until the locker is bound, and then
# until its stats say it serves (a member: out of joining, both peers live,
# one member set) and a probe ask gets go.
wait_ready() {
  local name=$1 mode=peered deadline=$((SECONDS + 30)) why=""
  [ "$name" = lone ] || [ "$name" = bare ] && mode=lone
  while :; do
    kill -0 "${PID[$name]}" 2>/dev/null || { cat "$DIR/$name.err" >&2; die "locker $name exited at start"; }
    if grep -q '^listening on' "$DIR/$name.out" 2>/dev/null; then
      if why=$("$LOCKER_BIN" stats --connect "tcp://127.0.0.1:${PORT[$name]}" --json --timeout 500ms 2>&1 |
        python3 "$PY" ready "$mode") &&
        "$LOCKER_BIN" ask --connect "tcp://127.0.0.1:${PORT[$name]}" --limit cost-fixed-window \
          --key "probe-$name" --timeout 500ms >/dev/null 2>&1; then
        return 0
      fi
    else
      why="not bound yet"
    fi
    ((SECONDS < deadline)) || { tail -20 "$DIR/$name.err" >&2; die "locker $name did not serve within 30 s (${why:-its probe ask got no go})"; }
    sleep 0.05
  done
}

for name in "${LONES[@]}" a b c; do start "$name"; done
for name in "${LONES[@]}" a b c; do wait_ready "$name"; done

# serving WHAT: before a timed run on the trio, each member's stats must say
# it serves (out of joining, both peers live, one member set); one that does
# not (learning the counts again after its loop stalled) is noted with why,
# and the run waits until wait_ready passes for it.
: >"$DIR/notes"
serving() {
  local what=$1 name why t0
  for name in a b c; do
    if ! why=$("$LOCKER_BIN" stats --connect "tcp://127.0.0.1:${PORT[$name]}" --json --timeout 2s 2>&1 |
      python3 "$PY" ready peered); then
      t0=$(date +%s%N)
      wait_ready "$name"
      echo "before $what: $name was not serving (${why:-no stats reply}); it served $((($(date +%s%N) - t0) / 1000000)) ms later" |
        tee -a "$DIR/notes" >&2
    fi
  done
}

# snapshot FOLDER NAMES...: every named locker's CPU ticks, and for trio
# members the `ss` lines of their peer PUB port.
snapshot() {
  local dir=$1 name
  shift
  mkdir -p "$dir"
  : >"$dir/ticks"
  for name in "$@"; do
    echo "$name $(awk '{ print $14 + $15 }' "/proc/${PID[$name]}/stat")" >>"$dir/ticks"
    [ -z "${PPORT[$name]:-}" ] || ss -tinH state established "( sport = :${PPORT[$name]} )" >"$dir/ss-$name"
  done
}

bench() { "$BENCH_BIN" bench --clients "$CLIENTS" --timeout 5s "$@"; }

# The cost scenarios: "kind keys shape".
SCENARIOS=()
if [ "$COST" = 1 ]; then
  for keys in $KEYS_LIST; do
    for shape in $SHAPES; do SCENARIOS+=("fixed-window $keys $shape"); done
  done
  for kind in $KINDS; do
    [ "$kind" = fixed-window ] || SCENARIOS+=("$kind $KINDS_KEYS single")
  done
fi

# cost ROUND KIND KEYS SHAPE TARGET(lone|bare|trio)
cost() {
  local round=$1 kind=$2 keys=$3 shape=$4 target=$5 who flags
  local -a names
  who=$target names=("$target")
  [ "$target" = trio ] && who=a names=(a b c)
  flags=$SINGLE
  [ "$shape" = batch ] && flags=$BATCH
  local ep="tcp://127.0.0.1:${PORT[$who]}" limit="cost-$kind"
  # Untimed: every key once, and a moment's load.
  # shellcheck disable=SC2086
  bench --connect "$ep" --limit "$limit" --keys "$keys" --prefill --duration 200ms $flags --json \
    >"$DIR/prefill.json" || die "the prefill against $target failed"
  [ "$target" != trio ] || serving "round $round, $kind, $keys keys, $shape"
  snapshot "$DIR/before" "${names[@]}"
  # shellcheck disable=SC2086
  bench --connect "$ep" --limit "$limit" --keys "$keys" --duration "${DURATION}s" $flags --json \
    >"$DIR/run.json" || die "locker bench against $target failed"
  snapshot "$DIR/after" "${names[@]}"
  python3 "$PY" cost "$DIR/raw.jsonl" bench="$DIR/run.json" before="$DIR/before" after="$DIR/after" \
    scenario="$kind, $keys keys, $shape" kind="$kind" keys="$keys" shape="$shape" round="$round" \
    target="$target" targets="$(IFS=,; echo "${LONES[*]},trio")" hz="$HZ"
  rm -rf "$DIR/before" "$DIR/after"
}

go_of() { "$LOCKER_BIN" stats --connect "tcp://127.0.0.1:${PORT[$1]}" --json --timeout 5s | python3 "$PY" go "$2"; }

# reach ROUND KIND KEYS TARGET: one run starting just after a slot boundary.
reach() {
  local round=$1 kind=$2 keys=$3 target=$4 who name now wait started ended
  local -a names
  local limit="reach-$kind-k$keys"
  who=lone names=(lone)
  [ "$target" = trio ] && who=a names=(a b c)
  declare -A before
  [ "$target" != trio ] || serving "reach, $kind, $keys keys"
  for name in "${names[@]}"; do before[$name]=$(go_of "$name" "$limit"); done
  # The next slot boundary at least a slot after this target last asked
  # this limit, so that a bucket is full again (the order of the two
  # targets alternates, and one may ask the same limit twice in a row).
  now=$(date +%s.%N)
  wait=$(awk -v t="$now" -v s="$REACH_SECONDS" -v last="${last_asked[$target-$limit]:-0}" \
    'BEGIN { from = (last + s > t) ? last + s : t; printf "%.3f", from - t + s - (from - int(from / s) * s) + 0.05 }')
  sleep "$wait"
  started=$(date +%s.%N)
  # shellcheck disable=SC2086
  bench --connect "tcp://127.0.0.1:${PORT[$who]}" --limit "$limit" --keys "$keys" \
    --duration "${REACH_DURATION}s" $REACH_BENCH --json >"$DIR/run.json" || die "locker bench against $target failed"
  ended=$(date +%s.%N)
  last_asked[$target-$limit]=$ended
  local gos=()
  for name in "${names[@]}"; do gos+=("go_$name=$(($(go_of "$name" "$limit") - ${before[$name]}))"); done
  local most=$REACH_MAX
  [ "$kind" = token-bucket ] && most=$(awk -v m="$REACH_MAX" -v s="$REACH_SECONDS" -v d="$REACH_DURATION" 'BEGIN { print m + m / s * d }')
  python3 "$PY" reach "$DIR/raw.jsonl" bench="$DIR/run.json" kind="$kind" keys="$keys" limit="$limit" \
    round="$round" target="$target" max_per_key="$most" started="$started" ended="$ended" \
    slot="$REACH_SECONDS" "${gos[@]}"
}

n_reach=0
if [ "$REACH" = 1 ]; then
  n_reach=$(($(wc -w <<<"$KINDS") * $(wc -w <<<"$REACH_KEYS_LIST") * 2 * REACH_ROUNDS))
fi
say "lockers: $LOCKER_BIN; bench: $BENCH_BIN"
say "ports: lone ${PORT[lone]}, bare ${PORT[bare]}, a ${PORT[a]}, b ${PORT[b]}, c ${PORT[c]}; peer PUB a ${PPORT[a]}, b ${PPORT[b]}, c ${PPORT[c]}"
runs=$((${#LONES[@]} + 1))
say "cost: ${#SCENARIOS[@]} scenarios x $ROUNDS rounds x $runs runs of ${DURATION} s; reach: $n_reach runs of one ${REACH_SECONDS} s slot;" \
  "about $(((${#SCENARIOS[@]} * ROUNDS * runs * (DURATION * 10 + 6) / 10 + n_reach * REACH_SECONDS + 59) / 60)) minutes"

began=$(date +%s)
: >"$DIR/raw.jsonl"
for round in $(seq "$ROUNDS"); do
  for scenario in "${SCENARIOS[@]}"; do
    read -r kind keys shape <<<"$scenario"
    # Alternate which goes first, so a trend in the machine's load favours neither.
    # Lone and trio always back to back (bare after, or before).
    if ((round % 2)); then order=(lone trio); else order=(trio lone); fi
    if [ "$BARE" = 1 ]; then
      if ((round % 2)); then order+=(bare); else order=(bare "${order[@]}"); fi
    fi
    for target in "${order[@]}"; do cost "$round" "$kind" "$keys" "$shape" "$target"; done
  done
done
cost_took=$(($(date +%s) - began))

declare -A last_asked
if [ "$REACH" = 1 ]; then
  turn=0
  for round in $(seq "$REACH_ROUNDS"); do
    for kind in $KINDS; do
      for keys in $REACH_KEYS_LIST; do
        if ((turn % 2)); then order=(trio lone); else order=(lone trio); fi
        turn=$((turn + 1))
        for target in "${order[@]}"; do reach "$round" "$kind" "$keys" "$target"; done
      done
    done
  done
fi
took=$(($(date +%s) - began))

for name in "${LONES[@]}" a b c; do
  kill -0 "${PID[$name]}" 2>/dev/null || say "!! locker $name is no longer running: $(tail -3 "$DIR/$name.err")"
done

echo
echo "locker: $LOCKER_BIN"
[ "$BENCH_BIN" = "$LOCKER_BIN" ] || echo "bench client: $BENCH_BIN"
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); ${took} s in all (cost ${cost_took} s)"
echo "cost: $ROUNDS rounds of ${DURATION} s runs, $CLIENTS clients; single asks: $SINGLE; batches: $BATCH"
echo "reach: $REACH_ROUNDS round(s) of ${REACH_DURATION} s runs ($CLIENTS clients, $REACH_BENCH), $REACH_MAX per $REACH_SECONDS s"
echo "lone: with a --state file, as the members have; bare: without one ($([ "$BARE" = 1 ] && echo measured || echo not measured, BARE=0)); members peered over tcp://127.0.0.1"
if [ -s "$DIR/notes" ]; then
  echo "members that were not serving when a timed run was due (the run waited for them):"
  sed 's/^/  /' "$DIR/notes"
fi
echo "warnings and errors the lockers logged:"
logs=()
for name in "${LONES[@]}" a b c; do logs+=("$DIR/$name.err"); done
python3 "$PY" logs "${logs[@]}"
echo
python3 "$PY" summary "$DIR/raw.jsonl" "$OUT"
[ -z "$OUT" ] || echo "(written to $OUT)"
