"""The seed's loop rewritten with the package prints what the seed's did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import Lockers

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "seed_loop.py"


def test_the_seed_loop_prints_time_and_go_or_sorry(lockers: Lockers) -> None:
    d = lockers.start("--max-requests", "2", "--in-seconds", "3600", config=False)
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), d.endpoint, "4", "0"], capture_output=True, text=True, timeout=20, check=True
    )
    lines = [line.split() for line in out.stdout.splitlines()]
    assert [answer for _, answer in lines] == ["go", "go", "sorry", "sorry"], out.stdout
    assert all(float(t) > 1e9 for t, _ in lines), "each line starts with the unix time"
