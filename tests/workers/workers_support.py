"""Helpers for tests/workers: build pools and services on the stand-in."""

from __future__ import annotations

import asyncio
import sys
import time

import psutil

from leanrpc.config import Config
from leanrpc.pool.pool import Pool
from leanrpc.services.verify import VerifyOptions, VerifyService

HEADER = "import Mathlib\n\n"
STANDIN = [sys.executable, "-m", "leanrpc.standin"]


def make_config(workers: int = 1, **overrides) -> Config:
    """Overrides are `section__key=value`."""
    config = Config()
    config.pool.workers = workers
    config.pool.default_timeout_s = 30
    config.limits.max_system_memory_percent = 0  # tests inject pressure
    for key, value in overrides.items():
        section, _, name = key.partition("__")
        if not hasattr(getattr(config, section), name):
            raise AttributeError(key)
        setattr(getattr(config, section), name, value)
    return config


async def start_service(workers: int = 1, **overrides) -> VerifyService:
    config = make_config(workers, **overrides)
    pool = Pool(config)
    await pool.start()
    return VerifyService(pool, config)


async def verify(service: VerifyService, body: str, *, snippet_id: str = "s", timeout_s: float = 0.0):
    return await service.verify(snippet_id, HEADER + body, VerifyOptions(timeout_s=timeout_s))


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


async def wait_until(predicate, timeout: float, what: str, interval: float = 0.02) -> None:
    """Polls a condition with a bound; fails naming what never happened."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


def cpu_seconds(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    except psutil.Error:
        return 0.0
