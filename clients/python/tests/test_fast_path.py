"""The common case's shortcut keeps the guarantees of the Lazy Pirate plan.

Once a locker has answered, a request is sent at once on its open socket
and the answer waited for without the plan (``Client.round_trip``,
``AsyncClient.round_trip``). These tests make that locker stop answering
with its connection still up (SIGSTOP: the request is sent, and nothing
comes back), which is the one case the shortcut itself must handle: the
next locker answers within the deadline and each locker is sent the
request once; with no other locker the request raises ``NoAnswer`` at its
deadline, not later; signals arriving during the wait do not stretch it.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from typing import Iterator

import pytest

from conftest import Daemon, Lockers, limit_stats
from locker_client import AsyncClient, Client, ClientError, NoAnswer


@pytest.fixture
def stopped() -> Iterator[list]:
    """Daemons a test stopped with SIGSTOP, let go again at its end."""
    daemons: list = []
    yield daemons
    for d in daemons:
        d.proc.send_signal(signal.SIGCONT)


def stop(daemon: Daemon, stopped: list) -> None:
    daemon.proc.send_signal(signal.SIGSTOP)
    stopped.append(daemon)


def requests_of(daemon: Daemon) -> int:
    """The default limit's requests, asked of ``daemon`` alone."""
    with Client(daemon.endpoint, timeout=5.0) as c:
        return int(limit_stats(c.stats())["requests"])


def test_a_locker_that_stops_answering_is_failed_over_from_within_the_deadline(
    lockers: Lockers, stopped: list
) -> None:
    first, second = lockers.start(), lockers.start()
    timeout = 1.0
    with Client([first.endpoint, second.endpoint], timeout=timeout) as c:
        for _ in range(3):
            assert c.ask().ok
        assert c.current_endpoint == first.endpoint, "the shortcut is taken from here on"
        stop(first, stopped)
        started = time.monotonic()
        assert c.ask().ok, "the second locker answers"
        elapsed = time.monotonic() - started
        # The first had its share of the deadline (half of it), no more (the
        # upper bound allows for a machine busy with other work).
        assert timeout / 2 - 0.05 <= elapsed < timeout + 0.5, elapsed
        assert c.current_endpoint == second.endpoint
        assert c.ask().ok
    assert requests_of(second) == 2, "each ask after the stop reached the second once"
    first.proc.send_signal(signal.SIGCONT)
    # The stopped locker got the request that went unanswered, once.
    assert requests_of(first) == 4


def test_a_silent_locker_raises_no_answer_at_the_deadline_and_the_client_recovers(
    lockers: Lockers, stopped: list
) -> None:
    only = lockers.start()
    timeout = 0.4
    with Client(only.endpoint, timeout=timeout) as c:
        assert c.ask().ok
        stop(only, stopped)
        started = time.monotonic()
        with pytest.raises(NoAnswer):
            c.ask()
        elapsed = time.monotonic() - started
        assert timeout - 0.01 <= elapsed < timeout + 1.0, elapsed
        only.proc.send_signal(signal.SIGCONT)
        # The socket that timed out was closed: a late answer is not taken
        # for the next one, which goes on a new socket.
        assert c.ask("hour", "recovers").remaining == 2


def test_signals_during_the_wait_do_not_stretch_the_deadline(lockers: Lockers, stopped: list) -> None:
    """pyzmq restarts a receive that a signal interrupts with its whole
    timeout: the shortcut's blocking receive is kept short (10 ms) so that
    a stream of signals (here every 25 ms, for up to 6 s) cannot hold the
    request past its deadline: a receive restarted by each signal would
    end only with the stream."""
    only = lockers.start()
    timeout = 0.3
    main = threading.get_ident()
    storm_over = threading.Event()

    def storm() -> None:
        end = time.monotonic() + 6.0
        while time.monotonic() < end and not storm_over.is_set():
            signal.pthread_kill(main, signal.SIGUSR1)
            time.sleep(0.025)

    previous = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        with Client(only.endpoint, timeout=timeout) as c:
            assert c.ask().ok
            stop(only, stopped)
            sender = threading.Thread(target=storm, daemon=True)
            sender.start()
            started = time.monotonic()
            with pytest.raises(NoAnswer):
                c.ask()
            elapsed = time.monotonic() - started
            storm_over.set()
            sender.join()
            assert elapsed < timeout + 2.0, elapsed
    finally:
        storm_over.set()
        signal.signal(signal.SIGUSR1, previous)


def test_the_asyncio_shortcut_fails_over_and_keeps_the_deadline(lockers: Lockers, stopped: list) -> None:
    first, second = lockers.start(), lockers.start()

    async def main() -> None:
        async with AsyncClient([first.endpoint, second.endpoint], timeout=1.0) as c:
            for _ in range(3):
                assert (await c.ask()).ok
            assert c.current_endpoint == first.endpoint
            stop(first, stopped)
            started = time.monotonic()
            assert (await c.ask()).ok
            elapsed = time.monotonic() - started
            assert 0.45 <= elapsed < 1.5, elapsed
            assert c.current_endpoint == second.endpoint
            stop(second, stopped)
            started = time.monotonic()
            with pytest.raises(NoAnswer):
                await c.ask()
            elapsed = time.monotonic() - started
            assert 0.99 <= elapsed < 2.0, elapsed

    asyncio.run(asyncio.wait_for(main(), 30))
    for d in stopped:
        d.proc.send_signal(signal.SIGCONT)
    assert requests_of(first) == 4 and requests_of(second) == 2, "each ask reached each locker at most once"


def test_other_tasks_run_while_the_asyncio_client_waits(lockers: Lockers, stopped: list) -> None:
    """The asyncio shortcut waits on the loop: a silent locker holds up its
    own request, not the loop, and the request ends at its deadline."""
    only = lockers.start()

    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        async with AsyncClient(only.endpoint, timeout=0.5) as c:
            assert (await c.ask()).ok
            stop(only, stopped)
            task = asyncio.ensure_future(ticker())
            started = time.monotonic()
            with pytest.raises(NoAnswer):
                await c.ask()
            assert 0.49 <= time.monotonic() - started < 1.5
            task.cancel()
        return ticks

    assert asyncio.run(asyncio.wait_for(main(), 30)) >= 10


def test_closing_the_asyncio_client_ends_a_request_waiting_on_it(lockers: Lockers, stopped: list) -> None:
    only = lockers.start()

    async def main() -> None:
        c = AsyncClient(only.endpoint, timeout=5.0)
        assert (await c.ask()).ok
        stop(only, stopped)
        waiting = asyncio.ensure_future(c.ask())
        await asyncio.sleep(0.05)
        started = time.monotonic()
        c.close()
        with pytest.raises(ClientError):
            await waiting
        assert time.monotonic() - started < 1.0, "not left to its 5 s deadline"

    asyncio.run(asyncio.wait_for(main(), 30))


def test_tasks_sharing_an_asyncio_client_take_turns(lockers: Lockers, stopped: list) -> None:
    """Many tasks on one client: every request answered once, in turn; a
    task cancelled while it waits for its turn gives it up without holding
    up the others or being sent."""
    only = lockers.start()

    async def main() -> None:
        async with AsyncClient(only.endpoint, timeout=5.0) as c:

            async def asker(n: int) -> int:
                return sum([(await c.ask("default", f"task-{n}")).ok for _ in range(10)])

            assert await asyncio.gather(*(asker(n) for n in range(20))) == [10] * 20
            # One request holds the turn (its locker stopped), two wait
            # behind it; the first of those is cancelled.
            stop(only, stopped)
            holding = asyncio.ensure_future(c.ask())
            await asyncio.sleep(0.05)
            cancelled = asyncio.ensure_future(c.ask())
            behind = asyncio.ensure_future(c.ask())
            await asyncio.sleep(0.05)
            cancelled.cancel()
            only.proc.send_signal(signal.SIGCONT)
            assert (await holding).ok and (await behind).ok
            assert cancelled.cancelled()
            assert limit_stats(await c.stats())["requests"] == 202, "the cancelled one was never sent"

    asyncio.run(asyncio.wait_for(main(), 30))
