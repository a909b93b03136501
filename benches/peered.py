"""The arithmetic and the tables of benches/peered.sh (Python 3 stdlib only).

    peered.py ready lone|peered < STATS_JSON     exit 0 when that locker serves
    peered.py go LIMIT < STATS_JSON              the limit's go count so far
    peered.py cost RAW KEY=VALUE...              record one timed cost run
    peered.py reach RAW KEY=VALUE...             record one reach run
    peered.py summary RAW [OUT]                  the tables, and OUT as JSON
    peered.py logs FILE...                       warnings and errors, counted

A run's snapshots (SNAP_BEFORE, SNAP_AFTER) are folders holding `ticks`
(lines `NAME TICKS`, utime + stime from /proc/PID/stat) and `ss-NAME` (the
output of `ss -tinH` for NAME's peer PUB port). Every record is one JSON
line in RAW; `summary` reads them all.
"""

import json
import os
import statistics
import sys

TARGETS = {"member": 1.3, "peers": 0.3, "reach": 0.9}


def args_map(argv):
    out = {}
    for a in argv:
        k, _, v = a.partition("=")
        out[k] = v
    return out


def read_stats():
    text = sys.stdin.read()
    try:
        return json.loads(text)
    except ValueError:
        return None


def ready(mode):
    """A peered locker serves when it has left joining, hears both peers and
    agrees with them on the member set."""
    s = read_stats()
    if s is None:
        print("no stats reply")
        return 1
    if mode == "lone":
        return 0
    if s.get("joining"):
        print("joining")
        return 1
    if s.get("member_set_mismatch") or s.get("member_set_settling"):
        print("member set mismatch or settling")
        return 1
    peers = s.get("peers") or []
    live = [p for p in peers if p.get("live")]
    if len(live) < 2:
        print(f"{len(live)} of 2 peers live")
        return 1
    return 0


def go_count(limit):
    s = read_stats() or {}
    for entry in s.get("limits", []):
        if entry.get("name") == limit:
            print(entry.get("go", 0))
            return 0
    print(0)
    return 0


def ticks(snap):
    out = {}
    with open(os.path.join(snap, "ticks")) as f:
        for line in f:
            name, value = line.split()
            out[name] = int(value)
    return out


def ss_bytes(path):
    """Bytes acked (else sent) per connection of one `ss -tinH` output, keyed
    by the far end's address, so a connection made anew counts from 0."""
    conns, peer = {}, None
    if not os.path.exists(path):
        return conns
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            if not line[0].isspace():
                fields = line.split()
                # State Recv-Q Send-Q Local Peer (the state column is left
                # out when ss is given a state filter)
                addrs = [x for x in fields if ":" in x and x[-1].isdigit()]
                peer = addrs[1] if len(addrs) > 1 else line.strip()
                conns.setdefault(peer, 0)
                continue
            acked = sent = None
            for item in line.split():
                if item.startswith("bytes_acked:"):
                    acked = int(item.split(":")[1])
                elif item.startswith("bytes_sent:"):
                    sent = int(item.split(":")[1])
            if peer is not None and (acked is not None or sent is not None):
                conns[peer] = acked if acked is not None else sent
    return conns


def peer_bytes(before, after, name):
    b = ss_bytes(os.path.join(before, f"ss-{name}"))
    a = ss_bytes(os.path.join(after, f"ss-{name}"))
    total = sum(v - b.get(k, 0) if v >= b.get(k, 0) else v for k, v in a.items())
    return total, len(a)


def load_bench(path):
    with open(path) as f:
        return json.load(f)


def append(raw, rec):
    with open(raw, "a") as f:
        f.write(json.dumps(rec) + "\n")


def read_raw(raw):
    with open(raw) as f:
        return [json.loads(line) for line in f if line.strip()]


def fmt_int(x):
    return f"{x:,.0f}"


def cost_figures(rec, hz):
    """Per-run figures: decisions/s, server CPU µs per decision, and for the
    trio B+C's CPU and the peer links' bytes per decision of A."""
    d = max(rec["decisions"], 1)
    t = rec["cpu_ticks"]
    out = {"dps": rec["decisions_per_second"]}
    if rec["target"] in ("lone", "bare"):
        out["us"] = t[rec["target"]] / hz * 1e6 / d
    else:
        out["us"] = t["a"] / hz * 1e6 / d
        out["peers_us"] = (t["b"] + t["c"]) / hz * 1e6 / d
        pb = rec["peer_bytes"]
        out["a_bytes"] = pb["a"] / d
        out["bc_bytes"] = (pb["b"] + pb["c"]) / d
    return out


def record_cost(raw, kv):
    bench = load_bench(kv["bench"])
    before, after = kv["before"], kv["after"]
    t0, t1 = ticks(before), ticks(after)
    names = ["a", "b", "c"] if kv["target"] == "trio" else [kv["target"]]
    rec = {
        "part": "cost",
        "scenario": kv["scenario"],
        "kind": kv["kind"],
        "keys": int(kv["keys"]),
        "shape": kv["shape"],
        "round": int(kv["round"]),
        "target": kv["target"],
        "hz": int(kv["hz"]),
        "decisions": bench.get("decisions", bench.get("requests", 0)),
        "decisions_per_second": bench.get("decisions_per_second", bench.get("requests_per_second", 0)),
        "go": bench.get("go", 0),
        "sorry": bench.get("sorry", 0),
        "errors": bench.get("errors", 0),
        "cpu_ticks": {n: t1[n] - t0[n] for n in names},
    }
    if kv["target"] == "trio":
        rec["peer_bytes"], rec["peer_connections"] = {}, {}
        for n in names:
            rec["peer_bytes"][n], rec["peer_connections"][n] = peer_bytes(before, after, n)
    append(raw, rec)
    f = cost_figures(rec, rec["hz"])
    who = {"lone": "lone  ", "bare": "bare  ", "trio": "trio A"}[rec["target"]]
    line = f"round {rec['round']}  {rec['scenario']:<34} {who} {fmt_int(f['dps']):>10} dec/s  {f['us']:6.3f} µs CPU/dec"
    if rec["target"] == "trio":
        line += f"  B+C {f['peers_us']:6.3f} µs/dec of A  A sends {f['a_bytes']:6.1f} B/dec, B+C {f['bc_bytes']:6.2f}"
    if rec["sorry"] or rec["errors"]:
        line += f"  (!! sorry {rec['sorry']}, errors {rec['errors']})"
    # Once all of a round's runs are in, the round's ratios.
    same = {
        r["target"]: r for r in read_raw(raw)
        if r["part"] == "cost" and r["scenario"] == rec["scenario"] and r["round"] == rec["round"]
    }
    if set(same) == set(kv["targets"].split(",")) and "trio" in same:
        ft = cost_figures(same["trio"], rec["hz"])
        parts = []
        for base in ("lone", "bare"):
            if base in same:
                fb = cost_figures(same[base], rec["hz"])
                parts.append(
                    f"against {base}: member {ft['us'] / fb['us']:.2f}, peers {ft['peers_us'] / fb['us']:.2f},"
                    f" rate A/{base} {ft['dps'] / fb['dps']:.2f}"
                )
        if parts:
            line += "\n        -> " + "; ".join(parts)
    print(line, file=sys.stderr)
    return 0


def record_reach(raw, kv):
    bench = load_bench(kv["bench"])
    rec = {
        "part": "reach",
        "kind": kv["kind"],
        "keys": int(kv["keys"]),
        "limit": kv["limit"],
        "round": int(kv["round"]),
        "target": kv["target"],
        "max_per_key": float(kv["max_per_key"]),
        "decisions": bench.get("decisions", bench.get("requests", 0)),
        "go": bench.get("go", 0),
        "sorry": bench.get("sorry", 0),
        "errors": bench.get("errors", 0),
        "started": float(kv["started"]),
        "ended": float(kv["ended"]),
        "slot_seconds": float(kv["slot"]),
        # go counted by the lockers' own stats over the run (replies still
        # in flight when the bench stopped counting are in these)
        "stats_go": {k[len("go_"):]: int(v) for k, v in kv.items() if k.startswith("go_")},
    }
    slot = rec["slot_seconds"]
    rec["one_slot"] = int(rec["started"] // slot) == int(rec["ended"] // slot)
    append(raw, rec)
    who = "lone  " if rec["target"] == "lone" else "trio A"
    most = rec["max_per_key"] * rec["keys"]
    line = (
        f"reach round {rec['round']}  {rec['kind']:<14} {rec['keys']:>6} keys  {who} go {fmt_int(rec['go']):>9}"
        f" of at most {fmt_int(most)} ({rec['go'] / most:.3f})  stats go {rec['stats_go']}"
    )
    if not rec["one_slot"]:
        line += "  (!! the run spanned a slot boundary)"
    if rec["errors"]:
        line += f"  (!! errors {rec['errors']})"
    print(line, file=sys.stderr)
    return 0


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def rng(xs, f="{:.2f}"):
    return (f + "-" + f).format(min(xs), max(xs)) if xs else "-"


def verdict(value, target, le):
    if value != value:  # nan
        return "-"
    ok = value <= target if le else value >= target
    return "met" if ok else "NOT met"


def ratios(num, den, field_num, field_den):
    """Per-round ratios num[field_num] / den[field_den] over the rounds both have."""
    return [num[k][field_num] / den[k][field_den] for k in sorted(set(num) & set(den)) if den[k][field_den] > 0]


def span(xs):
    return [min(xs), max(xs)] if xs else None


def cost_summary(cost, result):
    scenarios = []
    for r in cost:
        if r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
    if not scenarios:
        return
    have_bare = any(r["target"] == "bare" for r in cost)
    print("Cost: a lone locker against member A of a peered trio, the same load on each")
    print("(CPU = utime + stime of the whole process; member ratio = A's CPU per decision ÷ lone's;")
    print(" peers ratio = (B + C)'s CPU per decision of A ÷ lone's CPU per decision; bytes = bytes")
    print(" acked on the TCP connections of each member's peer PUB port, per decision of A;")
    print(" figures are medians over rounds, ratios the median of the per-round ratios [their range].")
    print(" 'lone' keeps a --state file as the members do, so its ratios are peering's own cost;")
    if have_bare:
        print(" 'bare' is a lone locker without one, the cheapest way to serve the same limits)")
    else:
        print(" no lone locker without a state file was measured (BARE=0))")
    rows = []
    for sc in scenarios:
        runs = [r for r in cost if r["scenario"] == sc]
        fig = {t: {r["round"]: cost_figures(r, r["hz"]) for r in runs if r["target"] == t} for t in ("lone", "bare", "trio")}
        fl, fb, ft = fig["lone"], fig["bare"], fig["trio"]
        member = ratios(ft, fl, "us", "us")
        peers = ratios(ft, fl, "peers_us", "us")
        rate = ratios(ft, fl, "dps", "dps")
        member_b = ratios(ft, fb, "us", "us")
        peers_b = ratios(ft, fb, "peers_us", "us")
        rate_b = ratios(ft, fb, "dps", "dps")
        a_bytes = [f["a_bytes"] for f in ft.values()]
        bc_bytes = [f["bc_bytes"] for f in ft.values()]
        bad = sum(r["sorry"] + r["errors"] for r in runs)
        first = runs[0]
        row = {
            "scenario": sc,
            "kind": first["kind"],
            "keys": first["keys"],
            "shape": first["shape"],
            "rounds": len(ft),
            "lone_decisions_per_second": med([f["dps"] for f in fl.values()]),
            "a_decisions_per_second": med([f["dps"] for f in ft.values()]),
            "rate_ratio": med(rate),
            "rate_ratio_range": span(rate),
            "lone_cpu_us_per_decision": med([f["us"] for f in fl.values()]),
            "a_cpu_us_per_decision": med([f["us"] for f in ft.values()]),
            "bc_cpu_us_per_a_decision": med([f["peers_us"] for f in ft.values()]),
            "member_ratio": med(member),
            "member_ratio_range": span(member),
            "peers_ratio": med(peers),
            "peers_ratio_range": span(peers),
            "a_peer_bytes_per_decision": med(a_bytes),
            "a_peer_bytes_per_decision_range": span(a_bytes),
            "bc_peer_bytes_per_a_decision": med(bc_bytes),
            "bc_peer_bytes_per_a_decision_range": span(bc_bytes),
            "sorry_or_errors": bad,
        }
        if fb:
            row.update({
                "bare_decisions_per_second": med([f["dps"] for f in fb.values()]),
                "bare_cpu_us_per_decision": med([f["us"] for f in fb.values()]),
                "rate_ratio_bare": med(rate_b),
                "rate_ratio_bare_range": span(rate_b),
                "member_ratio_bare": med(member_b),
                "member_ratio_bare_range": span(member_b),
                "peers_ratio_bare": med(peers_b),
                "peers_ratio_bare_range": span(peers_b),
            })
        result["cost"].append(row)
        rows.append(row)
        print()
        print(f"{sc}  ({len(ft)} rounds)")
        bare_head = f" {'bare':>12}" if fb else ""
        print(f"  {'':26} {'lone':>12}{bare_head} {'trio A':>12}   A ÷ lone [range over rounds]")
        bare_dps = f" {fmt_int(row['bare_decisions_per_second']):>12}" if fb else ""
        bare_us = f" {row['bare_cpu_us_per_decision']:12.3f}" if fb else ""
        pad = f" {'':>12}" if fb else ""
        print(
            f"  {'decisions/s':26} {fmt_int(row['lone_decisions_per_second']):>12}{bare_dps} {fmt_int(row['a_decisions_per_second']):>12}"
            f"   {row['rate_ratio']:.2f} [{rng(rate)}]" + (f"   (A ÷ bare {row['rate_ratio_bare']:.2f} [{rng(rate_b)}])" if fb else "")
        )
        print(
            f"  {'CPU µs per decision':26} {row['lone_cpu_us_per_decision']:12.3f}{bare_us} {row['a_cpu_us_per_decision']:12.3f}"
            f"   {row['member_ratio']:.2f} [{rng(member)}]  member ratio, target ≤ {TARGETS['member']}: "
            f"{verdict(row['member_ratio'], TARGETS['member'], True)}"
            + (f"   (÷ bare {row['member_ratio_bare']:.2f} [{rng(member_b)}])" if fb else "")
        )
        print(
            f"  {'B+C CPU µs per A decision':26} {'':>12}{pad} {row['bc_cpu_us_per_a_decision']:12.3f}"
            f"   {row['peers_ratio']:.2f} [{rng(peers)}]  peers ratio, target ≤ {TARGETS['peers']}: "
            f"{verdict(row['peers_ratio'], TARGETS['peers'], True)}"
            + (f"   (÷ bare {row['peers_ratio_bare']:.2f} [{rng(peers_b)}])" if fb else "")
        )
        print(
            f"  {'peer bytes per A decision':26} {'':>12}{pad} {'':>12}   A sends {row['a_peer_bytes_per_decision']:.2f}"
            f" [{rng(a_bytes)}], B+C send {row['bc_peer_bytes_per_a_decision']:.3f} [{rng(bc_bytes, '{:.3f}')}]"
        )
        if bad:
            print(f"  !! {bad} decisions were sorry or errors: the limit was meant never to refuse")

    print()
    print("Cost summary (medians; ratios: the median of per-round ratios)")
    extra = f" {'member÷bare':>11} | {'peers÷bare':>10} |" if have_bare else ""
    head = (
        f"| {'scenario':<34} | {'lone dec/s':>11} | {'A dec/s':>11} | {'A÷lone':>6} | {'member':>6} | {'peers':>6} |{extra}"
        f" {'A B/dec':>8} | {'B+C B/dec':>9} |"
    )
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    for row in rows:
        extra = f" {row.get('member_ratio_bare', float('nan')):11.2f} | {row.get('peers_ratio_bare', float('nan')):10.2f} |" if have_bare else ""
        print(
            f"| {row['scenario']:<34} | {fmt_int(row['lone_decisions_per_second']):>11} | {fmt_int(row['a_decisions_per_second']):>11}"
            f" | {row['rate_ratio']:6.2f} | {row['member_ratio']:6.2f} | {row['peers_ratio']:6.2f} |{extra}"
            f" {row['a_peer_bytes_per_decision']:8.2f} | {row['bc_peer_bytes_per_a_decision']:9.3f} |"
        )
    worst_m = max(r["member_ratio"] for r in rows)
    worst_p = max(r["peers_ratio"] for r in rows)
    print(
        f"member ratio: worst scenario {worst_m:.2f} (target ≤ {TARGETS['member']}: {verdict(worst_m, TARGETS['member'], True)}); "
        f"peers ratio: worst {worst_p:.2f} (target ≤ {TARGETS['peers']}: {verdict(worst_p, TARGETS['peers'], True)})"
    )


def reach_summary(reach, result):
    if not reach:
        return
    print()
    print("Reach: go granted in one run, all demand on one locker: trio member A against a lone locker")
    print("(go from `locker bench --json`, its share of what the limit allows in the run in parentheses;")
    print(" each run starts just after a slot boundary, so it has one whole slot; 'B+C go' and 'trio go'")
    print(" are what the members' own stats counted in the run, A + B + C for the trio)")
    head = (
        f"| {'limit':<28} | {'keys':>6} | {'at most':>9} | {'lone go':>17} | {'A go':>17} | {'A ÷ lone':<21} |"
        f" {'B+C go':>6} | {'trio go':>9} |"
    )
    print(head)
    print("|" + "|".join("-" * len(c) for c in head.split("|")[1:-1]) + "|")
    groups = []
    for r in reach:
        if (r["kind"], r["keys"]) not in groups:
            groups.append((r["kind"], r["keys"]))
    for kind, keys in groups:
        runs = [r for r in reach if r["kind"] == kind and r["keys"] == keys]
        lone = {r["round"]: r for r in runs if r["target"] == "lone"}
        trio = {r["round"]: r for r in runs if r["target"] == "trio"}
        rs = ratios(trio, lone, "go", "go")
        first = runs[0]
        most = first["max_per_key"] * keys
        bc = [r["stats_go"].get("b", 0) + r["stats_go"].get("c", 0) for r in trio.values()]
        group = [sum(r["stats_go"].values()) for r in trio.values()]
        row = {
            "limit": first["limit"],
            "kind": kind,
            "keys": keys,
            "at_most": most,
            "rounds": len(trio),
            "lone_go": med([r["go"] for r in lone.values()]),
            "a_go": med([r["go"] for r in trio.values()]),
            "ratio": med(rs),
            "ratio_range": span(rs),
            "bc_stats_go": med(bc),
            "trio_stats_go": med(group),
            "trio_stats_go_max": max(group) if group else None,
            "lone_stats_go": med([r["stats_go"].get("lone", 0) for r in lone.values()]),
            "runs_spanning_a_boundary": sum(1 for r in runs if not r["one_slot"]),
            "errors": sum(r["errors"] for r in runs),
        }
        result["reach"].append(row)
        lone_s = f"{fmt_int(row['lone_go'])} ({row['lone_go'] / most:.2f})"
        ratio_s = f"{row['ratio']:.3f} [{rng(rs, '{:.3f}')}]"
        a_s = f"{fmt_int(row['a_go'])} ({row['a_go'] / most:.2f})"
        print(
            f"| {first['limit']:<28} | {keys:>6} | {fmt_int(most):>9} | {lone_s:>17} | {a_s:>17}"
            f" | {ratio_s:<21} | {fmt_int(row['bc_stats_go']):>6} | {fmt_int(row['trio_stats_go']):>9} |"
        )
    for row in result["reach"]:
        notes = []
        # A fixed window allows max_requests per slot; the others at most
        # what "at most" says over the run.
        if row["trio_stats_go_max"] is not None and row["trio_stats_go_max"] > row["at_most"]:
            notes.append(f"the trio granted {row['trio_stats_go_max']:.0f} in a run, over {row['at_most']:.0f}")
        if row["lone_go"] < 0.95 * row["at_most"]:
            notes.append(
                f"the lone locker granted only {row['lone_go'] / row['at_most']:.0%} of what the limit allows:"
                " the run was too short for its asks to spend every key, so the ratio mixes reach with throughput"
            )
        if row["runs_spanning_a_boundary"]:
            notes.append(f"{row['runs_spanning_a_boundary']} run(s) spanned a slot boundary")
        if row["errors"]:
            notes.append(f"{row['errors']} errors")
        if notes:
            print(f"!! {row['limit']}: " + "; ".join(notes))
    worst = min(r["ratio"] for r in result["reach"])
    print(f"reach ratio: worst {worst:.3f} (target ≥ {TARGETS['reach']}: {verdict(worst, TARGETS['reach'], False)})")


def summary(raw, out):
    recs = read_raw(raw)
    result = {"cost": [], "reach": [], "targets": TARGETS}
    cost_summary([r for r in recs if r["part"] == "cost"], result)
    reach_summary([r for r in recs if r["part"] == "reach"], result)
    if out:
        with open(out, "w") as f:
            json.dump({"summary": result, "runs": recs}, f, indent=1)
            f.write("\n")
    return 0


def logs(paths):
    """The warnings and errors in the lockers' logs, each message once with
    its count per locker."""
    seen = {}
    for path in paths:
        name = os.path.basename(path).rsplit(".", 1)[0]
        with open(path, errors="replace") as f:
            for line in f:
                parts = line.split(None, 3)
                if len(parts) < 4 or parts[1] not in ("WARN", "ERROR"):
                    continue
                text = parts[3].strip()
                # the message without its fields (key=value ...)
                words = text.split(" ")
                while words and "=" in words[-1]:
                    words.pop()
                msg = parts[1] + " " + " ".join(words)
                seen.setdefault(msg, {}).setdefault(name, 0)
                seen[msg][name] += 1
    for msg, counts in seen.items():
        print(f"  {msg}: " + ", ".join(f"{n} x{c}" for n, c in counts.items()))
    if not seen:
        print("  none")
    return 0


def main(argv):
    cmd = argv[1]
    if cmd == "ready":
        return ready(argv[2])
    if cmd == "go":
        return go_count(argv[2])
    if cmd == "cost":
        return record_cost(argv[2], args_map(argv[3:]))
    if cmd == "reach":
        return record_reach(argv[2], args_map(argv[3:]))
    if cmd == "logs":
        return logs(argv[2:])
    if cmd == "summary":
        return summary(argv[2], argv[3] if len(argv) > 3 else "")
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
