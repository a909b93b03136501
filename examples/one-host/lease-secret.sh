#!/usr/bin/env bash
# A lease secret on one host: a locker on 127.0.0.1:7785 (BASE+5) with a
# secret made in a scratch folder; a lease is acquired, heartbeated and
# released, and a heartbeat with a made-up id is refused.
# Run from anywhere: bash examples/one-host/lease-secret.sh
source "$(dirname "$0")/lib.sh"

(umask 077 && head -c 32 /dev/urandom >"$SCRATCH/lease.secret")
endpoint="tcp://127.0.0.1:$((BASE + 5))"
serve lease --config "$HERE/lease-secret.toml" --bind "$endpoint"

id=$("$LOCKER" lease acquire --limit db --ttl 30s --wait 2s --connect "$endpoint")
echo "acquired: $id"
echo "heartbeat: $("$LOCKER" lease heartbeat --limit db --lease "$id" --ttl 30s --count 1 --connect "$endpoint")"
made_up=0123456789abcdef0123456789abcdef.0123456789abcdef0123456789abcdef
if "$LOCKER" lease heartbeat --limit db --lease "$made_up" --ttl 30s --count 1 --connect "$endpoint" 2>"$SCRATCH/refused"; then
  echo "made-up id: restored (it should not be)"
  exit 1
fi
echo "made-up id: refused: $(cat "$SCRATCH/refused")"
echo "release: $("$LOCKER" lease release --limit db --lease "$id" --connect "$endpoint")"
