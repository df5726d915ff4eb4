"""Fault injection through `--@standin:` directive lines."""

from __future__ import annotations

import os
import re
import signal
import socket
import time

import pytest


def _cmd(directive: str, body: str = "theorem t : True := trivial") -> dict:
    return {"cmd": f"--@standin: {directive}\n{body}"}


def test_burn_uses_cpu_not_sleep(standin):
    p = standin()
    assert p.request({"cmd": "def warm := 1"}) == {"env": 0}
    cpu0, t0 = p.cpu(), time.monotonic()
    assert p.request(_cmd("burn=0.6")) == {"env": 1}
    used, wall = p.cpu() - cpu0, time.monotonic() - t0
    assert used >= 0.55, f"only {used:.2f}s of CPU"
    assert wall >= 0.55


def test_grow_raises_rss_for_good(standin):
    p = standin()
    assert p.request({"cmd": "def warm := 1"}) == {"env": 0}
    before = p.rss()
    assert p.request(_cmd("grow=96")) == {"env": 1}
    assert p.rss() - before >= 90 * 2**20
    assert p.request({"cmd": "def later := 1"}) == {"env": 2}
    assert p.rss() - before >= 90 * 2**20, "memory is kept for the process lifetime"


@pytest.mark.parametrize(
    "mode, status, stderr_re",
    [
        ("exit", 1, r"^uncaught exception: .*\n$"),
        ("abort", -signal.SIGABRT, r"Aborting"),
        ("kill", -signal.SIGKILL, r"^$"),
        ("segv", -signal.SIGSEGV, r"^$"),
    ],
)
def test_crash_modes(standin, mode, status, stderr_re):
    p = standin()
    assert p.request({"cmd": "def f := 1"}) == {"env": 0}
    p.send(_cmd(f"crash={mode}"))
    assert p.read_rest() == b"", "a crash writes nothing on stdout"
    assert p.wait() == status
    assert re.search(stderr_re, p.stderr_text()), p.stderr_text()


@pytest.mark.parametrize("mode", ["", "=busy"])
def test_hang_never_answers(standin, mode):
    p = standin()
    assert p.request({"cmd": "def f := 1"}) == {"env": 0}
    p.send(_cmd("hang" + mode))
    p.close_stdin()
    assert p.read_some(1.0) == b""
    assert p.proc.poll() is None, "still running"
    if mode:
        # Wait on the condition, not a fixed slice: on a loaded box the busy
        # loop may get little CPU in any given half second.
        cpu0 = p.cpu()
        deadline = time.monotonic() + 20.0
        while p.cpu() - cpu0 <= 0.2 and time.monotonic() < deadline:
            assert p.read_some(0.1) == b"", "a hang never answers"
        assert p.cpu() - cpu0 > 0.2, "hang=busy burns CPU"
        assert p.proc.poll() is None, "still running"
    p.kill()
    assert p.proc.returncode == -signal.SIGKILL


def test_garbage_then_normal_answer(standin):
    p = standin()
    p.send(_cmd("garbage"))
    frame = p.read_frame()
    assert not frame.startswith(b"{")
    assert p.read() == {"env": 0}
    p.send(_cmd("garbage=inline"))
    frame = p.read_frame()
    assert frame.startswith(b"@@") and frame.endswith(b'{"env": 1}\n\n')


def test_partial_writes_half_and_hangs(standin):
    p = standin("--pretty")
    p.send(_cmd("partial", "def f (x : Unit) : Nat := by sorry"))
    data = b""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(data) < 20:
        data += p.read_some(0.5)
    data += p.read_some(1.0)
    assert data.startswith(b'{"sorries"') and b"\n\n" not in data
    assert p.proc.poll() is None


def test_stderr_flood_with_drained_stderr(standin):
    p = standin()
    assert p.request(_cmd("stderr=4000000"), timeout=30) == {"env": 0}
    assert p.request({"cmd": "def f := 1"}) == {"env": 1}
    p.close_stdin()
    assert p.wait() == 0
    assert len(p.err) == 4_000_000


def test_panic_line_then_normal_answer(standin):
    p = standin()
    assert p.request(_cmd("panic")) == {"env": 0}
    p.close_stdin()
    assert p.wait() == 0
    assert p.stderr_text().startswith("PANIC at ")


def test_several_directives_in_one_command(standin):
    p = standin()
    cpu0 = p.cpu()
    r = p.request(
        {"cmd": "--@standin: panic\n--@standin: burn=0.3\ntheorem t : 1 = 1 := by\n  sorry"}
    )
    assert p.cpu() - cpu0 >= 0.25
    assert r["sorries"][0]["pos"] == {"line": 4, "column": 2}
    p.close_stdin()
    assert p.wait() == 0
    assert p.stderr_text().startswith("PANIC at ")


_OUTCOME = re.compile(r"^escape (\w+) (\S+): (blocked \(.+\)|SUCCEEDED)$")


def test_escape_attempts_are_reported(standin, tmp_path):
    # The socket attempt targets a loopback listener of ours: tests never leave the machine.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    kinds = ["write", "spawn", "shadow", f"socket:127.0.0.1:{port}"]
    root_writable = os.statvfs("/").f_flag & os.ST_RDONLY == 0
    if root_writable:
        kinds.append("remount")  # a no-op bind remount where / is already writable
    p = standin(cwd=tmp_path)
    r = p.request({"cmd": "--@standin: escape=" + ",".join(kinds) + "\ndef f := 1"}, timeout=30)
    listener.close()
    assert r["env"] == 0
    msgs = r["messages"]
    seen = []
    for m in msgs:
        assert m["severity"] == "info" and m["pos"] == {"line": 1, "column": 0}
        match = _OUTCOME.match(m["data"])
        assert match, m["data"]
        seen.append(match.group(1))
    assert seen == ["write", "write"] + [k.partition(":")[0] for k in kinds[1:]]
    assert f"escape socket 127.0.0.1:{port}: SUCCEEDED" in [m["data"] for m in msgs], (
        "unsandboxed: loopback reachable"
    )
    assert not os.path.exists("/etc/leanrpc-escape-test")
    # the process keeps working after every attempt
    assert p.request({"cmd": "def g := 1", "env": 0}) == {"env": 1}


def test_escape_in_tactic_mode(standin):
    p = standin()
    r = p.request({"cmd": "theorem t : 1 = 1 := by sorry"})
    r = p.request({"tactic": "--@standin: escape=spawn\nrfl", "proofState": 0})
    assert r["proofStatus"] == "Completed"
    (m,) = r["messages"]
    assert m["pos"] == {"line": 0, "column": 0} and m["data"].startswith("escape spawn /bin/true: ")
