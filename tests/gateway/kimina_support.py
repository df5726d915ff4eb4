"""Helpers for the gateway tests: Kimina's own client run from the peers venv
(a module of its own, so no test imports another folder's conftest)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PEERS_PYTHON = REPO / "benchmarks" / ".peers-venv" / "bin" / "python"
DRIVER = Path(__file__).with_name("kimina_driver.py")


async def run_kimina(
    python: Path, url: str, action: str, args: dict | None = None, *, timeout: float = 240
) -> dict:
    """Runs tests/gateway/kimina_driver.py (Kimina's client) without blocking the server's loop."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", NO_COLOR="1")
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    proc = await asyncio.create_subprocess_exec(
        str(python),
        str(DRIVER),
        url,
        action,
        json.dumps(args or {}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"kimina driver {action} ran past {timeout} s")
    if proc.returncode != 0:
        raise AssertionError(
            f"kimina driver {action} failed ({proc.returncode}):\n{err.decode()[-4000:]}"
        )
    return json.loads(out.decode().strip().splitlines()[-1])


def kimina_inputs() -> list[Path]:
    from testkit import shared_path

    return sorted(shared_path("fixtures", "kimina", "match", "input").glob("*.lean"))
