"""leanrpc.ray on a real two-node Ray cluster, all on loopback.

Two raylets on 127.0.0.1 (ray.cluster_utils.Cluster) stand in for two
machines: one leanrpc server per node, batches routed by import header, a
verifier shipped into a Ray task, and nothing left running afterwards.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil
import pytest
import ray  # in the test extra: a missing ray fails here rather than skipping

from leanrpc.config import Config
from leanrpc.edge.auth import AccessConfigError
from raycluster import descendants, kill, reap_zombies, start_two_node_cluster, wait_gone

pytestmark = pytest.mark.slow

_IMPORTS = [
    "import Mathlib",
    "import Mathlib.Tactic",
    "import Aesop",
    "import Batteries",
    "import Std",
    "import Lean",
]
# The servers' ports are random, so the ring's split is too: with the pairs as
# well, all 21 candidates land on one of two servers with odds of about 1e-6
# (six alone: about 3%, which made this test flaky).
CANDIDATE_HEADERS = _IMPORTS + [
    f"{a}\n{b}" for i, a in enumerate(_IMPORTS) for b in _IMPORTS[i + 1 :]
]
EXPECTED_BY_KIND = {0: "VALID", 1: "SORRY", 2: "INVALID"}


PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def _set_child_subreaper(on: bool) -> None:
    # Orphans (a REPL whose actor died, a worker whose raylet died) get
    # reparented to this process instead of init, so the leak checks see them.
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _child_subreaper() -> bool:
    flag = ctypes.c_int(0)
    if (
        ctypes.CDLL(None, use_errno=True).prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
        != 0
    ):
        raise OSError(ctypes.get_errno(), "prctl(PR_GET_CHILD_SUBREAPER)")
    return bool(flag.value)


# Environment the cluster needs, restored afterwards. RAY_TMPDIR: everything
# Ray writes (sessions, sockets, the ray_current_cluster file, the driver's
# logs) goes under the fixture's folder instead of /tmp/ray. The laptop-mode
# switch keeps every address on loopback, also in the raylets and workers,
# which inherit the environment (Ray advertises the machine's IP otherwise).
_RAY_ENV = ("RAY_TMPDIR", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")


@pytest.fixture(scope="module")
def ray_cluster():
    tmp_ray_existed = os.path.exists("/tmp/ray")
    saved_env = {key: os.environ.get(key) for key in _RAY_ENV}
    # A short private temp dir (Ray's unix sockets live there) that goes away.
    temp_dir = tempfile.mkdtemp(prefix="lrray-")
    before = descendants()
    # Ray writes RAY_TMPDIR/ray/ray_current_cluster without creating the folder.
    os.makedirs(os.path.join(temp_dir, "ray"))
    os.environ["RAY_TMPDIR"] = temp_dir
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False
    _set_child_subreaper(True)
    cluster = None
    leftover: set[int] = set()
    survivors: set[int] = set()
    try:
        cluster = start_two_node_cluster(temp_dir)
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        try:
            ray.shutdown()
            if cluster is not None:
                cluster.shutdown()
        finally:
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            ray._private.ray_constants.ENABLE_RAY_CLUSTER = True
            leftover = descendants() - before
            survivors = wait_gone(leftover)
            kill(survivors)  # nothing outlives the fixture, even when it fails
            wait_gone(survivors, timeout_s=10)
            _set_child_subreaper(False)
            reap_zombies(leftover)
            shutil.rmtree(temp_dir, ignore_errors=True)
    assert survivors == set(), "Ray or leanrpc processes outlived the cluster"
    assert not _child_subreaper()
    assert not os.path.exists(temp_dir)
    if not tmp_ray_existed:
        assert not os.path.exists("/tmp/ray"), (
            "Ray wrote to /tmp/ray instead of the fixture's folder"
        )


def _config(**pool) -> Config:
    config = Config()
    config.server.port = 0
    config.pool.workers = 1
    config.pool.default_timeout_s = 60
    for key, value in pool.items():
        setattr(config.pool, key, value)
    return config


def _snippets(headers: list[str], count: int) -> list[tuple[str, str, str]]:
    out = []
    for i in range(count):
        kind = i % 3
        proof = ("rfl", "sorry", "exact Nat.nonexistent_lemma x")[kind]
        code = f"{headers[i % len(headers)]}\n\ntheorem t{i} (x : Nat) : x + {i} = x + {i} := by\n  {proof}\n"
        out.append((f"s{i}", code, EXPECTED_BY_KIND[kind]))
    return out


def test_one_server_per_node_routes_by_header_and_shuts_down_cleanly(ray_cluster):
    import leanrpc.ray

    nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(nodes) == 2
    # num_cpus 0.5 leaves half of each node for the "trainer" task below.
    verifier = leanrpc.ray.connect(_config(), num_cpus=0.5, client_kwargs={"max_retries": 2})
    deployment = verifier.deployment
    try:
        servers = deployment.servers
        assert {s.node_id for s in servers} == nodes  # one per node, on distinct nodes
        assert all(s.address.startswith("127.0.0.1:") for s in servers)
        assert all(s.verifier_kind == "stand-in" for s in servers)

        # Two headers that the ring puts on different servers, so both work.
        ring = verifier.ring
        by_owner = {}
        for header in CANDIDATE_HEADERS:
            by_owner.setdefault(ring.node_for_code(header + "\n"), header)
        assert len(by_owner) == 2, "every candidate header hashed to one server"
        headers = list(by_owner.values())

        items = _snippets(headers, 50)
        results = verifier.verify([(sid, code) for sid, code, _ in items])
        assert [r.id for r in results] == [sid for sid, _, _ in items]
        assert [r.status for r in results] == [expected for _, _, expected in items]
        assert {r.verifier for r in results} == {"stand-in"}

        stats = deployment.stats()
        for server in servers:
            got = stats[server.address]
            assert got["jobs_finished"] == 25  # its one header, every snippet of it
            assert got["header_loads"] == 1  # affinity: no node loads the other's header

        # A trainer's reward function runs in a Ray task with a pickled copy.
        @ray.remote(num_cpus=0.5)
        def reward(remote_verifier, codes):
            try:
                return [r.status for r in remote_verifier.verify(codes)]
            finally:
                remote_verifier.close()

        codes = [code for _sid, code, _ in items[:6]]
        statuses = ray.get(reward.remote(verifier, codes), timeout=120)
        assert statuses == [expected for _, _, expected in items[:6]]
        # Async callers (e.g. an async reward actor) await the same client.
        more = [code for _sid, code, _ in items[6:10]]
        again = asyncio.run(verifier.averify(more))
        assert [r.status for r in again] == [expected for _, _, expected in items[6:10]]
        # Those 10 were verified before: each node's result cache (on by default)
        # answered them, so no REPL ran them twice.
        assert {r.cache_source for r in again} == {"memory"}
        assert sum(v["jobs_finished"] for v in deployment.stats().values()) == 50

        server_pids = {s.pid for s in servers}
        worker_pids = {pid for v in deployment.stats().values() for pid in v["worker_pids"]}
        assert len(worker_pids) == 2
        for pid in worker_pids:  # REPL workers are children of the actor processes
            assert psutil.Process(pid).ppid() in server_pids
    finally:
        verifier.close()
    assert verifier.deployment is None and deployment.servers == []
    assert wait_gone(worker_pids | server_pids) == set()


def _standin_pids() -> set[int]:
    pids = set()
    for pid in descendants():
        try:
            if "leanrpc.standin" in " ".join(psutil.Process(pid).cmdline()):
                pids.add(pid)
        except psutil.NoSuchProcess:
            pass
    return pids


def _wait_cpus_free(timeout_s: float = 60.0) -> float:
    total = ray.cluster_resources()["CPU"]
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0) < total and time.monotonic() < deadline:
        time.sleep(0.2)
    return total - ray.available_resources().get("CPU", 0)


def test_failed_start_raises_the_server_error_and_removes_the_actors(ray_cluster):
    import leanrpc.ray

    config = _config()
    config.server.allow_unauthenticated_loopback = False  # no tokens: every node refuses
    with pytest.raises(AccessConfigError, match="without authentication"):
        leanrpc.ray.deploy_per_node(config, num_cpus=0.5)
    assert _wait_cpus_free() == 0  # the actors are gone


def test_partial_start_fails_and_leaves_no_server_or_repl_behind(ray_cluster):
    import leanrpc.ray

    # One real node, one that does not exist: the real one starts a server
    # (and a REPL worker in its own session) while the other cannot be placed.
    real = next(n["NodeID"] for n in ray.nodes() if n["Alive"])
    with pytest.raises(ray.exceptions.ActorUnschedulableError):
        leanrpc.ray.deploy_per_node(
            _config(), node_ids=[real, "ab" * 28], num_cpus=0.5, timeout_s=60
        )
    assert _wait_cpus_free() == 0
    assert wait_gone(_standin_pids()) == set()  # no REPL orphaned by a killed actor


def test_routing_imports_without_ray():
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import pickle, leanrpc.ray as r\n"
        "v = pickle.loads(pickle.dumps(r.RayVerifier(['b:1', 'a:1'], token='t')))\n"
        "print(v.addresses, v.ring.node_for_code('import Mathlib\\n') in v.addresses)\n"
        "try:\n"
        "    r.LeanrpcNodeServer\n"
        "except ImportError:\n"
        "    print('no ray')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.split("\n")[:2] == ["['a:1', 'b:1'] True", "no ray"]
