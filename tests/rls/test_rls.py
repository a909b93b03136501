"""Envoy's rate-limit service, asked by a gRPC client generated from Envoy's
own message definitions (proto/, compiled here by grpc_tools.protoc into a
temporary folder), of a real locker serving envoyproxy/ratelimit's README
examples (config/, unchanged).

Run with `python3 -m pytest tests/rls -q`; LOCKER_BIN names the binary
(target/release/locker by default).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from free_port import free_port  # noqa: E402

LOCKER = os.environ.get("LOCKER_BIN", str(ROOT / "target" / "release" / "locker"))
DEADLINE = 10  # seconds any one wait may take before the test fails


def compile_protos(out):
    import grpc_tools
    from grpc_tools import protoc

    includes = Path(grpc_tools.__file__).parent / "_proto"
    files = [
        "envoy/service/ratelimit/v3/rls.proto",
        "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
        "envoy/config/core/v3/base.proto",
    ]
    args = ["protoc", f"-I{HERE / 'proto'}", f"-I{includes}", f"--python_out={out}", f"--grpc_python_out={out}"]
    assert protoc.main(args + files) == 0, "protoc failed"
    sys.path.insert(0, str(out))


@pytest.fixture(scope="module")
def pb():
    with tempfile.TemporaryDirectory() as out:
        compile_protos(out)
        from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc

        yield rls_pb2, rls_pb2_grpc


class Locker:
    """`locker serve` with the RLS on a free port, read from its log."""

    def __init__(self, *args):
        self.proc = subprocess.Popen(
            [LOCKER, "serve", "--bind", "tcp://127.0.0.1:*", "--rls-bind", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        found = threading.Event()
        self.logged = threading.Event()
        self.address = None
        self.endpoint = None
        self.log = []

        def read():
            for line in self.proc.stderr:
                self.log.append(line)
                self.logged.set()
                m = re.search(r"over grpc address=(\S+)", line)
                if m:
                    self.address = m.group(1)
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        # The endpoint line comes once everything is bound.
        line = self.proc.stdout.readline()
        assert line.startswith("listening on "), f"{line!r} {''.join(self.log)}"
        self.endpoint = line.split()[-1]
        assert found.wait(DEADLINE), "".join(self.log)
        self.channel = grpc.insecure_channel(self.address)

    def close(self):
        self.proc.terminate()
        assert self.proc.wait(DEADLINE) == 0
        self.channel.close()


@pytest.fixture(scope="module")
def locker():
    node = Locker("--rls-config", str(HERE / "config"))
    wait_serving(node.channel, "")
    yield node
    node.close()


def wait_serving(channel, service):
    """Waits on the health service's stream until it says SERVING."""
    stub = health_pb2_grpc.HealthStub(channel)
    stream = stub.Watch(health_pb2.HealthCheckRequest(service=service), timeout=DEADLINE)
    for reply in stream:
        if reply.status == health_pb2.HealthCheckResponse.SERVING:
            stream.cancel()
            return
    pytest.fail("never serving")


def ask(pb, locker, domain, *descriptors, hits_addend=0):
    """One ShouldRateLimit; each descriptor a list of (key, value), with an
    optional per-descriptor hits_addend as a last int."""
    rls_pb2, rls_pb2_grpc = pb
    request = rls_pb2.RateLimitRequest(domain=domain, hits_addend=hits_addend)
    for d in descriptors:
        entries, own = (d[:-1], d[-1]) if d and isinstance(d[-1], int) else (d, None)
        descriptor = request.descriptors.add()
        for key, value in entries:
            descriptor.entries.add(key=key, value=value)
        if own is not None:
            descriptor.hits_addend.value = own
    return rls_pb2_grpc.RateLimitServiceStub(locker.channel).ShouldRateLimit(request, timeout=DEADLINE)


def unique():
    return uuid.uuid4().hex[:12]


def codes(pb, reply):
    name = pb[0].RateLimitResponse.Code.Name
    return name(reply.overall_code), [name(s.code) for s in reply.statuses]


def test_nested_descriptors_count_to_their_limits(pb, locker):
    # README Example 2: 5 marketing messages a day to a number, 100 messages.
    number = unique()
    marketing = [("message_type", "marketing"), ("to_number", number)]
    any_message = [("to_number", number)]
    for left in range(4, -1, -1):
        reply = ask(pb, locker, "messaging", marketing, any_message)
        assert codes(pb, reply) == ("OK", ["OK", "OK"])
        assert [s.limit_remaining for s in reply.statuses] == [left, 95 + left]
    reply = ask(pb, locker, "messaging", marketing, any_message)
    assert codes(pb, reply) == ("OVER_LIMIT", ["OVER_LIMIT", "OK"])
    over, ok = reply.statuses
    Unit = pb[0].RateLimitResponse.RateLimit.Unit
    assert (over.current_limit.requests_per_unit, over.current_limit.unit) == (5, Unit.Value("DAY"))
    assert (over.limit_remaining, ok.limit_remaining) == (0, 94)
    assert 0 < over.duration_until_reset.seconds <= 86400
    # Another number has its own counts.
    reply = ask(pb, locker, "messaging", [("message_type", "marketing"), ("to_number", unique())])
    assert reply.statuses[0].limit_remaining == 4


def test_the_most_specific_match_wins(pb, locker):
    # README Example 3: 10 a second per address, none for 50.0.0.5.
    reply = ask(pb, locker, "edge_proxy_per_ip", [("remote_address", "50.0.0.5")])
    assert codes(pb, reply) == ("OVER_LIMIT", ["OVER_LIMIT"])
    assert reply.statuses[0].current_limit.requests_per_unit == 0
    reply = ask(pb, locker, "edge_proxy_per_ip", [("remote_address", unique())])
    assert codes(pb, reply) == ("OK", ["OK"])
    assert reply.statuses[0].current_limit.requests_per_unit == 10
    # README Example 1: a value of the top level.
    reply = ask(pb, locker, "mongo_cps", [("database", "users")])
    assert reply.statuses[0].current_limit.requests_per_unit == 500


def test_unmatched_descriptors_are_ok_without_a_limit(pb, locker):
    # README Example 4: a two-entry descriptor does not match a one-level config.
    reply = ask(pb, locker, "example4", [("key", "value"), ("subkey", "subvalue")])
    assert codes(pb, reply) == ("OK", ["OK"])
    assert not reply.statuses[0].HasField("current_limit")
    reply = ask(pb, locker, "no-such-domain", [("a", "b")], [("c", "d")])
    assert codes(pb, reply) == ("OK", ["OK", "OK"])


def test_unlimited_and_shadow_mode(pb, locker):
    # README Example 5: unlimited answers the largest remaining.
    reply = ask(pb, locker, "internal", [("ldap", "x")], [("azure", unique())])
    assert codes(pb, reply) == ("OK", ["OK", "OK"])
    assert [s.limit_remaining for s in reply.statuses] == [4294967295, 99]
    # README Example 6: user-a is in shadow mode (10 a second), user-b is not
    # (20 a second): more hits than either holds, in one request.
    service = ("service", "auth-service")
    reply = ask(pb, locker, "example6", [service, ("user", "user-a"), 11])
    assert codes(pb, reply) == ("OK", ["OK"])
    assert reply.statuses[0].limit_remaining == 0
    reply = ask(pb, locker, "example6", [service, ("user", "user-b"), 21])
    assert codes(pb, reply) == ("OVER_LIMIT", ["OVER_LIMIT"])


def test_a_replaced_limit_does_not_apply(pb, locker):
    # README Example 7: the key_2 rule (10 a second) replaces specific_limit.
    user = ("user", "bkthomps")
    reply = ask(pb, locker, "example7", [("key_1", "value_1"), user], [("key_2", "value_2"), user])
    assert codes(pb, reply) == ("OK", ["OK", "OK"])
    replaced, replacing = reply.statuses
    assert not replaced.HasField("current_limit")
    assert replacing.current_limit.requests_per_unit == 10


def test_hits_addend_is_the_cost(pb, locker):
    number = [("to_number", unique())]
    reply = ask(pb, locker, "messaging", number, hits_addend=40)
    assert reply.statuses[0].limit_remaining == 60
    # A descriptor's own hits_addend wins; 0 checks without counting.
    reply = ask(pb, locker, "messaging", number + [0], hits_addend=40)
    assert (codes(pb, reply), reply.statuses[0].limit_remaining) == (("OK", ["OK"]), 60)
    reply = ask(pb, locker, "messaging", number + [61])
    assert codes(pb, reply) == ("OVER_LIMIT", ["OVER_LIMIT"])
    reply = ask(pb, locker, "messaging", number + [60])
    assert (codes(pb, reply), reply.statuses[0].limit_remaining) == (("OK", ["OK"]), 0)


def test_the_docs_ready_client_says_ok_then_over_limit(locker):
    """examples/rls_ask.py, the client docs/envoy.md gives: OK with what is
    left while the marketing limit of 5 a day lasts, then OVER_LIMIT."""
    number = unique()
    run = lambda: subprocess.run(
        [sys.executable, str(ROOT / "examples" / "rls_ask.py"), locker.address, "messaging",
         "message_type=marketing", f"to_number={number}"],
        capture_output=True, text=True, timeout=60,
    )
    answers = [run() for _ in range(6)]
    assert [a.returncode for a in answers] == [0] * 5 + [1], [a.stderr for a in answers]
    assert answers[0].stdout.splitlines() == ["OK", "  OK: 5 per DAY, 4 left"]
    assert answers[5].stdout.splitlines()[0] == "OVER_LIMIT"


def test_the_zeromq_side_counts_the_same_limit(pb, locker):
    number = unique()
    out = subprocess.run(
        [LOCKER, "ask", "--connect", locker.endpoint, "--limit", "messaging.to_number", "--key", number, "--cost", "30"],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert out.returncode == 0, out.stderr
    reply = ask(pb, locker, "messaging", [("to_number", number)])
    assert reply.statuses[0].limit_remaining == 69


@pytest.mark.parametrize(
    "domain, descriptors, says",
    [
        ("", [[("a", "b")]], "domain is empty"),
        ("messaging", [], "at least one descriptor"),
        ("messaging", [[]], "no entries"),
        ("messaging", [[("to_number", "1")], [("", "x")]], "empty key"),
    ],
)
def test_bad_requests_are_invalid_arguments(pb, locker, domain, descriptors, says):
    with pytest.raises(grpc.RpcError) as e:
        ask(pb, locker, domain, *descriptors)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert says in e.value.details()


def test_an_oversized_request_is_refused(pb, locker):
    with pytest.raises(grpc.RpcError) as e:
        ask(pb, locker, "messaging", [("to_number", "x" * 300_000)])
    assert e.value.code() == grpc.StatusCode.OUT_OF_RANGE, "tonic's word for it"
    assert "too large" in e.value.details()
    # Within gRPC's bound, but asks larger than the locker takes in one message.
    with pytest.raises(grpc.RpcError) as e:
        ask(pb, locker, "messaging", [("to_number", "x" * 100_000)])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max-message-size" in e.value.details()
    # The locker still serves.
    assert codes(pb, ask(pb, locker, "messaging", [("to_number", unique())])) == ("OK", ["OK"])


def test_health_says_serving_for_the_server_and_the_service(locker):
    stub = health_pb2_grpc.HealthStub(locker.channel)
    for service in ["", "envoy.service.ratelimit.v3.RateLimitService"]:
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=DEADLINE)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def threads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def test_the_grpc_side_runs_on_the_loops_thread_and_holds_no_thread_per_call(pb, locker):
    """A locker serving Envoy's calls has as many threads as one without
    the RLS, while calls are in flight on several connections."""
    plain = subprocess.Popen(
        [LOCKER, "serve", "--bind", "tcp://127.0.0.1:*"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert plain.stdout.readline().startswith("listening on ")
        rls_pb2, rls_pb2_grpc = pb
        channels = [grpc.insecure_channel(locker.address) for _ in range(4)]
        stubs = [rls_pb2_grpc.RateLimitServiceStub(c) for c in channels]

        def request():
            r = rls_pb2.RateLimitRequest(domain="messaging")
            r.descriptors.add().entries.add(key="to_number", value=unique())
            return r

        calls = [stubs[n % 4].ShouldRateLimit.future(request(), timeout=DEADLINE) for n in range(200)]
        during = threads(locker.proc.pid)
        assert all(c.result().overall_code == rls_pb2.RateLimitResponse.OK for c in calls)
        assert during == threads(plain.pid), "the gRPC side adds no thread"
        for c in channels:
            c.close()
    finally:
        plain.terminate()
        plain.wait(DEADLINE)


def test_a_stopping_locker_stops_the_rls(pb):
    node = Locker("--rls-config", str(HERE / "config" / "example2.yaml"))
    wait_serving(node.channel, "")
    assert codes(pb, ask(pb, node, "messaging", [("to_number", unique())])) == ("OK", ["OK"])
    node.close()
    node.channel = grpc.insecure_channel(node.address)
    with pytest.raises(grpc.RpcError) as e:
        ask(pb, node, "messaging", [("to_number", unique())])
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    node.channel.close()


def test_a_bad_config_names_its_file_and_line():
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write("domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: x\n")
        f.flush()
        out = subprocess.run(
            [LOCKER, "serve", "--rls-bind", "127.0.0.1:0", "--rls-config", f.name],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
    assert out.returncode == 2
    assert f"{f.name}: line 6" in out.stderr, out.stderr


def test_a_reload_reads_the_rls_config_again(pb, tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    rule = "domain: reload\ndescriptors:\n  - key: user\n    rate_limit: {unit: day, requests_per_unit: %d}\n"
    (rules / "reload.yaml").write_text(rule % 5)
    node = Locker("--config", str(ROOT / "examples" / "limits.toml"), "--rls-config", str(rules))
    try:
        wait_serving(node.channel, "")
        user = [("user", unique())]
        assert ask(pb, node, "reload", user, hits_addend=2).statuses[0].limit_remaining == 3
        (rules / "reload.yaml").write_text(rule % 10)
        node.proc.send_signal(signal.SIGHUP)
        wait_log(node, "config reloaded")
        status = ask(pb, node, "reload", user).statuses[0]
        # The limit grew; the two hits taken before still count.
        assert (status.current_limit.requests_per_unit, status.limit_remaining) == (10, 7)
    finally:
        node.close()


def wait_log(node, needle):
    """Waits for the locker to log `needle` (read by the log thread)."""
    end = time.monotonic() + DEADLINE
    while not any(needle in line for line in node.log):
        assert time.monotonic() < end, "".join(node.log)
        node.logged.wait(0.05)
        node.logged.clear()


@pytest.mark.parametrize("serving", ["curve", "rep"])
def test_a_curve_or_rep_serving_socket_serves_the_rls_too(pb, tmp_path, serving):
    # The gRPC side reaches the loop beside the serving socket, whatever
    # guards it (CURVE) and whichever kind it is (a locker that holds
    # nothing serves on a REP socket).
    if serving == "curve":
        subprocess.run([LOCKER, "keygen", "--out", str(tmp_path / "server")], check=True, capture_output=True)
        args = ["--curve-secret-key", str(tmp_path / "server.key")]
    else:
        args = ["--max-parked", "0"]
    node = Locker("--rls-config", str(HERE / "config" / "example2.yaml"), *args)
    try:
        wait_serving(node.channel, "")
        reply = ask(pb, node, "messaging", [("to_number", unique())], hits_addend=3)
        assert reply.statuses[0].limit_remaining == 97
    finally:
        node.close()


def override_request(pb, domain, entries, requests_per_unit, unit):
    """A request of one descriptor carrying a `limit` override."""
    rls_pb2, _ = pb
    request = rls_pb2.RateLimitRequest(domain=domain)
    descriptor = request.descriptors.add()
    for key, value in entries:
        descriptor.entries.add(key=key, value=value)
    descriptor.limit.requests_per_unit = requests_per_unit
    descriptor.limit.unit = pb[0].RateLimitResponse.RateLimit.Unit.Value(unit)
    return request


def test_a_limit_override_counts_exactly(pb):
    # README Example 2's domain; the override wins over its 100 a day, and
    # counts where the config has no rule (a key it does not know).
    node = Locker("--rls-config", str(HERE / "config" / "example2.yaml"), "--runtime-limits", "4")
    try:
        wait_serving(node.channel, "")
        stub = pb[1].RateLimitServiceStub(node.channel)
        for entries in ([("to_number", unique())], [("tenant", unique()), ("route", "/a")]):
            request = override_request(pb, "messaging", entries, 3, "MINUTE")
            for left in [2, 1, 0]:
                reply = stub.ShouldRateLimit(request, timeout=DEADLINE)
                assert codes(pb, reply) == ("OK", ["OK"])
                status = reply.statuses[0]
                assert status.limit_remaining == left
                unit = pb[0].RateLimitResponse.RateLimit.Unit.Value("MINUTE")
                assert (status.current_limit.requests_per_unit, status.current_limit.unit) == (3, unit)
                assert 0 < status.duration_until_reset.seconds + status.duration_until_reset.nanos / 1e9 <= 60
            reply = stub.ShouldRateLimit(request, timeout=DEADLINE)
            assert codes(pb, reply) == ("OVER_LIMIT", ["OVER_LIMIT"])
            assert reply.statuses[0].limit_remaining == 0
        # A domain the config lacks: the override does not apply, as there.
        reply = stub.ShouldRateLimit(override_request(pb, "nowhere", [("a", "b")], 1, "SECOND"), timeout=DEADLINE)
        assert codes(pb, reply) == ("OK", ["OK"])
        assert not reply.statuses[0].HasField("current_limit")
        # Longer than a day: refused, naming what counts exactly instead.
        with pytest.raises(grpc.RpcError) as e:
            stub.ShouldRateLimit(override_request(pb, "messaging", [("a", "b")], 1, "MONTH"), timeout=DEADLINE)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "one month, longer than a locker's longest window" in e.value.details()
    finally:
        node.close()


def test_a_limit_override_needs_runtime_limits(pb, locker):
    request = override_request(pb, "messaging", [("to_number", unique())], 3, "MINUTE")
    with pytest.raises(grpc.RpcError) as e:
        pb[1].RateLimitServiceStub(locker.channel).ShouldRateLimit(request, timeout=DEADLINE)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "--runtime-limits" in e.value.details()


ALL_OR_NOTHING = """domain: checkout
all_or_nothing: true
descriptors:
  - {key: user, rate_limit: {unit: minute, requests_per_unit: 10}}
  - {key: card, rate_limit: {unit: minute, requests_per_unit: 2}}
"""


def test_an_all_or_nothing_domain_charges_nothing_for_a_refused_request(pb, tmp_path):
    (tmp_path / "checkout.yaml").write_text(ALL_OR_NOTHING)
    (tmp_path / "messaging.yaml").write_text((HERE / "config" / "example2.yaml").read_text())
    node = Locker("--rls-config", str(tmp_path))
    try:
        wait_serving(node.channel, "")
        user, card = [("user", unique())], [("card", unique())]
        assert [s.limit_remaining for s in ask(pb, node, "checkout", user, card).statuses] == [9, 1]
        assert [s.limit_remaining for s in ask(pb, node, "checkout", user, card).statuses] == [8, 0]
        # The card is spent: the request is refused, and the user's count
        # is charged nothing, request after request.
        for _ in range(3):
            reply = ask(pb, node, "checkout", user, card)
            assert codes(pb, reply) == ("OVER_LIMIT", ["OK", "OVER_LIMIT"])
            assert [s.limit_remaining for s in reply.statuses] == [8, 0]
        # More hits than a rule holds: refused before counting, nothing charged.
        reply = ask(pb, node, "checkout", user, [("card", unique()), 3])
        assert codes(pb, reply) == ("OVER_LIMIT", ["OK", "OVER_LIMIT"])
        assert ask(pb, node, "checkout", user + [0]).statuses[0].limit_remaining == 8
        # Without the setting, as envoyproxy/ratelimit: the one that goes is charged.
        number, marketing = [("to_number", unique())], [("message_type", "marketing")]
        for _ in range(5):
            ask(pb, node, "messaging", marketing + number)
        reply = ask(pb, node, "messaging", number, marketing + number)
        assert codes(pb, reply) == ("OVER_LIMIT", ["OK", "OVER_LIMIT"])
        assert reply.statuses[0].limit_remaining == 99
    finally:
        node.close()


CHARGE_REFUSED = """domain: tokens
charge_refused: true
descriptors:
  - {key: user, rate_limit: {unit: hour, requests_per_unit: 10}}
"""


def test_a_charge_refused_domain_counts_a_refused_requests_hits_as_a_debt(pb, tmp_path):
    (tmp_path / "tokens.yaml").write_text(CHARGE_REFUSED)
    plain = CHARGE_REFUSED.replace("domain: tokens", "domain: plain").replace("charge_refused: true\n", "")
    (tmp_path / "plain.yaml").write_text(plain)
    node = Locker("--rls-config", str(tmp_path))
    try:
        wait_serving(node.channel, "")
        for domain in ["tokens", "plain"]:
            user = [("user", unique())]
            assert ask(pb, node, domain, user + [4]).statuses[0].limit_remaining == 6
            # Eight hits where six are left (an answer's tokens, known at
            # stream end): refused either way.
            assert codes(pb, ask(pb, node, domain, user + [8])) == ("OVER_LIMIT", ["OVER_LIMIT"])
            after = ask(pb, node, domain, user + [1])
            if domain == "tokens":
                # Charged all the same, 2 past the limit: the next hit is refused.
                assert codes(pb, after) == ("OVER_LIMIT", ["OVER_LIMIT"]), domain
                assert after.statuses[0].limit_remaining == 0
            else:
                # Without the setting, a refused descriptor charges nothing.
                assert codes(pb, after) == ("OK", ["OK"]), domain
                assert after.statuses[0].limit_remaining == 5
    finally:
        node.close()


@pytest.mark.parametrize("style", ["draft-03", "ietf"])
def test_response_headers(pb, style):
    # README Example 2, with a named rule of the locker's own beside it.
    rules = HERE / "config" / "example2.yaml"
    node = Locker("--rls-config", str(rules), "--rls-headers", style)
    try:
        wait_serving(node.channel, "")
        number = unique()
        marketing = [("message_type", "marketing"), ("to_number", number), 2]
        reply = ask(pb, node, "messaging", marketing, [("to_number", number)], [("unknown", "x")])
        headers = [(h.key, h.value) for h in reply.response_headers_to_add]
        reset = reply.statuses[0].duration_until_reset
        assert 0 < reset.seconds <= 86400
        if style == "draft-03":
            # As Envoy's filter writes them: the fewest remaining (3 of 5)
            # gives the numbers, and every limit its policy.
            assert headers == [
                ("x-ratelimit-limit", "5, 5;w=86400, 100;w=86400"),
                ("x-ratelimit-remaining", "3"),
                ("x-ratelimit-reset", str(reset.seconds)),
            ]
        else:
            t = -(-(reset.seconds * 1000 + reset.nanos // 1_000_000) // 1000)
            marketing_name, any_name = '"messaging.message_type_marketing.to_number"', '"messaging.to_number"'
            assert headers == [
                ("ratelimit-policy", f"{marketing_name};q=5;w=86400, {any_name};q=100;w=86400"),
                ("ratelimit", f"{marketing_name};r=3;t={t}, {any_name};r=99;t={t}"),
            ]
        # No limit among the statuses: no headers.
        reply = ask(pb, node, "messaging", [("unknown", "x")])
        assert list(reply.response_headers_to_add) == []
    finally:
        node.close()


def test_no_headers_unless_asked(pb, locker):
    reply = ask(pb, locker, "messaging", [("to_number", unique())])
    assert list(reply.response_headers_to_add) == []


PEERED = """domain: peered
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 10}
"""


def start_peered(rules):
    """Two lockers peered on loopback, each serving the RLS; a PUB port
    taken between its choice and the bind makes a locker exit, and then
    the pair is started again on other ports. Each starts with a new state
    file, a first run, so the pair owns the slot it starts in (a pair
    without one owns none of it), and a grace a loaded machine can meet."""
    for attempt in range(3):
        pubs = [f"tcp://127.0.0.1:{free_port()}" for _ in range(2)]
        nodes = []
        try:
            for i in range(2):
                state = str(rules / f"n{i}-{attempt}.state")
                peering = ["--peer-bind", pubs[i], "--node-id", f"n{i}", "--peer", pubs[1 - i]]
                peering += ["--state", state, "--peer-grace", "5"]
                nodes.append(Locker("--rls-config", str(rules), *peering))
            return nodes
        except AssertionError:
            for n in nodes:
                n.close()
    pytest.fail("a peered pair did not start in three tries")


def test_peered_lockers_never_exceed_a_descriptor_limit_between_them(pb, tmp_path):
    (tmp_path / "peered.yaml").write_text(PEERED)
    nodes = start_peered(tmp_path)
    try:
        for n in nodes:
            wait_serving(n.channel, "")  # not while it joins its peers
        user = unique()
        # One slot for the whole test: a day that ends within it would
        # let a second day's permits pass for an excess.
        peek = ask(pb, nodes[0], "peered", [("user", user), 0]).statuses[0]
        if peek.duration_until_reset.seconds < 60:
            pytest.skip("the day's slot ends within a minute")
        by_node = [0, 0]
        for i in range(40):
            n = i % 2
            if i % 8 == 7:
                # The ZeroMQ side asks the same limit and key.
                out = subprocess.run(
                    [LOCKER, "ask", "--connect", nodes[n].endpoint, "--limit", "peered.user", "--key", user],
                    capture_output=True,
                    timeout=DEADLINE,
                )
                assert out.returncode in (0, 1), out.stderr
                ok = out.returncode == 0
            else:
                reply = ask(pb, nodes[n], "peered", [("user", user)])
                ok = reply.overall_code == pb[0].RateLimitResponse.Code.Value("OK")
            by_node[n] += ok
        print("goes per locker", by_node)
        assert sum(by_node) <= 10, by_node
        assert all(by_node), f"both lockers let some go: {by_node}"
    finally:
        for n in nodes:
            n.close()


@pytest.mark.parametrize("unit,seconds", [("week", 604_800), ("month", 2_592_000), ("year", 31_536_000)])
def test_a_unit_longer_than_a_day_counts_as_envoys_fixed_window(pb, tmp_path, unit, seconds):
    """envoyproxy/ratelimit divides Unix time by 604,800 s, 30 days or 365
    days for these units: one fixed window each, its reset a multiple of
    that since the epoch."""
    (tmp_path / "long.yaml").write_text(
        f"domain: d\ndescriptors:\n  - key: a\n    rate_limit: {{unit: {unit}, requests_per_unit: 2}}\n"
    )
    node = Locker("--rls-config", str(tmp_path))
    try:
        wait_serving(node.channel, "")
        key = [("a", unique())]
        replies = [ask(pb, node, "d", key) for _ in range(3)]
        assert [codes(pb, r)[0] for r in replies] == ["OK", "OK", "OVER_LIMIT"]
        status = replies[0].statuses[0]
        assert status.current_limit.requests_per_unit == 2
        reset = status.duration_until_reset.seconds
        assert 0 < reset <= seconds
        off = (int(time.time()) + reset) % seconds
        assert min(off, seconds - off) <= 2, "the window ends at a multiple of the divider"
    finally:
        node.close()


def scrape(address):
    import urllib.request

    with urllib.request.urlopen(f"http://{address}/metrics", timeout=DEADLINE) as r:
        return r.read().decode()


def sample(text, series):
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


def test_metrics_count_calls_per_domain_and_code(pb):
    node = Locker("--rls-config", str(HERE / "config"), "--metrics-bind", "127.0.0.1:0")
    try:
        wait_serving(node.channel, "")
        wait_log(node, "metrics and health over http")
        metrics = next(re.search(r"address=(\S+)", l).group(1) for l in node.log if "metrics and health" in l)
        blocked = [("remote_address", "50.0.0.5")]
        for _ in range(3):
            ask(pb, node, "edge_proxy_per_ip", [("remote_address", unique())])
        ask(pb, node, "edge_proxy_per_ip", blocked)
        ask(pb, node, "someone-elses", [("a", "b")])
        with pytest.raises(grpc.RpcError):
            ask(pb, node, "messaging", [("", "x")])
        want = {
            'domain="edge_proxy_per_ip",code="ok"': 3,
            'domain="edge_proxy_per_ip",code="over_limit"': 1,
            'domain="(unconfigured)",code="ok"': 1,
            'domain="messaging",code="error"': 1,
            'domain="messaging",code="ok"': 0,
        }
        # The loop hands the metrics thread a snapshot every quarter second:
        # scrape until it holds these calls.
        end = time.monotonic() + DEADLINE
        while True:
            text = scrape(metrics)
            got = {k: sample(text, f"locker_rls_requests_total{{{k}}}") for k in want}
            if got == want or time.monotonic() > end:
                break
        assert got == want, text
        assert 'domain="someone-elses"' not in text, "an unconfigured domain has no series of its own"
    finally:
        node.close()


def make_certificates(folder):
    """A CA, a server certificate for 127.0.0.1 and a client certificate,
    both issued by the CA, made with the openssl command line."""
    assert shutil.which("openssl"), "needs the openssl command line (.ci/run installs it)"

    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder, timeout=DEADLINE)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=test ca")
    for name, ext in [("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")]:
        run("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        (folder / f"{name}.ext").write_text(ext + "\n")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext")
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".pem", ".key")}


@pytest.mark.parametrize("client_ca", [False, True])
def test_tls_with_optional_client_certificates(pb, tmp_path, client_ca):
    files = make_certificates(tmp_path)
    args = ["--rls-tls-cert", str(tmp_path / "server.pem"), "--rls-tls-key", str(tmp_path / "server.key")]
    if client_ca:
        args += ["--rls-tls-client-ca", str(tmp_path / "ca.pem")]
    node = Locker("--rls-config", str(HERE / "config" / "example2.yaml"), *args)
    try:
        node.channel.close()
        mine = (files["client.key"], files["client.pem"]) if client_ca else (None, None)
        node.channel = grpc.secure_channel(node.address, grpc.ssl_channel_credentials(files["ca.pem"], *mine))
        wait_serving(node.channel, "")
        assert ask(pb, node, "messaging", [("to_number", unique())], hits_addend=3).statuses[0].limit_remaining == 97
        # Plain HTTP/2 is not served.
        plain = grpc.insecure_channel(node.address)
        with pytest.raises(grpc.RpcError):
            pb[1].RateLimitServiceStub(plain).ShouldRateLimit(pb[0].RateLimitRequest(domain="d"), timeout=2)
        plain.close()
        if client_ca:
            # Without a client certificate the handshake fails.
            bare = grpc.secure_channel(node.address, grpc.ssl_channel_credentials(files["ca.pem"]))
            with pytest.raises(grpc.RpcError) as e:
                pb[1].RateLimitServiceStub(bare).ShouldRateLimit(pb[0].RateLimitRequest(domain="d"), timeout=2)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE
            bare.close()
    finally:
        node.close()
