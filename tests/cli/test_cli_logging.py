"""The server log a person reads (issue 29): one line per worker event with
its cause, one line per request, a boot failure naming the exec error."""

from __future__ import annotations

import re
import signal
import subprocess
import time

from cli_support import LEANRPC, clean_env
from leanrpc.client import Client


class LoggedServer:
    def __init__(self, tmp_path, *extra: str, config: str = "") -> None:
        args = [LEANRPC, "serve", "--port", "0", "--workers", "1", *extra]
        if config:
            (tmp_path / "leanrpc.toml").write_text(config)
            args += ["--config", str(tmp_path / "leanrpc.toml")]
        self.log_path = tmp_path / "server.log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=self._log, text=True, env=clean_env()
        )
        line = self.process.stdout.readline()
        assert line.startswith("leanrpc listening on "), (line, self.log_path.read_text())
        self.address = line.split()[-1]

    def log(self) -> list[str]:
        return self.log_path.read_text().splitlines()

    def wait_for(self, words: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.log():
                if words in line:
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no log line with {words!r}:\n" + "\n".join(self.log()))

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def test_a_line_per_worker_event_kind(tmp_path):
    server = LoggedServer(tmp_path, config="[limits]\nmax_worker_rss_mb = 300\n")
    try:
        server.wait_for("worker w1 booted in ")
        with Client(server.address, max_retries=0) as client:
            client.verify(["--@standin: crash=segv\ntheorem a : 1 = 1 := rfl"])
            server.wait_for("crashed")
            client.verify(["--@standin: hang\ntheorem b : 1 = 1 := rfl"], timeout_s=1)
            server.wait_for("killed after a timeout")
            client.verify(["--@standin: garbage\ntheorem c : 1 = 1 := rfl"])
            server.wait_for("poisoned (wrote garbage")
            client.verify(["--@standin: grow=600\ntheorem d : 1 = 1 := rfl"])
            server.wait_for("ran out of memory")
    finally:
        server.stop()
    log = server.log()
    # One line per event: a record that quotes REPL output keeps it on its line.
    assert all(line[:4].isdigit() for line in log), [line for line in log if not line[:4].isdigit()]
    worker_lines = [
        line for line in log if "WARNING leanrpc.pool: worker w" in line or " booted in " in line
    ]
    boot = next(line for line in log if " booted in " in line)
    assert re.search(r" INFO leanrpc\.pool: worker w1 booted in \d+\.\d\d s$", boot), boot
    crash = next(line for line in worker_lines if " crashed" in line)
    assert crash.endswith(" crashed (killed by SIGSEGV)"), crash
    timeout = next(line for line in worker_lines if " killed after a timeout" in line)
    assert re.search(r"WARNING leanrpc\.pool: worker w\d+ killed after a timeout", timeout), timeout
    # One line for the poisoning: the cause, the channel's reason with the frame, the signal.
    assert not any("leanrpc.worker: worker w" in line and " poisoned: " in line for line in log)
    poison = next(line for line in worker_lines if " poisoned (wrote garbage on stdout): " in line)
    assert "unparseable output" in poison and " | frame starts: " in poison, poison
    assert poison.endswith("(killed by SIGKILL)"), poison
    memory = next(line for line in worker_lines if " ran out of memory" in line)
    assert memory.endswith("(killed by SIGKILL)"), memory
    assert sum("booted in " in line for line in log) >= 4  # the first, and one after each death


def test_a_memory_recycle_is_a_line_with_its_cause(tmp_path):
    # Any machine uses more than 0.01 % of its memory: the idle worker is recycled.
    server = LoggedServer(tmp_path, config="[limits]\nmax_system_memory_percent = 0.01\n")
    try:
        reason = server.wait_for("system memory above 0%; recycling w")
        gone = server.wait_for(" recycled: memory")
    finally:
        server.stop()
    assert "WARNING leanrpc.pool: " in reason
    assert re.search(r"WARNING leanrpc\.pool: worker w\d+ recycled: memory", gone), gone


def test_boot_failure_names_the_exec_error(tmp_path):
    server = LoggedServer(tmp_path, "--repl-cmd", "/nonexistent/repl")
    try:
        line = server.wait_for("boot failed")
    finally:
        server.stop()
    assert "worker w1 boot failed: " in line
    assert "No such file or directory" in line, line


def test_one_line_per_request_with_identity_counts_and_ms(tmp_path):
    server = LoggedServer(tmp_path)
    try:
        with Client(server.address) as client:
            client.verify(
                [
                    "theorem a : 1 = 1 := rfl",
                    "theorem b : 1 = 1 := rfl",
                    "theorem c (x : Nat) : x = x + 1 := by\n  exact Nat.nonexistent_lemma x",
                ]
            )
        line = server.wait_for("VerifyStream from ")
    finally:
        server.stop()
    assert (
        "INFO leanrpc.requests: VerifyStream from peer:ipv4:127.0.0.1: 3 snippets (VALID 2, INVALID 1) OK in "
        in line
    ), line
    assert line.endswith(" ms")
