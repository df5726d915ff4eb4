"""A minimal HTTP/1.1 keep-alive JSON client for the REST targets.

May import: nothing from the benchmark.
"""

from __future__ import annotations

import asyncio
import json
import time


class HttpConnection:
    """Minimal HTTP/1.1 keep-alive JSON client (the bench must not add a core dependency)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader = self.writer = None

    async def post(self, path: str, payload: dict, timeout: float) -> tuple[int, dict | None]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        body = json.dumps(payload).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        try:
            self.writer.write(head + body)
            return await asyncio.wait_for(self._read_response(), timeout)
        except Exception:
            self.close()
            raise

    async def _read_response(self) -> tuple[int, dict | None]:
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("server closed the connection")
        code = int(status_line.split()[1])
        length, chunked, close = 0, False, False
        while True:
            line = (await self.reader.readline()).decode("latin-1").strip()
            if not line:
                break
            name, _, value = line.partition(":")
            name = name.lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and "close" in value.lower():
                close = True
        if chunked:
            data = b""
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                if size == 0:
                    await self.reader.readline()
                    break
                data += await self.reader.readexactly(size)
                await self.reader.readline()
        else:
            data = await self.reader.readexactly(length)
        if close:
            self.close()
        try:
            return code, json.loads(data) if data else None
        except ValueError:
            return code, None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class KiminaCheck:
    """One-snippet `POST /api/check` calls over a pool of keep-alive connections
    (the Kimina target and leanrpc's Kimina gateway target send the same requests)."""

    def __init__(self) -> None:
        self._idle: list[HttpConnection] = []

    async def check(
        self, port: int, request_id: str, code: str, timeout_s: float, reuse: bool
    ) -> tuple[float, float, str, dict | None]:
        """(start, end, error or "", the snippet's result or None)."""
        connection = (
            self._idle.pop() if self._idle and self._idle[-1].port == port else HttpConnection(port)
        )
        start = time.monotonic()
        payload = {
            "snippets": [{"id": request_id, "code": code}],
            "timeout": int(timeout_s),
            "reuse": reuse,
        }
        try:
            status, body = await connection.post("/api/check", payload, timeout_s + 30)
        except Exception as exc:
            return start, time.monotonic(), f"http:{type(exc).__name__}", None
        end = time.monotonic()
        self._idle.append(connection)
        if status != 200 or not body or not body.get("results"):
            return start, end, f"http:{status}", None
        return start, end, "", body["results"][0]

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()
