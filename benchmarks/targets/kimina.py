"""Target: Kimina Lean Server (kimina-ast-server from benchmarks/.peers-venv) over its REST API.

May import: benchmarks.config, benchmarks.workloads, benchmarks.targets.{common,http}.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from .. import workloads
from ..config import PEERS_VENV, REPO, SHIM_DIR, Record, RunConfig
from .common import free_port, standin_args, stop_process, wait_port
from .http import HttpConnection

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
        self._idle: list[HttpConnection] = []

    async def start(self) -> int:
        exe = PEERS_VENV / "bin" / "kimina-ast-server"
        if not exe.exists():
            raise RuntimeError(f"{exe} missing: run benchmarks/peers/setup.sh")
        project = self.tmp / "kimina-project"
        project.mkdir(exist_ok=True)
        env = dict(os.environ)
        env.pop("LEANRPC_NO_EXTENSIONS", None)
        env.update({
            "PATH": f"{SHIM_DIR}:{env.get('PATH', '')}",  # `lake env X` -> exec X
            "PYTHONPATH": str(REPO / "benchmarks" / "peers" / "prisma_stub"),
            "LEANRPC_PYTHON": sys.executable,
            "LEANRPC_STANDIN_ARGS": " ".join(standin_args(self.cfg)),
            "LEAN_SERVER_REPL_PATH": str(SHIM_DIR / "standin-repl"),
            "LEAN_SERVER_PROJECT_DIR": str(project),
            "LEAN_SERVER_SKIP_VALIDATION": "1",
            "LEAN_SERVER_HOST": "127.0.0.1",
            "LEAN_SERVER_PORT": str(self.port),
            "LEAN_SERVER_MAX_REPLS": str(self.cfg.workers),
            # Production settings: dev mode logs every snippet with syntax highlighting.
            "LEAN_SERVER_ENVIRONMENT": "prod",
            "LEAN_SERVER_LOG_LEVEL": "WARNING",
        })
        self.process = subprocess.Popen(
            [str(exe)], env=env, cwd=self.tmp, stdout=subprocess.DEVNULL,
            stderr=open(self.tmp / "kimina.log", "wb"),
        )
        await wait_port(self.port, self.process, 90, "kimina-ast-server")
        self.info = {"verifier": "stand-in", "max_repls": self.cfg.workers}
        return self.process.pid

    async def send(self, item: workloads.Item, request_id: str) -> Record:
        connection = self._idle.pop() if self._idle else HttpConnection(self.port)
        start = time.monotonic()
        payload = {"snippets": [{"id": request_id, "code": item.code}],
                   "timeout": int(self.cfg.timeout_s), "reuse": self.cfg.reuse}
        try:
            code, body = await connection.post("/api/check", payload, self.cfg.timeout_s + 30)
        except Exception as exc:
            return Record(request_id, start, time.monotonic(), f"http:{type(exc).__name__}", item.burn_s)
        end = time.monotonic()
        self._idle.append(connection)
        if code != 200 or not body or not body.get("results"):
            return Record(request_id, start, end, f"http:{code}", item.burn_s)
        result = body["results"][0]
        return Record(request_id, start, end, status_of(result), item.burn_s, repl_s=result.get("time"),
                      verifier="stand-in")

    async def stop(self) -> None:
        for connection in self._idle:
            connection.close()
        if self.process:
            stop_process(self.process)
