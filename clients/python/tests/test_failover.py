"""Failover between real lockers: a killed locker is passed over, a silent
one gets each request at most once, and a list of dead lockers raises
NoAnswer within the timeout instead of hanging."""

from __future__ import annotations

import time

import zmq

from conftest import Lockers, limit_stats
from locker_client import Client, NoAnswer


def test_the_client_keeps_getting_answers_when_its_locker_is_killed(lockers: Lockers) -> None:
    first, second = lockers.start(), lockers.start()
    timeout = 0.6
    with Client([first.endpoint, second.endpoint], timeout=timeout) as c:
        for _ in range(3):
            assert c.ask().ok
        assert c.current_endpoint == first.endpoint
        first.kill()
        started = time.monotonic()
        for _ in range(5):
            assert c.ask().ok, "the second locker answers"
        assert time.monotonic() - started < 5 * timeout, "the dead locker is not waited on every time"
        assert c.current_endpoint == second.endpoint
        # Every ask after the kill reached the second locker exactly once:
        # the one that found the first dead was not also counted there twice.
        assert limit_stats(c.stats())["requests"] == 5


def test_the_last_locker_that_answered_is_asked_first(lockers: Lockers) -> None:
    dead = lockers.start()
    dead.kill()
    live = lockers.start()
    with Client([dead.endpoint, live.endpoint], timeout=2.0) as c:
        assert c.ask().ok
        started = time.monotonic()
        for _ in range(3):
            assert c.ask().ok
        assert time.monotonic() - started < 1.0, "no time lost on the dead locker"
        assert limit_stats(c.stats())["requests"] == 4, "each ask was counted once"


def test_a_silent_locker_gets_each_request_at_most_once(lockers: Lockers) -> None:
    ctx = zmq.Context.instance()
    silent = ctx.socket(zmq.ROUTER)
    silent.setsockopt(zmq.LINGER, 0)
    silent.bind("tcp://127.0.0.1:*")
    try:
        live = lockers.start()
        with Client([silent.getsockopt_string(zmq.LAST_ENDPOINT), live.endpoint], timeout=0.6) as c:
            for _ in range(3):
                assert c.ask().ok
            got = 0
            while silent.poll(100, zmq.POLLIN):
                silent.recv_multipart()
                got += 1
            assert got == 1, "only the first ask tried the silent endpoint"
            assert limit_stats(c.stats())["go"] == 3
    finally:
        silent.close()


def test_only_dead_lockers_raise_no_answer_within_the_timeout(lockers: Lockers) -> None:
    a, b = lockers.start(), lockers.start()
    a.kill()
    b.kill()
    with Client([a.endpoint, b.endpoint], timeout=0.3) as c:
        started = time.monotonic()
        try:
            c.ask()
        except NoAnswer as e:
            assert e.endpoints == [a.endpoint, b.endpoint] and e.timeout == 0.3
        else:
            raise AssertionError("expected NoAnswer")
        elapsed = time.monotonic() - started
        assert 0.25 <= elapsed < 2.0, elapsed
        # The client is still usable, and still bounded, afterwards.
        started = time.monotonic()
        try:
            c.go()
        except NoAnswer:
            pass
        else:
            raise AssertionError("expected NoAnswer")
        assert time.monotonic() - started < 2.0
