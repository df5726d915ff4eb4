"""No orphans: after shutdown under load, no child or grandchild survives."""

from __future__ import annotations

import asyncio
import sys

import grpc
import psutil
import pytest

from leanrpc.app import create_server
from leanrpc.config import LimitsConfig
from leanrpc.errors import WorkerCrashed
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from leanrpc.worker.launcher import Launcher, LaunchSpec
from leanrpc.worker.worker import ShutdownRung, Worker, WorkerState
from workers_support import (
    HEADER,
    STANDIN,
    descendants,
    make_config,
    start_service,
    verify,
    wait_until,
)

# A REPL that leaves a long-lived grandchild behind (as `lake env repl` or a
# tactic that shells out can), holding the REPL's stdout open.
_REPL_WITH_GRANDCHILD = [
    "sh",
    "-c",
    f"sleep 600 & exec {sys.executable} -m leanrpc.standin",
]


def _tree(pids: set[int]) -> set[int]:
    """pids and all their live descendants."""
    out = set(pids)
    for pid in pids:
        try:
            out.update(c.pid for c in psutil.Process(pid).children(recursive=True))
        except psutil.NoSuchProcess:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _bodies(n: int) -> list[str]:
    kinds = [
        "theorem t{i} : {i} = {i} := rfl\n",
        "theorem t{i} : True := trivial\n--@standin: burn=0.3\n",
        "theorem t{i} : True := trivial\n--@standin: hang\n",
    ]
    return [kinds[i % 3].format(i=i) for i in range(n)]


async def test_pool_close_under_load_leaves_no_grandchild():
    service = await start_service(workers=2, repl__command=_REPL_WITH_GRANDCHILD)
    pool = service.pool
    tasks = [
        asyncio.ensure_future(verify(service, body, snippet_id=f"s{i}", timeout_s=30))
        for i, body in enumerate(_bodies(12))
    ]
    await wait_until(lambda: sum(1 for w in pool.workers if w.busy) == 2, 20.0, "both workers busy")
    tree = _tree({w.pid for w in pool.workers if w.pid})
    # Each worker brought its grandchild along.
    assert len(tree) >= 4
    await pool.close(2.0)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    # Every job got exactly one outcome: an answer or "shutting down".
    assert len(results) == 12
    for outcome in results:
        assert not isinstance(outcome, asyncio.CancelledError)
        if isinstance(outcome, BaseException):
            assert "shutting down" in str(outcome) or "gone" in str(outcome), repr(outcome)
    await wait_until(lambda: not any(_alive(pid) for pid in tree), 15.0, "the whole tree to exit")


async def test_crashed_repl_with_grandchild_is_not_reused():
    """The REPL dies while its grandchild keeps stdout open (no EOF)."""
    service = await start_service(
        workers=1, repl__command=_REPL_WITH_GRANDCHILD, pool__max_retries=1
    )
    pool = service.pool
    try:
        first = await verify(service, "theorem a : True := trivial\n")
        assert first.status.name == "VALID"
        crashed = await verify(
            service, "theorem b : True := trivial\n--@standin: crash=exit\n", timeout_s=10
        )
        assert crashed.status.name == "CRASH"
        after = await verify(service, "theorem c : True := trivial\n", timeout_s=10)
        assert after.status.name == "VALID"
        assert after.reuse.worker != first.reuse.worker
    finally:
        await pool.close(2.0)


async def test_server_stop_under_stream_load_leaves_no_process():
    # The REPL spawns on purpose; the default sandbox's seccomp filter would refuse it.
    config = make_config(
        workers=2, server__port=0, repl__command=_REPL_WITH_GRANDCHILD, sandbox__block_spawn="off"
    )
    app = await create_server(config)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    stub = pb_grpc.VerifierStub(channel)
    calls = []
    for k in range(4):
        call = stub.VerifyStream()
        for i, body in enumerate(_bodies(9)):
            await call.write(
                pb.VerifyStreamRequest(snippet=pb.Snippet(id=f"{k}-{i}", code=HEADER + body))
            )
        calls.append(call)
    await wait_until(
        lambda: sum(1 for w in app.pool.workers if w.busy) == 2, 20.0, "both workers busy"
    )
    tree = _tree({w.pid for w in app.pool.workers if w.pid})
    await app.stop(1.0)
    for call in calls:
        call.cancel()
    await channel.close()
    await wait_until(
        lambda: not (descendants() & tree), 15.0, "every worker process and grandchild to exit"
    )


class GatedLauncher(Launcher):
    """Holds every launch until released, to stop a worker mid-launch."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def launch(self, spec):
        self.entered.set()
        await self.release.wait()
        return await super().launch(spec)


async def test_worker_stopped_while_launching_kills_the_late_process():
    launcher = GatedLauncher()
    worker = Worker("w-late", LaunchSpec(argv=list(STANDIN)), launcher, LimitsConfig())
    starting = asyncio.ensure_future(worker.start(timeout=30))
    await asyncio.wait_for(launcher.entered.wait(), 10)
    # Shutdown reaches the worker before its process exists.
    assert await worker.stop(1.0) is ShutdownRung.EXITED
    assert worker.state is WorkerState.DEAD
    launcher.release.set()
    with pytest.raises(WorkerCrashed, match="stopped while starting"):
        await asyncio.wait_for(starting, 30)
    assert worker.pid is not None
    await wait_until(lambda: not _alive(worker.pid), 10.0, "the late process to die")
