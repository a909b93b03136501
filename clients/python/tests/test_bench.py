"""The lockstep bench (``benches/lockstep.py``) runs: a smoke run of one
short round, nothing installed, its figures well-formed. What it measures
is recorded in docs/performance.md; this only keeps the command working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benches" / "lockstep.py"


def test_a_quick_run_reports_every_contender(locker_bin: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--no-install", "--json"],
        env={**os.environ, "LOCKER_BIN": locker_bin},
        capture_output=True,
        timeout=120,
        check=True,
    )
    report = json.loads(done.stdout)
    rows = report["rows"]
    for name in ["zmq REQ, plain (b\"big\")", "Client.ask, fixed window", "Client.go, plain", "AsyncClient.ask, fixed window"]:
        assert rows[name]["asks_per_s"] > 0 and 0 < rows[name]["p50_us"] <= rows[name]["p99_us"], name
    assert "Client.ask / zmq REQ (asks/s)" in report["ratios"]
    # The Redis contenders run when limits, redis and redis-server are all
    # there, and say why not otherwise.
    assert ("limits fixed window, Redis" in rows) == (report["skipped"] is None), report["skipped"]
