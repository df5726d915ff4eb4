"""The stdout reader thread (native/gather.pyx, issue 38 item 6): a watched pipe is read
only between `gather` and `park`, as bytes come, each read kept with its time; the door is
written only when the loop has something to do (every read while no needle is set; with
one, once the needle was read, across reads too; `cap` bytes waiting; the pipe's end);
`take` hands everything over in order, `park` and `unwatch` stop the reading."""

from __future__ import annotations

import os
import time

import pytest

from leanrpc._native import gather

TAG = 5


def _until(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def _doorbell(door: int) -> int:
    try:
        return os.eventfd_read(door)
    except BlockingIOError:
        return 0


@pytest.fixture
def rig():
    g = gather.Gatherer(cap=1000)
    door = os.eventfd(0, os.EFD_NONBLOCK)
    r, w = os.pipe()
    g.watch(1, r, door, TAG)
    g.gather(1, None)
    yield g, door, r, w
    g.unwatch(1)
    g.close()
    for fd in (door, r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def test_without_a_needle_every_read_rings_the_door(rig):
    g, door, _, w = rig
    os.write(w, b"one\n")
    _until(lambda: g.ready(TAG) == [1])
    assert _doorbell(door) == 1
    before = time.monotonic()
    chunks, ended = g.take(1)
    assert [c for c, _ in chunks] == [b"one\n"] and not ended
    assert chunks[0][1] <= before  # the time it was read, on time.monotonic's clock
    assert g.ready(TAG) == [] and g.take(1) == ([], False)


def test_with_a_needle_the_door_rings_once_it_was_read_even_split_across_reads(rig):
    g, door, _, w = rig
    g.gather(1, b"NONCE42")
    os.write(w, b"answer 1\n")
    _until(lambda: g.reads == 1)
    os.write(w, b"answer 2 NON")
    _until(lambda: g.reads == 2)
    time.sleep(0.02)
    assert g.ready(TAG) == [] and _doorbell(door) == 0  # read, kept, nobody woken
    os.write(w, b"CE42 fence\n")
    _until(lambda: g.ready(TAG) == [1])
    assert _doorbell(door) == 1 and g.signals == 1
    chunks, _ = g.take(1)
    assert [c for c, _ in chunks] == [b"answer 1\n", b"answer 2 NON", b"CE42 fence\n"]
    times = [t for _, t in chunks]
    assert times == sorted(times)


def test_a_needle_already_waiting_rings_at_once_and_none_hands_over_what_waits(rig):
    g, door, _, w = rig
    g.gather(1, b"XYZ")
    os.write(w, b"abc XYZ")
    _until(lambda: g.ready(TAG) == [1])
    g.take(1)
    os.write(w, b"before the needle was set")
    _until(lambda: g.reads == 2)
    g.gather(1, b"absent")  # searched in what waits: not there
    assert g.ready(TAG) == []
    g.gather(1, b"needle was")
    assert g.ready(TAG) == [1]
    g.take(1)
    g.gather(1, b"QQQ")
    os.write(w, b"no needle")
    _until(lambda: g.reads == 3)
    assert g.ready(TAG) == []
    g.gather(1, None)  # no needle now: what waits is to be taken
    assert g.ready(TAG) == [1]


def test_cap_bytes_waiting_ring_the_door(rig):
    g, _, _, w = rig
    g.gather(1, b"never")
    os.write(w, b"x" * 1500)
    _until(lambda: g.ready(TAG) == [1])
    chunks, ended = g.take(1)
    assert sum(len(c) for c, _ in chunks) == 1500 and not ended


def test_a_pipe_at_the_cap_is_not_read_until_taken_and_the_thread_does_not_spin(rig):
    g, _, _, w = rig
    g.gather(1, b"never")
    os.write(w, b"x" * 1500)
    _until(lambda: g.ready(TAG) == [1])
    reads, wakeups = g.reads, g.wakeups
    os.write(w, b"more")  # waits in the pipe: the thread's set no longer holds it
    time.sleep(0.05)
    assert g.reads == reads and g.wakeups == wakeups  # level-triggered: in the set, it would spin
    chunks, ended = g.take(1)
    assert sum(len(c) for c, _ in chunks) == 1500 and not ended
    _until(lambda: g.reads == reads + 1)  # back in the set once taken
    assert [c for c, _ in g.park(1)] == [b"more"]


def test_gather_park_take_and_unwatch_never_wake_the_thread():
    """The set holds exactly the pipes to be read now and is changed by the callers
    themselves: a batch's start and end cost the thread no wakeup; only bytes do."""
    g = gather.Gatherer()
    door = os.eventfd(0, os.EFD_NONBLOCK)
    r, w = os.pipe()
    try:
        g.watch(1, r, door, 1)
        for _ in range(50):
            g.gather(1, b"fence")
            g.take(1)
            g.park(1)
        time.sleep(0.05)
        assert g.wakeups == 0 and g.reads == 0
        g.gather(1, b"fence")
        os.write(w, b"an answer")
        _until(lambda: g.reads == 1)
        assert g.wakeups >= 1
        wakeups = g.wakeups
        assert [c for c, _ in g.park(1)] == [b"an answer"]
        g.unwatch(1)
        os.write(w, b"nobody's")
        time.sleep(0.05)
        assert g.wakeups == wakeups and os.read(r, 100) == b"nobody's"
    finally:
        g.close()
        for fd in (door, r, w):
            os.close(fd)


def test_a_forked_child_never_changes_its_parent_s_epoll_set(rig):
    """The child shares the parent's epoll instance (a copied descriptor), not its thread:
    a gatherer the child inherited may park and unwatch there (its loop's objects closing),
    and the parent's thread still reads its pipe."""
    g, _, _, w = rig
    pid = os.fork()
    if pid == 0:  # the child: park and unwatch the inherited copy, then leave at once
        code = 0
        try:
            g.park(1)
            g.unwatch(1)
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    os.write(w, b"still ours")
    _until(lambda: g.ready(TAG) == [1])
    assert [c for c, _ in g.take(1)[0]] == [b"still ours"]


def test_the_pipe_s_end_is_handed_over_and_the_watch_is_gone(rig):
    g, _, _, w = rig
    g.gather(1, b"never")
    os.write(w, b"last words")
    os.close(w)
    _until(lambda: g.ready(TAG) == [1])
    chunks, ended = g.take(1)
    assert [c for c, _ in chunks] == [b"last words"] and ended
    assert g.watched == 0 and g.take(1) == ([], True)


def test_a_parked_pipe_is_not_read_and_park_hands_over_what_waits(rig):
    g, _, r, w = rig
    g.gather(1, b"never")
    os.write(w, b"read by the thread")
    _until(lambda: g.reads == 1)
    assert [c for c, _ in g.park(1)] == [b"read by the thread"]
    os.write(w, b"the caller's own reader's")
    time.sleep(0.05)
    assert g.reads == 1 and g.ready(TAG) == [] and g.park(1) == []
    assert os.read(r, 100) == b"the caller's own reader's"
    g.gather(1, None)  # read again from here
    os.write(w, b"again")
    _until(lambda: g.ready(TAG) == [1])
    assert [c for c, _ in g.take(1)[0]] == [b"again"]


def test_a_watch_starts_parked():
    g = gather.Gatherer()
    door = os.eventfd(0, os.EFD_NONBLOCK)
    r, w = os.pipe()
    try:
        g.watch(1, r, door, 1)
        os.write(w, b"not read")
        time.sleep(0.05)
        assert g.reads == 0 and os.read(r, 100) == b"not read"
        g.unwatch(1)
    finally:
        g.close()
        for fd in (door, r, w):
            os.close(fd)


def test_after_unwatch_the_pipe_is_never_read_again(rig):
    g, _, r, w = rig
    os.write(w, b"taken")
    _until(lambda: g.reads == 1)
    assert [c for c, _ in g.unwatch(1)] == [b"taken"]
    os.write(w, b"left in the pipe")
    time.sleep(0.05)
    assert os.read(r, 100) == b"left in the pipe" and g.reads == 1 and g.watched == 0


def test_doors_are_apart_and_a_reused_descriptor_is_read_for_its_new_watch():
    g = gather.Gatherer()
    doors = [os.eventfd(0, os.EFD_NONBLOCK) for _ in range(2)]
    first = os.pipe()
    try:
        g.watch(1, first[0], doors[0], 1)
        g.gather(1, None)
        g.unwatch(1)
        second = os.pipe()
        g.watch(2, second[0], doors[1], 2)  # may get the same dup'd number the first had
        g.gather(2, None)
        os.write(first[1], b"old pipe")
        os.write(second[1], b"new pipe")
        _until(lambda: g.ready(2) == [2])
        assert g.ready(1) == [] and _doorbell(doors[0]) == 0
        assert [c for c, _ in g.take(2)[0]] == [b"new pipe"]
        assert os.read(first[0], 100) == b"old pipe"
        g.unwatch(2)
        for fd in second:
            os.close(fd)
    finally:
        g.close()
        for fd in (*doors, *first):
            os.close(fd)


def test_a_needle_must_be_1_to_64_bytes(rig):
    g = rig[0]
    with pytest.raises(ValueError):
        g.gather(1, b"")
    with pytest.raises(ValueError):
        g.gather(1, b"x" * 65)
    g.gather(99, b"unknown key: nothing to do")


def test_close_stops_the_thread():
    g = gather.Gatherer()
    g.close()
    g.close()  # idempotent
    r, w = os.pipe()
    door = os.eventfd(0, os.EFD_NONBLOCK)
    try:
        g.watch(1, r, door, 1)
        g.gather(1, None)
        os.write(w, b"nobody reads")
        time.sleep(0.05)
        assert g.reads == 0
        g.unwatch(1)
    finally:
        for fd in (r, w, door):
            os.close(fd)


def test_the_thread_s_copy_of_a_pipe_is_never_inherited_by_a_child(rig):
    """A REPL started later must not hold another worker's stdout: the copy is close-on-exec
    (the door's copy is made the same way)."""
    import fcntl

    r, w = rig[2], rig[3]
    target = os.readlink(f"/proc/self/fd/{r}")  # pipe:[inode], this pipe's alone (both ends)
    copies = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if int(name) not in (r, w) and os.readlink(f"/proc/self/fd/{name}") == target:
                copies.append(int(name))
        except OSError:
            continue
    assert len(copies) == 1  # the thread's
    assert fcntl.fcntl(copies[0], fcntl.F_GETFD) & fcntl.FD_CLOEXEC
