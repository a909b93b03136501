#!/usr/bin/env bash
# Semaphore leases on the locker against Throttle (`throttle-server` on
# crates.io, an axum server), one server at a time, under the same Python
# load (benches/leases.py): acquire + release cycles per second and the
# server's CPU per cycle at 1, 8 and 64 clients; leases granted and the busy
# fraction for a semaphore of 3 under 20 contending clients; and the time
# from a lease's expiry to its waiter's grant (issue 41).
#
#   bash benches/leases.sh                  # about three minutes, after the install
#   SECONDS_EACH=3 bash benches/leases.sh
#
# Throttle is installed with `cargo install --locked` into a scratch folder
# (THROTTLE_ROOT, by default target/bench-throttle), once. The locker is
# asked through clients/python, which must import (pyzmq, msgpack).
# Load goes to 127.0.0.1 only. Each server is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${SECONDS_EACH:-5}
CONTENTION_SECONDS=${CONTENTION_SECONDS:-10}
THROTTLE_ROOT=${THROTTLE_ROOT:-$PWD/target/bench-throttle}

cargo build --release --quiet --bin locker
LOCKER=target/release/locker
if [ ! -x "$THROTTLE_ROOT/bin/throttle" ]; then
  cargo install --locked --quiet throttle-server --root "$THROTTLE_ROOT"
fi
THROTTLE=$THROTTLE_ROOT/bin/throttle

# One server runs at a time: SERVER is its process id while it runs.
SERVER=
DIR=$(mktemp -d)
stop_server() {
  if [ -n "$SERVER" ]; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
  SERVER=
}
trap 'stop_server; rm -rf "$DIR"' EXIT

# The same three semaphores on both: one too large to contend, one of 3,
# one of 1.
cat >"$DIR/locker.toml" <<'EOF'
[[limits]]
name = "big"
algorithm = "semaphore"
max_requests = 100000
in_seconds = 30

[[limits]]
name = "sem3"
algorithm = "semaphore"
max_requests = 3
in_seconds = 30

[[limits]]
name = "one"
algorithm = "semaphore"
max_requests = 1
in_seconds = 30
EOF
cat >"$DIR/throttle.toml" <<'EOF'
[semaphores]
big = 100000
sem3 = 3
one = 1
EOF

export PYTHONPATH=$PWD/clients/python/src${PYTHONPATH:+:$PYTHONPATH}
load() { python3 benches/leases.py "$@" --seconds "$SECONDS_EACH" --contention-seconds "$CONTENTION_SECONDS"; }

# The locker prints its endpoint once bound: waiting for that line, not for
# a fixed time, is how we know it is up.
fifo=$DIR/out
mkfifo "$fifo"
LOCKER_LOG=error "$LOCKER" serve --bind 'tcp://127.0.0.1:*' --config "$DIR/locker.toml" >"$fifo" &
SERVER=$!
exec {out}<"$fifo"
read -r -t 30 -u "$out" line || { echo "the locker printed no endpoint" >&2; exit 1; }
load locker "${line#listening on }" "$SERVER"
stop_server

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
(cd "$DIR" && THROTTLE_LOG=ERROR exec "$THROTTLE" --port "$PORT" -c throttle.toml) &
SERVER=$!
# Up when its health endpoint answers (bounded: 30 s).
python3 - "$PORT" <<'EOF'
import http.client, sys, time
end = time.monotonic() + 30
while True:
    try:
        c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=1)
        c.request("GET", "/health")
        if c.getresponse().status == 200:
            break
    except OSError:
        if time.monotonic() > end:
            sys.exit("throttle did not come up")
        time.sleep(0.05)
EOF
load throttle "127.0.0.1:$PORT" "$SERVER"
