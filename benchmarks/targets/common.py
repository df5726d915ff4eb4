"""What every server target shares: ports (benchmarks/ports.py), the stand-in's cost flags,
process start and stop, the measured leanrpc server's config table (`leanrpc_table`) and
`leanrpc serve` of a table of one's own (`serve_leanrpc`, with `--set` overrides): every
benchmark starts its leanrpc here.

May import: benchmarks.config, benchmarks.ports, benchmarks.workloads, tomli_w (in
`serve_leanrpc` only: the peers' venv lacks it).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .. import workloads
from ..ports import free_port


def standin_cost_args(scale: float) -> list[str]:
    """The stand-in's header costs at `scale`: a first import, and a quarter for a later one."""
    return [
        "--import-cost",
        f"{workloads.import_cost(scale):.4f}",
        "--reimport-cost",
        f"{workloads.import_cost(scale) / 4:.4f}",
    ]


def leanrpc_table(workers: int, scale: float, checks: str = "default") -> dict:
    """The config of a measured `leanrpc serve`: the stand-in at `scale`, `workers` warm
    workers, no result cache (peers have none, and rounds repeat items); `checks` "off" turns
    the axiom check off and the code policy to `trusted` (the rows compared with peers, which
    check no axioms and screen no code). Callers add their own keys to the table."""
    table = {
        "repl": {"command": [sys.executable, "-m", "leanrpc.standin", *standin_cost_args(scale)]},
        "pool": {"workers": workers, "min_warm": workers},
        "cache": {"enabled": False},
    }
    if checks == "off":
        table["axioms"] = {"check": False}
        table["policy"] = {"default": "trusted"}
    return table


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
    table: dict,
    folder: Path,
    python_args: tuple[str, ...] = (),
    *,
    serve_args: tuple[str, ...] = (),
    pure_python: bool = False,
    name: str = "leanrpc",
) -> tuple[subprocess.Popen, int]:
    """`leanrpc serve` on a free loopback port with `table` as its config (written to
    `folder/<name>.toml`, the log to `folder/server.log`, or `<name>.log` for another name),
    compiled core on unless `pure_python`; (process, port)."""
    import tomli_w  # the benchmarks' own dependency (the test extra), not the peers' venv

    config = folder / f"{name}.toml"
    config.write_text(tomli_w.dumps(table))
    env = dict(os.environ)
    env.pop("LEANRPC_NO_EXTENSIONS", None)
    if pure_python:
        env["LEANRPC_NO_EXTENSIONS"] = "1"
    port = free_port()
    with open(folder / ("server.log" if name == "leanrpc" else f"{name}.log"), "wb") as log:
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
                *serve_args,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    return server, port
