"""The exceptions a locker client raises.

Every failure of a request is a :class:`ClientError`; which subclass says
whether the locker refused (:class:`LockerError`; :class:`RateLimited`
when it said sorry to a caller that asked for an exception), nobody answered
(:class:`NoAnswer`), a lease could not be had (:class:`NotAcquired`) or a
reply made no sense (:class:`BadReply`). Wrong arguments are not sent at all:
they raise the built-in :class:`TypeError` or :class:`ValueError`.
"""

from __future__ import annotations

from typing import Any, Sequence


class ClientError(Exception):
    """The base of every error a request to a locker can end in."""


class LockerError(ClientError):
    """The locker refused the request; ``message`` is the locker's own words
    (an unknown limit, a cost above the capacity, a go on a semaphore...)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"the locker refused the request: {message}")
        self.message = message


class RateLimited(LockerError):
    """The limit said sorry: raised by :meth:`~locker_client.Client.permit`
    and :meth:`~locker_client.Client.limited` when no go came within their
    wait. ``retry_after`` is in seconds: until an ask would fit.
    ``limit`` and ``key`` are what was asked (over several limits, the part
    that refused and waits longest). ``reply`` is the last sorry (a
    ``GoReply``, or an ``AllReply`` over several limits), whose
    ``headers()`` a web server sends with its 429."""

    def __init__(self, limit: str | None, key: str | None, retry_after: float, reply: Any = None) -> None:
        what = f"{limit or 'the default limit'!r}" + (f" for key {key!r}" if key is not None else "")
        super().__init__(f"rate limited on {what}: retry after {retry_after:g} s")
        self.limit = limit
        self.key = key
        self.retry_after = retry_after
        self.reply = reply


class NoAnswer(ClientError):
    """No locker answered within the client's timeout.

    ``endpoints`` are the lockers that were tried, ``timeout`` the deadline in
    seconds.
    """

    def __init__(self, timeout: float, endpoints: Sequence[str]) -> None:
        super().__init__(f"no locker answered within {timeout:g} s (tried {', '.join(endpoints)})")
        self.timeout = timeout
        self.endpoints = list(endpoints)


class NotAcquired(ClientError):
    """A semaphore lease could not be had within its wait.

    ``limit`` is the semaphore, ``count`` what was asked for and
    ``remaining`` the capacity the locker last said was free.
    """

    def __init__(self, limit: str | None, count: int, remaining: int | None) -> None:
        free = "" if remaining is None else f" ({remaining} free)"
        super().__init__(f"could not acquire {count} of {limit or 'the default limit'!r}{free}")
        self.limit = limit
        self.count = count
        self.remaining = remaining


class BadReply(ClientError):
    """The locker's reply could not be read (not the shape this client knows)."""
