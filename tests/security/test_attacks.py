"""Issue 16's attack table, each attack run and shown blocked (root here; see
test_unprivileged.py for the same file run as an unprivileged uid)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc
import psutil
import pytest

from leanrpc.config import Config
from leanrpc.edge.auth import AccessConfigError, load_tokens
from leanrpc.security import cgroups, sandbox
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.worker.launcher import LaunchSpec
from security_support import (
    HEADER,
    bearer,
    make_config,
    one_snippet,
    repl_pid,
    running_server,
    stub,
)

HERE = os.path.dirname(os.path.abspath(__file__))
CODE = HEADER + "theorem t : 1 = 1 := rfl\n"

_SERVER = """
import asyncio, sys
sys.path[:0] = [sys.argv[2], sys.argv[2] + "/.."]
from security_support import make_config, running_server
async def main():
    extra = {}
    if len(sys.argv) > 3:  # a REPL that leaves a daemon behind (spawning allowed)
        extra = {"repl__command": [sys.argv[3]], "sandbox__block_spawn": "off"}
    config = make_config(sandbox__mode=sys.argv[1], pool__workers=2, **extra)
    async with running_server(config) as app:
        print("READY", app.port, flush=True)
        await asyncio.Event().wait()
asyncio.run(main())
"""


def _standins_below(pid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            if "leanrpc.standin" in " ".join(proc.cmdline()) and "enter.py" not in " ".join(
                proc.cmdline()
            ):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _daemon_repl(directory) -> str:
    """A REPL command whose tree holds a daemon (own session, holding stdout)."""
    directory.chmod(0o755)  # a root server's workers run as another uid
    repl = directory / "repl.sh"
    repl.write_text(f"#!/bin/sh\nsetsid sleep 600 &\nexec {sys.executable} -m leanrpc.standin\n")
    repl.chmod(0o755)
    return str(repl)


@pytest.mark.parametrize("daemon", [False, True], ids=["plain", "daemon"])
@pytest.mark.parametrize("mode", ["unshare", "off"])
def test_kill_9_of_the_server_leaves_no_repl_and_no_scratch(mode, daemon, tmp_path):
    # A private TMPDIR: other servers on this machine may use the shared one.
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(mode=0o755)
    env = dict(os.environ, TMPDIR=str(tmpdir))
    args = [_daemon_repl(tmp_path)] if daemon else []
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, mode, HERE, *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout.readline().startswith("READY")
        deadline = time.monotonic() + 30
        while not _standins_below(server.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = [p for p in psutil.Process(server.pid).children(recursive=True)]
        assert _standins_below(server.pid), "a worker is up"
        if daemon:
            assert [p for p in tree if p.name() == "sleep"], "the daemon is running"
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
    deadline = time.monotonic() + 2.0
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [p for p in tree if _alive(p)], "every worker process died with the server"
    # (Unsandboxed, the stand-in's own temp files are the REPL's business, not a server scratch.)
    left = [n for n in os.listdir(tmpdir) if n.startswith(("leanrpc-sandbox", "leanrpc-scratch"))]
    assert left == [], "no scratch folder left behind"


_MEMFD_REPL = """
import os, time
import leanrpc.standin.faults as faults
def grow(mb):
    fd = os.memfd_create("leanrpc-test")
    chunk = b"x" * (16 << 20)
    for _ in range(int(mb) // 16):
        os.write(fd, chunk)
        time.sleep(0.005)
    faults._HELD.append(fd) if hasattr(faults, "_HELD") else None
faults.grow = grow
from leanrpc.standin.__main__ import main
main()
"""


async def test_3_gb_in_a_memfd_is_out_of_memory_with_a_1000_mb_limit(tmp_path):
    script = tmp_path / "memfd_repl.py"
    script.write_text(_MEMFD_REPL)
    config = make_config(
        repl__command=[sys.executable, str(script)], limits__max_worker_rss_mb=1000
    )
    async with running_server(config) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            code = HEADER + "def f := 1\n--@standin: grow=3000\ndef g := 2\n"
            response = await stub(channel).Verify(one_snippet(code))
    (result,) = response.results
    assert result.status == pb.STATUS_OUT_OF_MEMORY, result
    assert "1000 MB limit" in result.error


async def test_repl_exit_with_a_daemon_holding_stdout_is_crash_at_once(tmp_path):
    repl = tmp_path / "repl.sh"
    repl.write_text(f"#!/bin/sh\nsetsid sleep 600 &\nexec {sys.executable} -m leanrpc.standin\n")
    repl.chmod(0o755)
    config = make_config(repl__command=[str(repl)], pool__default_timeout_s=60)
    async with running_server(config) as app:
        (worker,) = [w for w in app.pool.workers if w.pid]
        (daemon,) = [
            p for p in psutil.Process(worker.pid).children(recursive=True) if p.name() == "sleep"
        ]
        assert os.getsid(daemon.pid) != os.getsid(worker.pid), (
            "the daemon left the worker's session"
        )
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            started = time.monotonic()
            response = await stub(channel).Verify(
                one_snippet(HEADER + "def f := 1\n--@standin: crash\n")
            )
            took = time.monotonic() - started
            assert response.results[0].status == pb.STATUS_CRASH, response.results[0]
            assert took < 10, f"CRASH at once, not after the 60 s timeout ({took:.1f} s)"
            deadline = time.monotonic() + 2
            while _alive(daemon) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert not _alive(daemon), "the daemon died with its worker"
            again = await stub(channel).Verify(one_snippet(CODE))
            assert again.results[0].status == pb.STATUS_VALID, "the slot came back"


_SIGNALLER = """
import ctypes, errno, os, signal, sys
server = int(sys.argv[1]); group = os.getpgid(server)
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, fn):
    try:
        fn(); print(name, "SUCCEEDED")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
attempt("kill", lambda: os.kill(server, 0))
attempt("killpg", lambda: os.killpg(group, 0))
attempt("kill_all", lambda: os.kill(-1, 0))
attempt("pidfd_open", lambda: os.close(os.pidfd_open(server)))
def tgkill():
    if libc.syscall(234, server, server, 0) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")
attempt("tgkill", tgkill)
attempt("self", lambda: os.kill(os.getpid(), 0))
"""


async def _run(launcher, argv) -> tuple[int, str, str]:
    process = await launcher.launch(LaunchSpec(argv=argv))
    out, err = await process.communicate()
    return process.returncode, out.decode(), err.decode()


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="raw tgkill number is x86_64's")
async def test_mode_off_worker_cannot_signal_the_server():
    launcher = sandbox.make_sandbox_launcher(make_config(sandbox__mode="off"))
    rc, out, err = await _run(launcher, [sys.executable, "-c", _SIGNALLER, str(os.getpid())])
    assert rc == 0, err
    results = dict(line.split() for line in out.splitlines())
    assert results == {
        "kill": "EPERM",
        "killpg": "EPERM",
        "kill_all": "EPERM",
        "pidfd_open": "EPERM",
        "tgkill": "EPERM",
        "self": "SUCCEEDED",
    }, results
    assert "own session" in launcher.describe()


_SNOOP = """
import os, socket, sys
# Given without the leading "/": absolute paths in a REPL command are exposed on purpose.
sock_path, token_path = "/" + sys.argv[1], "/" + sys.argv[2]
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sock_path); print("socket SUCCEEDED")
except OSError as exc:
    print("socket", type(exc).__name__)
try:
    open(token_path).read(); print("token SUCCEEDED")
except OSError as exc:
    print("token", type(exc).__name__)
print("tmp", sorted(os.listdir("/tmp")))
"""


async def test_sandbox_hides_host_sockets_and_token_files(tmp_path):
    # Outside every exposed path: /tmp of the host.
    work = tempfile.mkdtemp(prefix="leanrpc-attack-", dir="/tmp")
    os.chmod(work, 0o755)
    try:
        sock_path, token_path = os.path.join(work, "host.sock"), os.path.join(work, "tokens")
        with open(token_path, "w") as f:
            f.write("secret\n")
        os.chmod(token_path, 0o644)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(sock_path)
        os.chmod(sock_path, 0o777)
        listener.listen()
        argv = [sys.executable, "-c", _SNOOP, sock_path[1:], token_path[1:]]
        jailed = sandbox.make_sandbox_launcher(make_config(sandbox__mode="unshare"))
        rc, out, err = await _run(jailed, argv)
        assert rc == 0, err
        lines = out.splitlines()
        assert lines[:2] == ["socket FileNotFoundError", "token FileNotFoundError"], out
        assert "leanrpc-attack" not in lines[2], "the host's /tmp is not there at all"
        # Control: the same program without the sandbox gets both.
        rc, out, err = await _run(
            sandbox.make_sandbox_launcher(make_config(sandbox__mode="off")), argv
        )
        assert out.splitlines()[:2] == ["socket SUCCEEDED", "token SUCCEEDED"], (out, err)
        listener.close()
    finally:
        subprocess.run(["rm", "-rf", work], check=False)


def test_token_file_readable_by_others_refuses_to_start(tmp_path):
    token_file = tmp_path / "tokens"
    token_file.write_text("tok-1\n")
    token_file.chmod(0o644)
    config = Config()
    config.server.auth_token_file = str(token_file)
    with pytest.raises(
        AccessConfigError, match=r"readable by group or others \(mode 0644\); run chmod 600"
    ):
        load_tokens(config.server)
    token_file.chmod(0o600)
    assert load_tokens(config.server) == ["tok-1"]


async def test_two_authorization_values_are_rejected(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    config = make_config(server__auth_tokens=["good"])
    async with running_server(config) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            verifier = stub(channel)
            for metadata in (bearer("bad") + bearer("good"), bearer("good") + bearer("good")):
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await verifier.Verify(one_snippet(CODE), metadata=metadata)
                assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED
                assert "send exactly one" in raised.value.details()
            ok = await verifier.Verify(one_snippet(CODE), metadata=bearer("good"))
            assert ok.results[0].status == pb.STATUS_VALID


async def test_made_up_tokens_do_not_bypass_the_per_client_limit(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    config = make_config(server__max_concurrent_per_client=1)
    async with running_server(config) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            verifier = stub(channel)
            held = verifier.VerifyStream(metadata=bearer("made-up-1"))
            await held.write(pb.VerifyStreamRequest(snippet=pb.Snippet(id="held", code=CODE)))
            assert (await held.read()).result.status == pb.STATUS_VALID
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await verifier.Verify(one_snippet(CODE), metadata=bearer("made-up-2"))
            assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            await held.done_writing()
            assert await held.read() is grpc.aio.EOF


def test_plans_name_the_server_so_workers_die_with_it():
    launcher = sandbox.make_sandbox_launcher(make_config(sandbox__mode="unshare"))
    plan = json.loads(launcher.plan(LaunchSpec(argv=["repl"]), *launcher._ids())[-1])
    assert plan["server_pid"] == os.getpid() and plan["kind"] == "sandbox"
    assert plan["userns"] == (os.geteuid() != 0)


def test_default_memory_limit_is_derived_from_the_machine_and_described():
    from leanrpc.worker.memory import default_memory_limit_mb, effective_memory_limit_mb

    assert default_memory_limit_mb(4, total_bytes=32 << 30) == int(32 * 1024 * 0.8 / 4)
    assert default_memory_limit_mb(64, total_bytes=8 << 30) == 1024, "never below 1 GB"
    assert effective_memory_limit_mb(0, 2) == default_memory_limit_mb(2) > 0, (
        "0 means the default: on"
    )
    assert effective_memory_limit_mb(-1, 2) == 0 and effective_memory_limit_mb(1000, 2) == 1000
    for mode in ("off", "unshare"):
        described = sandbox.make_sandbox_launcher(
            make_config(sandbox__mode=mode, limits__max_worker_rss_mb=1000)
        ).describe()
        assert (
            "; memory limit 1000 MB per worker tree (anonymous + shared memory + memfds)"
            in described
        ), described


@pytest.mark.skipif(
    cgroups.writable_base() is None,
    reason="the server may not create cgroups here (not root, nothing delegated)",
)
async def test_each_worker_gets_a_cgroup_that_goes_with_it_and_stale_ones_are_removed():
    base = cgroups.writable_base()
    config = make_config(sandbox__mode="unshare")
    async with running_server(config) as app:
        assert "a cgroup v2 per worker" in app.pool.launcher.describe()
        (worker,) = [w for w in app.pool.workers if w.pid]
        with open(f"/proc/{repl_pid(worker)}/cgroup") as f:
            (own,) = [line[3:].strip() for line in f if line.startswith("0::")]
        assert f"/leanrpc-{os.getpid()}/w-" in own, own
        path = os.path.join(base, f"leanrpc-{os.getpid()}", own.rsplit("/", 1)[1])
        assert os.path.isdir(path)
    assert not os.path.exists(path), "the worker's cgroup went with it"
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = os.path.join(base, f"leanrpc-{gone.pid}")
    os.makedirs(os.path.join(stale, "w-1"), exist_ok=True)
    assert f"leanrpc-{gone.pid}" in cgroups.remove_stale(base)
    assert not os.path.exists(stale)


async def test_exposed_paths_keep_their_symlinked_names_and_nothing_else_shows():
    work = tempfile.mkdtemp(prefix="leanrpc-expose-", dir="/tmp")
    try:
        os.chmod(work, 0o755)
        os.makedirs(os.path.join(work, "real"), mode=0o755)
        with open(os.path.join(work, "real", "olean"), "w") as f:
            f.write("lib\n")
        with open(os.path.join(work, "secret"), "w") as f:
            f.write("no\n")
        os.chmod(os.path.join(work, "real", "olean"), 0o644)
        os.chmod(os.path.join(work, "secret"), 0o644)
        os.symlink("real", os.path.join(work, "alias"))
        probe = (
            "import os, sys; w = '/' + sys.argv[1]; print(open(w + '/alias/olean').read().strip(), "
            "os.path.exists(w + '/secret'))"
        )
        config = make_config(sandbox__mode="unshare", sandbox__expose=[os.path.join(work, "alias")])
        rc, out, err = await _run(
            sandbox.make_sandbox_launcher(config), [sys.executable, "-c", probe, work[1:]]
        )
        assert (rc, out.strip()) == (0, "lib False"), err
    finally:
        subprocess.run(["rm", "-rf", work], check=False)


_CGROUP_OOM_REPL = """
import os, signal, sys
import leanrpc.standin.faults as faults
def crash(mode, stdout):
    # What the monitor writes when the cgroup's memory.events shows an oom_kill.
    sys.stderr.write("leanrpc sandbox: out of memory: killed at the cgroup's memory.max\\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
faults.crash = crash
from leanrpc.standin.__main__ import main
main()
"""


async def test_a_kernel_oom_kill_reported_by_the_monitor_is_out_of_memory(tmp_path):
    script = tmp_path / "oom_repl.py"
    script.write_text(_CGROUP_OOM_REPL)
    config = make_config(repl__command=[sys.executable, str(script)])
    async with running_server(config) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            response = await stub(channel).Verify(
                one_snippet(HEADER + "def f := 1\n--@standin: crash\n")
            )
    assert response.results[0].status == pb.STATUS_OUT_OF_MEMORY, response.results[0]


def test_the_monitor_reads_the_cgroups_oom_kills(tmp_path):
    fake = tmp_path / "w-1"
    fake.mkdir()
    (fake / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]); import enter; "
        "enter.remove_cgroup(sys.argv[2])"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", program, os.path.dirname(sandbox.ENTER_SCRIPT), str(fake)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.stderr == "leanrpc sandbox: out of memory: killed at the cgroup's memory.max\n"
