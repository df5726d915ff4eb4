"""The default sandbox against untrusted code: each escape is blocked, and answered."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys

import grpc
import psutil
import pytest

from leanrpc.config import Config
from leanrpc.security import enter, sandbox
from leanrpc.v1 import verifier_pb2 as pb
from security_support import (
    HEADER,
    make_config,
    mount_flags,
    one_snippet,
    proc_environ,
    proc_limits,
    proc_status,
    repl_pid,
    root_is_writable_here,
    running_server,
    stub,
)

_OUTCOME = re.compile(r"^escape (\w+) (\S+): (blocked \(.+\)|SUCCEEDED)$")
ESCAPES = "write,socket:127.0.0.1:{port},spawn,shadow,remount,userns"


def _body_with_directive(directive: str) -> str:
    # After a declaration, so the directive is in the body, not the header.
    return HEADER + f"def f := 1\n--@standin: {directive}\ndef g := 2\n"


def _escape_outcomes(result) -> dict[str, list[str]]:
    outcomes: dict[str, list[str]] = {}
    for message in result.messages:
        match = _OUTCOME.match(message.text)
        assert match, message.text
        outcomes.setdefault(match.group(1), []).append(match.group(3))
    return outcomes


@pytest.fixture
def loopback_listener():
    """A listening socket on the host's loopback: reachable unless the network is cut."""
    listener = socket.create_server(("127.0.0.1", 0))
    yield listener.getsockname()[1]
    listener.close()


async def test_every_escape_is_blocked_and_the_request_answered(loopback_listener, monkeypatch):
    monkeypatch.setenv("LEANRPC_TOKENS", "not-for-workers")
    # No max_processes override: spawning is blocked by the seccomp filter, not RLIMIT_NPROC.
    config = make_config(
        sandbox__mode="unshare",
        limits__cpu_seconds=300,
        limits__max_file_size_mb=5,
        limits__max_open_files=64,
    )
    async with running_server(config) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            verifier = stub(channel)
            info = await verifier.GetServerInfo(
                pb.GetServerInfoRequest(), metadata=(("authorization", "Bearer not-for-workers"),)
            )
            assert info.sandbox.startswith("unshare sandbox:"), info.sandbox
            # The worker, checked before the escapes (the userns attempt leaves it in a
            # user namespace of its own, where it holds capabilities over nothing of the host's).
            (worker,) = [w for w in app.pool.workers if w.pid]
            repl = repl_pid(worker)
            status = proc_status(repl)
            assert status["Uid"].split()[0] != "0" and status["Gid"].split()[0] != "0"
            assert (
                int(status["CapEff"], 16)
                == int(status["CapBnd"], 16)
                == int(status["CapPrm"], 16)
                == 0
            )
            assert status["NoNewPrivs"].strip() == "1"
            assert status["Groups"].strip() == ""
            for ns in ("net", "mnt", "pid", "ipc", "uts"):
                assert os.readlink(f"/proc/{repl}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}")
            assert "LEANRPC_TOKENS" not in proc_environ(repl), "secrets must not reach workers"
            limits = proc_limits(repl)
            assert limits["Max processes"] == str(max(512, 8 * (os.cpu_count() or 1)))
            assert limits["Max cpu time"] == "300"
            assert status["Seccomp"].strip() == "2", "a seccomp filter is in force"
            assert limits["Max file size"] == str(5 * 2**20) and limits["Max open files"] == "64"
            flags = mount_flags(repl)
            scratch = app.pool.launcher.scratch_dir
            assert flags[scratch].startswith("rw")
            assert all(
                opts.startswith("ro") for point, opts in flags.items() if point != scratch
            ), flags

            assert "process creation blocked by seccomp" in info.sandbox, info.sandbox
            code = _body_with_directive("escape=" + ESCAPES.format(port=loopback_listener))
            response = await verifier.Verify(
                one_snippet(code), metadata=(("authorization", "Bearer not-for-workers"),)
            )
            (result,) = response.results
            assert result.status == pb.STATUS_VALID, result
            outcomes = _escape_outcomes(result)
            assert set(outcomes) == {"write", "socket", "spawn", "shadow", "remount", "userns"}
            for kind, results in outcomes.items():
                assert all(r.startswith("blocked") for r in results), (kind, results)
            assert "Read-only file system" in outcomes["write"][0]
            assert "Operation not permitted" in outcomes["spawn"][0], (
                "EPERM from the seccomp filter"
            )
            assert "Network is unreachable" in outcomes["socket"][0]
            assert not os.path.exists("/etc/leanrpc-escape-test")

            # Still serving after all of that.
            again = await verifier.Verify(
                one_snippet(HEADER + "theorem t : 1 = 1 := rfl\n"),
                metadata=(("authorization", "Bearer not-for-workers"),),
            )
            assert again.results[0].status == pb.STATUS_VALID
            # Threads are not processes: the filter lets them through.
            threads = await verifier.Verify(
                one_snippet(_body_with_directive("escape=thread")),
                metadata=(("authorization", "Bearer not-for-workers"),),
            )
            assert _escape_outcomes(threads.results[0]) == {"thread": ["SUCCEEDED"]}
    assert root_is_writable_here(), "the sandbox's read-only mounts must not leak to the host"


ROOT_ONLY = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="checks a root server's uid switch (test_unprivileged.py covers the rest as non-root)",
)


async def test_without_sandbox_the_same_attempts_succeed(loopback_listener):
    """Shows the escape test can fail: unsandboxed, root reads /etc/shadow and reaches loopback."""
    config = make_config(sandbox__mode="off")
    async with running_server(config) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            code = _body_with_directive(f"escape=shadow,socket:127.0.0.1:{loopback_listener}")
            response = await stub(channel).Verify(one_snippet(code))
    outcomes = _escape_outcomes(response.results[0])
    assert outcomes["socket"] == ["SUCCEEDED"]
    if os.geteuid() == 0:  # only root may read /etc/shadow at all
        assert outcomes["shadow"] == ["SUCCEEDED"]


_NO_NAMESPACES = """
import logging, os, sys
sys.path.insert(0, sys.argv[1])
import seccomp
# What a container runtime's default profile does: unshare(2) refused.
prog = seccomp._abi_prologue(seccomp.SPAWN_SYSCALLS[os.uname().machine][0]) + [
    (seccomp.BPF_JEQ_K, 0, 1, {"x86_64": 272, "aarch64": 97}[os.uname().machine]),
    (seccomp.BPF_RET_K, 0, 0, seccomp._deny()),
    (seccomp.BPF_RET_K, 0, 0, seccomp.SECCOMP_RET_ALLOW),
]
assert seccomp._libc.prctl(seccomp.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
seccomp.install(prog, "no unshare")
logging.basicConfig(level=logging.WARNING, format="%(message)s")
from leanrpc.config import Config
from leanrpc.security import sandbox
print(sandbox.make_sandbox_launcher(Config()).describe(), flush=True)
try:
    cfg = Config()
    cfg.sandbox.mode = "unshare"
    sandbox.make_sandbox_launcher(cfg)
except sandbox.SandboxUnavailable as exc:
    print("refused:", exc)
"""


def test_auto_falls_back_loudly_where_the_kernel_refuses_namespaces():
    """Where namespaces are refused (seccomp as in a container's default profile), auto runs
    unsandboxed and says so in the log and the description; mode = unshare refuses to start."""
    done = subprocess.run(
        [sys.executable, "-c", _NO_NAMESPACES, os.path.dirname(enter.__file__)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    described, refused = done.stdout.splitlines()
    assert described.startswith("no sandbox (auto: sandbox probe failed: "), described
    assert "unshare" in described and "Operation not permitted" in described, described
    assert "SANDBOX OFF" in done.stderr
    assert refused.startswith("refused: sandbox probe failed"), refused
    with pytest.raises(ValueError, match="sandbox.mode must be one of"):
        sandbox.make_sandbox_launcher(make_config(sandbox__mode="bwrap-ish"))


def test_auto_is_the_default_and_picks_unshare_here():
    config = Config()
    assert config.sandbox.mode == "auto"
    launcher = sandbox.make_sandbox_launcher(config)
    assert launcher.name == "unshare", launcher.describe()


def test_worker_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("LEANRPC_TOKENS", "t1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "k")
    monkeypatch.setenv("LEAN_PATH", "/opt/lean")
    launcher = sandbox.UnshareLauncher(make_config())
    env = launcher.child_env(sandbox.LaunchSpec(argv=["repl"], env={"LEANRPC_STANDIN_SEED": "3"}))
    assert "LEANRPC_TOKENS" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["LEAN_PATH"] == "/opt/lean" and env["LEANRPC_STANDIN_SEED"] == "3"
    assert env["HOME"] == env["TMPDIR"] == launcher.scratch_dir


@ROOT_ONLY
def test_fixed_user_option(tmp_path):
    launcher = sandbox.UnshareLauncher(
        make_config(sandbox__user="nobody", sandbox__scratch_root=str(tmp_path))
    )
    assert launcher._ids() == (65534, 65534)
    assert launcher.scratch_dir.startswith(str(tmp_path))
    with pytest.raises(sandbox.SandboxUnavailable, match="must not be root"):
        sandbox.UnshareLauncher(make_config(sandbox__user="root"))


@ROOT_ONLY
async def test_unreadable_repl_fails_boot_with_a_clear_reason(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    config = make_config(sandbox__mode="unshare", repl__cwd=str(private), pool__header_timeout_s=30)
    launcher = sandbox.make_sandbox_launcher(config)
    process = await launcher.launch(sandbox.LaunchSpec(argv=["true"], cwd=str(private)))
    stderr = (await process.stderr.read()).decode()
    assert await process.wait() == 126
    assert "Permission denied" in stderr and "readable by other users" in stderr


async def test_block_spawn_off_lets_the_worker_spawn():
    """Shows the spawn check can fail: same sandbox, filter off, spawning works."""
    config = make_config(sandbox__mode="unshare", sandbox__block_spawn="off")
    async with running_server(config) as app:
        assert (
            "process creation allowed (sandbox.block_spawn = off)" in app.pool.launcher.describe()
        )
        (worker,) = [w for w in app.pool.workers if w.pid]
        assert proc_status(repl_pid(worker))["Seccomp"].strip() == "0"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            response = await stub(channel).Verify(one_snippet(_body_with_directive("escape=spawn")))
    assert _escape_outcomes(response.results[0]) == {"spawn": ["SUCCEEDED"]}


def _lake_shim(tmp_path) -> str:
    """A `lake` that runs its arguments after `env` as a child, as `lake env repl` does."""
    tmp_path.chmod(0o755)  # the worker's uid must reach it (its parents may stay private)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(mode=0o755)
    shim = bin_dir / "lake"
    shim.write_text('#!/bin/sh\n[ "$1" = env ] && shift\n"$@"\nexit $?\n')
    shim.chmod(0o755)
    return str(shim)


async def test_lake_command_gets_spawning_allowed_by_default_and_says_so(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="leanrpc.security")
    command = [_lake_shim(tmp_path), "env", sys.executable, "-m", "leanrpc.standin"]
    config = make_config(sandbox__mode="unshare", repl__command=command)
    assert config.sandbox.block_spawn == "auto"
    async with running_server(config) as app:
        description = app.pool.launcher.describe()
        assert (
            "process creation allowed (auto: the REPL command starts with 'lake'" in description
        ), description
        assert "workers may spawn processes" in caplog.text
        (worker,) = [w for w in app.pool.workers if w.pid]
        assert psutil.Process(repl_pid(worker)).children(), "the REPL runs as the shim's child"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            info = await stub(channel).GetServerInfo(pb.GetServerInfoRequest())
            assert "process creation allowed" in info.sandbox
            # The REPL is the shim's child, so it only answers because spawning is allowed.
            response = await stub(channel).Verify(one_snippet(_body_with_directive("escape=spawn")))
    assert response.results[0].status == pb.STATUS_VALID
    assert _escape_outcomes(response.results[0]) == {"spawn": ["SUCCEEDED"]}
    # Forcing the filter on for the same command is honoured.
    forced = sandbox.UnshareLauncher(make_config(repl__command=command, sandbox__block_spawn="on"))
    assert forced.block_spawn and "blocked by seccomp" in forced.describe()


def test_block_spawn_setting_is_checked():
    with pytest.raises(ValueError, match="sandbox.block_spawn must be one of auto, on, off"):
        sandbox.make_sandbox_launcher(make_config(sandbox__mode="auto", sandbox__block_spawn="yes"))


_FILTERED_CHILD = """
import concurrent.futures, ctypes, errno, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import enter
assert enter._libc.prctl(enter.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
enter.install_spawn_filter(os.uname().machine)
attempts = {
    "fork": os.fork,
    "posix_spawn": lambda: os.posix_spawn("/bin/true", ["/bin/true"], {}),
    "subprocess": lambda: subprocess.run(["/bin/true"]),
}
libc = ctypes.CDLL(None, use_errno=True)
numbers = enter.SPAWN_SYSCALLS[os.uname().machine][1]


def raw(number, *args):
    pid = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    if pid < 0:
        raise OSError(ctypes.get_errno(), "syscall")
    return pid


SIGCHLD = 17
attempts["clone"] = lambda: raw(numbers["clone"], SIGCHLD, 0, 0, 0, 0)
attempts["clone3"] = lambda: raw(numbers["clone3"], 0, 0)
if "fork" in numbers:
    attempts["fork_syscall"] = lambda: raw(numbers["fork"])
    attempts["x32_clone"] = lambda: raw(numbers["clone"] | 0x40000000, SIGCHLD, 0, 0, 0, 0)
for name, attempt in attempts.items():
    try:
        if attempt() == 0:
            os._exit(0)  # a forked grandchild; its parent reports SUCCEEDED
        print(name, "SUCCEEDED", flush=True)
    except OSError as exc:
        print(name, errno.errorcode[exc.errno], flush=True)
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    print("threads", sum(pool.map(lambda n: n, range(10))), flush=True)
os.execv("/bin/echo", ["echo", "exec ok"])
"""


def test_spawn_filter_blocks_fork_and_clone_but_not_threads_or_exec():
    """The filter itself: every way Python starts a process fails with EPERM."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", _FILTERED_CHILD, os.path.dirname(enter.__file__)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    expected = [
        "fork EPERM",
        "posix_spawn EPERM",
        "subprocess EPERM",
        "clone EPERM",
        "clone3 ENOSYS",
    ]
    if os.uname().machine == "x86_64":
        expected += ["fork_syscall EPERM", "x32_clone EPERM"]
    assert done.stdout.splitlines() == expected + ["threads 45", "exec ok"]


def test_spawn_filter_refuses_unknown_machines():
    with pytest.raises(enter.SeccompError, match="no seccomp spawn filter for riscv64"):
        enter.spawn_filter("riscv64")
