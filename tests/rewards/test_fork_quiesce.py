"""Before a fork the reward connection closes its channels and waits for gRPC's core
to shut down (clients/python/leanrpc_client/rewards/connection.py): a child forked
while the core's shutdown thread still ran hung in its first channel (CI, 2026-12-05).
The rule is tested on its own with an injected clock; the real threads are read from a
process that scored and then closed."""

from __future__ import annotations

import asyncio
import json
import sys
import threading

from leanrpc.client.rewards import connection
from leanrpc.rewards import Problem

P = Problem("theorem add_comm' (a b : ℕ) : a + b = b + a := by\n")


def test_settled_waits_for_core_threads_and_threads_born_since():
    before = {10, 11, 12}
    assert connection._settled(before, {})
    assert connection._settled(before, {10: "pt_main_thread", 11: "OMP"})  # a trainer's own
    assert not connection._settled(before, {10: "event_engine"})  # the core's, still there
    assert not connection._settled(before, {99: "python"})  # born since: the unnamed shutdown
    assert not connection._settled(before, {99: "grpc_shutdown"})


def test_quiesced_gives_up_at_its_bound(monkeypatch):
    now = [0.0]

    def nap(seconds: float) -> None:
        now[0] += seconds

    monkeypatch.setattr(connection, "_native_threads", lambda: {7: "event_engine"})
    # gRPC in use elsewhere in the process: its threads never end, the wait stops at the bound.
    assert connection._quiesced(set(), 2.0, clock=lambda: now[0], nap=nap) is False
    assert 2.0 <= now[0] < 2.01
    left = iter([{7: "event_engine"}, {8: "grpc_shutdown"}, {}])
    monkeypatch.setattr(connection, "_native_threads", lambda: next(left))
    now[0] = 0.0
    assert connection._quiesced(set(), 2.0, clock=lambda: now[0], nap=nap) is True
    assert now[0] < 0.01


def test_a_shutdown_under_way_is_waited_for_past_the_bound(monkeypatch):
    """gRPC's shutdown waits for its thread pool, whose lifeguard checks on a backoff
    growing to a second: under load it took over 2 s (CI, 2026-12-07). While its thread
    runs, the fork waits for it, up to `shutdown_s`."""
    now = [0.0]

    def nap(seconds: float) -> None:
        now[0] += seconds

    def threads() -> dict[int, str]:
        return {8: "grpc_shutdown"} if now[0] < 3.0 else {}

    monkeypatch.setattr(connection, "_native_threads", threads)
    assert connection._quiesced(set(), 2.0, clock=lambda: now[0], nap=nap) is True
    assert 3.0 <= now[0] < 3.01
    monkeypatch.setattr(connection, "_native_threads", lambda: {8: "grpc_shutdown"})
    now[0] = 0.0
    assert connection._quiesced(set(), 2.0, clock=lambda: now[0], nap=nap, shutdown_s=5.0) is False
    assert 5.0 <= now[0] < 5.01


AFTER_SCORING = """
import json, sys
from leanrpc.client.rewards import connection
from leanrpc.rewards import Problem, RewardCore
core = RewardCore(server=sys.argv[1], deadline_s=30)
scored = [d.reward for d in core.score_sync(["```lean\\n  omega\\n```"], [Problem(sys.argv[2])])]
running = sorted(set(connection._native_threads().values()) & connection._CORE_THREADS)
before = set(connection._native_threads())
connection._before_fork()
left = connection._native_threads()
print(json.dumps([scored, running, left, connection._settled(before, left)]))
"""


async def test_the_hook_after_scoring_leaves_no_core_thread(server):
    """A process that scored through the sync runner (gRPC's core threads started)
    runs the before-fork hook: no core thread, and none born since, is left. In a
    process of its own: this test's process serves, and its server's core stays up."""
    address = await server()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        AFTER_SCORING,
        address,
        P.statement,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-2000:]
    scored, running, left, settled = json.loads(out.decode().splitlines()[-1])
    assert scored == [1.0]
    assert running  # the core ran: the check had threads to wait for
    assert (left, settled) == ({}, True)


def test_python_threads_are_not_native_threads():
    assert threading.get_native_id() not in connection._native_threads()
