"""The sandbox entry's stdlib-only /proc walk (security/enter.py `_descendants`)
and the server's one walk (worker/proctree.py) find the same processes,
and the ones psutil finds, on a real tree: children of two levels, and a child
forked by a second thread (only that thread's children file names it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from leanrpc.security import enter
from leanrpc.worker import launcher, memory, proctree

# A parent with a shell child (which has a sleep child) and a sleep started from a thread.
TREE = """
import subprocess, sys, threading, time
subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
threading.Thread(target=lambda: subprocess.Popen(["sleep", "60"])).start()
print("ready", flush=True)
time.sleep(60)
"""


def test_the_sandbox_twin_and_the_one_walk_agree_on_a_real_tree():
    parent = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        expected: set[int] = set()
        for _ in range(200):  # the grandchild sleep appears once the shell has forked it
            expected = {p.pid for p in psutil.Process(parent.pid).children(recursive=True)}
            if len(expected) == 3:
                break
            time.sleep(0.02)
        assert len(expected) == 3, expected
        assert set(enter._descendants(parent.pid)) == expected
        assert set(proctree.descendants(parent.pid)) == expected
        assert set(launcher.descendants(parent.pid)) == expected
        assert set(memory.tree_pids(parent.pid)) == expected | {parent.pid}
        walked = list(proctree.walk(parent.pid))
        assert walked[0] == parent.pid and len(walked) == len(set(walked)) == 4
    finally:
        for pid in proctree.descendants(parent.pid):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        parent.kill()
        parent.wait()


def test_a_gone_process_has_no_tree():
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert enter._descendants(gone.pid) == [] == proctree.descendants(gone.pid)
    assert memory.tree_pids(gone.pid) == [gone.pid]
