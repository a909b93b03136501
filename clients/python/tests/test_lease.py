"""Semaphore leases against a real locker ("db": capacity 1, default ttl
5 s): the guard keeps its lease and releases it on exit, waits in the
queue, raises NotAcquired, is restored by a restarted locker, and reports a
lease lost to someone else."""

from __future__ import annotations

import threading
import time
from typing import Callable, List

import pytest

from conftest import Lockers
from locker_client import Client, Lease, NotAcquired


def eventually(condition: Callable[[], bool], within: float = 5.0) -> bool:
    """Polls ``condition`` until it holds or ``within`` seconds pass."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_a_lease_is_kept_while_held_and_released_on_exit(lockers: Lockers) -> None:
    d = lockers.start()
    with Client(d.endpoint, timeout=5.0) as c, Client(d.endpoint, timeout=5.0) as other:
        with c.lease("db", count=1, ttl=0.15) as lease:
            assert isinstance(lease, Lease) and lease.held and lease.id and lease.ttl == 0.15
            # Several ttls pass; the heartbeats (every 50 ms) keep the lease.
            time.sleep(0.45)
            assert lease.held
            assert not other.acquire_lease("db").ok, "still held"
        assert not lease.held
        taken = other.acquire_lease("db", ttl=1)
        assert taken.ok, "released on exit: another client can take it"
        assert lease.release() is False, "releasing twice does nothing"


def test_a_lease_without_a_ttl_takes_the_limits_own(lockers: Lockers) -> None:
    d = lockers.start()
    with Client(d.endpoint, timeout=5.0) as c:
        lease = c.lease("db")
        try:
            assert lease.ttl == 5.0, "the semaphore's in_seconds"
        finally:
            assert lease.release() is True
        assert c.acquire_lease("db").ok


def test_a_lease_waits_in_the_queue_until_the_count_frees(lockers: Lockers) -> None:
    d = lockers.start()
    with Client(d.endpoint, timeout=5.0) as c:
        assert c.acquire_lease("db", ttl=0.3).ok, "held without heartbeats: it expires at 300 ms"
        started = time.monotonic()
        with c.lease("db", ttl=5, wait=3) as lease:
            assert lease.held
            assert time.monotonic() - started >= 0.25, "held only once the first lease expired"
            stats = c.stats()
            assert stats["live_keys"] == 1


def test_a_waiter_is_handed_the_count_on_the_held_reply_at_the_release(lockers: Lockers) -> None:
    d = lockers.start()
    with Client(d.endpoint, timeout=5.0) as c:
        holder = c.lease("db", ttl=30)
        got: List[Lease] = []
        waiter = threading.Thread(target=lambda: got.append(c.sibling().lease("db", ttl=30, wait=4)))
        waiter.start()
        assert eventually(lambda: c.stats().get("parked", 0) == 1), "the waiting acquire is held, not polling"
        holder.release()
        waiter.join(5)
        assert got and got[0].held
        stats = c.stats()
        db = next(limit for limit in stats["limits"] if limit["name"] == "db")
        assert (stats.get("held"), stats.get("held_go"), db.get("waited")) == (1, 1, 1), stats
        got[0].release()


def test_a_lease_not_had_within_its_wait_raises_not_acquired(lockers: Lockers) -> None:
    d = lockers.start()
    with Client(d.endpoint, timeout=5.0) as c:
        holder = c.acquire_lease("db", ttl=30)
        assert holder.ok
        with pytest.raises(NotAcquired) as caught:
            c.lease("db")
        assert caught.value.limit == "db" and caught.value.count == 1 and caught.value.remaining == 0
        started = time.monotonic()
        with pytest.raises(NotAcquired):
            c.lease("db", wait=0.2)
        assert time.monotonic() - started < 3.0, "bounded by the wait"
        # The given-up waiter left the queue: once the holder releases, a
        # plain acquire (refused while anyone waits) succeeds.
        assert c.release("db", holder.lease or "").ok
        assert c.acquire_lease("db", ttl=1).ok


def test_a_restarted_locker_restores_the_lease_from_its_heartbeats(lockers: Lockers) -> None:
    first = lockers.start()
    port = first.port
    with Client(first.endpoint, timeout=0.5) as c:
        with c.lease("db", count=1, ttl=0.3) as lease:
            first.kill()
            second = lockers.start(bind=f"tcp://127.0.0.1:{port}")
            with Client(second.endpoint, timeout=5.0) as other:
                # The guard's next heartbeats carry the count: the new locker
                # re-creates the lease ahead of anyone else.
                assert eventually(lambda: other.stats()["live_keys"] == 1), "restored"
                assert lease.held
                assert not other.acquire_lease("db").ok, "a restart cannot double the capacity"
        with Client(second.endpoint, timeout=5.0) as other:
            assert other.acquire_lease("db", ttl=1).ok, "released on exit"


def test_a_lease_lost_to_another_holder_is_reported(lockers: Lockers) -> None:
    d = lockers.start()
    lost: List[Lease] = []
    seen = threading.Event()

    def on_lost(lease: Lease) -> None:
        lost.append(lease)
        seen.set()

    with Client(d.endpoint, timeout=5.0) as c, Client(d.endpoint, timeout=5.0) as thief:
        with c.lease("db", ttl=3, on_lost=on_lost) as lease:
            # Free the lease behind the guard's back and take the count. A
            # heartbeat landing between the two restores the lease first;
            # then try again.
            for _ in range(20):
                thief.release("db", lease.id)
                if thief.acquire_lease("db", ttl=30).ok:
                    break
            else:
                raise AssertionError("could not take the count")
            # The next heartbeat (within a second) cannot restore it.
            assert seen.wait(5.0), "on_lost was called"
            assert lost == [lease] and not lease.held
        assert lease.release() is False


def test_on_lost_may_release_the_lease_from_the_heartbeat_thread(lockers: Lockers) -> None:
    d = lockers.start()
    released: List[bool] = []
    done = threading.Event()

    def on_lost(lease: Lease) -> None:
        released.append(lease.release())
        done.set()

    with Client(d.endpoint, timeout=5.0) as c, Client(d.endpoint, timeout=5.0) as thief:
        lease = c.lease("db", ttl=0.3, on_lost=on_lost)
        for _ in range(20):
            thief.release("db", lease.id)
            if thief.acquire_lease("db", ttl=30).ok:
                break
        assert done.wait(5.0), "on_lost was called"
        assert released == [False], "nothing left to free, and no deadlock"


def test_a_lease_reaches_its_locker_only_through_the_lease_channel() -> None:
    """The client carries a lease through the four public methods of
    LeaseChannel; a lease calls nothing private of the client's."""
    import inspect

    from locker_client import lease

    assert isinstance(Client("tcp://127.0.0.1:1", timeout=0.1), lease.LeaseChannel)
    source = inspect.getsource(lease.Lease)
    assert "client." in source and "client._" not in source, "a Lease reaches into a client's private parts"
