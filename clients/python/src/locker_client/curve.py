"""CURVE for the clients: the locker's public key and this client's key
pair, read from Z85 text or from the files ``locker keygen`` writes, and set
on each socket before it connects.

A key file holds one 40-character Z85 key; blank lines and ``#`` comments
are allowed around it (``locker keygen --out PREFIX`` writes ``PREFIX.key``,
the secret key, and ``PREFIX.pub``). A client needs the server's public key
and its own secret key; its public key is derived from the secret. This
module reads files and sets socket options; it never sends anything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple, Optional, Union

import zmq

#: The length of a key in Z85 text.
Z85_CHARS = 40

_Z85 = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#")

KeySource = Union[str, bytes, "os.PathLike[str]"]


class Curve(NamedTuple):
    """The keys one client speaks CURVE with, each in Z85."""

    server: bytes
    public: bytes
    secret: bytes


def load(server_key: Optional[KeySource], client_key: Optional[KeySource]) -> Optional[Curve]:
    """The CURVE keys for ``server_key`` (the locker's public key: Z85 text
    or its ``.pub`` file) and ``client_key`` (this client's secret key: Z85
    text, its ``.key`` file, or the ``PREFIX`` given to ``locker keygen``);
    None when neither is given. Raises ValueError for a key that cannot be
    read, or for one without the other, and RuntimeError when this pyzmq's
    libzmq has no CURVE."""
    if server_key is None and client_key is None:
        return None
    if server_key is None or client_key is None:
        raise ValueError("CURVE needs both server_key (the locker's public key) and client_key (this client's secret key)")
    if not zmq.has("curve"):
        raise RuntimeError("this pyzmq's libzmq was built without CURVE")
    server = read_key(server_key, ".pub")
    secret = read_key(client_key, ".key")
    return Curve(server=server, public=zmq.curve_public(secret), secret=secret)


def read_key(source: KeySource, suffix: str) -> bytes:
    """One Z85 key: ``source`` itself when it is 40 Z85 characters, else the
    one key in the file it names (or in that name plus ``suffix``)."""
    if isinstance(source, bytes):
        source = source.decode("ascii", errors="replace")
    text = os.fspath(source)
    if len(text) == Z85_CHARS and set(text) <= _Z85 and not Path(text).exists():
        return text.encode("ascii")
    path = Path(text)
    if not path.exists() and Path(text + suffix).exists():
        path = Path(text + suffix)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ValueError(f"{text}: neither a Z85 key nor a readable key file ({e.strerror})") from None
    keys = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    if len(keys) != 1:
        raise ValueError(f"{path}: expected one key, found {len(keys)}")
    key = keys[0]
    if len(key) != Z85_CHARS or not set(key) <= _Z85:
        raise ValueError(f"{path}: not a CURVE key (expected {Z85_CHARS} Z85 characters)")
    return key.encode("ascii")


def secure(socket: "zmq.Socket[Any]", curve: Optional[Curve]) -> None:
    """Makes ``socket`` a CURVE client of the locker, before it connects."""
    if curve is None:
        return
    socket.setsockopt(zmq.CURVE_SERVERKEY, curve.server)
    socket.setsockopt(zmq.CURVE_PUBLICKEY, curve.public)
    socket.setsockopt(zmq.CURVE_SECRETKEY, curve.secret)
