"""Helpers for tests/workers: build pools and services on the stand-in."""

from __future__ import annotations

import sys

import psutil

from leanrpc.config import Config, LimitsConfig
from leanrpc.pool.pool import Pool
from leanrpc.services.verify import VerifyOptions, VerifyService
from leanrpc.worker import Launcher, LaunchSpec, Worker
from testkit import descendants, loopback_config, wait_until  # noqa: F401  (re-exported to the tests)

HEADER = "import Mathlib\n\n"
STANDIN = [sys.executable, "-m", "leanrpc.standin"]


async def booted_worker(name: str) -> Worker:
    """A lone stand-in Worker (no pool), booted and reserved: ready for `request`."""
    worker = Worker(name, LaunchSpec(argv=STANDIN), Launcher(), LimitsConfig())
    await worker.start(60.0)
    worker.reserve()
    return worker


def make_config(workers: int = 1, **overrides) -> Config:
    """Overrides are `section__key=value`."""
    return loopback_config(workers, **overrides)


async def start_service(workers: int = 1, **overrides) -> VerifyService:
    config = make_config(workers, **overrides)
    pool = Pool(config)
    await pool.start()
    return VerifyService(pool, config)


async def verify(
    service: VerifyService, body: str, *, snippet_id: str = "s", timeout_s: float = 0.0
):
    return await service.verify(snippet_id, HEADER + body, VerifyOptions(timeout_s=timeout_s))


def cpu_seconds(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    except psutil.Error:
        return 0.0
