"""Every Python snippet of the README, run as written against a daemon
serving the repository's examples/limits.toml on the default endpoint
(tcp://127.0.0.1:7777), as a reader of the quick start would run it.

Each snippet runs in one namespace shared with the snippets before it,
with ``client`` an open :class:`Client` (later snippets use the one the
quick start opened); a snippet that says it is not run is left out."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from conftest import Daemon
from locker_client import DEFAULT_ENDPOINT, Client

ROOT = Path(__file__).resolve().parents[3]
README = Path(__file__).resolve().parents[1] / "README.md"


def snippets() -> list:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    return [b for b in blocks if "not run by the README test" not in b]


@pytest.fixture
def quick_start_locker(locker_bin: str, monkeypatch: pytest.MonkeyPatch):
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 7777)) == 0:
            pytest.skip("something already listens on 127.0.0.1:7777")
    daemon = Daemon(locker_bin, ["--config", str(ROOT / "examples" / "limits.toml")], bind=DEFAULT_ENDPOINT)
    monkeypatch.chdir(ROOT)
    yield daemon
    daemon.kill()


def test_every_python_snippet_of_the_readme_runs_against_the_quick_start_locker(quick_start_locker: Daemon) -> None:
    blocks = snippets()
    assert len(blocks) >= 6, blocks
    with Client(timeout=5.0) as client:
        namespace = {"client": client, "__name__": "readme"}
        for i, block in enumerate(blocks):
            try:
                exec(compile(block, f"README.md snippet {i + 1}", "exec"), namespace)
            except Exception as e:  # noqa: BLE001 - the snippet and its error, together
                pytest.fail(f"snippet {i + 1} failed: {e!r}\n{block}")
            if namespace["client"] is not client and getattr(namespace["client"], "_closed", False):
                namespace["client"] = client
