"""The cheap memory watch (issue 28): one status read per process, the fd scan
only when memfds may exist, one cgroup file when the worker has its own."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from leanrpc.worker import memory
from leanrpc.worker.memory import TreeMemory, tree_memory_bytes, tree_pids
from testkit import fds_on

# /proc/meminfo is held open only where the extensions are off (the system's Shmem is
# otherwise one sysinfo(2) call: worker/memory.py).
MEMINFO = 1 if memory._native is None else 0


def _held_for(pids):
    """Counts this process's fds on the tree's /proc files (and /proc/meminfo
    where the watch holds it): the files a watch holds, whatever other
    threads of the test process open meanwhile (testkit.fds_on)."""
    prefixes = tuple(f"/proc/{pid}/" for pid in pids) + (("/proc/meminfo",) if MEMINFO else ())
    return lambda: fds_on(*prefixes)


# A child that holds a memfd written with write(2) (never mapped: no RSS shows
# it) and grows it by 64 MB each time it reads a line.
_HOLDER = """
import os, sys
fd = os.memfd_create("leanrpc-watch-test")
print("ready", flush=True)
for line in sys.stdin:
    os.write(fd, b"x" * (64 << 20))
    print("grown", flush=True)
"""


def _start_holder():
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "ready"
    return child


def _grow(child) -> None:
    child.stdin.write("grow\n")
    child.stdin.flush()
    assert child.stdout.readline().strip() == "grown"


def test_an_unmapped_memfd_is_counted_at_release_without_a_periodic_scan():
    child = _start_holder()
    try:
        watch = TreeMemory(child.pid)
        before = watch.sample(periodic_scan=False)
        scans = watch.fd_scans
        _grow(child)
        # System Shmem rose by 64 MB: the release-time sample scans the fds.
        after = watch.sample(periodic_scan=False)
        assert watch.fd_scans == scans + 1
        assert watch.shmem_seen
        assert after - before >= 64 << 20
        # Once seen, every sample scans (the memfd can grow between samples).
        watch.sample(periodic_scan=False)
        assert watch.fd_scans == scans + 2
        # The same sum as the full walk.
        assert abs(after - tree_memory_bytes([child.pid])) < 8 << 20
    finally:
        child.kill()
        child.wait()


def test_no_fd_scan_at_release_when_no_memfd_was_seen(monkeypatch):
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        watch = TreeMemory(child.pid)
        watch.sample()  # the first (periodic) scan: nothing held
        assert not watch.shmem_seen
        scanned = []
        monkeypatch.setattr(memory, "_held_shmem", lambda pid: scanned.append(pid) or {})
        monkeypatch.setattr(TreeMemory, "_system_shmem", lambda self: 0)  # no Shmem growth
        for _ in range(5):
            assert watch.sample(periodic_scan=False) > 0
        assert scanned == []
    finally:
        child.kill()
        child.wait()


def test_tree_pids_follows_the_children_files():
    child = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys; subprocess.run(['sleep', '30'])"]
    )
    try:
        deadline = time.monotonic() + 10
        while len(tree_pids(child.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        pids = tree_pids(child.pid)
        assert pids[0] == child.pid and len(pids) == 2
    finally:
        for pid in tree_pids(child.pid)[1:]:
            subprocess.run(["kill", "-9", str(pid)])
        child.kill()
        child.wait()


def test_a_worker_cgroup_is_read_from_memory_stat_alone(tmp_path, monkeypatch):
    (tmp_path / "memory.stat").write_text(
        "anon 3000\nfile 999999\nkernel 5\nshmem 400\nfile_mapped 7\n"
    )
    monkeypatch.setattr(
        TreeMemory,
        "_status",
        lambda self, pid: (_ for _ in ()).throw(AssertionError("walked /proc")),
    )
    watch = TreeMemory(1, cgroup_dir=str(tmp_path))
    assert watch.sample() == 3400  # anon + shmem; page cache (file) left out
    assert watch.fd_scans == 0


def test_the_status_files_held_open_follow_the_tree_and_close():
    """Samples re-read held files (issue 28); a process that left the tree has
    its file closed at the next listing, and close() leaves no fd behind."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, time; subprocess.run(['sleep', '30']); time.sleep(30)",
        ]
    )
    try:
        deadline = time.monotonic() + 10
        while len(tree_pids(child.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        held = _held_for(tree_pids(child.pid))
        before = held()
        watch = TreeMemory(child.pid)
        first = watch.sample()
        assert first > 0 and held() == before + 2 + MEMINFO  # two status files (and meminfo)
        assert watch.sample() > 0 and held() == before + 2 + MEMINFO  # re-read, not reopened
        grandchild = tree_pids(child.pid)[1]
        os.kill(grandchild, 9)
        while len(tree_pids(child.pid)) > 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        watch._listed_at = float("-inf")  # the next sample lists the tree again
        assert watch.sample() > 0 and held() == before + 1 + MEMINFO
        watch.close()
        assert held() == before
    finally:
        child.kill()
        child.wait()


# A child that maps a file it wrote (page cache, not counted) and, on a line,
# allocates 64 MB of anonymous memory it touches.
_MAPPER = """
import mmap, os, sys, tempfile
with tempfile.TemporaryFile() as f:
    f.write(b"x" * (64 << 20))
    f.flush()
    mapped = mmap.mmap(f.fileno(), 64 << 20, prot=mmap.PROT_READ)
    sum(mapped[i] for i in range(0, 64 << 20, 4096))  # resident file pages
    print("ready", flush=True)
    held = []
    for line in sys.stdin:
        held.append(bytearray(b"y" * (64 << 20)))
        print("grown", flush=True)
"""


def test_the_polls_bound_answers_within_the_limit_and_the_exact_sum_decides_over_it():
    """Issue 38 item 6: the poll reads statm (resident pages) and reads status
    only when that bound is over the limit; the answer over the limit is the
    exact sum, so the verdict is the one the exact sum gives."""
    child = subprocess.Popen(
        [sys.executable, "-c", _MAPPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        watch = TreeMemory(child.pid)
        exact = watch.sample()
        reads = watch.exact_reads
        # Far within: the bound (resident, file pages included) answers, no status read.
        bound = watch.sample(limit=exact + (1 << 30))
        assert watch.exact_reads == reads
        assert exact <= bound <= exact + (1 << 30)
        assert bound >= exact + (48 << 20)  # the 64 MB of mapped file pages are in the bound
        # The mapped file brings the bound over a limit the exact sum is within:
        # the exact sum is read and answers (no false OUT_OF_MEMORY).
        limit = exact + (24 << 20)
        answer = watch.sample(limit=limit)
        assert watch.exact_reads == reads + 1
        assert answer <= limit and abs(answer - exact) < (16 << 20)
        # 64 MB more anonymous memory: over the same limit, by the exact sum.
        child.stdin.write("grow\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "grown"
        over = watch.sample(limit=limit)
        assert watch.exact_reads == reads + 2
        assert over > limit and abs(over - watch.sample()) < (16 << 20)
    finally:
        child.kill()
        child.wait()


def test_the_statm_files_held_open_follow_the_tree_and_close():
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    held = _held_for([child.pid])
    before = held()
    try:
        watch = TreeMemory(child.pid)
        assert watch.sample(limit=1 << 40) > 0 and held() == before + 1 + MEMINFO  # statm
        assert watch.sample(limit=1 << 40) > 0 and held() == before + 1 + MEMINFO  # re-read
        assert watch.sample(limit=1) > 1 and held() == before + 2 + MEMINFO  # over: status too
        watch.close()
        assert held() == before
    finally:
        child.kill()
        child.wait()
