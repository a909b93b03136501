"""The rendered pods' command lines, and the image's, run as local processes.

Each pod's command line is the rendered StatefulSet's command and
arguments with the pod's name put in for `$(POD_NAME)`, as the kubelet
does, and only what a cluster would supply moved to this machine
(`pod_command`): the listeners on free ports of 127.0.0.1, each member's
DNS name (`locker-N.locker-peers`) in the ConfigMap's files resolved to
127.0.0.1 and that member's peer port (the id it is listed by,
`locker-N@`, kept), and each volume (ConfigMaps and Secrets laid out as
the kubelet mounts them, the claim an empty folder) in a folder of the
test. Every other flag is kept.

- The trio joins and serves; clients ask each member without pause (the
  plain form, `let me go`, which the default limit of the rendered files
  answers: 100 per 1 s slot); the members are restarted one at a time,
  highest ordinal first, as a rolling update does (SIGTERM, wait for the
  exit, the same command line, wait for `/health` to say serving); and no
  slot may hold more go than the limit. A go counts in a slot only when
  its ask and its answer both fall inside it, since slots are wall-clock
  slots aligned to the epoch. With the peers taken out of the files, the
  same count must see slots over the limit.
- Each member of the trio hears every peer under the id it lists it by,
  and refuses nothing; with a member listed under another id than it goes
  by, the others refuse its messages and say so.
- A member is added and removed as docs/operations.md says, under load.
- The trio with every optional component joins over CURVE and serves.
- The pod's reload container: its script, run with `sh` beside the
  locker, sends SIGHUP when the kubelet replaces the locker's file with
  one of other limits, and not when another member's file changes.
- The image: the Dockerfile's ENTRYPOINT with the config file its COPY
  installs, the file's endpoints moved to loopback, starts, serves and
  answers go, and its HEALTHCHECK command says so.

Nothing sleeps to wait for readiness: each wait polls with a deadline.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any, Dict, List, Tuple

import pytest
import yaml
import zmq

from test_manifests import LOCKER, ROOT, Docs, config_files, container, named_peer, one, pod_args, pod_config, reload_container, render

sys.path.insert(0, str(ROOT / "tests"))
from free_port import free_port  # noqa: E402

DEADLINE = 15.0  # seconds any one wait may take before the test fails


class Process:
    """A locker started from a command line; ready once it printed
    `listening on ...` (it does once bound) and its /health says serving."""

    def __init__(self, argv: List[str], metrics: str, log: Path) -> None:
        self.argv, self.metrics, self.log = argv, metrics, log
        self.start()

    def start(self) -> None:
        self.err = open(self.log, "a")
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.err, text=True)
        lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in self.proc.stdout], daemon=True).start()
        try:
            line = lines.get(timeout=DEADLINE)
        except queue.Empty:
            pytest.fail(f"no `listening on` within {DEADLINE} s: {self.log.read_text()}")
        assert line.startswith("listening on "), f"{line!r}: {self.log.read_text()}"

    def health(self) -> str:
        try:
            with urllib.request.urlopen(f"http://{self.metrics}/health", timeout=2) as r:
                return r.read().decode().split("\n")[0]
        except urllib.error.HTTPError as e:
            return e.read().decode().split("\n")[0]
        except OSError as e:
            return f"no answer: {e}"

    def wait_serving(self) -> None:
        end = time.monotonic() + DEADLINE
        while (state := self.health()) != "serving":
            assert time.monotonic() < end, f"{self.argv}: /health says {state!r} after {DEADLINE} s: {self.log.read_text()}"
            time.sleep(0.02)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(DEADLINE)
        finally:
            self.err.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


def rewrite_endpoints(argv: List[str], moves: Dict[str, str]) -> List[str]:
    """`argv` with each flag of `moves` given the new value; every other
    argument as it was."""
    out = list(argv)
    for i, arg in enumerate(argv[:-1]):
        if arg in moves:
            out[i + 1] = moves[arg]
    return out


def kubelet_volume(folder: Path, files: Dict[str, bytes], mode: int = 0o644) -> None:
    """`files` laid out as the kubelet mounts a ConfigMap or Secret: the
    data in a dated folder, `..data` linking to it, each name linking
    through `..data` (so an update replaces them all at once)."""
    dated = folder / "..2026_01_01_00_00_00.000000000"
    dated.mkdir(parents=True)
    for name, data in files.items():
        (dated / name).write_bytes(data)
        (dated / name).chmod(mode)
    (folder / "..data").symlink_to(dated.name)
    for name in files:
        (folder / name).symlink_to(f"..data/{name}")


def kubelet_update(folder: Path, files: Dict[str, bytes]) -> None:
    """A mounted ConfigMap updated as the kubelet updates it: the new data
    in a new dated folder, a link to it renamed over `..data` at once, a
    link for each new name, the old folder removed."""
    old = (folder / "..data").readlink()
    dated = folder / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.time_ns() % 10**9:09d}"
    dated.mkdir()
    for name, data in files.items():
        (dated / name).write_bytes(data)
    (folder / "..data_tmp").symlink_to(dated.name)
    (folder / "..data_tmp").rename(folder / "..data")
    for name in files:
        if not (folder / name).is_symlink():
            (folder / name).symlink_to(f"..data/{name}")
    for stale in (folder / old).iterdir():
        stale.unlink()
    (folder / old).rmdir()


def mount_volumes(docs: Docs, c: Dict[str, Any], pod: str, tmp: Path, ports: Dict[str, Dict[str, int]], secrets: Dict[str, Dict[str, bytes]] | None = None) -> Dict[str, Path]:
    """Each volume container `c` mounts, in a folder of `tmp` by mount path:
    a ConfigMap's or Secret's files as the kubelet lays them out (the
    ConfigMaps' DNS names resolved as `resolve` does), a claim an empty
    folder. A pod's volume is laid out once, so two containers that mount
    it share its folder, as they do in the pod."""
    statefulset = one(docs, "StatefulSet")
    service = statefulset["spec"]["serviceName"]
    volumes = {v["name"]: v for v in statefulset["spec"]["template"]["spec"].get("volumes", [])}
    mounted: Dict[str, Path] = {}
    for mount in c.get("volumeMounts", []):
        folder = tmp / pod / "mounts" / mount["name"]
        volume = volumes.get(mount["name"])
        if folder.exists():
            pass
        elif volume is None:  # a volumeClaimTemplate: the pod's own volume
            folder.mkdir(parents=True)
        elif "configMap" in volume:
            data = one(docs, "ConfigMap", volume["configMap"]["name"]).get("data", {})
            kubelet_volume(folder, {name: resolve(text, pod, service, ports).encode() for name, text in data.items()})
        else:
            secret = volume["secret"]
            kubelet_volume(folder, (secrets or {})[secret["secretName"]], secret.get("defaultMode", 0o644))
        mounted[mount["mountPath"]] = folder
    return mounted


def move_paths(args: List[str], mounted: Dict[str, Path]) -> List[str]:
    """`args` with every path under a mount path moved to its folder."""
    out = []
    for arg in args:
        for path, folder in sorted(mounted.items(), key=lambda m: -len(m[0])):
            if arg == path or arg.startswith(path + "/"):
                arg = str(folder) + arg[len(path):]
                break
        out.append(arg)
    return out


def pod_command(docs: Docs, pod: str, tmp: Path, ports: Dict[str, Dict[str, int]], secrets: Dict[str, Dict[str, bytes]] | None = None) -> Tuple[List[str], Dict[str, str]]:
    """Pod `pod`'s command line as a local process, and its addresses.

    The container's command and arguments with `$(POD_NAME)` expanded; each
    volume mounted in a folder of `tmp` (`mount_volumes`) and every argument
    under a mount path moved there; the listeners (`--bind`,
    `--metrics-bind`, `--rls-bind`, the files' `peer_bind`) on pod `pod`'s
    loopback ports, and each member's DNS name in the files resolved to
    127.0.0.1 and that member's port. Every other flag is kept."""
    args = move_paths(pod_args(docs, pod), mount_volumes(docs, container(docs), pod, tmp, ports, secrets))
    addresses = {
        "--bind": f"tcp://127.0.0.1:{ports[pod]['zmq']}",
        "--metrics-bind": f"127.0.0.1:{ports[pod]['metrics']}",
        "--rls-bind": f"127.0.0.1:{ports[pod]['rls']}",
    }
    command = container(docs)["command"]
    assert command[0] == "/usr/local/bin/locker", command
    return [LOCKER, *command[1:], *rewrite_endpoints(args, addresses)], addresses


def reload_command(docs: Docs, pod: str, tmp: Path, ports: Dict[str, Dict[str, int]]) -> Tuple[List[str], Dict[str, str]]:
    """Pod `pod`'s reload container as a local process: its command and
    arguments with `$(POD_NAME)` expanded and the paths under its mounts
    moved to the pod's folders (`mount_volumes`: the config volume is the
    locker's folder), and its environment (`POD_NAME` the pod's name)."""
    c = reload_container(docs)
    assert c is not None, "no reload container"
    mounted = mount_volumes(docs, c, pod, tmp, ports)
    env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
    env.update({e["name"]: pod for e in c.get("env", []) if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name"})
    return move_paths([*c["command"], *pod_args(docs, pod, c)], mounted), env


def resolve(text: str, pod: str, service: str, ports: Dict[str, Dict[str, int]]) -> str:
    """A config file with pod `pod`'s peer listener on its loopback port and
    every member's DNS name resolved to loopback and its port. The id a
    peer is listed by (`locker-1@tcp://locker-1.locker-peers:7778`) stays
    before its endpoint (`locker-1@tcp://127.0.0.1:PORT`), so the members
    run with their peers listed by id, as in the cluster."""
    ids = re.findall(r'"([^"\s@]+)@tcp://', text)
    text = re.sub(r'^peer_bind = "tcp://\*:\d+"', f'peer_bind = "tcp://127.0.0.1:{ports[pod]["peer"]}"', text, flags=re.M)
    for other in ports:
        text = re.sub(rf"tcp://{re.escape(other)}\.{re.escape(service)}:\d+", f"tcp://127.0.0.1:{ports[other]['peer']}", text)
    assert f".{service}:" not in text, text
    assert re.findall(r'"([^"\s@]+)@tcp://', text) == ids, text
    return text


def group_ports(pods: List[str]) -> Dict[str, Dict[str, int]]:
    return {pod: {"zmq": free_port(), "peer": free_port(), "metrics": free_port(), "rls": free_port()} for pod in pods}


def trio_command_lines(tmp: Path, unpeered: bool = False, misnamed: bool = False) -> Tuple[List[List[str]], List[Dict[str, str]], int]:
    """Each pod's command line, on loopback, with its ZeroMQ and metrics
    addresses; and the default limit's max_requests per slot of 1 s.
    `unpeered` breaks the files on purpose: each member lists no peer;
    `misnamed` too: the others list locker-2 under the id locker-9."""
    docs = render("overlays/trio")
    data = one(docs, "ConfigMap", "locker-config")["data"]
    for name in data:
        if unpeered:
            data[name] = re.sub(r"^peers = .*$", "peers = []", data[name], flags=re.M)
        if misnamed:
            data[name] = data[name].replace('"locker-2@tcp://', '"locker-9@tcp://')
    statefulset = one(docs, "StatefulSet")
    pods = [f"{statefulset['metadata']['name']}-{n}" for n in range(statefulset["spec"]["replicas"])]
    ports = group_ports(pods)
    lines, addresses = [], []
    for pod in pods:
        argv, at = pod_command(docs, pod, tmp, ports)
        lines.append(argv)
        addresses.append({"zmq": at["--bind"], "metrics": at["--metrics-bind"]})
    limits = pod_config(docs, pods[0])["limits"]
    default = next(l for l in limits if l["name"] == "default")
    assert default["in_seconds"] == 1.0, default
    return lines, addresses, default["max_requests"]


class Asker(threading.Thread):
    """Asks one locker in the plain form without pause, recording (ask
    time, answer time, reply) by the wall clock; a request unanswered
    within a second (the locker is down) is dropped with its socket."""

    def __init__(self, ctx: zmq.Context, endpoint: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.ctx, self.endpoint, self.stop = ctx, endpoint, stop
        self.answers: List[Tuple[float, float, bytes]] = []

    def connect(self) -> zmq.Socket:
        s = self.ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(self.endpoint)
        return s

    def run(self) -> None:
        s = self.connect()
        while not self.stop.is_set():
            asked = time.time()
            s.send(b"let me go")
            if s.poll(1000):
                reply = s.recv()
                self.answers.append((asked, time.time(), reply))
            else:
                s.close()
                s = self.connect()
        s.close()


def go_per_slot(answers: List[Tuple[float, float, bytes]], slot: float) -> Dict[int, int]:
    counts: Dict[int, int] = {}
    for asked, answered, reply in answers:
        n = math.floor(asked / slot)
        if reply == b"go" and n == math.floor(answered / slot):
            counts[n] = counts.get(n, 0) + 1
    return counts


def rolling_restart(tmp_path: Path, unpeered: bool = False) -> Tuple[Dict[int, int], int, List[int], int]:
    """Runs the trio through a rolling restart under load: go per slot, the
    limit, go answered by each member after its restart, answers in all."""
    lines, addresses, limit = trio_command_lines(tmp_path, unpeered)
    members: List[Process] = []
    ctx = zmq.Context()
    stop = threading.Event()
    askers: List[Asker] = []
    try:
        for n, argv in enumerate(lines):
            members.append(Process(argv, addresses[n]["metrics"], tmp_path / f"locker-{n}.log"))
        for m in members:
            m.wait_serving()
        for a in addresses:
            for _ in range(2):
                askers.append(Asker(ctx, a["zmq"], stop))
        for a in askers:
            a.start()
        restarted_at = {}
        # As a StatefulSet's RollingUpdate: highest ordinal first, the next
        # only once the one before is ready again.
        for n in reversed(range(len(members))):
            assert members[n].stop() == 0, members[n].log.read_text()
            members[n].start()
            members[n].wait_serving()
            restarted_at[n] = time.time()
        # Asked on after the last restart, so every member serves again.
        end = time.monotonic() + DEADLINE
        while time.monotonic() < end:
            after = [sum(1 for asked, _, r in askers[2 * n].answers + askers[2 * n + 1].answers if r == b"go" and asked > restarted_at[n]) for n in range(len(members))]
            if all(after) and time.time() > restarted_at[0] + 2.0:
                break
            time.sleep(0.05)
        stop.set()
        for a in askers:
            a.join(DEADLINE)
    finally:
        stop.set()
        for m in members:
            m.kill()
        ctx.term()

    answers = [x for a in askers for x in a.answers]
    return go_per_slot(answers, 1.0), limit, after, len(answers)


def test_the_rendered_trio_joins_serves_and_survives_a_rolling_restart(tmp_path):
    counts, limit, after, answers = rolling_restart(tmp_path)
    over = {slot: go for slot, go in counts.items() if go > limit}
    assert not over, f"slots over the limit of {limit}: {over}"
    assert sum(counts.values()) > 0 and answers > 100, f"{answers} answers, {sum(counts.values())} go"
    assert all(after), f"go after each member's restart: {after}"
    assert max(counts.values()) == limit or sum(counts.values()) > limit, f"the trio served little: {counts}"


def test_the_count_sees_members_that_do_not_share(tmp_path):
    """The same run with every member's peers taken out of its file: each
    grants the whole limit, and the count per slot must show it."""
    counts, limit, _, _ = rolling_restart(tmp_path, unpeered=True)
    assert max(counts.values()) > limit, f"no slot over {limit}: {counts}"


def stats(zmq_at: str) -> Dict[str, Any]:
    """A member's `locker stats --json`."""
    out = subprocess.run([LOCKER, "stats", "--json", "--connect", zmq_at], capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def heard_by_id(s: Dict[str, Any], pod: str, listed: int) -> List[str]:
    """What a member's stats show amiss with ids: it goes by `pod`, hears
    each of its `listed` peers, live, under the id it lists it by (the
    id before `@` in the peer's `endpoint` is its `node`), and has refused
    nothing from its peers (`peer_rejected`, absent when 0)."""
    wrong = []
    if s.get("node") != pod:
        wrong.append(f"goes by {s.get('node')!r}, not {pod!r}")
    peers = s.get("peers", [])
    if len(peers) != listed:
        wrong.append(f"{len(peers)} peers heard of the {listed} listed: {peers}")
    for p in peers:
        if not p.get("live"):
            wrong.append(f"{p.get('endpoint')} not live")
        if named_peer(p.get("endpoint", ""))[0] != p.get("node"):
            wrong.append(f"{p.get('endpoint')} heard as {p.get('node')!r}")
    if s.get("peer_rejected", 0):
        wrong.append(f"{s['peer_rejected']} messages refused from peers")
    return wrong


def test_each_member_hears_its_peers_under_the_ids_it_lists(tmp_path):
    """The rendered trio: each member goes by its pod's name and hears both
    peers, live, under the ids its file lists them by, refusing nothing."""
    lines, addresses, _ = trio_command_lines(tmp_path)
    members = []
    try:
        for n, argv in enumerate(lines):
            members.append(Process(argv, addresses[n]["metrics"], tmp_path / f"locker-{n}.log"))
        for n, member in enumerate(members):
            member.wait_serving()
            end = time.monotonic() + DEADLINE
            while wrong := heard_by_id(stats(addresses[n]["zmq"]), f"locker-{n}", len(members) - 1):
                assert time.monotonic() < end, f"locker-{n}: {wrong}: {member.log.read_text()}"
                time.sleep(0.05)
    finally:
        for m in members:
            m.kill()


def test_a_member_listed_under_another_id_is_refused(tmp_path):
    """The same trio with locker-2 listed as locker-9 in the others' files:
    they refuse its messages (`peer_rejected`), say so in the log, and do
    not hear it; so the check above can fail."""
    lines, addresses, _ = trio_command_lines(tmp_path, misnamed=True)
    members = []
    try:
        for n, argv in enumerate(lines):
            members.append(Process(argv, addresses[n]["metrics"], tmp_path / f"locker-{n}.log"))
        end = time.monotonic() + DEADLINE
        # A refusal may come before locker-1's first heartbeat is heard, and
        # the reply names no peers until one is: wait for both.
        while not ((s := stats(addresses[0]["zmq"])).get("peer_rejected", 0) and s.get("peers")):
            assert time.monotonic() < end, f"locker-0 refuses nothing or hears no one: {s}: {members[0].log.read_text()}"
            time.sleep(0.05)
        assert [p["node"] for p in s["peers"]] == ["locker-1"], s
        assert heard_by_id(s, "locker-0", 2) != [], s
        log = members[0].log.read_text()
        assert 'a message sent as "locker-2", not as "locker-9", the id the peer list names' in log, log
    finally:
        for m in members:
            m.kill()


def test_the_images_entrypoint_starts_serves_and_is_healthy(tmp_path):
    dockerfile = (ROOT / "Dockerfile").read_text()
    entry = yaml.safe_load(re.search(r"^ENTRYPOINT (\[.*\])$", dockerfile, re.M).group(1))
    health = yaml.safe_load(re.search(r"^\s+CMD (\[.*\])$", dockerfile, re.M).group(1))
    copies = dict(reversed(m.groups()) for m in re.finditer(r"^COPY (?!--)(\S+) (\S+)$", dockerfile, re.M))
    assert entry[0] == health[0] == "/usr/local/bin/locker", (entry, health)
    config_at = entry[entry.index("--config") + 1]
    text = (ROOT / copies[config_at]).read_text()
    bind = tomllib.loads(text)["bind"]
    metrics = tomllib.loads(text)["metrics_bind"]
    zmq_at, metrics_at = f"tcp://127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    # The file's listeners moved to loopback; nothing else changed.
    text = text.replace(f'"{bind}"', f'"{zmq_at}"').replace(f'"{metrics}"', f'"{metrics_at}"')
    (tmp_path / "locker.toml").write_text(text)
    argv = [LOCKER, *[str(tmp_path / "locker.toml") if a == config_at else a for a in entry[1:]]]
    locker = Process(argv, metrics_at, tmp_path / "locker.log")
    ctx = zmq.Context()
    try:
        locker.wait_serving()
        probe = [LOCKER, *[a.replace(metrics.replace("0.0.0.0", "127.0.0.1"), metrics_at) for a in health[1:]]]
        assert metrics_at in probe, probe
        assert subprocess.run(probe, capture_output=True, timeout=DEADLINE).returncode == 0, probe
        s = ctx.socket(zmq.REQ)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(zmq_at)
        s.send(b"let me go")
        assert s.poll(DEADLINE * 1000), "no answer"
        assert s.recv() == b"go"
        s.close()
        assert locker.stop() == 0, locker.log.read_text()
    finally:
        locker.kill()
        ctx.term()


def test_adding_and_removing_a_member_as_operations_md_says_keeps_every_slot_within_the_limit(tmp_path):
    """docs/operations.md, "On Kubernetes": locker-3 is added by giving it
    a file that lists the three and starting it (it stays unready, naming
    another set, while the three serve on), then adding it to the three's
    files, replaced whole as the kubelet replaces a ConfigMap's files, and
    sending each SIGHUP; it is removed by stopping it and taking it out of
    the files, with SIGHUP again. Asked throughout: no slot over the
    limit, and each member serving at the end of each step."""
    docs = render("overlays/trio")
    statefulset = one(docs, "StatefulSet")
    name, service = statefulset["metadata"]["name"], statefulset["spec"]["serviceName"]
    pods = [f"{name}-{n}" for n in range(4)]
    ports = {pod: {"zmq": free_port(), "peer": free_port(), "metrics": free_port()} for pod in pods}
    rendered = config_files(docs)
    template = rendered[str(PurePosixPath(pod_args(docs, pods[0])[pod_args(docs, pods[0]).index("--config") + 1]))]
    limit = next(l for l in tomllib.loads(template)["limits"] if l["name"] == "default")["max_requests"]
    config_dir = tmp_path / "etc-locker"
    config_dir.mkdir()

    def write_file(pod: str, listed: List[str]) -> Path:
        """pod's file as the overlay would hold it (the rendered one's limits,
        `peers` naming `listed` by id and DNS name, as
        `locker-3@tcp://locker-3.locker-peers:7778`), resolved to loopback
        (`resolve`), replaced whole."""
        text = re.sub(r"^peers = .*$", "peers = [" + ", ".join(f'"{p}@tcp://{p}.{service}:7778"' for p in listed) + "]", template, flags=re.M)
        text = resolve(text, pod, service, ports)
        path = config_dir / f"{pod}.toml"
        fresh = config_dir / f".{pod}.toml.new"
        fresh.write_text(text)
        fresh.rename(path)
        return path

    def command(pod: str) -> List[str]:
        moves = {
            "--config": str(write_file(pod, [p for p in pods[:3] if p != pod])),
            "--state": str(tmp_path / pod / "state.log"),
            "--bind": f"tcp://127.0.0.1:{ports[pod]['zmq']}",
            "--metrics-bind": f"127.0.0.1:{ports[pod]['metrics']}",
        }
        return [LOCKER, *container(docs)["command"][1:], *rewrite_endpoints(pod_args(docs, pod), moves)]

    def reload(member: Process) -> None:
        member.proc.send_signal(signal.SIGHUP)

    def wait_state(member: Process, want: str) -> None:
        end = time.monotonic() + DEADLINE
        while (state := member.health()) != want:
            assert time.monotonic() < end, f"/health says {state!r}, not {want!r}: {member.log.read_text()}"
            time.sleep(0.02)

    members: Dict[str, Process] = {}
    ctx = zmq.Context()
    stop = threading.Event()
    askers: Dict[str, Asker] = {}
    try:
        for pod in pods[:3]:
            members[pod] = Process(command(pod), f"127.0.0.1:{ports[pod]['metrics']}", tmp_path / f"{pod}.log")
        for pod in pods[:3]:
            members[pod].wait_serving()
            askers[pod] = Asker(ctx, f"tcp://127.0.0.1:{ports[pod]['zmq']}", stop)
            askers[pod].start()
        # 1. locker-3 starts listing the three; it names another set than
        #    theirs and is not ready, while they serve on.
        new = pods[3]
        members[new] = Process(command(new), f"127.0.0.1:{ports[new]['metrics']}", tmp_path / f"{new}.log")
        wait_state(members[new], "member-set-mismatch")
        assert [members[p].health() for p in pods[:3]] == ["serving"] * 3
        # 2. Each of the three lists it too and reloads.
        for pod in pods[:3]:
            write_file(pod, [p for p in pods if p != pod])
            reload(members[pod])
        # 3. All four serve; locker-3's clients get go.
        for pod in pods:
            members[pod].wait_serving()
        stop_new = threading.Event()
        askers[new] = Asker(ctx, f"tcp://127.0.0.1:{ports[new]['zmq']}", stop_new)
        askers[new].start()
        grown = time.time()
        end = time.monotonic() + DEADLINE
        while not any(r == b"go" and t > grown for t, _, r in askers[new].answers):
            assert time.monotonic() < end, "locker-3 never answered go"
            time.sleep(0.05)
        # Removing it: stopped first, then out of the three's files.
        stop_new.set()
        askers[new].join(DEADLINE)
        assert members[new].stop() == 0
        for pod in pods[:3]:
            write_file(pod, [p for p in pods[:3] if p != pod])
            reload(members[pod])
        for pod in pods[:3]:
            members[pod].wait_serving()
        shrunk = time.time()
        end = time.monotonic() + DEADLINE
        while not all(any(r == b"go" and t > shrunk + 1.0 for t, _, r in askers[p].answers) for p in pods[:3]):
            assert time.monotonic() < end, "the three do not all answer go after the removal"
            time.sleep(0.05)
    finally:
        stop.set()
        for a in askers.values():
            a.stop.set()
            a.join(DEADLINE)
        for m in members.values():
            m.kill()
        ctx.term()

    answers = [x for a in askers.values() for x in a.answers]
    counts = go_per_slot(answers, 1.0)
    over = {slot: go for slot, go in counts.items() if go > limit}
    assert not over, f"slots over the limit of {limit}: {over}"


def keygen(folder: Path, name: str) -> Tuple[bytes, bytes]:
    """A CURVE pair from `locker keygen`: (secret key file, public key file)."""
    subprocess.run([LOCKER, "keygen", "--out", str(folder / name)], check=True, capture_output=True, timeout=30)
    return (folder / f"{name}.key").read_bytes(), (folder / f"{name}.pub").read_bytes()


def peers_live(metrics: str) -> float:
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=2) as r:
        scrape = r.read().decode()
    found = re.search(r"^locker_peers_live (\S+)$", scrape, re.M)
    return float(found.group(1)) if found else -1


def z85(key_file: bytes) -> bytes:
    """The key of a `locker keygen` file: its last line (comments before)."""
    return key_file.strip().splitlines()[-1]


def test_every_component_runs_on_the_rendered_command_lines(tmp_path):
    """The trio with CURVE, the lease secret and Envoy's rate-limit service
    (tests/all-components), each pod's Secrets and ConfigMaps laid out as
    the kubelet mounts them: the members join over CURVE, answer a client
    whose key the clients Secret holds and not a plain one, and serve the
    rate-limit service's health as SERVING."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    import grpc

    docs = render("tests/all-components")
    keys = tmp_path / "keys"
    keys.mkdir()
    server_key, server_pub = keygen(keys, "server")
    alice_key, alice_pub = keygen(keys, "alice")
    secrets = {
        "locker-curve": {"server.key": server_key},
        "locker-curve-clients": {"alice.pub": alice_pub},
        "locker-lease-secret": {"lease.secret": os.urandom(32)},
    }
    statefulset = one(docs, "StatefulSet")
    pods = [f"{statefulset['metadata']['name']}-{n}" for n in range(statefulset["spec"]["replicas"])]
    ports = group_ports(pods)
    members, ctx = [], zmq.Context()
    try:
        for pod in pods:
            argv, at = pod_command(docs, pod, tmp_path, ports, secrets)
            members.append((Process(argv, at["--metrics-bind"], tmp_path / f"{pod}.log"), at))
        for member, at in members:
            member.wait_serving()
            # Its two peers heard over CURVE (with the group's one pair).
            end = time.monotonic() + DEADLINE
            while (live := peers_live(at["--metrics-bind"])) != len(pods) - 1:
                assert time.monotonic() < end, f"{live} peers live: {member.log.read_text()}"
                time.sleep(0.05)
            log = member.log.read_text()
            assert "serving a semaphore without --lease-secret" not in log, log
            # A client with its key in the clients Secret is answered ...
            alice = ctx.socket(zmq.REQ)
            alice.setsockopt(zmq.LINGER, 0)
            alice.curve_serverkey = z85(server_pub)
            alice.curve_publickey = z85(alice_pub)
            alice.curve_secretkey = z85(alice_key)
            alice.connect(at["--bind"])
            alice.send(b"let me go")
            assert alice.poll(DEADLINE * 1000), f"alice is not answered: {log}"
            assert alice.recv() in (b"go", b"sorry")
            alice.close()
            # ... a plain one is not.
            plain = ctx.socket(zmq.REQ)
            plain.setsockopt(zmq.LINGER, 0)
            plain.connect(at["--bind"])
            plain.send(b"let me go")
            assert not plain.poll(300), "a plain client is answered by a CURVE locker"
            plain.close()
            # Envoy's cluster would find the rate-limit service serving.
            with grpc.insecure_channel(at["--rls-bind"]) as channel:
                stub = health_pb2_grpc.HealthStub(channel)
                reply = stub.Check(health_pb2.HealthCheckRequest(service="envoy.service.ratelimit.v3.RateLimitService"), timeout=DEADLINE)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        for member, _ in members:
            member.kill()
        ctx.term()


def test_the_reload_container_sends_sighup_when_the_lockers_file_changes(tmp_path):
    """The lone pod's two containers as local processes: the locker on its
    rendered command line, and beside it the reload container's command
    (`sh` on reload.sh from the ConfigMap locker-reload), both on the one
    folder that stands in for the config volume. The locker runs under a
    name of its own (a link to the binary), given to the script as
    RELOAD_PROCESS, so that no other locker on the machine is signalled;
    the script polls every 0.1 s instead of the rendered 5 s.

    The kubelet adds another member's file (the locker's unchanged): no
    SIGHUP. It then replaces the locker's file with one whose semaphore
    `db` holds 6 instead of 4: the 4 leases held stay, and 2 more are
    granted, then none. One SIGHUP in all, one reload in the locker's log."""
    docs = render("overlays/lone")
    pod = "locker-0"
    ports = group_ports([pod])
    argv, at = pod_command(docs, pod, tmp_path, ports)
    name = f"locker{os.urandom(4).hex()}"  # 14 characters: pidof sees it whole
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / name).symlink_to(LOCKER)
    argv[0] = str(tmp_path / "bin" / name)
    config = Path(argv[argv.index("--config") + 1])
    assert (config.parent / "..data").is_symlink(), config
    capacity = next(l for l in tomllib.loads(config.read_text())["limits"] if l["name"] == "db")["max_requests"]

    reload_argv, env = reload_command(docs, pod, tmp_path, ports)
    assert reload_argv[0] == "/bin/sh" and str(config) in reload_argv, reload_argv
    assert env["RELOAD_EVERY"] == "5" and "RELOAD_PROCESS" not in env, env
    env.update(RELOAD_EVERY="0.1", RELOAD_PROCESS=name, PATH=os.environ["PATH"])

    def acquire() -> bool:
        out = subprocess.run([LOCKER, "lease", "acquire", "--limit", "db", "--ttl", "60s", "--connect", at["--bind"]], capture_output=True, text=True, timeout=DEADLINE)
        assert out.returncode in (0, 1), out.stderr
        return out.returncode == 0

    locker = Process(argv, at["--metrics-bind"], tmp_path / "locker.log")
    reload = subprocess.Popen(reload_argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: "queue.Queue[str]" = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(l) for l in reload.stdout], daemon=True)
    reader.start()
    said: List[str] = []
    try:
        locker.wait_serving()
        said.append(lines.get(timeout=DEADLINE))
        assert said[0].startswith(f"watching {config} every 0.1 s"), said
        assert [acquire() for _ in range(capacity + 1)] == [True] * capacity + [False]

        # Another member's file arrives; the locker's stays as it was.
        text = config.read_text()
        kubelet_update(config.parent, {config.name: text.encode(), "locker-1.toml": text.encode()})
        time.sleep(1.0)  # ten polls, each of which must see no change
        assert lines.empty(), lines.get()
        assert not acquire()

        # The locker's file with db at capacity + 2.
        head, tail = text.split('name = "db"')
        changed = head + 'name = "db"' + re.sub(r"^max_requests = \d+$", f"max_requests = {capacity + 2}", tail, count=1, flags=re.M)
        assert next(l for l in tomllib.loads(changed)["limits"] if l["name"] == "db")["max_requests"] == capacity + 2
        kubelet_update(config.parent, {config.name: changed.encode(), "locker-1.toml": text.encode()})
        said.append(lines.get(timeout=DEADLINE))
        assert said[1] == f"changed: SIGHUP to {name} serve (pid {locker.proc.pid})\n", said
        end = time.monotonic() + DEADLINE
        while not acquire():
            assert time.monotonic() < end, f"db still holds {capacity} after the reload: {locker.log.read_text()}"
            time.sleep(0.05)
        assert [acquire(), acquire()] == [True, False]
        assert locker.health() == "serving"
        log = locker.log.read_text()
        assert log.count("config reloaded") == 1, log

        reload.send_signal(signal.SIGTERM)
        assert reload.wait(DEADLINE) == 0
        reader.join(DEADLINE)
        assert lines.empty(), f"said more: {lines.get()!r}"
        assert locker.stop() == 0, locker.log.read_text()
    finally:
        if reload.poll() is None:
            reload.kill()
            reload.wait()
        locker.kill()
