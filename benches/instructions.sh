#!/usr/bin/env bash
# Instructions per plain request, which do not drift with the machine's
# load as rates do: each server runs under callgrind (every thread counted,
# libzmq's I/O thread included) loaded with the plain form, 4 clients x 64
# in flight, once for SHORT and once for LONG; the difference in
# instructions over the difference in requests is the cost of one request
# with start-up taken out. Four servers: the bare REP and ROUTER echoes and
# the locker on each socket (REP with holding off), served as
# benches/compare.sh serves them.
#
#   bash benches/instructions.sh            # about two minutes; needs valgrind
#   SHORT=3s LONG=9s bash benches/instructions.sh
#   SERVER=/path/to/other/locker bash benches/instructions.sh
#
# Load goes to 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

SHORT=${SHORT:-2s}
LONG=${LONG:-6s}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
cargo build --release --quiet --bin locker --example echo_server
LOCKER=target/release/locker
# The locker measured, by default this build (another build, an earlier
# commit's, say, is loaded by this build's `locker bench`).
SERVER=${SERVER:-$LOCKER}
ECHO=target/release/examples/echo_server
OUT=$(mktemp -d)
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null || true
  rm -rf "$OUT"
}
trap cleanup EXIT

# count FILE DURATION SERVER... -> writes "requests instructions" for one
# run of SERVER under callgrind, loaded for DURATION, to FILE.n (not to
# stdout: run in this shell, not a subshell, the exit trap knows its PID).
count() {
  local file=$1 duration=$2 fifo line requests
  shift 2
  fifo=$(mktemp -u)
  mkfifo "$fifo"
  valgrind --tool=callgrind --callgrind-out-file="$file" "$@" >"$fifo" 2>/dev/null &
  PID=$!
  exec {out}<"$fifo"
  rm "$fifo"
  # Waiting for the `listening on` line, not for a fixed time.
  read -r -t 120 -u "$out" line || { echo "$1 printed no endpoint" >&2; exit 1; }
  requests=$("$LOCKER" bench --connect "${line#listening on }" --duration "$duration" --timeout 10s \
    --plain --clients 4 --pipeline 64 | awk '$1 == "requests" { print $2 }')
  # SIGTERM, not SIGINT: a shell without job control starts background
  # programs with SIGINT ignored. Callgrind writes its counts either way.
  kill -TERM "$PID"
  wait "$PID" || true
  PID=
  echo "$requests $(callgrind_annotate "$file" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')" >"$file.n"
}

# per_request NAME SERVER... -> one line: instructions per request.
RUN=0
per_request() {
  local name=$1 short long
  shift
  RUN=$((RUN + 1))
  count "$OUT/$RUN.short" "$SHORT" "$@"
  count "$OUT/$RUN.long" "$LONG" "$@"
  short=$(cat "$OUT/$RUN.short.n")
  long=$(cat "$OUT/$RUN.long.n")
  awk -v name="$name" -v s="$short" -v l="$long" 'BEGIN {
    split(s, a, " "); split(l, b, " ")
    printf "%-34s %6d instructions a request (%d and %d requests)\n", name, (b[2] - a[2]) / (b[1] - a[1]), a[1], b[1]
  }'
}

export LOCKER_LOG=warn
SERVE=(serve --bind 'tcp://127.0.0.1:*' --max-requests 1000000000 --in-seconds 86400)
per_request "bare REP echo" "$ECHO" 'tcp://127.0.0.1:*'
per_request "locker, --max-parked 0 (REP)" "$SERVER" "${SERVE[@]}" --max-parked 0
per_request "bare ROUTER echo" "$ECHO" 'tcp://127.0.0.1:*' 2 router
per_request "locker, default (ROUTER)" "$SERVER" "${SERVE[@]}"
