"""Helpers for the REPL stand-in tests: real subprocesses, every wait bounded."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from testkit import shared_path

# Recorded REPL transcripts; missing ones fail the run (a skip would hide it).
FIXTURES = Path(os.environ.get("LEANRPC_STANDIN_FIXTURES") or shared_path("fixtures"))


class StandIn:
    """One stand-in process with helpers to talk the protocol."""

    def __init__(self, *args: str, cwd=None, env=None, fixtures: bool = False):
        cmd = [sys.executable, "-m", "leanrpc.standin", *args]
        if not fixtures and "--fixtures" not in args:
            cmd.append("--no-replay")
        elif fixtures and "--fixtures" not in args and FIXTURES is not None:
            cmd += ["--fixtures", str(FIXTURES)]
        full_env = dict(os.environ)
        for k in list(full_env):
            if k.startswith("LEANRPC_STANDIN_") and k != "LEANRPC_STANDIN_CACHE_DIR":
                del full_env[k]
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=full_env,
        )
        self.pid = self.proc.pid
        self.buf = b""
        self.err = bytearray()
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drain.start()

    def _drain_stderr(self) -> None:
        fd = self.proc.stderr.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.err.extend(chunk)

    # -- writing

    def send_raw(self, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj) -> None:
        self.send_raw(json.dumps(obj, ensure_ascii=False) + "\n\n")

    def close_stdin(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    # -- reading

    def read_some(self, timeout: float) -> bytes:
        """Whatever arrives on stdout within ``timeout`` (b"" at EOF or timeout)."""
        fd = self.proc.stdout.fileno()
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            return b""
        return os.read(fd, 65536)

    def read_frame(self, timeout: float = 15.0) -> bytes:
        """Bytes up to and including the next blank-line terminator."""
        deadline = time.monotonic() + timeout
        while b"\n\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no response within {timeout}s; got {self.buf[:200]!r}")
            chunk = self.read_some(left)
            if not chunk:
                if self.proc.poll() is not None or self._eof():
                    raise EOFError(
                        f"stdout closed; pending {self.buf!r}; stderr {bytes(self.err[-500:])!r}"
                    )
                continue
            self.buf += chunk
        frame, _, self.buf = self.buf.partition(b"\n\n")
        return frame + b"\n\n"

    def _eof(self) -> bool:
        fd = self.proc.stdout.fileno()
        r, _, _ = select.select([fd], [], [], 0)
        if r:
            chunk = os.read(fd, 65536)
            if not chunk:
                return True
            self.buf += chunk
        return False

    def read(self, timeout: float = 15.0) -> dict:
        return json.loads(self.read_frame(timeout))

    def request(self, obj, timeout: float = 15.0) -> dict:
        self.send(obj)
        return self.read(timeout)

    def read_rest(self, timeout: float = 15.0) -> bytes:
        """Everything until stdout closes."""
        deadline = time.monotonic() + timeout
        out = self.buf
        self.buf = b""
        fd = self.proc.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("stdout did not close")
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return out
            out += chunk

    def wait(self, timeout: float = 15.0) -> int:
        rc = self.proc.wait(timeout)
        self._drain.join(timeout)
        return rc

    def stderr_text(self) -> str:
        return bytes(self.err).decode("utf-8", "replace")

    def cpu(self) -> float:
        import psutil

        t = psutil.Process(self.pid).cpu_times()
        return t.user + t.system

    def rss(self) -> int:
        import psutil

        return psutil.Process(self.pid).memory_info().rss

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


def run_standin(
    args: list[str], data: bytes, cwd=None, timeout: float = 30.0
) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LEANRPC_STANDIN_") or k.endswith("CACHE_DIR")
    }
    return subprocess.run(
        [sys.executable, "-m", "leanrpc.standin", *args],
        input=data,
        capture_output=True,
        cwd=cwd,
        timeout=timeout,
        env=env,
    )
