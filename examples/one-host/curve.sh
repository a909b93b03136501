#!/usr/bin/env bash
# CURVE on one host: keys generated in a scratch folder, a locker on
# 127.0.0.1:7784 (BASE+4) that answers only alice; alice gets go, mallory
# (a key it does not list) and a plain client get no answer.
# Run from anywhere: bash examples/one-host/curve.sh
source "$(dirname "$0")/lib.sh"

(cd "$SCRATCH" && "$LOCKER" keygen --out server && "$LOCKER" keygen --out alice && "$LOCKER" keygen --out mallory)
mkdir -p "$SCRATCH/client-keys" && cp "$SCRATCH/alice.pub" "$SCRATCH/client-keys/"
endpoint="tcp://127.0.0.1:$((BASE + 4))"
serve curve --config "$HERE/curve.toml" --bind "$endpoint"

echo "alice: $(ask --connect "$endpoint" --server-key "$SCRATCH/server.pub" --client-key "$SCRATCH/alice")"
echo "mallory: $(ask --connect "$endpoint" --server-key "$SCRATCH/server.pub" --client-key "$SCRATCH/mallory" --timeout 300ms)"
echo "plain: $(ask --connect "$endpoint" --timeout 300ms)"
