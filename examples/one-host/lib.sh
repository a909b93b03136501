# Shared by the one-host recipes: which locker to run, a scratch folder,
# and lockers started in the background and stopped when the script ends.
# Sourced, not run.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# The locker to run: $LOCKER, else the checkout's release build, else the one on PATH.
if [ -z "${LOCKER:-}" ]; then
  if [ -x "$ROOT/target/release/locker" ]; then LOCKER="$ROOT/target/release/locker"; else LOCKER=locker; fi
fi
# A relative path, made absolute: the lockers run in the scratch folder.
case "$LOCKER" in */*) LOCKER="$(cd "$(dirname "$LOCKER")" && pwd)/$(basename "$LOCKER")" ;; esac
# Every port is BASE plus a fixed offset (7780 by default, as the .toml files say).
BASE=${BASE:-7780}
# Keys, secrets and logs go into a scratch folder, removed at the end
# unless KEEP=1 (then its path is printed).
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/locker-one-host.XXXXXX")
PIDS=()

finish() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept: $SCRATCH"; else rm -rf "$SCRATCH"; fi
}
trap finish EXIT

# serve NAME ARGS...: starts `locker serve ARGS` in the scratch folder (so
# the paths of a config resolve there), its log in NAME.log, and returns
# once it prints `listening on`; fails with its log if it exits instead.
serve() {
  local name=$1 line=
  shift
  mkfifo "$SCRATCH/$name.out"
  (cd "$SCRATCH" && exec "$LOCKER" serve "$@" >"$SCRATCH/$name.out" 2>"$SCRATCH/$name.log") &
  PIDS+=($!)
  # Kept open for the locker's life: it writes this one line only.
  exec {fd}<"$SCRATCH/$name.out"
  if ! read -r -t 30 line <&"$fd" || [[ $line != "listening on "* ]]; then
    echo "locker $name did not start:" >&2
    cat "$SCRATCH/$name.log" >&2
    return 1
  fi
  echo "$name: $line"
}

# ask ARGS...: `locker ask ARGS`, printing go or sorry; never fails the script.
ask() {
  "$LOCKER" ask "$@" 2>&1 || true
}

# count_go N LIMIT PORT...: asks LIMIT N times, the lockers on PORTs in
# turn, and prints how many asks got go.
count_go() {
  local n=$1 limit=$2 go=0 i
  shift 2
  local ports=("$@")
  for ((i = 1; i <= n; i++)); do
    local port=${ports[i % ${#ports[@]}]}
    if [ "$(ask --limit "$limit" --connect "tcp://127.0.0.1:$port")" = go ]; then go=$((go + 1)); fi
  done
  echo "$go"
}
