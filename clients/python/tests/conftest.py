"""The harness: the real ``locker`` binary on wildcard loopback ports.

The binary is ``$LOCKER_BIN`` when set, else ``target/release/locker`` at the
repository's root, built with ``cargo build --release`` when missing. Each
daemon is started with ``--bind tcp://127.0.0.1:*`` (or a given endpoint)
and is ready once it printed ``listening on <endpoint>``, which it does only
after binding: nothing here sleeps to wait for readiness. Every daemon is
killed at teardown.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: How long a daemon may take to print its endpoint.
START_DEADLINE = 10.0

#: The limits most tests use. Counting limits have hour-long slots so that a
#: slot cannot end in the middle of a test that counts go and sorry.
CONFIG = """
[[limits]]
name = "default"
max_requests = 1000000
in_seconds = 1.0

[[limits]]
name = "hour"
max_requests = 3
in_seconds = 3600

[[limits]]
name = "api"
max_requests = 5
in_seconds = 3600

[[limits]]
name = "smooth"
algorithm = "token-bucket"
max_requests = 5
in_seconds = 1
burst = 1

[[limits]]
name = "db"
algorithm = "semaphore"
max_requests = 1
in_seconds = 5
"""


class Daemon:
    """A running ``locker serve``; ``endpoint`` is the one it printed."""

    def __init__(self, binary: str, args: List[str], bind: str = "tcp://127.0.0.1:*") -> None:
        self.proc = subprocess.Popen(
            [binary, "serve", "--bind", bind, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env={**os.environ, "LOCKER_LOG": "warn"},
        )
        lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, args=(lines,), daemon=True).start()
        try:
            line = lines.get(timeout=START_DEADLINE)
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"locker printed no endpoint within {START_DEADLINE} s") from None
        if not line.startswith("listening on "):
            self.kill()
            raise RuntimeError(f"unexpected first line {line!r}")
        self.endpoint = line[len("listening on ") :].strip()

    def _read(self, lines: "queue.Queue[str]") -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            lines.put(raw.decode(errors="replace"))
        # The pipe is read to its end so the daemon never blocks on it.

    @property
    def port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    def kill(self) -> None:
        """SIGKILL, and wait until it is gone (its port is then free)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


class Lockers:
    """Starts daemons for one test and kills them all at its end."""

    def __init__(self, binary: str, config: str) -> None:
        self.binary = binary
        self.config = config
        self.started: List[Daemon] = []

    def start(self, *args: str, bind: str = "tcp://127.0.0.1:*", config: bool = True) -> Daemon:
        extra = ["--config", self.config] if config else []
        daemon = Daemon(self.binary, [*extra, *args], bind)
        self.started.append(daemon)
        return daemon

    def kill_all(self) -> None:
        for d in self.started:
            d.kill()


@pytest.fixture(scope="session")
def locker_bin() -> str:
    """The daemon binary, built once when missing."""
    env = os.environ.get("LOCKER_BIN")
    if env:
        return env
    binary = ROOT / "target" / "release" / "locker"
    if not binary.exists():
        subprocess.run(["cargo", "build", "--release"], cwd=ROOT, check=True, timeout=1800)
    return str(binary)


@contextlib.contextmanager
def written_config(text: str) -> Iterator[str]:
    """The path of a limits file holding `text`, removed afterwards."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(text)
    try:
        yield f.name
    finally:
        os.unlink(f.name)


@contextlib.contextmanager
def serving(locker_bin: str, config: str) -> Iterator[Daemon]:
    """A daemon serving the limits file `config`, killed afterwards."""
    daemon = Daemon(locker_bin, ["--config", config])
    try:
        yield daemon
    finally:
        daemon.kill()


def served(config: str) -> Tuple[Any, Any]:
    """The fixtures of a module whose tests ask one daemon of its own,
    serving the limits `config`: ``locker`` (for the module) and
    ``client`` (a blocking client of it, for each test). A module takes
    them with ``locker, client = served(CONFIG)``."""

    @pytest.fixture(scope="module")
    def locker(locker_bin: str) -> Iterator[Daemon]:
        with written_config(config) as path, serving(locker_bin, path) as daemon:
            yield daemon

    @pytest.fixture
    def client(locker: Daemon) -> Iterator[Any]:
        from locker_client import Client

        with Client(locker.endpoint, timeout=5.0) as c:
            yield c

    return locker, client


@pytest.fixture(scope="session")
def config_file() -> Iterator[str]:
    with written_config(CONFIG) as path:
        yield path


@pytest.fixture(scope="session")
def locker(locker_bin: str, config_file: str) -> Iterator[Daemon]:
    """One daemon for the tests that only need their own keys."""
    with serving(locker_bin, config_file) as daemon:
        yield daemon


@pytest.fixture
def lockers(locker_bin: str, config_file: str) -> Iterator[Lockers]:
    """Daemons of a test's own, for tests that kill or restart them."""
    started = Lockers(locker_bin, config_file)
    yield started
    started.kill_all()


@pytest.fixture
def key() -> str:
    """A key no other test uses, so counts start at zero."""
    return f"k-{uuid.uuid4().hex[:12]}"


def limit_stats(stats: dict, name: Optional[str] = None) -> dict:
    """One limit's counters from a stats map (the default limit first)."""
    limits = stats["limits"]
    return limits[0] if name is None else next(l for l in limits if l["name"] == name)
