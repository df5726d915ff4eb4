"""Target: leanrpc behind its Kimina-compatible REST gateway (`serve --http-port`), sent
exactly the requests the Kimina target sends to Kimina's own server.

May import: benchmarks.config, benchmarks.workloads, benchmarks.targets.{common,http,leanrpc}.
"""

from __future__ import annotations

from pathlib import Path

from .. import workloads
from ..config import Record, RunConfig
from .common import free_port, wait_port
from .http import KiminaCheck
from .leanrpc import LeanrpcTarget


class KiminaRestTarget(LeanrpcTarget):
    """`leanrpc serve --http-port`: same server and pool as the gRPC target, Kimina's JSON on the wire."""

    name = "kimina_rest"

    def __init__(self, cfg: RunConfig, tmp: Path) -> None:
        super().__init__(cfg, tmp)
        self.http_port = free_port()
        self.extra_serve_args = ("--http-port", str(self.http_port))
        self._check = KiminaCheck()

    async def start(self) -> int:
        pid = await super().start()  # also checks, over gRPC, that the REPL is the stand-in
        await wait_port(self.http_port, self.process, 30, "leanrpc REST gateway")
        self.info["api"] = "Kimina REST (/api/check)"
        return pid

    async def send(self, item: workloads.Item, request_id: str) -> Record:
        start, end, error, result = await self._check.check(
            self.http_port, request_id, item.code, self.cfg.timeout_s, self.cfg.reuse
        )
        if result is None:
            return Record(request_id, start, end, error, item.burn_s)
        ours = result.get("leanrpc", {})
        t = ours.get("timings", {})
        repl_s = t.get("boot_s", 0.0) + t.get("header_s", 0.0) + t.get("body_s", 0.0)
        return Record(
            request_id,
            start,
            end,
            ours.get("status", "REJECTED"),
            item.burn_s,
            repl_s=repl_s,
            queue_s=t.get("queue_s"),
            verifier=ours.get("verifier", {}).get("kind", ""),
            server_total_s=t.get("total_s"),
        )

    async def stop(self) -> None:
        self._check.close()
        await super().stop()
