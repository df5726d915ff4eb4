"""worker/pipes.py: the REPL's three pipes, made by us, on both event loops.

The fence audit needs real pipes (one inode for both ends) and the channel
needs every end to be seen: these hold on asyncio's loop and on uvloop, the
two `[server] event_loop` may pick (uvloop's own subprocess pipes are
socketpairs, and it keeps a read transport half-open at EOF when asked).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest
import uvloop

from leanrpc.client import Client
from leanrpc.commands.exits import UserError
from leanrpc.commands.serve import loop_factory
from leanrpc.config import Config
from leanrpc.worker.pipes import spawn_with_pipes, write_input
from testkit import fds_on

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_support import Served  # noqa: E402

LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}

_ECHO = (
    "import os, sys\n"
    "data = sys.stdin.buffer.read()\n"
    "sys.stdout.buffer.write(data[::-1]); sys.stdout.flush()\n"
    "sys.stderr.write('err %d' % len(data)); sys.stderr.flush()\n"
    "print(os.readlink('/proc/self/fd/0'), os.readlink('/proc/self/fd/1'),"
    " os.readlink('/proc/self/fd/2'), file=open('/proc/self/fd/2', 'w'))\n"
)


def _run(loop: str, coro_fn):
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(coro_fn())


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_the_child_gets_our_pipes_and_its_output_arrives_whole(loop):
    async def go():
        process = await spawn_with_pipes([sys.executable, "-c", _ECHO], cwd=None, env={})
        payload = bytes(range(256)) * 2000  # more than a pipe buffer: drain must wait
        out, err = await process.communicate(payload)
        return process, out, err

    process, out, err = _run(loop, go)
    assert process.returncode == 0
    assert out == payload_reversed()
    text = err.decode()
    assert text.startswith(f"err {256 * 2000}")
    # The child's 0/1/2 are pipes whose inodes are our ends' (the audit's key).
    named = text.split("\n", 1)[0][len(f"err {256 * 2000}") :].split()
    assert named == [f"pipe:[{inode}]" for inode in process.pipe_inodes]


def payload_reversed() -> bytes:
    return (bytes(range(256)) * 2000)[::-1]


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_every_end_closes_when_the_child_exits(loop):
    async def go():
        process = await spawn_with_pipes(
            [sys.executable, "-c", "import sys; sys.stdout.write('bye')"], cwd=None, env={}
        )
        lost = asyncio.Event()
        original = process.pipe_transport(1).get_protocol()

        class Watch(asyncio.Protocol):  # in front of the reader, as worker/stdout.py is
            def data_received(self, data):
                original.data_received(data)

            def eof_received(self):
                original.eof_received()
                return False

            def connection_lost(self, exc):
                original.connection_lost(exc)
                lost.set()

        process.pipe_transport(1).set_protocol(Watch())
        await asyncio.wait_for(lost.wait(), 30)  # uvloop: only if EOF closes the transport
        await process.wait()
        await asyncio.wait_for(process.stderr.read(), 30)
        await asyncio.sleep(0.05)
        return process

    process = _run(loop, go)
    assert process.pipe_transport(1).is_closing() and process.pipe_transport(2).is_closing()
    process.close_pipes()
    assert process.pipe_transport(0).is_closing()


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_write_to_a_closed_input_is_a_broken_pipe_on_every_loop(loop):
    """The child closes its input and lives on (as a killed REPL's pipe closes before its
    exit is seen): uvloop's transport raises RuntimeError on the next write, asyncio's
    drops it; `write_input` says BrokenPipeError on both, which the channel reads as
    the worker gone (a search killed under uvloop got UNKNOWN from that RuntimeError)."""

    async def go():
        process = await spawn_with_pipes(
            [sys.executable, "-c", "import os, time; os.close(0); time.sleep(30)"],
            cwd=None,
            env={},
        )
        try:
            stdin = process.stdin
            for _ in range(3000):  # the loop sees the peer's close (at most 30 s)
                if stdin.transport.is_closing():
                    break
                await asyncio.sleep(0.01)
            assert stdin.transport.is_closing() and process.returncode is None
            raw = None
            try:
                stdin.write(b"{}\n\n")
            except RuntimeError as exc:
                raw = exc
            with pytest.raises(BrokenPipeError):
                write_input(stdin, b"{}\n\n")
            return raw
        finally:
            process.kill()
            await process.wait()
            process.close_pipes()

    raw = _run(loop, go)
    assert (raw is not None) == (loop == "uvloop"), raw  # what write_input stands in front of


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_exit_hooks_run_on_the_zombie_then_it_is_reaped(loop):
    async def go():
        process = await spawn_with_pipes(
            [sys.executable, "-c", "raise SystemExit(3)"], cwd=None, env={}
        )
        seen = []
        # Still a zombie in the hook: its status can be read without reaping it.
        process.add_exit_hook(
            lambda: seen.append(
                os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG).si_status
            )
        )
        code = await asyncio.wait_for(process.wait(), 30)
        late = []
        process.add_exit_hook(lambda: late.append(process.returncode))  # after: at once
        process.close_pipes()
        return process, code, seen, late

    process, code, seen, late = _run(loop, go)
    assert seen == [3] and code == 3 and late == [3]
    with pytest.raises(ChildProcessError):  # reaped: no zombie left
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG)


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_child_that_cannot_start_leaves_no_fd_open(loop):
    before = fds_on("pipe:")  # the pipes: other threads open files of their own meanwhile

    async def go():
        with pytest.raises(FileNotFoundError):
            await spawn_with_pipes(["/nonexistent/repl"], cwd=None, env={})

    _run(loop, go)
    assert fds_on("pipe:") == before


def test_serve_picks_its_loop_from_the_config(monkeypatch):
    assert Config().server.event_loop == "auto"  # the default: uvloop where it is installed
    assert loop_factory("auto") is uvloop.new_event_loop
    assert loop_factory("asyncio") is None
    assert loop_factory("uvloop") is uvloop.new_event_loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # not installed
    assert loop_factory("auto") is None  # asyncio's, with no error
    assert loop_factory("asyncio") is None
    with pytest.raises(UserError, match="uvloop is not installed"):
        loop_factory("uvloop")


@pytest.mark.parametrize("choice", ["uvloop", None], ids=["asked", "by-default"])
def test_serve_runs_on_uvloop_when_asked_and_by_default(tmp_path, choice):
    """`leanrpc serve` with event_loop = "uvloop", or with nothing said ("auto"):
    a worker boots (its audit passes), answers, and stops, on uvloop."""
    config = tmp_path / "server.toml"
    loop = "" if choice is None else f'event_loop = "{choice}"\n'
    config.write_text(f"[server]\n{loop}[cache]\nenabled = false\n")
    served = Served("--config", str(config))
    try:
        with Client(served.address, max_retries=0) as client:
            [result] = client.verify(["import Mathlib\n\ntheorem t : 1 = 1 := rfl\n"])
            assert result.status == "VALID", result.error
            loops = {
                m.path
                for m in psutil.Process(served.process.pid).memory_maps()
                if "uvloop" in m.path
            }
            assert loops, "the server did not load uvloop"
        served.process.send_signal(signal.SIGTERM)
        assert served.process.wait(timeout=60) == 0
    finally:
        served.kill()
