#!/usr/bin/env bash
# Three peered lockers on 127.0.0.1 (clients on 7781-7783, peers on
# 7791-7793; BASE=N moves them to N+1.. and N+11..), 40 asks spread over
# the three against a limit of 30 for the group, then one locker's view of
# its peers. Run from anywhere: bash examples/one-host/peering.sh
source "$(dirname "$0")/lib.sh"

config="$HERE/peering.toml"
names=(a b c)
for i in 0 1 2; do
  peers=()
  for j in 0 1 2; do
    [ "$i" = "$j" ] || peers+=(--peer "tcp://127.0.0.1:$((BASE + 11 + j))")
  done
  # Each keeps a state file (run in the scratch folder): with a new one a
  # locker knows it is a first run, and the group serves from its first
  # slot (without, a group started all at once serves nothing of it).
  serve "${names[$i]}" --config "$config" --node-id "${names[$i]}" --state "${names[$i]}.state" \
    --bind "tcp://127.0.0.1:$((BASE + 1 + i))" --peer-bind "tcp://127.0.0.1:$((BASE + 11 + i))" "${peers[@]}"
done

# Each locker has joined once it has heard both peers (stats say so).
for i in 0 1 2; do
  for _ in $(seq 200); do
    stats=$("$LOCKER" stats --json --connect "tcp://127.0.0.1:$((BASE + 1 + i))")
    live=$(grep -o '"live":true' <<<"$stats" | wc -l || true)
    if [[ $stats != *'"joining":true'* ]] && [ "$live" -ge 2 ]; then break; fi
    sleep 0.05
  done
done

go=$(count_go 40 shared $((BASE + 1)) $((BASE + 2)) $((BASE + 3)))
echo "go: $go of 40 asks over the three lockers (the group's limit: 30 a day)"
"$LOCKER" stats --connect "tcp://127.0.0.1:$((BASE + 1))"
