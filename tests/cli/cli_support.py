"""Helpers for the CLI tests: the real `leanrpc` command and a real server on port 0."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

LEANRPC = shutil.which("leanrpc") or str(Path(sys.executable).parent / "leanrpc")
GOOD = "theorem t (x : Nat) : x + 0 = x := by\n  rfl\n"
BAD = "theorem t (x : Nat) : x = x + 1 := by\n  exact Nat.nonexistent_lemma x\n"


_EMPTY_CONFIG_HOME = tempfile.mkdtemp(prefix="leanrpc-test-xdg-")


def clean_env() -> dict[str, str]:
    # No config from the developer's environment: LEANRPC_CONFIG, LEANRPC_<S>__<K>, ~/.config.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LEANRPC_TOKENS", "LEANRPC_TOKEN", "LEANRPC_CONFIG")
        and not (k.startswith("LEANRPC_") and "__" in k)
    }
    env["XDG_CONFIG_HOME"] = _EMPTY_CONFIG_HOME  # no leanrpc/leanrpc.toml there
    env["PYTHONUNBUFFERED"] = "1"
    return env


def leanrpc(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LEANRPC, *args], capture_output=True, text=True, timeout=timeout, env=clean_env(), **kwargs
    )


class Served:
    """`leanrpc serve --port 0` in its own process group; `.address` once it listens."""

    def __init__(self, *extra: str) -> None:
        self.process = subprocess.Popen(
            [LEANRPC, "serve", "--port", "0", "--workers", "1", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=clean_env(),
            start_new_session=True,
        )
        line = self.process.stdout.readline()
        if not line.startswith("leanrpc listening on "):
            self.kill()
            raise AssertionError(f"server did not start: {line!r}")
        self.address = line.split()[-1]

    def kill(self) -> None:
        """SIGKILL the server and its workers (its group, and its descendants,
        since the sandbox starts each worker in a session of its own)."""
        try:
            workers = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            workers = []
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for worker in workers:
            try:
                worker.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(workers, timeout=30)
        self.process.wait(timeout=30)
        self.process.stdout.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
