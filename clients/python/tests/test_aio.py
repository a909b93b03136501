"""The asyncio flavour against real lockers, each test one ``asyncio.run``:
the same asks, errors, failover, leases and pool as the blocking client,
without blocking the loop."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import List

import pytest

from conftest import Daemon, Lockers, limit_stats
from locker_client import AsyncClient, AsyncLease, AsyncPermitPool, LockerError, NoAnswer, NotAcquired


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_asks_count_go_and_sorry_with_keys_cost_and_up_to(locker: Daemon, key: str) -> None:
    async def main() -> None:
        async with AsyncClient(locker.endpoint, timeout=5.0) as c:
            assert [(await c.ask("api", key)).ok for _ in range(3)] == [True] * 3
            assert (await c.ask("api", key, cost=0)).remaining == 2
            batch = await c.ask("api", key, cost=10, up_to=True)
            assert batch.ok and batch.granted == 2
            assert not (await c.ask("api", key))
            assert (await c.ask("api", key + "-b", cost=5)).ok
            assert await c.go() is True
            assert limit_stats(await c.stats(), "api")["max_requests"] == 5

    run(main())


def test_acquire_sleeps_a_reservation_without_blocking_the_loop(locker: Daemon, key: str) -> None:
    async def main() -> None:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        async with AsyncClient(locker.endpoint, timeout=5.0) as c:
            assert (await c.ask("smooth", key)).ok
            task = asyncio.ensure_future(ticker())
            started = time.monotonic()
            reply = await c.acquire("smooth", key, max_wait_ms=1000)
            task.cancel()
            assert reply.ok and reply.wait_ms and reply.wait_ms >= 1, reply
            assert time.monotonic() - started >= reply.wait_ms / 1000
            assert ticks > 0, "other tasks ran while acquire waited"

    run(main())


def test_errors_and_bad_arguments(locker: Daemon) -> None:
    async def main() -> None:
        async with AsyncClient(locker.endpoint, timeout=5.0) as c:
            with pytest.raises(LockerError) as caught:
                await c.ask("nope")
            assert "unknown limit" in caught.value.message
            with pytest.raises(ValueError):
                await c.ask(cost=-1)
            with pytest.raises(TypeError):
                await c.ask(cost="1")
            with pytest.raises(TypeError):
                await c.ask(speed=3)  # type: ignore[call-arg]
            with pytest.raises(ValueError):
                c.lease("db", ttl=0)
            assert (await c.ask()).ok, "still usable"

    run(main())


def test_failover_and_no_answer(lockers: Lockers) -> None:
    first, second = lockers.start(), lockers.start()

    async def main() -> None:
        async with AsyncClient([first.endpoint, second.endpoint], timeout=0.6) as c:
            assert (await c.ask()).ok
            assert c.current_endpoint == first.endpoint
            first.kill()
            for _ in range(3):
                assert (await c.ask()).ok
            assert c.current_endpoint == second.endpoint
            assert limit_stats(await c.stats())["requests"] == 3, "each ask counted once"
            second.kill()
            started = time.monotonic()
            with pytest.raises(NoAnswer):
                await c.ask()
            assert time.monotonic() - started < 3.0

    run(main())


def test_a_cancelled_request_leaves_the_client_usable(lockers: Lockers) -> None:
    live = lockers.start()

    async def main() -> None:
        async with AsyncClient(live.endpoint, timeout=5.0) as c:
            task = asyncio.ensure_future(c.ask())
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await c.ask()).ok

    run(main())


def test_async_with_a_lease_keeps_it_and_releases_it_on_exit(lockers: Lockers) -> None:
    d = lockers.start()

    async def main() -> None:
        async with AsyncClient(d.endpoint, timeout=5.0) as c, AsyncClient(d.endpoint, timeout=5.0) as other:
            async with c.lease("db", ttl=0.15) as lease:
                assert isinstance(lease, AsyncLease) and lease.held
                await asyncio.sleep(0.45)  # three ttls: kept by the heartbeat task
                assert lease.held
                assert not (await other.acquire_lease("db")).ok
            assert not lease.held
            assert (await other.acquire_lease("db", ttl=0.2)).ok, "released on exit"
            with pytest.raises(NotAcquired):
                await c.lease("db")
            # Queued behind the 200 ms lease, then held.
            lease = await c.lease("db", ttl=5, wait=3)
            assert lease.held
            assert await lease.release() is True

    run(main())


def test_an_async_waiter_is_handed_the_count_on_the_held_reply(lockers: Lockers) -> None:
    d = lockers.start()

    async def main() -> None:
        async with AsyncClient(d.endpoint, timeout=5.0) as c, AsyncClient(d.endpoint, timeout=5.0) as other:
            holder = await c.lease("db", ttl=30)
            waiting = asyncio.ensure_future(other.lease("db", ttl=30, wait=4))
            while (await c.stats()).get("parked", 0) != 1:
                await asyncio.sleep(0.005)
            await holder.release()
            lease = await asyncio.wait_for(waiting, 5)
            assert lease.held
            stats = await c.stats()
            assert (stats.get("held"), stats.get("held_go")) == (1, 1), stats
            assert await lease.release() is True

    run(main())


def test_an_async_lease_lost_to_another_holder_is_reported(lockers: Lockers) -> None:
    d = lockers.start()

    async def main() -> None:
        lost: List[AsyncLease] = []
        async with AsyncClient(d.endpoint, timeout=5.0) as c, AsyncClient(d.endpoint, timeout=5.0) as thief:
            async with c.lease("db", ttl=0.6, on_lost=lost.append) as lease:
                # Free the lease behind the guard's back and take the count;
                # a heartbeat landing between the two restores it first, so
                # then try again.
                for _ in range(20):
                    await thief.release("db", lease.id)
                    if (await thief.acquire_lease("db", ttl=30)).ok:
                        break
                else:
                    raise AssertionError("could not take the count")
                for _ in range(200):
                    if lost:
                        break
                    await asyncio.sleep(0.01)
                assert lost == [lease] and not lease.held

    run(main())


def test_an_async_pool_never_hands_out_more_than_a_slot_allows(lockers: Lockers) -> None:
    d = lockers.start("--max-requests", "200", "--in-seconds", "0.1", config=False)

    async def main() -> None:
        async with AsyncClient(d.endpoint, timeout=5.0) as c:
            pool = AsyncPermitPool(c, key="batch", batch=50)
            per_slot: Counter = Counter()
            sorry = 0
            end = time.monotonic() + 0.35
            while time.monotonic() < end:
                if await pool.take():
                    per_slot[time.time_ns() // 100_000_000] += 1
                else:
                    sorry += 1
            assert sorry > 0 and per_slot, per_slot
            assert all(n <= 200 for n in per_slot.values()), per_slot
            assert pool.round_trips < sum(per_slot.values())

    run(main())
