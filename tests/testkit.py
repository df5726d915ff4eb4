"""Helpers shared by the test packages: a loopback config, the one "start a server" helper, process checks.

`running_server` is the shared server (tests/conftest.py's `running_app`
fixture is its default form): a real server on a loopback port with
stand-in workers, stopped at the end with a check that none of its workers
outlived it. Folders keep their own helper only where it does more than this
(a gateway, an agents door, a cache backend, a custom launcher).

`pythonpath = ["tests"]` in pyproject.toml makes this importable everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import sys
import time
import zipfile
from pathlib import Path

import psutil
import pytest

# free_port is the tests' one port picker (benchmarks/ports.py: the benchmarks use it too).
from benchmarks.ports import free_port as free_port
from leanrpc.config import Config

# tests/hostile/trapdoor_repl.py: the stand-in behind a REPL that misbehaves on cue (its modes).
TRAPDOOR = [sys.executable, str(Path(__file__).resolve().parent / "hostile" / "trapdoor_repl.py")]

# The project's shared/ folder (fixtures, datasets) sits next to the checkout.
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def shared_path(*parts: str) -> Path:
    """A file or folder under shared/; its absence fails the test, since a
    skip would hide that nothing was checked."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"shared data {path} is missing (shared/ must sit next to the checkout)")
    return path


@functools.cache
def real_proofs() -> tuple[tuple[str, str], ...]:
    """(name, text) of the 805 real proofs in shared/datasets: DeepSeek-Prover-V2's
    miniF2F solutions and ProofNet-Verified, names sorted within each archive."""
    out = []
    for folder, name in (
        ("proofs-deepseek-prover-v2-minif2f", "minif2f-solutions.zip"),
        ("proofs-proofnet-verified", "proofnet-verified_gt.zip"),
    ):
        with zipfile.ZipFile(shared_path("datasets", folder, name)) as archive:
            out += [
                (n, archive.read(n).decode("utf-8"))
                for n in sorted(archive.namelist())
                if n.endswith(".lean")
            ]
    return tuple(out)


def loopback_config(workers: int = 1, **overrides) -> Config:
    """A config for tests: port 0, and overrides given as `section__key=value`.

    System-memory recycling is off: a loaded CI box must not recycle workers
    behind a test's back (tests that need it inject the measurement). The
    result cache is off: a test that sends a snippet twice means the REPL to
    see it twice (tests/cache turns it on). Canaries by draw are off: a hostile
    fake REPL fails a canary, and a 5% draw before a retry changed which error a
    test saw (CI, 2026-12-05); the canary before another client's job stays on,
    and tests/canary sets the rate it tests.
    """
    config = Config()
    config.server.port = 0
    config.pool.workers = workers
    config.pool.default_timeout_s = 30
    config.limits.max_system_memory_percent = 0
    config.cache.enabled = False
    config.canary.rate = 0.0
    for key, value in overrides.items():
        section, _, name = key.partition("__")
        if not hasattr(getattr(config, section), name):
            raise AttributeError(key)
        setattr(getattr(config, section), name, value)
    return config


def descendants() -> set[int]:
    """Live (non-zombie) descendants of this process, grandchildren included."""
    pids = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                pids.add(child.pid)
        except psutil.NoSuchProcess:
            pass
    return pids


def fds_on(*prefixes: str) -> int:
    """How many of this process's fds are open on a path that starts with one
    of `prefixes` ("/proc/1234/" also matches the folder "/proc/1234" itself,
    never "/proc/12345"). A test that counts the files its own
    object holds counts these, not every fd: other threads of the test process
    open files of their own at any time (the memory watch's C thread lists
    the trees it watches, a trainer's telemetry thread loads certificates)."""
    held = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed meanwhile (the listing's own fd among them)
        held += (target + "/").startswith(prefixes)
    return held


async def wait_until(predicate, timeout: float, what: str, interval: float = 0.02) -> None:
    """Polls a condition with a bound; fails naming what never happened."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}")
        await asyncio.sleep(interval)


async def queued_behind_gate(pool, log: Path, gate: Path, held, queued, count: int):
    """Awaits `held` and `queued` (two calls' coroutines) so that `queued`'s jobs form one
    queue whatever the machine's speed: `held`'s command holds `GATE`, and trapdoor_repl.py's
    `gate=<gate>` mode (logging to `log`) keeps the worker on it until `count` jobs wait in
    `pool`'s queue. Returns (held's answer, queued's answer)."""
    first = asyncio.create_task(held)
    await wait_until(lambda: log.exists() and "gate waiting" in log.read_text(), 60, "the gate")
    rest = asyncio.create_task(queued)
    await wait_until(lambda: len(pool.admission) == count, 60, f"{count} jobs queued")
    gate.touch()
    return await first, await rest


@pytest.fixture(autouse=True)
async def no_orphans():
    """Children a test started must all be gone at its end (not even zombies left
    unreaped for long). Autouse in each folder whose conftest imports it by name
    (tests/workers, tests/pool)."""
    before = descendants()
    yield
    await wait_until(lambda: not (descendants() - before), 15.0, "child processes to exit")


# A pool and a Verify service on stand-in workers, without gRPC (tests/workers, tests/pool).
HEADER = "import Mathlib\n\n"


async def start_service(workers: int = 1, **overrides):
    """A started Pool under a VerifyService; overrides are `section__key=value`."""
    from leanrpc.pool.pool import Pool
    from leanrpc.services.verify import VerifyService

    config = loopback_config(workers, **overrides)
    pool = Pool(config)
    await pool.start()
    return VerifyService(pool, config)


async def verify(service, body: str, *, snippet_id: str = "s", timeout_s: float = 0.0):
    """`body` under HEADER through the service."""
    from leanrpc.services.verify import VerifyOptions

    return await service.verify(snippet_id, HEADER + body, VerifyOptions(timeout_s=timeout_s))


async def node_json(cwd: Path, *args: str, timeout: float):
    """Runs `node *args` in `cwd` (the Node client's folder) and returns the JSON of the
    last line it printed; fails with node's stderr when it exits non-zero."""
    proc = await asyncio.create_subprocess_exec(
        "node",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, stderr.decode()
    return json.loads(stdout.decode().strip().splitlines()[-1])


async def stop_server(app, client) -> None:
    """Closes `client`, stops `app`, and checks that none of its workers outlived it."""
    await client.close()
    await stop_app(app)


async def stop_app(app, grace: float = 2.0) -> None:
    """Stops `app` and checks that none of its workers outlived it."""
    children = [w.pid for w in app.pool.workers if w.pid]
    await app.stop(grace)
    for pid in children:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@contextlib.asynccontextmanager
async def running_server(config: Config | None = None, *, workers: int = 1, **overrides):
    """Yields a started `App` (real gRPC on a loopback port, stand-in workers) built
    from `config`, or from `loopback_config(workers, **overrides)`; stops it on exit."""
    from leanrpc.app import create_server

    app = await create_server(
        config if config is not None else loopback_config(workers, **overrides)
    )
    try:
        yield app
    finally:
        await stop_app(app)
