"""The Lazy Pirate plan both clients follow, without sockets or clocks.

A request has one deadline. Endpoints are tried in turn from the one that
answered last, each at most once, so one locker never counts a request
twice; each try gets an even share of the time left over the endpoints not
yet tried, so a dead first endpoint leaves time for the live ones. This is
the same rule as ``Client::round_trip`` in the Rust client.
"""

from __future__ import annotations

from typing import Callable, Iterator, List, Sequence, Tuple, Union


def endpoints_list(endpoints: Union[str, Sequence[str]]) -> List[str]:
    """One endpoint or several, checked: a non-empty list of strings."""
    if isinstance(endpoints, str):
        endpoints = [endpoints]
    if isinstance(endpoints, (bytes, bytearray)):
        raise TypeError("endpoints must be a str or a list of str, not bytes")
    listed = list(endpoints)
    if not listed:
        raise ValueError("at least one endpoint is needed")
    for e in listed:
        if not isinstance(e, str):
            raise TypeError(f"an endpoint must be a str, not {type(e).__name__}")
    return listed


def check_timeout(timeout: object) -> float:
    """A positive, finite number of seconds."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
    if not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be positive and finite, not {timeout}")
    return float(timeout)


def attempts(
    count: int, preferred: int, deadline: float, clock: Callable[[], float]
) -> Iterator[Tuple[int, float]]:
    """Yields (endpoint index, seconds to wait for its answer) for each try
    of one request, until the endpoints or the time run out."""
    for attempt in range(count):
        left = deadline - clock()
        if left <= 0:
            return
        yield (preferred + attempt) % count, left / (count - attempt)


def poll_ms(budget: float) -> int:
    """A try's budget as a poll timeout: whole milliseconds, at least one."""
    return max(1, int(budget * 1000))
