"""What every server target shares: ports, the stand-in's cost flags, process start and stop.

May import: benchmarks.config, benchmarks.workloads.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time

from .. import workloads
from ..config import RunConfig


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def standin_args(cfg: RunConfig) -> list[str]:
    return [
        "--import-cost",
        f"{workloads.import_cost(cfg.scale):.4f}",
        "--reimport-cost",
        f"{workloads.import_cost(cfg.scale) / 4:.4f}",
    ]


async def wait_port(port: int, process: subprocess.Popen, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode} before listening")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:.0f} s")


def stop_process(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
