"""The standard rate-limit header fields of a locker's answer, for a web
server to send with its response.

Two generations of fields, from the same numbers:

- the IETF ones (draft-ietf-httpapi-ratelimit-headers-10):
  ``RateLimit-Policy: "name";q=<limit>;w=<window>`` and
  ``RateLimit: "name";r=<remaining>;t=<seconds to reset>``, one list item
  per limit asked;
- the older draft-03 ``X-RateLimit-Limit``, ``X-RateLimit-Remaining`` and
  ``X-RateLimit-Reset`` (seconds to reset), which carry one limit only:
  the most restrictive one asked;

and ``Retry-After`` on a refusal. Every time is in whole seconds, rounded
up. A go reply does not carry its limit's window, so ``w`` is written only
when the caller knows it and passes it; the draft allows leaving it out.

Pure: it reads replies and writes text, nothing else.
"""

from __future__ import annotations

from typing import Dict, Optional, Protocol, Sequence, Tuple

#: The name of a part that asks the default limit (whose name the reply does not carry).
DEFAULT_NAME = "default"


class Counted(Protocol):
    """What a go reply says of one limit (``locker_client.GoReply``)."""

    @property
    def ok(self) -> bool: ...

    @property
    def limit(self) -> int: ...

    @property
    def remaining(self) -> int: ...

    @property
    def retry_after_ms(self) -> int: ...

    @property
    def reset_after_ms(self) -> int: ...


#: One limit asked: its name, its go reply, and its window in seconds when known.
Part = Tuple[Optional[str], Counted, Optional[float]]


def fields(parts: Sequence[Part], ok: bool, retry_after_ms: int) -> Dict[str, str]:
    """The header fields of an answer made of ``parts``, in the order a
    response sends them: ``RateLimit-Policy``, ``RateLimit``, the three
    ``X-RateLimit-*`` of the most restrictive part (:func:`most_restrictive`)
    and, when not ``ok``, ``Retry-After`` (at least 1: a refusal never says
    to retry at once)."""
    if not parts:
        raise ValueError("header fields need at least one limit")
    policies = []
    states = []
    for name, reply, window in parts:
        policy = f"{_sf_string(name)};q={reply.limit}"
        if window is not None:
            policy += f";w={window_seconds(window)}"
        policies.append(policy)
        states.append(f"{_sf_string(name)};r={reply.remaining};t={whole_seconds(reply.reset_after_ms)}")
    tightest = parts[most_restrictive([reply for _, reply, _ in parts])][1]
    headers = {
        "RateLimit-Policy": ", ".join(policies),
        "RateLimit": ", ".join(states),
        "X-RateLimit-Limit": str(tightest.limit),
        "X-RateLimit-Remaining": str(tightest.remaining),
        "X-RateLimit-Reset": str(whole_seconds(tightest.reset_after_ms)),
    }
    if not ok:
        headers["Retry-After"] = str(max(1, whole_seconds(retry_after_ms)))
    return headers


def most_restrictive(replies: Sequence[Counted]) -> int:
    """The index of the reply that binds hardest: a refusal before a go, then
    the fewest permits left, then the longest wait before a retry, then the
    longest until the count resets; the first of equals."""
    return min(
        range(len(replies)),
        key=lambda i: (replies[i].ok, replies[i].remaining, -replies[i].retry_after_ms, -replies[i].reset_after_ms),
    )


def whole_seconds(ms: int) -> int:
    """Milliseconds as whole seconds, rounded up."""
    return -(-ms // 1000)


def window_seconds(window: float) -> int:
    """A window in seconds as the whole seconds ``w`` takes: rounded up, at least 1."""
    if isinstance(window, bool) or not isinstance(window, (int, float)):
        raise TypeError(f"a window must be a number of seconds, not {type(window).__name__}")
    if not 0 < window < float("inf"):
        raise ValueError(f"a window must be a positive number of seconds, not {window}")
    return max(1, int(-(-window // 1)))


def _sf_string(name: Optional[str]) -> str:
    """A limit's name as a structured-field String (RFC 8941): quoted, with
    ``"`` and ``\\`` escaped. A String holds printable ASCII only, so any
    other character (a limit name may be any printable Unicode) is written
    as its UTF-8 bytes percent-encoded."""
    text = DEFAULT_NAME if name is None else name
    out = ['"']
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif " " <= c <= "~":
            out.append(c)
        else:
            out.append("".join(f"%{b:02X}" for b in c.encode()))
    out.append('"')
    return "".join(out)
