"""The Kubernetes manifests, checked without a cluster.

Each overlay is rendered with `kubectl kustomize` (the kustomize built into
kubectl), every document is validated against the Kubernetes OpenAPI
schemas of a pinned version (the `kubernetes-validate` package, offline),
and the rendered trio is read for what the locker needs of its members:
ids from pod names, every other member listed as a peer under the id it
goes by, the state file on a volume of its own, the disruption budget,
the probes, the security context, the config where `--config` points,
the reload container that signals a changed file. Every invariant is also
checked to fail on a copy broken on purpose (`test_each_invariant_fails_
on_a_copy_broken_on_purpose`), so none passes by reading nothing.

Run with `python3 -m pytest deploy/kubernetes/tests -q`; LOCKER_BIN names
the binary (target/release/locker by default), whose `serve --help` and
`check-config` vet the flags and files the manifests use.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import tomllib
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Dict, List, Tuple

import pytest
import yaml

HERE = Path(__file__).resolve().parent
KUBE = HERE.parent
ROOT = KUBE.parent.parent
LOCKER = os.environ.get("LOCKER_BIN", str(ROOT / "target" / "release" / "locker"))

#: The Kubernetes version whose schemas the documents must satisfy: the
#: client Debian ships (kubectl 1.32), and a release clusters still run.
KUBERNETES_VERSION = "1.32.0"

#: What is rendered and validated: the two overlays, and the trio with
#: every optional component (tests/all-components, as an overlay of your
#: own adds them).
OVERLAYS = ["overlays/lone", "overlays/trio", "tests/all-components"]

#: Kinds of the Prometheus Operator, whose schemas kubernetes-validate does
#: not bundle (they come with the operator's CRDs). They are skipped by the
#: schema check and read by the invariants instead: the ServiceMonitor's
#: port must be the headless Service's metrics port, the PrometheusRule
#: must hold contrib/prometheus/locker-alerts.yml's groups.
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}

Docs = List[Dict[str, Any]]


@lru_cache(maxsize=None)
def render_text(overlay: str) -> str:
    out = subprocess.run(
        ["kubectl", "kustomize", str(KUBE / overlay)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def render(overlay: str) -> Docs:
    """The overlay's documents, rendered afresh (callers may change them)."""
    return [d for d in yaml.safe_load_all(render_text(overlay)) if d]


def one(docs: Docs, kind: str, name: str | None = None) -> Dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


def flag(args: List[str], name: str) -> str | None:
    """The value after `name` in `args`, or None."""
    return args[args.index(name) + 1] if name in args else None


def port_of(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def named_peer(peer: str) -> Tuple[str | None, str]:
    """A `peers` entry as the locker reads it, `[ID@]ENDPOINT[=KEY]`: the
    node id it names (what comes before the last `@` ahead of `://`), or
    None, and the endpoint."""
    named = peer.split("=", 1)[0]
    head, scheme, _ = named.partition("://")
    if scheme and "@" in head:
        peer_id = head.rsplit("@", 1)[0]
        return peer_id, named[len(peer_id) + 1 :]
    return None, named


def container(docs: Docs) -> Dict[str, Any]:
    return one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]


def reload_container(docs: Docs) -> Dict[str, Any] | None:
    """The pod's container named `reload` beside the locker's, if any."""
    found = [c for c in one(docs, "StatefulSet")["spec"]["template"]["spec"]["containers"][1:] if c["name"] == "reload"]
    return found[0] if len(found) == 1 else None


def pod_args(docs: Docs, pod: str, c: Dict[str, Any] | None = None) -> List[str]:
    """The container's arguments (the locker's unless `c` is given) as the
    kubelet runs them in pod `pod`: `$(POD_NAME)` expanded from the
    downward API's metadata.name."""
    c = c or container(docs)
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c.get("env", [])}
    names = [n for n, path in env.items() if path == "metadata.name"]
    args = c.get("args", [])
    for n in names:
        args = [a.replace(f"$({n})", pod) for a in args]
    return args


def config_files(docs: Docs, c: Dict[str, Any] | None = None) -> Dict[str, str]:
    """The files of the ConfigMaps that the container (the locker's unless
    `c` is given) mounts, by path."""
    spec = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    files = {}
    for mount in (c or container(docs)).get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        if "configMap" in volume and "subPath" not in mount:
            data = one(docs, "ConfigMap", volume["configMap"]["name"]).get("data", {})
            for key, text in data.items():
                files[str(PurePosixPath(mount["mountPath"]) / key)] = text
    return files


def pod_config(docs: Docs, pod: str) -> Dict[str, Any]:
    path = flag(pod_args(docs, pod), "--config")
    text = config_files(docs).get(path)
    assert text is not None, f"{pod}: --config {path} is in no mounted ConfigMap"
    return tomllib.loads(text)


# The invariants of the rendered trio. Each returns what is wrong (empty
# when right), so that a broken copy can show that it would fail.


def ids_from_pod_names(docs: Docs) -> List[str]:
    c = container(docs)
    wrong = []
    refs = [e for e in c.get("env", []) if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name"]
    if not refs:
        wrong.append("no env var holds the pod's name (downward API, metadata.name)")
    for n in range(replicas(docs)):
        pod = f"locker-{n}"
        if flag(pod_args(docs, pod), "--node-id") != pod:
            wrong.append(f"{pod}: --node-id is {flag(pod_args(docs, pod), '--node-id')!r}, not the pod's name")
    return wrong


def replicas(docs: Docs) -> int:
    return one(docs, "StatefulSet")["spec"].get("replicas", 1)


def every_other_member_is_a_peer(docs: Docs) -> List[str]:
    s = one(docs, "StatefulSet")
    name, service = s["metadata"]["name"], s["spec"]["serviceName"]
    wrong = []
    headless = one(docs, "Service", service)["spec"]
    if headless.get("clusterIP") != "None":
        wrong.append(f"{service} is not headless: pods get no DNS names of their own")
    if not headless.get("publishNotReadyAddresses"):
        wrong.append(f"{service} hides members that are not ready: a joining member could not be reached")
    members = set()
    for n in range(replicas(docs)):
        pod = f"{name}-{n}"
        peer_port = port_of(pod_config(docs, pod).get("peer_bind", ":0"))
        if peer_port not in [p["port"] for p in headless["ports"]]:
            wrong.append(f"{service} does not serve the peer port {peer_port}")
        want = {f"tcp://{name}-{m}.{service}:{peer_port}" for m in range(replicas(docs)) if m != n}
        listed = [named_peer(p)[1] for p in pod_config(docs, pod).get("peers", [])]
        if sorted(listed) != sorted(want):
            wrong.append(f"{pod} lists {sorted(listed)}, not every other member {sorted(want)}")
        members.add(frozenset(listed) | {f"tcp://{pod}.{service}:{peer_port}"})
    if len(members) > 1:
        wrong.append(f"the members count different sets: {members}")
    return wrong


def peers_listed_by_the_ids_they_go_by(docs: Docs) -> List[str]:
    """Each member goes by its pod's name (`--node-id $(POD_NAME)`), and
    each peer it lists names the id that the pod at the peer's DNS name goes
    by (`locker-1@tcp://locker-1.locker-peers:7778`): every member's place
    is then known before all are heard, and a locker at that name under
    another id is refused. No id is named twice among a member and its
    peers, its own neither (the locker would refuse to start), and every
    member counts the same ids (the member-set digest is taken over
    them)."""
    s = one(docs, "StatefulSet")
    name, service = s["metadata"]["name"], s["spec"]["serviceName"]
    wrong = []
    counted = {}
    for n in range(replicas(docs)):
        pod = f"{name}-{n}"
        own = flag(pod_args(docs, pod), "--node-id")
        if own != pod:
            wrong.append(f"{pod} goes by {own!r}, not its pod's name")
        ids = [own]
        for peer in pod_config(docs, pod).get("peers", []):
            peer_id, endpoint = named_peer(peer)
            at = re.fullmatch(rf"tcp://({re.escape(name)}-\d+)\.{re.escape(service)}:\d+", endpoint)
            if at is None:
                wrong.append(f"{pod} lists {peer!r}, at no member's DNS name")
                continue
            goes_by = flag(pod_args(docs, at.group(1)), "--node-id")
            if peer_id is None:
                wrong.append(f"{pod} lists {peer!r} without its id: {at.group(1)} goes by {goes_by!r}")
            elif peer_id != goes_by:
                wrong.append(f"{pod} lists {peer!r} under the id {peer_id!r}: {at.group(1)} goes by {goes_by!r}")
            ids.append(peer_id)
        twice = sorted({i for i in ids if i is not None and ids.count(i) > 1})
        if twice:
            wrong.append(f"{pod} names {twice} twice among itself and its peers: it would refuse to start")
        counted[pod] = sorted(str(i) for i in ids)
    if len({repr(v) for v in counted.values()}) > 1:
        wrong.append(f"the members count different ids: {counted}")
    return wrong


def limits_alike(docs: Docs) -> List[str]:
    """Every member serves the same limits (peers merge only limits defined
    alike)."""
    limits = {f"locker-{n}": pod_config(docs, f"locker-{n}").get("limits") for n in range(replicas(docs))}
    return [] if len({repr(v) for v in limits.values()}) == 1 else [f"the members' limits differ: {limits}"]


def state_on_a_claimed_volume(docs: Docs) -> List[str]:
    s = one(docs, "StatefulSet")
    claims = {t["metadata"]["name"] for t in s["spec"].get("volumeClaimTemplates", [])}
    state = flag(pod_args(docs, "locker-0"), "--state")
    if state is None:
        return ["no --state"]
    mounts = [m for m in container(docs).get("volumeMounts", []) if m["name"] in claims]
    inside = [m for m in mounts if PurePosixPath(state).is_relative_to(PurePosixPath(m["mountPath"]))]
    return [] if inside else [f"--state {state} is on no volumeClaimTemplate's mount ({mounts})"]


def budget_of_one(docs: Docs) -> List[str]:
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    labels = one(docs, "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    wrong = []
    if len(pdbs) != 1:
        return [f"{len(pdbs)} disruption budgets"]
    spec = pdbs[0]["spec"]
    if spec.get("maxUnavailable") != 1:
        wrong.append(f"maxUnavailable is {spec.get('maxUnavailable')!r}, not 1")
    if not set(spec["selector"]["matchLabels"].items()) <= set(labels.items()):
        wrong.append("the budget selects other pods")
    return wrong


def named_port(docs: Docs, name_or_number: Any) -> int:
    """A probe's or Service's port as a number: a name is the container's."""
    for p in container(docs).get("ports", []):
        if p.get("name") == name_or_number:
            return p["containerPort"]
    return int(name_or_number)


def probes(docs: Docs) -> List[str]:
    c = container(docs)
    metrics = port_of(flag(pod_args(docs, "locker-0"), "--metrics-bind") or ":0")
    wrong = []
    ready = c.get("readinessProbe", {}).get("httpGet", {})
    if ready.get("path") != "/health" or named_port(docs, ready.get("port", 0)) != metrics:
        wrong.append(f"readiness asks {ready}, not /health on the metrics port {metrics}")
    live = c.get("livenessProbe", {})
    if not live:
        wrong.append("no liveness probe")
    if live.get("httpGet", {}).get("path") == "/health":
        wrong.append("liveness on /health: a full disk or a member set that differs would restart the locker")
    if "tcpSocket" in live and named_port(docs, live["tcpSocket"]["port"]) != metrics:
        wrong.append("liveness checks another port than the metrics listener")
    return wrong


def rollout(docs: Docs) -> List[str]:
    spec = one(docs, "StatefulSet")["spec"]
    wrong = []
    if spec.get("updateStrategy", {}).get("type", "RollingUpdate") != "RollingUpdate":
        wrong.append("the update is not a rolling one")
    if spec.get("updateStrategy", {}).get("rollingUpdate", {}).get("maxUnavailable", 1) != 1:
        wrong.append("the update may take several members down at once")
    if spec.get("podManagementPolicy") != "Parallel":
        wrong.append("members start one by one: the first would hear no majority")
    if replicas(docs) % 2 == 0:
        wrong.append(f"{replicas(docs)} members: an even group has no majority to spare")
    if spec["template"]["spec"].get("terminationGracePeriodSeconds", 30) < 5:
        wrong.append("the grace is too short for the locker to answer its held asks")
    return wrong


def locked_down(docs: Docs) -> List[str]:
    """Every container of the pod, the locker's and the reload container."""
    spec = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    pod = spec.get("securityContext", {})
    wrong = []
    for c in spec["containers"]:
        own = c.get("securityContext", {})
        if not (own.get("runAsNonRoot", pod.get("runAsNonRoot")) and own.get("runAsUser", pod.get("runAsUser", 0)) != 0):
            wrong.append(f"{c['name']} may run as root")
        if not own.get("readOnlyRootFilesystem"):
            wrong.append(f"{c['name']}: the root file system is writable")
        if own.get("allowPrivilegeEscalation", True):
            wrong.append(f"{c['name']}: privilege escalation allowed")
        if "ALL" not in own.get("capabilities", {}).get("drop", []):
            wrong.append(f"{c['name']} keeps capabilities")
    return wrong


def reloads_on_change(docs: Docs) -> List[str]:
    """A container beside the locker's sends it SIGHUP when its file
    changes: the pod shares one process namespace; the reload container
    runs the locker's image, mounts the volume of the locker's --config at
    the locker's path and watches that very file (in every pod), and its
    script (from a mounted ConfigMap) sends SIGHUP to the process named as
    the locker's binary; it is bounded in memory."""
    spec = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    locker = container(docs)
    wrong = []
    if spec.get("shareProcessNamespace") is not True:
        wrong.append("no shared process namespace: the reload container cannot signal the locker")
    reload = reload_container(docs)
    if reload is None:
        return wrong + ["no reload container"]
    if reload.get("image") != locker.get("image"):
        wrong.append(f"the reload container runs {reload.get('image')}, not the locker's image (whose shell and tools it uses)")
    config = flag(pod_args(docs, "locker-0"), "--config") or ""
    locker_mounts = {m["name"]: m["mountPath"] for m in locker.get("volumeMounts", [])}
    reload_mounts = {m["name"]: m["mountPath"] for m in reload.get("volumeMounts", [])}
    volume = next((v for v, at in locker_mounts.items() if PurePosixPath(config).is_relative_to(PurePosixPath(at))), None)
    if volume is None or reload_mounts.get(volume) != locker_mounts[volume]:
        wrong.append(f"the reload container mounts {volume} at {reload_mounts.get(volume)}, not at {locker_mounts.get(volume)} as the locker")
    for n in range(replicas(docs)):
        pod = f"locker-{n}"
        watched = pod_args(docs, pod, reload)
        if flag(pod_args(docs, pod), "--config") not in watched:
            wrong.append(f"{pod}: the reload container watches {watched}, not the locker's --config")
    command = reload.get("command", [])
    script = config_files(docs, reload).get(command[1] if len(command) > 1 else "")
    if not command or PurePosixPath(command[0]).name != "sh" or script is None:
        return wrong + [f"the reload container runs {command}, not sh on a script of a mounted ConfigMap"]
    env = {e["name"]: e.get("value") for e in reload.get("env", [])}
    default = re.search(r"^name=\$\{RELOAD_PROCESS:-([^}]+)\}$", script, re.M)
    name = env.get("RELOAD_PROCESS") or (default.group(1) if default else None)
    if name != PurePosixPath(locker["command"][0]).name:
        wrong.append(f"the reload container signals processes named {name!r}, not the locker's {locker['command'][0]}")
    if not re.search(r'^\s*for pid in \$\(pidof "\$name"\)', script, re.M) or not re.search(r'^\s*kill -HUP "\$pid"', script, re.M):
        wrong.append("the reload script does not send SIGHUP to the processes pidof names")
    if not reload.get("resources", {}).get("limits", {}).get("memory"):
        wrong.append("the reload container has no memory limit")
    return wrong


def config_where_it_points(docs: Docs) -> List[str]:
    files = config_files(docs)
    wrong = []
    for n in range(replicas(docs)):
        path = flag(pod_args(docs, f"locker-{n}"), "--config")
        if path not in files:
            wrong.append(f"locker-{n}: --config {path} is not a file of a mounted ConfigMap ({sorted(files)})")
    return wrong


def services_reach_the_ports(docs: Docs) -> List[str]:
    labels = one(docs, "StatefulSet")["spec"]["template"]["metadata"]["labels"]
    client = one(docs, "Service", "locker")["spec"]
    wrong = []
    if not set(client["selector"].items()) <= set(labels.items()):
        wrong.append("the client Service selects other pods")
    zmq = port_of(flag(pod_args(docs, "locker-0"), "--bind"))
    if zmq not in [named_port(docs, p.get("targetPort", p["port"])) for p in client["ports"]]:
        wrong.append(f"the client Service does not reach --bind's port {zmq}")
    return wrong


def operator_resources(docs: Docs) -> List[str]:
    wrong = []
    monitor = one(docs, "ServiceMonitor")["spec"]
    scraped = [s for s in docs if s["kind"] == "Service" and set(monitor["selector"]["matchLabels"].items()) <= set(s["metadata"].get("labels", {}).items())]
    names = [s["metadata"]["name"] for s in scraped]
    if names != [one(docs, "StatefulSet")["spec"]["serviceName"]]:
        wrong.append(f"the ServiceMonitor selects {names}, not the headless Service (which lists members not ready)")
    for s in scraped:
        for e in monitor["endpoints"]:
            if e["port"] not in [p["name"] for p in s["spec"]["ports"] if p["port"] == 9090]:
                wrong.append(f"the ServiceMonitor scrapes port {e['port']}, not {s['metadata']['name']}'s metrics port")
        if not any(r.get("targetLabel") == "job" and r.get("replacement") == "locker" for e in monitor["endpoints"] for r in e.get("relabelings", [])):
            wrong.append("the scrape's job is not `locker`, the job the alerts name")
    contrib = yaml.safe_load((ROOT / "contrib" / "prometheus" / "locker-alerts.yml").read_text())
    if one(docs, "PrometheusRule")["spec"]["groups"] != contrib["groups"]:
        wrong.append("the PrometheusRule's groups differ from contrib/prometheus/locker-alerts.yml")
    return wrong


INVARIANTS: List[Callable[[Docs], List[str]]] = [
    ids_from_pod_names,
    every_other_member_is_a_peer,
    peers_listed_by_the_ids_they_go_by,
    limits_alike,
    state_on_a_claimed_volume,
    budget_of_one,
    probes,
    rollout,
    locked_down,
    config_where_it_points,
    reloads_on_change,
    services_reach_the_ports,
    operator_resources,
]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_document_validates_against_the_pinned_kubernetes_schemas(overlay):
    import kubernetes_validate

    docs = render(overlay)
    kinds = sorted(d["kind"] for d in docs)
    assert {"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget"} <= set(kinds), kinds
    for doc in docs:
        if doc["kind"] in OPERATOR_KINDS:
            continue  # no bundled schema: read by operator_resources instead
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{overlay}: {doc['kind']} {doc['metadata']['name']}: {e.message} at {list(e.path)}")


def test_validation_refuses_a_document_broken_on_purpose():
    import kubernetes_validate

    statefulset = one(render("overlays/trio"), "StatefulSet")
    statefulset["spec"]["replicas"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(statefulset, KUBERNETES_VERSION, strict=True)
    statefulset = one(render("overlays/trio"), "StatefulSet")
    statefulset["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pth"] = "/health"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(statefulset, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("invariant", INVARIANTS, ids=lambda f: f.__name__)
def test_the_rendered_trio_holds(invariant):
    docs = render("overlays/trio")
    assert replicas(docs) == 3
    assert invariant(docs) == []


def test_the_lone_locker_is_a_group_of_one():
    docs = render("overlays/lone")
    assert replicas(docs) == 1
    for invariant in [ids_from_pod_names, every_other_member_is_a_peer, peers_listed_by_the_ids_they_go_by, state_on_a_claimed_volume, budget_of_one, probes, locked_down, config_where_it_points, reloads_on_change, services_reach_the_ports]:
        assert invariant(docs) == [], invariant.__name__
    assert pod_config(docs, "locker-0").get("peers", []) == []


def _env(docs):
    return container(docs)["env"]


#: A copy of the trio broken in one way, and the invariant that must say so.
BREAKS = [
    ("node id not the pod's name", lambda d: _replace_arg(d, "$(POD_NAME)", "locker", after="--node-id"), ids_from_pod_names),
    ("no downward API", lambda d: _env(d)[0]["valueFrom"]["fieldRef"].update(fieldPath="metadata.uid"), ids_from_pod_names),
    ("a member lists itself", lambda d: _edit_config(d, "locker-1.toml", '"locker-0@tcp://locker-0.locker-peers', '"locker-1@tcp://locker-1.locker-peers'), every_other_member_is_a_peer),
    ("a member misses a peer", lambda d: _edit_config(d, "locker-2.toml", ', "locker-1@tcp://locker-1.locker-peers:7778"', ""), every_other_member_is_a_peer),
    ("peers on another port", lambda d: _edit_config(d, "locker-0.toml", 'peer_bind = "tcp://*:7778"', 'peer_bind = "tcp://*:7779"'), every_other_member_is_a_peer),
    ("the headless Service hides joining members", lambda d: one(d, "Service", "locker-peers")["spec"].pop("publishNotReadyAddresses"), every_other_member_is_a_peer),
    ("a peer listed without its id", lambda d: _edit_config(d, "locker-0.toml", '"locker-1@tcp://locker-1.locker-peers', '"tcp://locker-1.locker-peers'), peers_listed_by_the_ids_they_go_by),
    ("peers listed under each other's ids", lambda d: _edit_config(d, "locker-0.toml", '["locker-1@tcp://locker-1.locker-peers:7778", "locker-2@tcp://locker-2.locker-peers:7778"]', '["locker-2@tcp://locker-1.locker-peers:7778", "locker-1@tcp://locker-2.locker-peers:7778"]'), peers_listed_by_the_ids_they_go_by),
    ("a peer listed under the member's own id", lambda d: _edit_config(d, "locker-2.toml", '"locker-1@tcp://locker-1.locker-peers', '"locker-2@tcp://locker-1.locker-peers'), peers_listed_by_the_ids_they_go_by),
    ("members go by other ids than the peers list", lambda d: _replace_arg(d, "$(POD_NAME)", "$(POD_NAME).locker-peers", after="--node-id"), peers_listed_by_the_ids_they_go_by),
    ("a member with other limits", lambda d: _edit_config(d, "locker-1.toml", "max_requests = 100", "max_requests = 101"), limits_alike),
    ("state off the volume", lambda d: _replace_arg(d, "/var/lib/locker/state.log", "/tmp/state.log"), state_on_a_claimed_volume),
    ("state on an emptyDir", lambda d: one(d, "StatefulSet")["spec"].pop("volumeClaimTemplates"), state_on_a_claimed_volume),
    ("a budget of two", lambda d: one(d, "PodDisruptionBudget")["spec"].update(maxUnavailable=2), budget_of_one),
    ("readiness on /metrics", lambda d: container(d)["readinessProbe"]["httpGet"].update(path="/metrics"), probes),
    ("readiness on the client port", lambda d: container(d)["readinessProbe"]["httpGet"].update(port="zmq"), probes),
    ("liveness on /health", lambda d: container(d).update(livenessProbe={"httpGet": {"path": "/health", "port": "metrics"}}), probes),
    ("members one by one", lambda d: one(d, "StatefulSet")["spec"].update(podManagementPolicy="OrderedReady"), rollout),
    ("an even group", lambda d: one(d, "StatefulSet")["spec"].update(replicas=4), rollout),
    ("root", lambda d: one(d, "StatefulSet")["spec"]["template"]["spec"]["securityContext"].update(runAsUser=0), locked_down),
    ("a writable root", lambda d: container(d)["securityContext"].update(readOnlyRootFilesystem=False), locked_down),
    ("a writable root for the reload container", lambda d: reload_container(d)["securityContext"].update(readOnlyRootFilesystem=False), locked_down),
    ("config elsewhere", lambda d: _replace_arg(d, "/etc/locker/$(POD_NAME).toml", "/etc/other/$(POD_NAME).toml"), config_where_it_points),
    ("no shared process namespace", lambda d: one(d, "StatefulSet")["spec"]["template"]["spec"].update(shareProcessNamespace=False), reloads_on_change),
    ("no reload container", lambda d: one(d, "StatefulSet")["spec"]["template"]["spec"]["containers"].remove(reload_container(d)), reloads_on_change),
    ("the reload container mounts the config elsewhere", lambda d: _mount(reload_container(d), "config").update(mountPath="/etc/config"), reloads_on_change),
    ("the reload container watches another file", lambda d: reload_container(d)["args"].__setitem__(0, "/etc/locker/locker.toml"), reloads_on_change),
    ("the reload container lacks the pod's name", lambda d: reload_container(d)["env"].pop(0), reloads_on_change),
    ("the reload container signals another process", lambda d: reload_container(d)["env"].append({"name": "RELOAD_PROCESS", "value": "sh"}), reloads_on_change),
    ("the reload script sends another signal", lambda d: _edit_script(d, 'kill -HUP "$pid"', 'kill -USR1 "$pid"'), reloads_on_change),
    ("client Service on the peer port", lambda d: one(d, "Service", "locker")["spec"]["ports"][0].update(targetPort="peers"), services_reach_the_ports),
    ("a rule changed", lambda d: one(d, "PrometheusRule")["spec"]["groups"][0]["rules"][0].update(expr="up == 0"), operator_resources),
    ("monitor on the client Service", lambda d: one(d, "ServiceMonitor")["spec"]["selector"]["matchLabels"].pop("app.kubernetes.io/component"), operator_resources),
]


def _replace_arg(docs, old, new, after=None):
    args = container(docs)["args"]
    i = args.index(after) + 1 if after else args.index(old)
    assert args[i] == old, args
    args[i] = new


def _mount(c, volume):
    return next(m for m in c["volumeMounts"] if m["name"] == volume)


def _edit_script(docs, old, new):
    volume = next(v for v in one(docs, "StatefulSet")["spec"]["template"]["spec"]["volumes"] if v["name"] == "reload")
    data = one(docs, "ConfigMap", volume["configMap"]["name"])["data"]
    key = PurePosixPath(reload_container(docs)["command"][1]).name
    assert old in data[key], data[key]
    data[key] = data[key].replace(old, new)


def _edit_config(docs, key, old, new):
    data = one(docs, "ConfigMap", "locker-config")["data"]
    assert old in data[key], data[key]
    data[key] = data[key].replace(old, new)


@pytest.mark.parametrize("what,breaks,invariant", BREAKS, ids=[b[0] for b in BREAKS])
def test_each_invariant_fails_on_a_copy_broken_on_purpose(what, breaks, invariant):
    docs = copy.deepcopy(render("overlays/trio"))
    breaks(docs)
    assert invariant(docs) != [], f"{invariant.__name__} did not see: {what}"


def test_the_flags_are_the_lockers_and_every_file_checks(tmp_path):
    """Every flag the container passes is one `locker serve --help` lists,
    and every member's file passes `locker check-config`."""
    help_text = subprocess.run([LOCKER, "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
    known = set(re.findall(r"^\s+(?:-\w, )?(--[a-z-]+)", help_text, re.M))
    assert "--node-id" in known and "--state" in known, help_text
    for overlay in OVERLAYS:
        docs = render(overlay)
        used = [a for a in container(docs)["args"] if a.startswith("--")]
        assert used and set(used) <= known, f"{overlay}: not the locker's: {set(used) - known}"
    docs = render("overlays/trio")
    for path, text in config_files(docs).items():
        file = tmp_path / PurePosixPath(path).name
        file.write_text(text)
        out = subprocess.run([LOCKER, "check-config", str(file)], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, f"{path}: {out.stderr}"


def test_the_manifests_run_the_images_binary_as_the_images_user():
    dockerfile = (ROOT / "Dockerfile").read_text()
    entry = yaml.safe_load(re.search(r"^ENTRYPOINT (\[.*\])$", dockerfile, re.M).group(1))
    user = re.search(r"^USER (\d+):(\d+)$", dockerfile, re.M)
    assert user, "the image's user is numeric, so runAsNonRoot can check it"
    docs = render("overlays/trio")
    assert container(docs)["command"] == entry[:2], "the image's `locker serve`"
    pod = one(docs, "StatefulSet")["spec"]["template"]["spec"]["securityContext"]
    assert (pod["runAsUser"], pod["runAsGroup"], pod["fsGroup"]) == (int(user.group(1)), int(user.group(2)), int(user.group(2)))


def test_the_components_mount_what_their_flags_name():
    """tests/all-components: each file flag a component adds names a path
    inside the volume of the Secret or ConfigMap it is meant to come from,
    and the rate-limit Service reaches --rls-bind's port."""
    docs = render("tests/all-components")
    spec = one(docs, "StatefulSet")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    args = pod_args(docs, "locker-0")

    def source(path: str) -> str:
        for mount in container(docs)["volumeMounts"]:
            if PurePosixPath(path).is_relative_to(PurePosixPath(mount["mountPath"])):
                volume = volumes[mount["name"]]
                return volume.get("secret", {}).get("secretName") or volume.get("configMap", {}).get("name")
        return "nowhere"

    assert source(flag(args, "--curve-secret-key")) == "locker-curve"
    assert source(flag(args, "--curve-clients")) == "locker-curve-clients"
    assert source(flag(args, "--lease-secret")) == "locker-lease-secret"
    assert source(flag(args, "--rls-config")) == "locker-rls-config"
    assert source("/etc/elsewhere/x") == "nowhere"
    rls = one(docs, "Service", "locker-rls")["spec"]["ports"][0]
    assert named_port(docs, rls["targetPort"]) == port_of(flag(args, "--rls-bind"))
    assert one(docs, "ConfigMap", "locker-rls-config")["data"], "an example domain"
