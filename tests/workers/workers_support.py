"""Helpers for tests/workers: build pools and services on the stand-in."""

from __future__ import annotations

import sys

import psutil

from leanrpc.config import Config, LimitsConfig
from leanrpc.worker import Launcher, LaunchSpec, Worker
from testkit import (  # noqa: F401  (re-exported to the tests)
    HEADER,
    descendants,
    loopback_config,
    start_service,
    verify,
    wait_until,
)

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


def cpu_seconds(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    except psutil.Error:
        return 0.0
