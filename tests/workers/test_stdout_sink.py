"""The REPL's stdout goes to the channel in the pipe's read callback (issue 28:
no call_soon hop, StreamReader or reader task per chunk); during a pipelined batch it comes
from the reader thread instead (worker/gathered.py, where the compiled build has it; tested
in test_gathered_stdout.py). Every byte once, in order, and the end once, and the process
still finishes (wait() returns). A process without pipe transports is read by a task
instead."""

from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace

import pytest

from leanrpc.worker import gathered, stdout
from leanrpc.worker.pipes import spawn_with_pipes

_WRITER = "import sys\nfor k in range(200):\n    sys.stdout.write(f'{k:05d}\\n' * 50)\n    sys.stdout.flush()\n"


async def _collect(process) -> tuple[bytes, int, object]:
    got, ends = bytearray(), []
    closed = asyncio.Event()

    def on_close() -> None:
        ends.append(1)
        closed.set()

    reading = stdout.attach(process, lambda data, at: got.extend(data), on_close, "t")
    await asyncio.wait_for(closed.wait(), 30)
    await asyncio.sleep(0.05)  # a second end would come now
    return bytes(got), len(ends), reading


@pytest.mark.parametrize("without_thread", [False, True], ids=["as-built", "no-reader-thread"])
async def test_a_child_s_stdout_arrives_whole_without_a_reader_task(without_thread, monkeypatch):
    if without_thread:
        monkeypatch.setattr(gathered, "_native", None)
    registered = gathered._native is not None  # built on Linux with the extensions on
    process = await spawn_with_pipes([sys.executable, "-c", _WRITER], cwd=None, env={})
    got, ends, reading = await _collect(process)
    await process.wait()
    assert reading.task is None  # straight from the pipe transport, or the thread
    assert reading.gathered is registered  # (it reads only during a batch: none here)
    assert got == b"".join(f"{k:05d}\n".encode() * 50 for k in range(200)) and ends == 1


async def test_without_the_protocol_a_task_reads_the_same():
    reader = asyncio.StreamReader()
    fake = SimpleNamespace(stdout=reader)  # no pipe transports: another launcher's process
    for k in range(3):
        reader.feed_data(f"{k}\n".encode())
    reader.feed_eof()
    got, ends, reading = await _collect(fake)
    assert reading.task is not None and reading.task.done() and not reading.gathered
    assert got == b"0\n1\n2\n" and ends == 1


async def test_bytes_that_arrived_before_attach_are_read_by_the_task_not_lost():
    """The direct path is taken only while the pipe's protocol has passed on no
    byte (its own count, not asyncio's private buffer): a child that wrote
    before `attach` is read by the task, from the first byte."""
    code = "import sys, time\nsys.stdout.write('early\\n'); sys.stdout.flush()\ntime.sleep(0.3)\nsys.stdout.write('late\\n')\n"
    process = await spawn_with_pipes([sys.executable, "-c", code], cwd=None, env={})
    protocol = process.pipe_transport(1).get_protocol()
    for _ in range(1000):  # until the early line is in the reader
        if protocol.received:
            break
        await asyncio.sleep(0.01)
    assert protocol.received == len(b"early\n")
    got, ends, reading = await _collect(process)
    await process.wait()
    assert reading.task is not None  # the reader already held bytes: no direct path
    assert got == b"early\nlate\n" and ends == 1
