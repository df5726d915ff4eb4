"""The audit's held /proc directories (issue 28): a process that joins the
tree holding our pipes after the baseline is still caught, its directories
are closed once it is gone, and close() leaves no fd behind."""

from __future__ import annotations

import os
import subprocess
import sys

from leanrpc.worker.audit import PipeAudit
from leanrpc.worker.memory import tree_pids
from testkit import fds_on

# Reads lines; "fork" starts a child that inherits (and holds) the pipes.
_REPL = """
import os, sys, time
kids = []
for line in sys.stdin:
    if line.strip() == "fork":
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
    elif line.strip() == "reap":
        for pid in kids:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        kids.clear()
    print("ok", flush=True)
    if line.strip() == "nap":
        time.sleep(0.5)  # answered, but not back at reading its input yet
"""


async def test_a_process_joining_the_tree_after_the_baseline_is_caught_and_its_dirs_closed():
    child = subprocess.Popen(
        [sys.executable, "-c", _REPL],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    inodes = tuple(os.fstat(p.fileno()).st_ino for p in (child.stdin, child.stdout, child.stderr))
    tree = {child.pid}  # every process the tree had: the audit's held folders are theirs
    held = lambda: fds_on(*(f"/proc/{pid}/" for pid in tree))  # noqa: E731
    assert held() == 0
    try:
        audit = PipeAudit(child.pid, inodes, settle_s=30.0)
        assert await audit.record_baseline() is None
        assert held() > 0  # the REPL's /proc folders, held open
        assert await audit.check() is None  # the held directories read the same tree again

        def say(line: str) -> None:
            child.stdin.write(line + "\n")
            assert child.stdout.readline().strip() == "ok"
            tree.update(tree_pids(child.pid))

        say("fork")
        problem = await audit.check()
        assert problem is not None and "file descriptors on the REPL's pipes changed" in problem, (
            problem
        )
        say("reap")
        assert await audit.check() is None  # back to the baseline tree
        say("fork")  # a new process again (perhaps a reused pid): seen afresh
        assert "file descriptors on the REPL's pipes changed" in (await audit.check() or "")
        say("reap")
        audit.close()
        assert held() == 0 and len(tree) == 3  # the REPL and two forks
    finally:
        child.kill()
        child.wait()


async def test_a_repl_that_exits_after_the_baseline_is_gone_not_vouched_for():
    """The audit asks whether the REPL runs only when a snapshot does not settle
    (issue 28): a zombie (exited, not yet reaped) and a reaped process both end
    the audit with ProcessGone, through the files held open since the baseline."""
    import pytest

    from leanrpc.worker.audit import ProcessGone

    for reap in (False, True):
        child = subprocess.Popen(
            [sys.executable, "-c", _REPL],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        inodes = tuple(
            os.fstat(p.fileno()).st_ino for p in (child.stdin, child.stdout, child.stderr)
        )
        audit = PipeAudit(child.pid, inodes, settle_s=30.0)
        try:
            assert await audit.record_baseline() is None
            assert await audit.check() is None
            os.kill(child.pid, 9)
            os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie now, not reaped
            if reap:
                child.wait()
            with pytest.raises(ProcessGone):
                await audit.check()
        finally:
            audit.close()
            child.kill()
            child.wait()


async def test_a_repl_not_yet_back_at_its_input_is_waited_for_with_one_snapshot():
    """While the reader thread is elsewhere (here: asleep after answering) the
    audit waits on its syscall file alone, then takes one snapshot (issue 28)."""
    child = subprocess.Popen(
        [sys.executable, "-c", _REPL],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    inodes = tuple(os.fstat(p.fileno()).st_ino for p in (child.stdin, child.stdout, child.stderr))
    audit = PipeAudit(child.pid, inodes, settle_s=30.0)
    try:
        assert await audit.record_baseline() is None
        child.stdin.write("nap\n")
        assert child.stdout.readline().strip() == "ok"
        before = audit.snapshots
        assert await audit.check() is None
        assert audit.snapshots == before + 1
    finally:
        audit.close()
        child.kill()
        child.wait()
