"""`Client.local(...)`: a leanrpc server of this process's own, on a free loopback port.

Owns: starting `python -m leanrpc serve --port 0` as a child process, reading
the address it prints, sharing one server per (workers, config) within the
process, and stopping it (SIGTERM, then SIGKILL) when the process exits.
A child process rather than a server in this interpreter: the server's pool,
sandbox and signal handling want a process and a main thread of their own,
and the client layer must not import the server's (it sits below them).
The server needs the `leanrpc` distribution installed; the standalone client
wheel alone cannot start one (the error says so).
May import: the standard library only.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

START_TIMEOUT_S = 120.0
_LOCK = threading.Lock()
_SERVERS: dict[tuple, "LocalServer"] = {}


class LocalServer:
    """One `leanrpc serve` child process listening on 127.0.0.1 and a free port."""

    def __init__(self, workers: int | None, config: str | None, repl_cmd: str | None) -> None:
        command = [sys.executable, "-m", "leanrpc", "serve", "--host", "127.0.0.1", "--port", "0"]
        if workers is not None:
            command += ["--workers", str(workers)]
        if config is not None:
            command += ["--config", config]
        if repl_cmd is not None:
            command += ["--repl-cmd", repl_cmd]
        self._log = tempfile.TemporaryFile(mode="w+", prefix="leanrpc-local-")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,  # a Ctrl-C in a notebook stops a call, not the server
        )
        self.address = self._wait_listening()

    def _wait_listening(self) -> str:
        line: list[str] = []
        reader = threading.Thread(
            target=lambda: line.append(self.process.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(START_TIMEOUT_S)
        text = line[0] if line else ""
        if text.startswith("{"):  # [server] log_json: the status line is JSON
            try:
                text = "leanrpc listening on " + json.loads(text)["address"]
            except (ValueError, KeyError, TypeError):
                pass
        if text.startswith("leanrpc listening on "):
            # Keep reading its status lines, so a full pipe never blocks the server.
            threading.Thread(target=self._drain, daemon=True).start()
            return text.split()[-1]
        self.stop()
        self._log.seek(0)
        said = " ".join(self._log.read().split())[-600:]
        if "No module named leanrpc" in said:
            said = "the leanrpc server is not installed here (pip install leanrpc)"
        raise RuntimeError(
            "Client.local could not start a leanrpc server: "
            + (said or f"no address within {START_TIMEOUT_S:.0f} s")
        )

    def _drain(self) -> None:
        for _line in self.process.stdout:
            pass

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


def config_file(config) -> str | None:
    """A config path as given, or a dict of sections written to a TOML file."""
    if config is None or isinstance(config, (str, os.PathLike)):
        return None if config is None else str(Path(config))
    if not isinstance(config, dict):
        raise TypeError(f"config must be a path or a dict of sections, not {type(config).__name__}")
    lines = []
    for section, keys in config.items():
        if not isinstance(keys, dict):
            raise TypeError(
                f"config[{section!r}] must be a dict of keys, as in the TOML file's [{section}]"
            )
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml(value)}" for key, value in keys.items()]
    handle, path = tempfile.mkstemp(prefix="leanrpc-local-", suffix=".toml")
    with os.fdopen(handle, "w") as out:
        out.write("\n".join(lines) + "\n")
    return path


def _toml(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # str, int, float, bool: JSON's spelling is TOML's


def shared(workers: int | None, config, repl_cmd: str | None) -> LocalServer:
    """The process's server for these settings, started on first use."""
    key = (workers, json.dumps(config, sort_keys=True, default=str), repl_cmd)
    with _LOCK:
        server = _SERVERS.get(key)
        if server is None or server.process.poll() is not None:
            server = LocalServer(workers, config_file(config), repl_cmd)
            _SERVERS[key] = server
        return server


@atexit.register
def stop_all() -> None:
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.stop()
