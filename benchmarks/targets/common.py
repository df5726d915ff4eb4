"""What every server target shares: ports, the stand-in's cost flags, process start and stop,
and a leanrpc server of a config table of one's own (`serve_leanrpc`, with `--set` overrides).

May import: benchmarks.config, benchmarks.workloads, tomli_w (in `serve_leanrpc` only:
the peers' venv lacks it).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

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


def apply_settings(table: dict, settings) -> dict:
    """`SECTION.KEY=VALUE` overrides (`--set`) written into a config table; a VALUE that is not
    JSON is a bare string (`repl.fence=off`)."""
    for setting in settings:
        key, _, value = setting.partition("=")
        section, _, name = key.partition(".")
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        table.setdefault(section, {})[name] = parsed
    return table


def serve_leanrpc(
    table: dict, folder: Path, python_args: tuple[str, ...] = ()
) -> tuple[subprocess.Popen, int]:
    """`leanrpc serve` on a free loopback port with `table` as its config (written to
    `folder/leanrpc.toml`, the log to `folder/server.log`), compiled core on; (process, port)."""
    import tomli_w  # the benchmarks' own dependency (the test extra), not the peers' venv

    config = folder / "leanrpc.toml"
    config.write_text(tomli_w.dumps(table))
    env = dict(os.environ)
    env.pop("LEANRPC_NO_EXTENSIONS", None)
    port = free_port()
    with open(folder / "server.log", "wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                *python_args,
                "-m",
                "leanrpc.cli",
                "serve",
                "--config",
                str(config),
                "--port",
                str(port),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    return server, port
