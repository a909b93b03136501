"""CURVE against a real locker started with ``--curve-secret-key`` and
``--curve-clients``: a client whose key is on the allowlist gets go (from
key files or Z85 text, blocking and asyncio, and its lease heartbeats too);
an unknown key and a plain client get no answer, which is ``NoAnswer``."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Tuple

import pytest
import zmq

from conftest import Lockers
from locker_client import AsyncClient, Client, NoAnswer

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="this pyzmq's libzmq was built without CURVE")

#: A refused or plain client never gets an answer; this only bounds the test.
SILENT = 0.3


def keygen(binary: str, prefix: Path) -> Tuple[str, str]:
    """Runs ``locker keygen --out prefix``; returns (public, secret) in Z85."""
    subprocess.run([binary, "keygen", "--out", str(prefix)], check=True, capture_output=True, timeout=10)

    def key(path: Path) -> str:
        return next(l.strip() for l in path.read_text().splitlines() if l.strip() and not l.startswith("#"))
    return key(prefix.with_suffix(".pub")), key(prefix.with_suffix(".key"))


@pytest.fixture
def keys(locker_bin: str, tmp_path: Path) -> Path:
    """server.key/.pub, alice (allowed) and mallory (not), in ``tmp_path``."""
    (tmp_path / "clients").mkdir()
    for name in ("server", "alice", "mallory"):
        keygen(locker_bin, tmp_path / name)
    (tmp_path / "clients" / "alice.pub").write_text((tmp_path / "alice.pub").read_text())
    return tmp_path


def start(lockers: Lockers, keys: Path) -> str:
    d = lockers.start("--curve-secret-key", str(keys / "server.key"), "--curve-clients", str(keys / "clients"))
    return d.endpoint


def test_an_allowed_key_gets_go_from_files_or_z85_text(lockers: Lockers, keys: Path) -> None:
    endpoint = start(lockers, keys)
    with Client(endpoint, timeout=5.0, server_key=keys / "server.pub", client_key=keys / "alice.key") as c:
        assert c.ask("api", key="curve-files").ok
        assert c.go()
    server_pub = (keys / "server.pub").read_text().strip().splitlines()[-1]
    alice_secret = (keys / "alice.key").read_text().strip().splitlines()[-1]
    with Client(endpoint, timeout=5.0, server_key=server_pub, client_key=str(keys / "alice")) as c:
        assert c.ask("api", key="curve-prefix").ok, "the keygen prefix names the .key file"
    with Client(endpoint, timeout=5.0, server_key=server_pub, client_key=alice_secret) as c:
        assert c.ask("api", key="curve-z85").ok


def test_an_unknown_key_and_a_plain_client_get_no_answer(lockers: Lockers, keys: Path) -> None:
    endpoint = start(lockers, keys)
    with Client(endpoint, timeout=SILENT, server_key=keys / "server.pub", client_key=keys / "mallory.key") as c:
        with pytest.raises(NoAnswer):
            c.ask()
    with Client(endpoint, timeout=SILENT) as c:
        with pytest.raises(NoAnswer):
            c.ask()


def test_lease_heartbeats_and_the_asyncio_client_speak_curve(lockers: Lockers, keys: Path) -> None:
    endpoint = start(lockers, keys)
    curve = {"server_key": keys / "server.pub", "client_key": keys / "alice.key"}
    with Client(endpoint, timeout=5.0, **curve) as c:
        with c.lease("db", ttl=0.15) as lease:
            # Several ttls: only heartbeats on the lease's own CURVE socket keep it.
            time.sleep(0.45)
            assert lease.held
            assert not c.acquire_lease("db").ok, "still held"

    async def run() -> None:
        async with AsyncClient(endpoint, timeout=5.0, **curve) as a:
            assert (await a.ask("api", key="curve-async")).ok
        async with AsyncClient(endpoint, timeout=SILENT, server_key=keys / "server.pub", client_key=keys / "mallory") as m:
            with pytest.raises(NoAnswer):
                await m.ask()

    asyncio.run(run())


def test_keys_are_checked_before_anything_is_sent(keys: Path) -> None:
    with pytest.raises(ValueError, match="both"):
        Client("tcp://127.0.0.1:1", server_key=keys / "server.pub")
    with pytest.raises(ValueError, match="expected one key|not a CURVE key|neither"):
        Client("tcp://127.0.0.1:1", server_key=keys / "nope.pub", client_key=keys / "alice.key")
