"""Target: leanrpc behind its Kimina-compatible REST gateway (`serve --http-port`), sent
exactly the requests the Kimina target sends to Kimina's own server.

May import: benchmarks.config, benchmarks.workloads, benchmarks.targets.{common,http,leanrpc}.
"""

from __future__ import annotations

import time
from pathlib import Path

from .. import workloads
from ..config import Record, RunConfig
from .common import free_port, wait_port
from .http import HttpConnection
from .leanrpc import LeanrpcTarget


class KiminaRestTarget(LeanrpcTarget):
    """`leanrpc serve --http-port`: same server and pool as the gRPC target, Kimina's JSON on the wire."""

    name = "kimina_rest"

    def __init__(self, cfg: RunConfig, tmp: Path) -> None:
        super().__init__(cfg, tmp)
        self.http_port = free_port()
        self.extra_serve_args = ("--http-port", str(self.http_port))
        self._idle: list[HttpConnection] = []

    async def start(self) -> int:
        pid = await super().start()  # also checks, over gRPC, that the REPL is the stand-in
        await wait_port(self.http_port, self.process, 30, "leanrpc REST gateway")
        self.info["api"] = "Kimina REST (/api/check)"
        return pid

    async def send(self, item: workloads.Item, request_id: str) -> Record:
        connection = self._idle.pop() if self._idle else HttpConnection(self.http_port)
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
        ours = result.get("leanrpc", {})
        t = ours.get("timings", {})
        repl_s = t.get("boot_s", 0.0) + t.get("header_s", 0.0) + t.get("body_s", 0.0)
        return Record(request_id, start, end, ours.get("status", "REJECTED"), item.burn_s, repl_s=repl_s,
                      queue_s=t.get("queue_s"), verifier=ours.get("verifier", {}).get("kind", ""),
                      server_total_s=t.get("total_s"))

    async def stop(self) -> None:
        for connection in self._idle:
            connection.close()
        await super().stop()
