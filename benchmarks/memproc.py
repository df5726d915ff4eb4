"""A real leanrpc server in its own process (gRPC and the REST gateway), so that
its RSS is its own and not the caller's, and the peak-RSS reading that
tests/memory and benchmarks/memory_bench.py share (issue 44). Stdlib, psutil,
benchmarks.ports (its port)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading

import psutil

from benchmarks.ports import free_port

TOKEN = "memory-test-token"
_MB = 2**20


class ServerProcess:
    """`leanrpc serve` with `settings` ({"memory.in_flight_mb": 64, ...}) as
    LEANRPC_<SECTION>__<KEY> variables; `.http` is the gateway's port."""

    def __init__(
        self,
        settings: dict | None = None,
        workers: int = 1,
        tokens: tuple = (TOKEN,),
        server_dir: str | None = None,
    ) -> None:
        self.http = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEANRPC_")}
        env["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="leanrpc-memory-xdg-")
        env["LEANRPC_TOKENS"] = ",".join(tokens)
        env["PYTHONUNBUFFERED"] = "1"
        if server_dir:  # another checkout's server/ (a benchmark's "before")
            env["PYTHONPATH"] = server_dir
        env["LEANRPC_LIMITS__MAX_SYSTEM_MEMORY_PERCENT"] = "0"
        for key, value in (settings or {}).items():
            section, _, name = key.partition(".")
            env[f"LEANRPC_{section.upper()}__{name.upper()}"] = str(value)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "leanrpc", "serve", "--port", "0"]
            + ["--workers", str(workers), "--http-port", str(self.http)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
        )
        line = self.process.stdout.readline()
        if not line.startswith("leanrpc listening on "):
            self.stop()
            raise AssertionError(f"server did not start: {line!r}")
        self.grpc = line.split()[-1]
        # Keep reading stdout so a full pipe never blocks the server.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def rss(self) -> int:
        return psutil.Process(self.process.pid).memory_info().rss

    def reset_peak(self) -> int:
        """Starts a new peak-RSS window (Linux clear_refs 5); returns the RSS now."""
        with open(f"/proc/{self.process.pid}/clear_refs", "w") as f:
            f.write("5")
        return self.rss()

    def peak(self) -> int:
        """Peak RSS (VmHWM) since the last `reset_peak`."""
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def stop(self) -> None:
        try:
            children = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for child in children:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(children, timeout=30)
        self.process.wait(timeout=30)

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def check_body(code: str, n: int = 1) -> bytes:
    """A Kimina /api/check body of `n` snippets of `code`."""
    snippets = [{"id": f"s{i}", "code": code} for i in range(n)]
    return json.dumps({"snippets": snippets}).encode()


def post(port: int, path: str, body: bytes, token: str | None = TOKEN, timeout: float = 300):
    """POSTs `body` (sent by sendall, never copied) and returns (status, headers, JSON or text)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        try:
            payload = json.loads(data)
        except ValueError:
            payload = data.decode(errors="replace")
        return response.status, dict(response.getheaders()), payload
    finally:
        conn.close()


def post_parallel(port: int, body: bytes, count: int, **kwargs) -> list:
    """`count` POSTs of the same body at once, one thread each; their answers (or exceptions)."""
    out: list = [None] * count

    def one(i: int) -> None:
        try:
            out[i] = post(port, "/api/check", body, **kwargs)
        except Exception as exc:  # a reset is an answer the test must see
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def mb(n: int) -> float:
    return n / _MB
