"""A minimal `verify(code) -> VerifyResult` on one REPL process, for tests and benchmarks.

The server verifies through the pool (leanrpc.services.verify); this is the
smallest thing that speaks the REPL protocol (one compact JSON request plus a
blank line; a JSON response ending in a blank line) so the repair loop and the
evaluation harness can run against the stand-in (`python -m leanrpc.standin`)
or a real `lake env repl` without a server. One request at a time; every
request is a fresh session (no `env`), so the header is re-elaborated.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Sequence

from leanrpc.errors import WorkerCrashed
from leanrpc.results import (
    STAND_IN_KIND,
    Message,
    Position,
    Severity,
    SorryInfo,
    Status,
    Timings,
    VerifierIdentity,
    VerifyResult,
)

STANDIN_COMMAND = (sys.executable, "-m", "leanrpc.standin")


def _pos(d: dict | None) -> Position | None:
    if not d:
        return None
    return Position(line=int(d.get("line", 0)), column=int(d.get("column", 0)))


def result_from_response(response: dict, *, snippet_id: str = "", identity: VerifierIdentity | None = None) -> VerifyResult:
    """Classifies a REPL command response (errors: INVALID; sorry: SORRY; else VALID)."""
    if "message" in response and "env" not in response:
        return VerifyResult(id=snippet_id, status=Status.REJECTED, error=str(response["message"]), verifier=identity)
    messages = [
        Message(
            severity=Severity.from_repl(m.get("severity", "info")),
            start=_pos(m.get("pos")) or Position(0, 0),
            end=_pos(m.get("endPos")),
            text=str(m.get("data", "")),
        )
        for m in response.get("messages", [])
    ]
    sorries = [SorryInfo(start=_pos(s.get("pos")), end=_pos(s.get("endPos")), goal=str(s.get("goal", "")))
               for s in response.get("sorries", [])]
    if any(m.severity == Severity.ERROR for m in messages):
        status = Status.INVALID
    elif sorries or any("declaration uses" in m.text and "sorry" in m.text for m in messages):
        status = Status.SORRY
    else:
        status = Status.VALID
    return VerifyResult(id=snippet_id, status=status, messages=messages, sorries=sorries, verifier=identity)


class ReplVerifier:
    """Owns one REPL subprocess; `await verifier(code)` verifies one snippet. Restarts after a crash."""

    def __init__(self, command: Sequence[str] = STANDIN_COMMAND, *, cwd: str | None = None,
                 timeout_s: float = 60.0, env: dict[str, str] | None = None) -> None:
        self.command = list(command)
        self.cwd = cwd
        self.env = env
        self.timeout_s = timeout_s
        self.identity = VerifierIdentity(
            kind=STAND_IN_KIND if "leanrpc.standin" in " ".join(self.command) else "lean",
            description=" ".join(self.command),
        )
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._buf = b""
        self.calls = 0

    async def _start(self) -> asyncio.subprocess.Process:
        if self._proc is None or self._proc.returncode is not None:
            self._buf = b""
            self._proc = await asyncio.create_subprocess_exec(
                *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL, cwd=self.cwd, env=self.env, limit=2**24,
            )
        return self._proc

    async def _read_frame(self, proc) -> bytes:
        while b"\n\n" not in self._buf:
            chunk = await proc.stdout.read(65536)
            if not chunk:
                raise WorkerCrashed("the REPL closed its stdout")
            self._buf += chunk
        frame, self._buf = self._buf.split(b"\n\n", 1)
        return frame

    async def __call__(self, code: str) -> VerifyResult:
        async with self._lock:
            self.calls += 1
            t0 = time.perf_counter()
            proc = await self._start()
            request = json.dumps({"cmd": code}, ensure_ascii=False).encode() + b"\n\n"
            try:
                proc.stdin.write(request)
                await proc.stdin.drain()
                frame = await asyncio.wait_for(self._read_frame(proc), self.timeout_s)
                response = json.loads(frame)
            except asyncio.TimeoutError:
                await self._kill()
                return VerifyResult(id="", status=Status.TIMEOUT, error=f"no answer in {self.timeout_s} s",
                                    verifier=self.identity)
            except (WorkerCrashed, ConnectionError, json.JSONDecodeError) as exc:
                await self._kill()
                return VerifyResult(id="", status=Status.CRASH, error=str(exc), verifier=self.identity)
            result = result_from_response(response, identity=self.identity)
            result.timings = Timings(total_s=time.perf_counter() - t0, body_s=time.perf_counter() - t0)
            return result

    async def _kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        self._proc = None

    async def close(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            try:
                self._proc.stdin.close()
                await asyncio.wait_for(self._proc.wait(), 5)
            except (asyncio.TimeoutError, ConnectionError):
                await self._kill()
        self._proc = None
