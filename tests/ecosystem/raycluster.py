"""Starting the ecosystem tests' two-node Ray cluster on a slow or busy machine.

Why this is more than ``Cluster(...)``: Ray 2.60's raylet starts two Python
agents (dashboard agent, runtime-env agent) and blocks until each has written
its port file. It gives them a fixed 15 s, then aborts (raylet.out: "Check
failed ... Timed out waiting for file .../dashboard_agent_listen_port_...");
the driver then gives up after its own fixed 30 s ("The current node timed out
during startup"). Neither deadline can be set: the raylet receives no listen
port on its command line, and neither RAY_agent_register_timeout_ms nor
RAY_raylet_start_wait_time_s moves the port-file wait (both tried, with an
agent slowed by a sitecustomize). An agent normally writes its ports 0.8 s
after it starts; on a loaded two-core CI machine it missed the 15 s once, and
the whole module errored. So the start:

- runs fewer Python processes at once (no autoscaler monitor, no log monitor:
  the tests pass ``log_to_driver=False`` and never autoscale);
- imports what the agents import once beforehand, so their own start reads
  warm files;
- and when Ray's startup deadline passes anyway, removes that attempt's
  processes and starts again, at most ``attempts`` times, with the raylet's own
  reason in a warning each time and in the error at the end. What is retried is
  Ray's start-up under our test, never a leanrpc assertion.

Imports: ray (inside the start), psutil and the standard library; no leanrpc.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
import warnings

import psutil

# What the driver's Node() raises when its raylet never registered.
_STARTUP_TIMEOUT = "timed out during startup"

# The agents' own imports (dashboard agent, its module scan, the runtime-env
# agent) and the head's helpers: read once so that no agent pays for cold files.
_WARM_IMPORTS = (
    "import ray.dashboard.agent, ray.dashboard.utils as u, ray.dashboard.consts;"
    "u.get_all_modules(u.DashboardAgentModule);"
    "import ray._private.runtime_env.agent.main;"
    "import ray._private.runtime_env.agent.runtime_env_agent"
)


def descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def wait_gone(pids: set[int], timeout_s: float = 60.0) -> set[int]:
    """The pids still running after up to timeout_s (zombies count as gone)."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = set()
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.add(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            pass


def reap_zombies(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def raylet_reasons(temp_dir: str) -> list[str]:
    """The raylets' fatal lines ("Check failed ...") under temp_dir's sessions."""
    reasons = []
    for path in sorted(glob.glob(os.path.join(temp_dir, "session_2*", "logs", "raylet*.out"))):
        with open(path, errors="replace") as log:
            for line in log:
                if "Check failed" in line or " F " in line[:40]:
                    reasons.append(f"{os.path.basename(path)}: {line.strip()[:400]}")
    return reasons


def warm_agent_imports() -> None:
    subprocess.run([sys.executable, "-c", _WARM_IMPORTS], capture_output=True, timeout=300)


def _clear_attempt(cluster, before: set[int]) -> None:
    """Take down whatever one failed attempt started."""
    if cluster is not None:
        try:
            cluster.shutdown()
        except Exception:  # a half-started cluster: its processes die below anyway
            pass
    started = descendants() - before
    kill(started)
    wait_gone(started, timeout_s=30)
    reap_zombies(started)


def start_two_node_cluster(temp_dir: str, attempts: int = 3):
    """A head and one more node on 127.0.0.1, their files under temp_dir.

    Raises RuntimeError with every attempt's raylet reason when Ray's start-up
    deadline passes ``attempts`` times; any other error is raised at once.
    """
    from ray.cluster_utils import Cluster

    warm_agent_imports()
    node_args = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "temp_dir": temp_dir}
    head_args = {**node_args, "include_dashboard": False, "no_monitor": True}
    head_args["include_log_monitor"] = False
    failures: list[str] = []
    for attempt in range(1, attempts + 1):
        before = descendants()
        seen = set(raylet_reasons(temp_dir))
        cluster = None
        try:
            cluster = Cluster(initialize_head=True, head_node_args=head_args)
            cluster.add_node(**node_args)
            return cluster
        except Exception as exc:
            if _STARTUP_TIMEOUT not in str(exc):
                _clear_attempt(cluster, before)
                raise
            reasons = [r for r in raylet_reasons(temp_dir) if r not in seen]
            failure = f"attempt {attempt}: {exc}; raylet: {reasons or 'no fatal line'}"
            failures.append(failure)
            warnings.warn(f"Ray's start-up deadline passed, starting again ({failure})")
            _clear_attempt(cluster, before)
    raise RuntimeError("the Ray cluster did not start:\n" + "\n".join(failures))
