"""The wire format as this client speaks it: request maps, their bytes, and
the replies decoded into frozen dataclasses.

It mirrors the locker's ``src/wire/`` (contract: ``docs/wire.md``): a structured request is a
MessagePack map whose absent fields are left out (never sent as nil), in the
field order the Rust client uses, so the bytes are the same; a plain request
is any bytes that are not a map, answered ``go`` or ``sorry``. Arguments are
checked here, before anything is sent. This module only translates: it
holds no state and never touches a socket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, cast

import msgpack

from . import headers
from .errors import BadReply, LockerError

#: The plain form's replies.
GO = b"go"
SORRY = b"sorry"

#: What the seed's client sends in the plain form.
PLAIN_BODY = b"let me go"

#: The longest hold a locker keeps for ``hold_ms`` (a minute).
MAX_HOLD_MS = 60_000

#: The most a locker accepts for ``max_wait_ms`` (an hour).
MAX_WAIT_MS = 3_600_000
#: The range of a lease's ``ttl_ms``.
MAX_TTL_MS = 86_400_000
#: The most asks one batch may carry (the locker's ``MAX_BATCH_ASKS``).
MAX_BATCH_ASKS = 1000
#: The most parts limits checked together (``all``) may have.
MAX_ALL_ASKS = 16
#: The most limits ``parents`` may name: a chain holds at most 8 levels,
#: the limit asked and 7 above it.
MAX_PARENTS = 7
#: The kinds a limit sent with the ask (:class:`Terms`) may be: the counting ones.
TERMS_ALGORITHMS = ("fixed-window", "token-bucket", "rolling-window")

_U64 = 2**64

Request = Dict[str, Any]


class _Answer:
    """What a go reply and the reply to limits checked together share: true
    when ``ok``, and the wire's milliseconds also in seconds."""

    ok: bool
    retry_after_ms: int
    wait_ms: Optional[int]

    def __bool__(self) -> bool:
        return self.ok

    @property
    def retry_after(self) -> float:
        """``retry_after_ms`` in seconds: when sorry, until the ask would fit."""
        return self.retry_after_ms / 1000.0

    @property
    def wait(self) -> Optional[float]:
        """``wait_ms`` in seconds: go after this long, when the ask had a wait."""
        return None if self.wait_ms is None else self.wait_ms / 1000.0


@dataclass(frozen=True)
class GoReply(_Answer):
    """The locker's answer to an ask. True in a boolean context when ``ok``.

    ``ok``: go (after ``wait_ms``, when present) or sorry.
    ``remaining``: permits a new ask for this key could take now.
    ``retry_after_ms``: when sorry, until the ask would fit; 0 when ok.
    ``reset_after_ms``: until the slot ends (a bucket is full again).
    ``granted``: permits taken, present when the ask had ``up_to``.
    ``wait_ms``: go after this long, present when the ask had ``max_wait_ms``.
    ``limit``: the limit's capacity (max_requests, or a bucket's burst).
    ``shadow_sorry``: the ask (or its limit) was in shadow and would have
    got sorry: it is ``ok``, charged nothing, with the sorry's figures.

    The ``_ms`` fields are the wire's own names, in milliseconds;
    ``retry_after``, ``reset_after`` and ``wait`` give them in seconds.
    """

    ok: bool
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    granted: Optional[int]
    wait_ms: Optional[int]
    limit: int
    shadow_sorry: bool = False

    @property
    def reset_after(self) -> float:
        """``reset_after_ms`` in seconds: until the slot ends (a bucket is full)."""
        return self.reset_after_ms / 1000.0

    def headers(self, name: Optional[str] = None, window: Optional[float] = None) -> Dict[str, str]:
        """The standard rate-limit header fields of this answer, for a web
        response (see :mod:`locker_client.headers`): ``RateLimit-Policy``
        and ``RateLimit`` (IETF draft-ietf-httpapi-ratelimit-headers-10),
        ``X-RateLimit-Limit``, ``X-RateLimit-Remaining`` and
        ``X-RateLimit-Reset`` (draft-03) and, on a sorry, ``Retry-After``;
        times in whole seconds, rounded up.

        ``name`` is the policy's name, the limit asked (the reply does not
        carry it; ``"default"`` when None). ``window`` is the limit's
        ``in_seconds``: a go reply does not carry it either, so the
        policy's ``w`` is written only when it is given, else left out, as
        the draft allows::

            reply.headers("api", window=60)
            # {"RateLimit-Policy": '"api";q=100;w=60', "RateLimit": '"api";r=99;t=42', ...}
        """
        return headers.fields([(name, self, window)], self.ok, self.retry_after_ms)


@dataclass(frozen=True)
class ChargeReply(GoReply):
    """The locker's answer to a charge: a :class:`GoReply` (always ``ok``;
    ``granted``, the cost charged; ``remaining`` 0 while in debt) and
    ``debt``, the permits owed beyond the limit right now, which later
    asks of the key wait out (0 when the charge fit)."""

    debt: int = 0


@dataclass(frozen=True)
class Terms:
    """A limit's terms, sent with an ask (``terms=``) for a limit the
    locker's config does not name: a locker started with
    ``--runtime-limits N`` makes it on first use (and takes new terms for
    the same name from its next slot, keeping the counts); without that
    flag the ask is refused.

    ``max_requests`` per ``in_seconds`` (sent as a float always) of
    ``algorithm``, a counting kind (``fixed-window``, ``token-bucket`` or
    ``rolling-window``); ``burst``, a token bucket's depth, for a bucket
    only. Checked when built::

        Terms(5, 0.8)                                          # a fixed window
        Terms(10, 1.0, algorithm="token-bucket", burst=20)
    """

    max_requests: int
    in_seconds: float
    algorithm: str = "fixed-window"
    burst: Optional[int] = None

    def __post_init__(self) -> None:
        if self.algorithm not in TERMS_ALGORITHMS:
            kinds = ", ".join(TERMS_ALGORITHMS)
            raise ValueError(f"terms: algorithm must be one of {kinds}, not {self.algorithm!r}")
        check_count("terms: max_requests", self.max_requests, 1)
        seconds = self.in_seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise TypeError(f"terms: in_seconds must be a number of seconds, not {type(seconds).__name__}")
        if not 0 < seconds < float("inf"):
            raise ValueError(f"terms: in_seconds must be a positive number of seconds, not {seconds}")
        if self.burst is not None:
            if self.algorithm != "token-bucket":
                raise ValueError(f"terms: burst is a token bucket's, not a {self.algorithm}'s")
            check_count("terms: burst", self.burst, 1)

    def entry(self) -> Request:
        """The ``terms`` map, in the wire's field order."""
        entry: Request = {
            "algorithm": self.algorithm,
            "max_requests": self.max_requests,
            "in_seconds": float(self.in_seconds),
        }
        _put(entry, "burst", self.burst)
        return entry


@dataclass(frozen=True)
class Ask:
    """One ask of a batch, with the arguments of
    :meth:`~locker_client.Client.ask` and the same defaults: ``cost``
    permits of ``limit`` (the default limit when None) for ``key``, with
    ``up_to`` and ``max_wait`` (seconds; or ``max_wait_ms``) as there, and
    the limit's :class:`Terms` when the locker's config does not name it,
    and ``parents``, the key of each limit above ``limit``, and ``shadow``
    (see :meth:`~locker_client.Client.ask`). Checked when the batch is built; ``max_wait`` is kept as ``max_wait_ms``.
    A part of :meth:`~locker_client.Client.all` takes neither ``up_to`` nor
    a wait of its own (the wait is the whole's).
    """

    limit: Optional[str] = None
    key: Optional[str] = None
    cost: int = 1
    up_to: bool = False
    max_wait_ms: Optional[int] = None
    max_wait: Optional[float] = None
    terms: Optional[Terms] = None
    parents: Optional[Mapping[str, str]] = None
    shadow: bool = False

    def __post_init__(self) -> None:
        if self.max_wait is not None:
            object.__setattr__(self, "max_wait_ms", seconds_or_ms("max_wait", self.max_wait, self.max_wait_ms))


@dataclass(frozen=True)
class Refused:
    """The locker's refusal of one ask of a batch, the others answered
    (an unknown limit, a cost above the capacity...): ``message`` is its
    own words, as :class:`~locker_client.LockerError` carries them. ``ok``
    is False, and so is the value in a boolean context: never a go."""

    message: str

    @property
    def ok(self) -> bool:
        return False

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True)
class AllAsks:
    """An entry of a batch that is limits checked together: the parts of
    :meth:`~locker_client.Client.all` (:class:`Ask` without ``up_to`` or
    a wait of their own), decided in the batch's order, never held. Its
    reply in the batch is an :class:`AllReply`."""

    asks: Tuple[Ask, ...]

    def __init__(self, asks: Iterable[Ask]) -> None:
        object.__setattr__(self, "asks", tuple(asks))




@dataclass(frozen=True)
class LeaseReply:
    """The locker's answer to acquire, heartbeat and release.

    ``ok``: acquire, heartbeat: the lease is held; release: a lease was freed.
    ``lease``: the lease id while it is held or pending.
    ``pending``: the acquire is queued; heartbeats tell when it is held.
    ``limit``: the semaphore's capacity. ``remaining``: capacity free.
    ``expires_in_ms``: held: until it expires without a heartbeat;
    pending: until the wait ends; else 0. ``expires_in`` gives it in seconds.
    ``waited_ms``: present when the locker held the reply (``hold_ms``):
    how long; pending with it, the hold ran out first: ask again at once.
    """

    ok: bool
    lease: Optional[str]
    pending: bool
    limit: int
    remaining: int
    expires_in_ms: int
    waited_ms: Optional[int] = None

    @property
    def expires_in(self) -> float:
        """``expires_in_ms`` in seconds."""
        return self.expires_in_ms / 1000.0

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class AllReply(_Answer):
    """The locker's answer to limits checked together
    (:meth:`~locker_client.Client.all`). True in a boolean context when ``ok``.

    ``ok``: every part goes (after ``wait_ms``, when present), or none is
    charged anything. ``replies``: each part's own go reply, in the order
    of the asks, so a refusal says which limit refused (a part that would
    have gone says what it has, charged nothing). ``retry_after_ms``: when
    not ok, the longest of the parts' (``retry_after`` in seconds).
    ``wait_ms``: present when the whole had a wait and was reserved.
    ``shadow_sorry``: a part in shadow would have refused the whole: it
    went on the other parts, that part charged nothing (its own reply
    says ``shadow_sorry``).
    ``names``: the limits asked, in order (None for the default limit),
    which :meth:`headers` names its items after; not part of equality.
    """

    ok: bool
    replies: Tuple[GoReply, ...]
    retry_after_ms: int
    wait_ms: Optional[int] = None
    shadow_sorry: bool = False
    names: Tuple[Optional[str], ...] = field(default=(), compare=False)

    @property
    def tightest(self) -> int:
        """The index of the part that binds hardest: the one that refused
        with the longest wait when not ok, else the one with the fewest
        permits left (``headers.most_restrictive``)."""
        return headers.most_restrictive(self.replies)

    def headers(
        self, windows: Optional[Mapping[str, float]] = None, names: Optional[Sequence[Optional[str]]] = None
    ) -> Dict[str, str]:
        """The standard rate-limit header fields of this answer, as
        :meth:`GoReply.headers` gives them, with one item per part in
        ``RateLimit-Policy`` and ``RateLimit`` (in the order of the asks)
        and the ``X-RateLimit-*`` fields of the part that binds hardest
        (:attr:`tightest`); ``Retry-After`` (the whole's) when not ok.

        Items are named after ``names`` (default: the limits asked, as the
        client recorded them; ``"default"`` for the default limit).
        ``windows`` maps a limit's name to its ``in_seconds``: the parts
        whose name it holds get the policy's ``w``, the others leave it
        out (a go reply does not carry the window).
        """
        listed = list(self.names if names is None else names) or [None] * len(self.replies)
        if len(listed) != len(self.replies):
            raise ValueError(f"{len(listed)} names for {len(self.replies)} parts")
        known = windows or {}
        parts = [(name, reply, known.get(name or headers.DEFAULT_NAME)) for name, reply in zip(listed, self.replies)]
        return headers.fields(parts, self.ok, self.retry_after_ms)


#: What a batch answers for each of its entries: a go reply for an
#: :class:`Ask`, an :class:`AllReply` for an :class:`AllAsks`, or the
#: refusal of that entry alone.
BatchReply = Union[GoReply, AllReply, Refused]


# ---- checking arguments -------------------------------------------------


def check_name(what: str, value: object) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{what} must be a str or None, not {type(value).__name__}")


def check_count(what: str, value: object, low: int = 0, high: int = _U64 - 1) -> int:
    # bool is an int in Python, but True as a cost is a mistake, not a 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{what} must be between {low} and {high}, not {value}")
    return value


def check_flag(what: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, not {type(value).__name__}")
    return value


def seconds_to_ms(what: str, value: object, low: int, high: int) -> int:
    """Seconds (int or float) as whole milliseconds, rounded up so a wait or
    a ttl is never shorter than asked, checked against [low, high] ms."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite, non-negative number of seconds, not {value}")
    ms = math.ceil(value * 1000)
    if not low <= ms <= high:
        raise ValueError(f"{what} must be between {low / 1000:g} and {high / 1000:g} s, not {value}")
    return ms


def ttl_ms(ttl: Optional[float]) -> Optional[int]:
    """A lease's ttl in seconds (None: the limit's own) as ``ttl_ms``."""
    return None if ttl is None else seconds_to_ms("ttl", ttl, 1, MAX_TTL_MS)


def wait_ms(wait: Optional[float]) -> Optional[int]:
    """A wait in seconds (None: no waiting) as ``max_wait_ms``."""
    return None if wait is None else seconds_to_ms("wait", wait, 0, MAX_WAIT_MS)


# ---- requests ------------------------------------------------------------


def seconds_or_ms(name: str, seconds: Optional[float], ms: Optional[int]) -> Optional[int]:
    """One of a time in seconds (the API's unit) or its old ``_ms`` form,
    as the wire's milliseconds (rounded up, so a wait is never cut short)."""
    if seconds is not None and ms is not None:
        raise ValueError(f"give {name} in seconds or {name}_ms, not both")
    if seconds is None:
        return ms
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(seconds).__name__}")
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"{name} must be zero or more seconds, not {seconds}")
    return int(math.ceil(seconds * 1000))


def go_request(
    limit: Optional[str],
    key: Optional[str],
    cost: int,
    up_to: bool,
    max_wait_ms: Optional[int],
    hold_ms: Optional[int] = None,
    terms: Optional[Terms] = None,
    parents: Optional[Mapping[str, str]] = None,
    shadow: bool = False,
) -> Request:
    """The map of an ask, checked; fields in the Rust client's order.
    ``hold_ms`` asks the locker to hold the reply that long for a go
    rather than answer sorry (at most a minute); ``terms``, the limit's
    own, come after the ask's own fields, then ``parents``, and ``shadow``
    last (only when true)."""
    request: Request = {"op": "go", **ask_entry(limit, key, cost, up_to, max_wait_ms)}
    if hold_ms is not None:
        request["hold_ms"] = check_count("hold_ms", hold_ms, high=MAX_HOLD_MS)
    _put_terms(request, terms)
    _put_parents(request, parents)
    _put_shadow(request, shadow)
    return request


def _put_shadow(request: Request, shadow: bool) -> None:
    """Adds ``shadow``, last, when it is true."""
    if check_flag("shadow", shadow):
        request["shadow"] = True


def _put_terms(request: Request, terms: Optional[Terms]) -> None:
    """Adds a limit's terms, last, when there are any."""
    if terms is not None:
        if not isinstance(terms, Terms):
            raise TypeError(f"terms must be a Terms, not {type(terms).__name__}")
        request["terms"] = terms.entry()


def _put_parents(request: Request, parents: Optional[Mapping[str, str]]) -> None:
    """Adds the keys of the limits above the one asked, last: a map of
    limit names to keys, in the caller's order; left out when empty, as
    the Rust client leaves it."""
    if parents is None:
        return
    if not isinstance(parents, Mapping):
        raise TypeError(f"parents must be a mapping of limit names to keys, not {type(parents).__name__}")
    if len(parents) > MAX_PARENTS:
        raise ValueError(f"parents names at most {MAX_PARENTS} limits, not {len(parents)}")
    checked: Dict[str, str] = {}
    for name, key in parents.items():
        if not isinstance(name, str) or not isinstance(key, str):
            kinds = f"{type(name).__name__}: {type(key).__name__}"
            raise TypeError(f"parents maps limit names to keys, both str, not {kinds}")
        checked[name] = key
    if checked:
        request["parents"] = checked


def ask_entry(
    limit: Optional[str], key: Optional[str], cost: int, up_to: bool, max_wait_ms: Optional[int]
) -> Request:
    """The map of an ask without ``op``, checked: a batch's entry."""
    entry: Request = {}
    _put(entry, "limit", check_name("limit", limit))
    _put(entry, "key", check_name("key", key))
    entry["cost"] = check_count("cost", cost)
    if check_flag("up_to", up_to):
        entry["up_to"] = True
    if max_wait_ms is not None:
        entry["max_wait_ms"] = check_count("max_wait_ms", max_wait_ms, 0, MAX_WAIT_MS)
    return entry


# ---- the common ask, straight to bytes ----------------------------------
#
# A web worker asks before every call, so the common ask (a limit, a key,
# a small cost, nothing else) is written straight to its bytes instead of
# building a map and packing it: the same bytes ``encode(go_request(...))``
# gives (the tests hold the two equal), a few hundred nanoseconds instead of
# microseconds. Anything else goes the general way, which checks it and
# raises as before.

#: ``cost`` n as MessagePack, for the costs that are one byte (0 to 127).
_COSTS = tuple(b"\xa4cost" + bytes([n]) for n in range(128))
#: A string's header for each length that fits a fixstr (0 to 31 bytes).
_FIXSTR = tuple(bytes([0xA0 | n]) for n in range(32))
#: The most heads kept: a caller that makes up limit names cannot grow it.
_MAX_HEADS = 256
#: limit (None: the default) -> (the bytes up to ``cost`` without a key,
#: the bytes up to the key's value with one): a go's map header (2 to 4
#: fields), ``op``, ``limit`` and, in the second, the ``key`` field name.
_ask_heads: Dict[Optional[str], Tuple[bytes, bytes]] = {}
#: The same for a batch's entries, which have no ``op``.
_entry_heads: Dict[Optional[str], Tuple[bytes, bytes]] = {}


def _packed_str(value: str) -> bytes:
    """A string as MessagePack, as :func:`encode` writes one in a map."""
    return cast(bytes, msgpack.packb(value, use_bin_type=True))


def _heads(limit: Optional[str], with_op: bool) -> Tuple[bytes, bytes]:
    """The two heads of an ask of ``limit``, made once per limit."""
    cache = _ask_heads if with_op else _entry_heads
    heads = cache.get(limit)
    if heads is None:
        fields = 2 if with_op else 1
        body = b"\xa2op\xa2go" if with_op else b""
        if limit is not None:
            fields += 1
            body += _packed_str("limit") + _packed_str(limit)
        heads = (bytes([0x80 | fields]) + body, bytes([0x80 | fields + 1]) + body + b"\xa3key")
        if len(cache) >= _MAX_HEADS:
            cache.clear()
        cache[limit] = heads
    return heads


def _ask_bytes(limit: Optional[str], key: Optional[str], cost: int, with_op: bool) -> Optional[bytes]:
    """The bytes of an ask of ``cost`` permits of ``limit`` for ``key`` and
    nothing more, when all three are of the common kind (None or exactly a
    str; an int cost of 0 to 127); None for anything else."""
    if cost.__class__ is not int or not 0 <= cost < 128:
        return None
    if limit is not None and limit.__class__ is not str:
        return None
    heads = _heads(limit, with_op)
    if key is None:
        return heads[0] + _COSTS[cost]
    if key.__class__ is not str:
        return None
    raw = key.encode()
    n = len(raw)
    if n < 32:
        return heads[1] + _FIXSTR[n] + raw + _COSTS[cost]
    return heads[1] + _packed_str(key) + _COSTS[cost]


def ask_body(
    limit: Optional[str],
    key: Optional[str],
    cost: int = 1,
    up_to: bool = False,
    max_wait_ms: Optional[int] = None,
    hold_ms: Optional[int] = None,
    terms: Optional[Terms] = None,
    parents: Optional[Mapping[str, str]] = None,
    shadow: bool = False,
) -> bytes:
    """The bytes of an ask, checked: ``encode(go_request(...))``, with the
    common ask written straight to bytes."""
    # _ask_bytes inlined for the commonest ask of all: a limit, a key of
    # up to 31 bytes, a cost of 0 to 127.
    if (
        up_to is False
        and max_wait_ms is None
        and hold_ms is None
        and terms is None
        and parents is None
        and shadow is False
        and cost.__class__ is int
        and 0 <= cost < 128
        and (limit is None or limit.__class__ is str)
    ):
        if key.__class__ is str:
            raw = key.encode()
            if len(raw) < 32:
                heads = _ask_heads.get(limit) or _heads(limit, True)
                return heads[1] + _FIXSTR[len(raw)] + raw + _COSTS[cost]
        body = _ask_bytes(limit, key, cost, True)
        if body is not None:
            return body
    return encode(go_request(limit, key, cost, up_to, max_wait_ms, hold_ms, terms, parents, shadow))


def batch_body(asks: Iterable[Union[Ask, AllAsks]]) -> Tuple[bytes, int]:
    """The bytes of a batch of asks, checked, and how many it carries:
    ``encode(batch_request(asks))``, each common entry written straight to
    bytes."""
    listed = asks if isinstance(asks, (list, tuple)) else list(asks)
    count = len(listed)
    if count > MAX_BATCH_ASKS:
        raise ValueError(f"a batch carries at most {MAX_BATCH_ASKS} asks, this one has {count}")
    parts = [_BATCH_HEAD, _array_header(count)]
    for index, ask in enumerate(listed):
        entry = None
        if (
            ask.__class__ is Ask
            and ask.up_to is False
            and ask.max_wait_ms is None
            and ask.terms is None
            and ask.parents is None
            and ask.shadow is False
        ):
            entry = _ask_bytes(ask.limit, ask.key, ask.cost, False)
        parts.append(entry if entry is not None else encode(_batch_entry(index, ask)))
    return b"".join(parts), count


#: A batch's bytes before its array of asks: ``{"op": "batch", "asks": ``.
_BATCH_HEAD = b"\x82\xa2op\xa5batch\xa4asks"


def _array_header(count: int) -> bytes:
    """An array's header, as msgpack writes it (count is at most 1000)."""
    return bytes([0x90 | count]) if count < 16 else b"\xdc" + count.to_bytes(2, "big")


def batch_request(asks: Iterable[Union[Ask, AllAsks]]) -> Request:
    """The map of a batch of asks, checked: at most :data:`MAX_BATCH_ASKS`,
    each an :class:`Ask` with good arguments or an :class:`AllAsks`."""
    listed = list(asks)
    if len(listed) > MAX_BATCH_ASKS:
        raise ValueError(f"a batch carries at most {MAX_BATCH_ASKS} asks, this one has {len(listed)}")
    return {"op": "batch", "asks": [_batch_entry(i, ask) for i, ask in enumerate(listed)]}


def _batch_entry(index: int, ask: object) -> Request:
    """The entry of ask ``index``; a bad one says which it is."""
    if isinstance(ask, AllAsks):
        try:
            return all_request(ask.asks)
        except (TypeError, ValueError) as e:
            raise type(e)(f"ask {index} (an all): {e}") from e
    if not isinstance(ask, Ask):
        raise TypeError(f"ask {index} must be an Ask, not {type(ask).__name__}")
    try:
        entry = ask_entry(ask.limit, ask.key, ask.cost, ask.up_to, ask.max_wait_ms)
        _put_terms(entry, ask.terms)
        _put_parents(entry, ask.parents)
        _put_shadow(entry, ask.shadow)
    except (TypeError, ValueError) as e:
        raise type(e)(f"ask {index}: {e}") from e
    return entry


def all_request(asks: Iterable[Ask], max_wait_ms: Optional[int] = None, hold_ms: Optional[int] = None) -> Request:
    """The map of limits checked together, checked: 1 to
    :data:`MAX_ALL_ASKS` parts, each an :class:`Ask` written as a batch's
    entry is, without ``up_to`` or a wait of its own; then the whole's
    ``max_wait_ms`` and ``hold_ms``."""
    listed = list(asks)
    if not 1 <= len(listed) <= MAX_ALL_ASKS:
        raise ValueError(f"limits checked together are 1 to {MAX_ALL_ASKS} asks, not {len(listed)}")
    request: Request = {"op": "all", "asks": [_all_part(i, ask) for i, ask in enumerate(listed)]}
    if max_wait_ms is not None:
        request["max_wait_ms"] = check_count("max_wait_ms", max_wait_ms, 0, MAX_WAIT_MS)
    if hold_ms is not None:
        request["hold_ms"] = check_count("hold_ms", hold_ms, high=MAX_HOLD_MS)
    return request


def _all_part(index: int, ask: object) -> Request:
    """The entry of part ``index`` of limits checked together."""
    if isinstance(ask, Ask) and (ask.up_to is not False or ask.max_wait_ms is not None):
        what = "up_to" if ask.up_to is not False else "a wait of its own (the wait is the whole's)"
        raise ValueError(f"ask {index}: a part of limits checked together takes no {what}")
    return _batch_entry(index, ask)


def refund_request(
    limit: Optional[str], key: Optional[str], cost: int, parents: Optional[Mapping[str, str]] = None
) -> Request:
    """The map of a refund of ``cost`` permits (at least 1), given back
    to the limits above ``limit`` too under the keys ``parents`` names."""
    request: Request = {"op": "refund"}
    _put(request, "limit", check_name("limit", limit))
    _put(request, "key", check_name("key", key))
    request["cost"] = check_count("cost", cost, 1)
    _put_parents(request, parents)
    return request


def charge_request(
    limit: Optional[str], key: Optional[str], cost: int, parents: Optional[Mapping[str, str]] = None
) -> Request:
    """The map of a charge of ``cost`` permits (at least 1) used before
    they were asked for, to the limits above ``limit`` too under the keys
    ``parents`` names."""
    request: Request = {"op": "charge"}
    _put(request, "limit", check_name("limit", limit))
    _put(request, "key", check_name("key", key))
    request["cost"] = check_count("cost", cost, 1)
    _put_parents(request, parents)
    return request


def reset_request(limit: Optional[str], key: Optional[str]) -> Request:
    """The map of a reset of one key's count."""
    request: Request = {"op": "reset"}
    _put(request, "limit", check_name("limit", limit))
    _put(request, "key", check_name("key", key))
    return request


def acquire_request(
    limit: Optional[str],
    count: int,
    ttl_ms: Optional[int],
    max_wait_ms: Optional[int],
    hold_ms: Optional[int] = None,
) -> Request:
    """The map of a lease acquire; with ``hold_ms``, a locker holds the
    reply of a queued acquire up to that long, until the count is granted."""
    request: Request = {"op": "acquire"}
    _put(request, "limit", check_name("limit", limit))
    _put(request, "max_wait_ms", max_wait_ms)
    _put(request, "hold_ms", hold_ms)
    request["count"] = check_count("count", count, 1)
    _put(request, "ttl_ms", ttl_ms)
    return request


def heartbeat_request(
    limit: Optional[str], lease: str, ttl_ms: Optional[int], count: Optional[int], hold_ms: Optional[int] = None
) -> Request:
    """The map of a heartbeat; with ``count``, a locker that does not know
    the lease restores it; with ``hold_ms``, a locker holds the reply while
    the lease is queued, up to that long."""
    request: Request = {"op": "heartbeat"}
    _put(request, "limit", check_name("limit", limit))
    _put(request, "hold_ms", hold_ms)
    if count is not None:
        request["count"] = check_count("count", count, 1)
    _put(request, "ttl_ms", ttl_ms)
    request["lease"] = _lease_id(lease)
    return request


def release_request(limit: Optional[str], lease: str) -> Request:
    """The map of a release."""
    request: Request = {"op": "release"}
    _put(request, "limit", check_name("limit", limit))
    request["lease"] = _lease_id(lease)
    return request


STATS_REQUEST: Request = {"op": "stats"}


def plain_body(limit: Optional[str]) -> bytes:
    """The plain form's body: a limit's name selects it; the seed's bytes
    ask the default limit."""
    name = check_name("limit", limit)
    return PLAIN_BODY if name is None else name.encode()


def _lease_id(lease: object) -> str:
    if not isinstance(lease, str):
        raise TypeError(f"lease must be a str, not {type(lease).__name__}")
    return lease


def _put(request: Request, field: str, value: Any) -> None:
    if value is not None:
        request[field] = value


def encode(request: Request) -> bytes:
    """The MessagePack bytes of a request map (strings as str, not bin)."""
    return cast(bytes, msgpack.packb(request, use_bin_type=True))


# ---- replies -------------------------------------------------------------


_unpackb = msgpack.unpackb
_new = object.__new__
_set = object.__setattr__


def decode_map(body: bytes) -> Dict[str, Any]:
    """A structured reply as a dict; raises LockerError for an error reply."""
    try:
        value = _unpackb(body, raw=False)
    except Exception as e:  # msgpack raises several unrelated types
        raise BadReply(f"not MessagePack: {e}") from e
    return _checked_map(value, body)


def _checked_map(value: Any, body: bytes) -> Dict[str, Any]:
    """A decoded reply that must be a map; raises LockerError for an
    error reply."""
    if not isinstance(value, dict):
        raise BadReply(f"expected a map, got {body[:40]!r}")
    if "error" in value and len(value) == 1:
        raise LockerError(str(value["error"]))
    return value


def _error_of(m: Dict[Any, Any]) -> Optional[str]:
    """The message of an error map, None for any other map."""
    return str(m["error"]) if "error" in m and len(m) == 1 else None


def decode_go(body: bytes) -> GoReply:
    """A go reply."""
    try:
        m = _unpackb(body)
    except Exception:  # decode_map says what was wrong
        return _go_reply(decode_map(body))
    reply = _usual_go(m)
    # Not ``or``: a sorry is a GoReply that is false.
    return _go_reply(_checked_map(m, body)) if reply is None else reply


def _usual_go(m: Any) -> Optional[GoReply]:
    """The locker's usual go reply (five fields, all numbers but ``ok``)
    as a :class:`GoReply`, its decoded map becoming the reply's attributes
    as it is: no field copied, none converted. None for anything else
    (``granted``, ``wait_ms``, an error, an odd reply), which the general
    way checks and converts field by field."""
    try:
        if (
            m.__class__ is dict
            and len(m) == 5
            and m["ok"].__class__ is bool
            and m["remaining"].__class__ is int
            and m["retry_after_ms"].__class__ is int
            and m["reset_after_ms"].__class__ is int
            and m["limit"].__class__ is int
        ):
            m["granted"] = None
            m["wait_ms"] = None
            reply = _new(GoReply)
            _set(reply, "__dict__", m)
            return reply
    except KeyError:
        pass
    return None


def _go_reply(m: Dict[str, Any]) -> GoReply:
    """A go reply's map as a :class:`GoReply`.

    Built the way the frozen dataclass's own ``__init__`` would build it
    (the same fields, checked and converted alike) but with one write of
    its ``__dict__`` instead of a frozen ``__setattr__`` per field, which
    costs more than decoding the reply."""
    try:
        fields = {
            "ok": bool(m["ok"]),
            "remaining": int(m["remaining"]),
            "retry_after_ms": int(m["retry_after_ms"]),
            "reset_after_ms": int(m["reset_after_ms"]),
            "granted": m.get("granted"),
            "wait_ms": m.get("wait_ms"),
            "limit": int(m["limit"]),
            "shadow_sorry": bool(m.get("shadow_sorry", False)),
        }
    except (KeyError, TypeError, ValueError) as e:
        raise BadReply(f"not a go reply: {m!r}") from e
    reply = _new(GoReply)
    _set(reply, "__dict__", fields)
    return reply


def decode_charge(body: bytes) -> ChargeReply:
    """The reply to a charge: a go reply with its ``debt``."""
    m = decode_map(body)
    go = _go_reply(m)
    try:
        debt = int(m["debt"])
    except (KeyError, TypeError, ValueError) as e:
        raise BadReply(f"not a charge's reply: {m!r}") from e
    reply = _new(ChargeReply)
    _set(reply, "__dict__", {**go.__dict__, "debt": debt})
    return reply


def decode_batch(body: bytes, count: int) -> List[BatchReply]:
    """The reply to a batch of ``count`` asks: a go reply or a
    :class:`Refused` for each, in order. Raises LockerError when the locker
    refused the whole batch."""
    replies = decode_map(body).get("replies")
    if not isinstance(replies, list):
        raise BadReply(f"not a batch's reply: {body[:40]!r}")
    if len(replies) != count:
        raise BadReply(f"{len(replies)} replies to a batch of {count} asks")
    decoded = []
    for value in replies:
        reply = _usual_go(value)
        decoded.append(_batch_reply(value) if reply is None else reply)
    return decoded


def _batch_reply(value: Any) -> BatchReply:
    """One reply of a batch: a go reply, the reply of an :class:`AllAsks`
    entry, or an error map for that entry alone."""
    if not isinstance(value, dict):
        raise BadReply(f"a batch's reply holds {value!r}, not a map")
    error = _error_of(value)
    if error is not None:
        return Refused(error)
    return _all_reply(value) if "replies" in value else _go_reply(value)


def decode_all(body: bytes, names: Sequence[Optional[str]] = ()) -> AllReply:
    """The reply to limits checked together, ``names`` the limits asked
    (kept in the reply for its headers). Raises LockerError when the
    locker refused the request, or one of its parts."""
    return _all_reply(decode_map(body), names)


def _all_reply(m: Dict[str, Any], names: Sequence[Optional[str]] = ()) -> AllReply:
    """The map of an ``all``'s reply as an :class:`AllReply`."""
    replies = m.get("replies")
    if not isinstance(replies, list) or (names and len(replies) != len(names)):
        raise BadReply(f"not the reply to {len(names) or 'some'} limits checked together: {m!r}")
    parts = []
    for value in replies:
        usual = _usual_go(value)
        # Not ``or``: a sorry is a GoReply that is false.
        part = _batch_reply(value) if usual is None else usual
        if isinstance(part, Refused):
            raise LockerError(part.message)
        if not isinstance(part, GoReply):
            raise BadReply(f"a part's reply is not a go reply: {value!r}")
        parts.append(part)
    try:
        return AllReply(
            ok=_bool(m["ok"]),
            replies=tuple(parts),
            retry_after_ms=int(m["retry_after_ms"]),
            wait_ms=None if m.get("wait_ms") is None else int(m["wait_ms"]),
            shadow_sorry=bool(m.get("shadow_sorry", False)),
            names=tuple(names),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise BadReply(f"not the reply to limits checked together: {m!r}") from e


def _bool(value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected a bool, got {value!r}")
    return value


def decode_lease(body: bytes) -> LeaseReply:
    """A reply to acquire, heartbeat or release."""
    m = decode_map(body)
    try:
        return LeaseReply(
            ok=bool(m["ok"]),
            lease=m.get("lease"),
            pending=bool(m.get("pending", False)),
            limit=int(m["limit"]),
            remaining=int(m["remaining"]),
            expires_in_ms=int(m["expires_in_ms"]),
            waited_ms=None if m.get("waited_ms") is None else int(m["waited_ms"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise BadReply(f"not a lease reply: {m!r}") from e


def decode_plain(body: bytes) -> bool:
    """A plain reply: True for go, False for sorry."""
    if body == GO:
        return True
    if body == SORRY:
        return False
    raise BadReply(f"expected go or sorry, got {body[:40]!r}")
