"""Target: Kimina Lean Server (kimina-ast-server from benchmarks/.peers-venv) over its REST API.

May import: benchmarks.config, benchmarks.workloads, benchmarks.targets.{common,http}.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .. import workloads
from ..config import PEERS_VENV, REPO, SHIM_DIR, Record, RunConfig
from .common import free_port, standin_cost_args, stop_process, wait_port
from .http import KiminaCheck


def status_of(result: dict) -> str:
    """One entry of Kimina's `results` as a leanrpc status name (VALID, SORRY, TIMEOUT...)."""
    response = result.get("response")
    if result.get("error"):
        return "TIMEOUT" if "timed out" in result["error"] else "REJECTED"
    if not isinstance(response, dict) or "message" in response and "messages" not in response:
        return "REJECTED"
    return workloads.classify(response.get("messages"), response.get("sorries"))


class KiminaTarget:
    """kimina-ast-server (Kimina Lean Server v2 derivative) from benchmarks/.peers-venv."""

    name = "kimina"

    def __init__(self, cfg: RunConfig, tmp: Path) -> None:
        self.cfg = cfg
        self.tmp = tmp
        self.port = free_port()
        self.process = None
        self._check = KiminaCheck()

    async def start(self) -> int:
        exe = PEERS_VENV / "bin" / "kimina-ast-server"
        if not exe.exists():
            raise RuntimeError(f"{exe} missing: run benchmarks/peers/setup.sh")
        project = self.tmp / "kimina-project"
        project.mkdir(exist_ok=True)
        env = dict(os.environ)
        env.pop("LEANRPC_NO_EXTENSIONS", None)
        env.update(
            {
                "PATH": f"{SHIM_DIR}:{env.get('PATH', '')}",  # `lake env X` -> exec X
                "PYTHONPATH": str(REPO / "benchmarks" / "peers" / "prisma_stub"),
                "LEANRPC_PYTHON": sys.executable,
                "LEANRPC_STANDIN_ARGS": " ".join(standin_cost_args(self.cfg.scale)),
                "LEAN_SERVER_REPL_PATH": str(SHIM_DIR / "standin-repl"),
                "LEAN_SERVER_PROJECT_DIR": str(project),
                "LEAN_SERVER_SKIP_VALIDATION": "1",
                "LEAN_SERVER_HOST": "127.0.0.1",
                "LEAN_SERVER_PORT": str(self.port),
                "LEAN_SERVER_MAX_REPLS": str(self.cfg.workers),
                # Production settings: dev mode logs every snippet with syntax highlighting.
                "LEAN_SERVER_ENVIRONMENT": "prod",
                "LEAN_SERVER_LOG_LEVEL": "WARNING",
            }
        )
        self.process = subprocess.Popen(
            [str(exe)],
            env=env,
            cwd=self.tmp,
            stdout=subprocess.DEVNULL,
            stderr=open(self.tmp / "kimina.log", "wb"),
        )
        await wait_port(self.port, self.process, 90, "kimina-ast-server")
        self.info = {"verifier": "stand-in", "max_repls": self.cfg.workers}
        return self.process.pid

    async def send(self, item: workloads.Item, request_id: str) -> Record:
        start, end, error, result = await self._check.check(
            self.port, request_id, item.code, self.cfg.timeout_s, self.cfg.reuse
        )
        if result is None:
            return Record(request_id, start, end, error, item.burn_s)
        return Record(
            request_id,
            start,
            end,
            status_of(result),
            item.burn_s,
            repl_s=result.get("time"),
            verifier="stand-in",
        )

    async def stop(self) -> None:
        self._check.close()
        if self.process:
            stop_process(self.process)
