"""The memory watch's C thread (native/memwatch.pyx, issue 38 item 6): it answers "within"
for an armed tree exactly while the poll's fast path would (statm bound plus held bytes
within the limit, the system's Shmem not grown by the step), makes the tree's due list
refresh and fd scan itself, and hands every other tree back, disarmed; it sleeps while
nothing is armed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from leanrpc._native import memwatch

PERIOD_S = 0.02
PAGE = os.sysconf("SC_PAGE_SIZE")
FAR = 1 << 40  # a limit no test process reaches
STEP = 16 << 20

# A process holding 40 MB it touched; on a line `fork` it starts a child of its own, on
# any other line it opens a memfd (and writes nothing to it).
_CHILD = """
import os, subprocess, sys
x = bytearray(40 << 20)
kept = []
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "fork":
        kept.append(subprocess.Popen(["sleep", "60"]))
    else:
        kept.append(os.memfd_create("leanrpc-native-watch-held"))
    print("done", flush=True)
"""


class Handed:
    """What the watcher handed back, and on which thread."""

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.threads: set[str] = set()
        self.event = threading.Event()

    def __call__(self, keys: list[int]) -> None:
        self.keys.extend(keys)
        self.threads.add(threading.current_thread().name)
        self.event.set()

    def wait(self, within_s: float = 5.0) -> list[int]:
        assert self.event.wait(within_s), "nothing was handed back"
        return self.keys


@pytest.fixture
def child():
    """The process of `_CHILD`, and its statm file held open."""
    process = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "ready"
    fd = os.open(f"/proc/{process.pid}/statm", os.O_RDONLY)
    yield process, fd
    os.close(fd)
    for below in _children(process.pid):
        os.kill(below, 9)
    process.kill()
    process.wait()


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def _ask(process, what: str) -> None:
    process.stdin.write(what + "\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "done"


def _resident(fd: int) -> int:
    return int(os.pread(fd, 256, 0).split()[1]) * PAGE


@pytest.fixture
def handed():
    return Handed()


@pytest.fixture
def watcher(handed):
    made = memwatch.Watcher(PERIOD_S, handed, PAGE)
    yield made
    made.close()


def _arm(watcher, key, process, fd, *, limit=FAR, held=0, base=None, due=60.0, fds=None):
    """`watcher.arm` for the child's tree: its statm file(s), due `due` seconds from now."""
    fds = [fd] if fds is None else fds
    pids = [process.pid, *_children(process.pid)][: len(fds)] if fds else []
    base = memwatch.shared_memory_bytes() if base is None else base
    watcher.arm(key, fds, held, limit, base, STEP, time.monotonic() + due, -1, pids, 1.0)


def test_a_tree_within_its_limit_is_looked_at_each_period_and_never_handed_back(
    watcher, handed, child
):
    _arm(watcher, 1, *child)
    time.sleep(PERIOD_S * 10)
    assert watcher.ticks >= 4 and watcher.armed == 1
    assert handed.keys == []


def test_a_tree_over_its_limit_is_handed_back_once_and_disarmed(watcher, handed, child):
    resident = _resident(child[1])
    # The held shared-memory bytes count too: the pages alone are within, pages + held are not.
    _arm(watcher, 7, *child, held=8 << 20, limit=resident + (4 << 20))
    assert handed.wait() == [7]
    assert watcher.armed == 0
    assert handed.threads == {f"leanrpc-memwatch-{PERIOD_S:g}s"}  # its own thread
    time.sleep(PERIOD_S * 5)
    assert handed.keys == [7]  # once


def test_a_due_list_refresh_and_fd_scan_are_made_on_the_thread(watcher, handed, child):
    """Due now: the thread lists the tree's children and its fds itself; nothing new, so
    the tree stays armed (its next rescan a second later); a new child hands it back."""
    process, fd = child
    _arm(watcher, 3, *child, due=0)
    time.sleep(PERIOD_S * 5)
    assert handed.keys == [] and watcher.armed == 1 and watcher.ticks >= 2
    _ask(process, "fork")  # a child the tree's list lacks
    watcher.arm(3, [fd], 0, FAR, memwatch.shared_memory_bytes(), STEP, 0.0, -1, [process.pid])
    assert handed.wait() == [3]
    # Known to the list (as after the sample's refresh): within again.
    grandchild = _children(process.pid)[0]
    extra = os.open(f"/proc/{grandchild}/statm", os.O_RDONLY)
    try:
        _arm(watcher, 4, *child, due=0, fds=[fd, extra])
        time.sleep(PERIOD_S * 5)
        assert handed.keys == [3] and watcher.armed == 1
    finally:
        os.close(extra)


def test_a_shared_memory_file_held_is_found_at_the_threads_fd_scan(watcher, handed, child):
    process, _fd = child
    _ask(process, "memfd")  # empty: no Shmem growth shows it, only an fd scan
    _arm(watcher, 5, *child)
    time.sleep(PERIOD_S * 5)
    assert handed.keys == []  # not due yet
    _arm(watcher, 5, *child, due=0)
    assert handed.wait() == [5]


def test_shared_memory_grown_by_the_step_over_the_lowest_base_hands_the_tree_back(
    watcher, handed, child
):
    # A base above today's Shmem is lowered to what the thread reads (as the sample does),
    # so a growth of one step from there counts, not from the stale base.
    _arm(watcher, 5, *child, base=memwatch.shared_memory_bytes() + (64 << 20))
    time.sleep(PERIOD_S * 5)
    assert handed.keys == []
    grown = os.memfd_create("leanrpc-native-watch-test")
    try:
        for _ in range(3):
            os.write(grown, b"x" * (8 << 20))  # 24 MB of Shmem that no RSS shows
        assert handed.wait() == [5]
    finally:
        os.close(grown)


def test_a_gone_process_counts_nothing_and_a_file_that_is_no_statm_is_handed_back(
    watcher, handed, child, tmp_path
):
    process, fd = child
    pid = process.pid
    process.kill()
    process.wait()
    watcher.arm(
        1, [fd], 0, 1, memwatch.shared_memory_bytes(), STEP, time.monotonic() + 60, -1, [pid]
    )
    time.sleep(PERIOD_S * 5)
    assert handed.keys == [] and watcher.armed == 1  # 0 bytes: within even 1
    odd = tmp_path / "statm"
    odd.write_text("12 x 3\n")
    odd_fd = os.open(odd, os.O_RDONLY)
    try:
        watcher.arm(2, [odd_fd], 0, FAR, 0, STEP, time.monotonic() + 60, -1, [pid])
    finally:
        os.close(odd_fd)  # the watcher holds its own copy
    assert handed.wait() == [2]


def test_a_root_whose_children_cannot_be_listed_is_handed_back_at_its_rescan(
    watcher, handed, child
):
    process, fd = child
    pid = process.pid
    process.kill()
    process.wait()  # reaped: no /proc/<pid> left to list
    watcher.arm(6, [fd], 0, FAR, memwatch.shared_memory_bytes(), STEP, 0.0, -1, [pid])
    assert handed.wait() == [6]


def test_nothing_armed_means_no_look_and_a_disarmed_tree_is_never_handed_back(
    watcher, handed, child
):
    time.sleep(PERIOD_S * 5)
    assert watcher.ticks == 0
    _arm(watcher, 4, *child, limit=1)
    watcher.disarm(4)
    time.sleep(PERIOD_S * 5)
    assert handed.keys == [] and watcher.armed == 0 and watcher.ticks == 0


def test_a_paused_tree_is_released_at_the_next_tick_unless_resumed(watcher, handed, child):
    _arm(watcher, 8, *child, limit=1 << 20)  # over: handed back at a tick, unless paused
    watcher.pause(8)
    assert watcher.resume(8)  # its next exchange came first
    assert handed.wait() == [8]
    handed.event.clear()
    _arm(watcher, 9, *child)
    watcher.pause(9)  # no exchange follows: released
    time.sleep(PERIOD_S * 5)
    assert handed.keys == [8] and watcher.armed == 0
    assert not watcher.resume(9)  # gone: the next exchange arms afresh


def test_arming_again_replaces_the_tree_and_bad_arguments_are_refused(watcher, handed, child):
    process, fd = child
    _arm(watcher, 9, *child)
    _arm(watcher, 9, *child, limit=1 << 20)  # now over
    assert handed.wait() == [9]
    base = memwatch.shared_memory_bytes()
    with pytest.raises(ValueError):
        watcher.arm(10, [fd] * 33, 0, FAR, base, STEP, 0.0, -1, [process.pid] * 33)
    with pytest.raises(ValueError):
        watcher.arm(11, [fd], 0, FAR, base, STEP, 0.0)  # no pid for the file
    assert watcher.armed == 0


def test_a_tree_in_its_own_cgroup_is_read_from_its_memory_stat(watcher, handed, tmp_path):
    stat = tmp_path / "memory.stat"
    stat.write_text("anon 4096\nfile 999999999999\nkernel 5\nshmem 4096\nfile_mapped 7\n")
    fd = os.open(stat, os.O_RDONLY)
    try:
        # anon + shmem (page cache left out), within 8 KiB: the statm arguments are unused.
        watcher.arm(1, [], 0, 8192, 0, 0, 0.0, fd)
        time.sleep(PERIOD_S * 5)
        assert handed.keys == [] and watcher.armed == 1
        stat.write_text("anon 4096\nfile 0\nshmem 4097\n")  # over by one byte
        assert handed.wait() == [1]
        handed.event.clear()
        stat.write_text("anon 4096\nfile 0\n")  # no shmem line: not read for certain
        watcher.arm(2, [], 0, 1 << 40, 0, 0, 0.0, fd)
        assert handed.wait() == [1, 2]
    finally:
        os.close(fd)


def test_shared_memory_bytes_is_the_kernels_shmem_counter():
    # NR_SHMEM as /proc/vmstat prints it (in pages; /proc/meminfo's `Shmem` is the same
    # counter, but lxcfs may serve a container its own view of meminfo), a moment apart.
    with open("/proc/vmstat") as f:
        pages = next(int(line.split()[1]) for line in f if line.startswith("nr_shmem "))
    assert abs(memwatch.shared_memory_bytes() - pages * PAGE) < (8 << 20)


def test_close_stops_the_thread_at_once():
    period = 0.0173  # a thread name no other watcher of the run has
    made = memwatch.Watcher(period, Handed(), PAGE)
    name = f"leanrpc-memwatch-{period:g}s"
    assert any(t.name == name for t in threading.enumerate())
    started = time.monotonic()
    made.close()
    assert time.monotonic() - started < 1.0
    assert not any(t.name == name and t.is_alive() for t in threading.enumerate())
