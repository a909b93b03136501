#!/usr/bin/env bash
# The Redis store on one host: a redis-server on 127.0.0.1:7789 (BASE+9)
# in a scratch folder, two lockers on 7786 and 7787 (BASE+6, BASE+7) that
# keep their counts in it, and 20 asks alternating between them against a
# limit of 10: exactly 10 go. Needs redis-server (apt-get install redis-server).
# Run from anywhere: bash examples/one-host/store.sh
source "$(dirname "$0")/lib.sh"

redis_port=$((BASE + 9))
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$SCRATCH" \
  --logfile "$SCRATCH/redis.log" &
PIDS+=($!)
for _ in $(seq 200); do
  if redis-cli -p "$redis_port" ping >/dev/null 2>&1; then break; fi
  sleep 0.05
done

store="redis://127.0.0.1:$redis_port"
serve one --config "$HERE/store.toml" --store "$store" --bind "tcp://127.0.0.1:$((BASE + 6))"
serve two --config "$HERE/store.toml" --store "$store" --bind "tcp://127.0.0.1:$((BASE + 7))"

go=$(count_go 20 shared $((BASE + 6)) $((BASE + 7)))
echo "go: $go of 20 asks over two lockers on one store (the limit: 10 a day)"
