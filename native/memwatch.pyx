# cython: language_level=3
"""The memory watch's poll in a thread of its own that holds no GIL
(issue 38 item 6): one look at every busy worker tree per period, in C.

Why: the watch (worker/memwatch.py) looks at each busy worker every
`limits.memory_poll_s` (0.1 s). On the event loop a look woke the server,
ran Python and read /proc after 100 ms asleep, everything cold: about
0.2 ms of the main thread per tick, 3 ms of server CPU per busy second,
a tenth of a snippet's CPU at the benchmark's pace. Almost every look
answers "within the limit" from the same few numbers. Here those numbers
are read by a C loop that never takes the GIL for them; the event loop is
woken only for what this loop cannot decide.

What a look decides here is exactly the fast path of
`TreeMemory.sample(limit=...)` (worker/memory.py, whose docstring says
why it is sound): for an armed tree,
  * the sum of each process's resident pages (`/proc/<pid>/statm`, the
    tree's own files, handed over and dup'd here so that they stay bound to
    their processes) times the page size, plus the held shared-memory
    bytes, is within the limit, and
  * the system's shared memory (`sysinfo(2)`'s `sharedram`, the kernel's
    NR_SHMEM, the counter /proc/meminfo prints as `Shmem`) has not grown by
    `step` over the tree's base (lowered to the least seen, as the sample
    does), and
  * the tree's next process-list refresh or fd scan is not due; when it is, it is made
    here: no process of the tree has a child the tree does not know
    (`/proc/<pid>/task/<tid>/children`, every thread's, as worker/proctree.py walks) and
    none holds a shared-memory file (`/proc/<pid>/fd` links to `/memfd:`, `/dev/shm/`,
    `/SYSV`, as worker/memory.py scans); then the next one is due a rescan period later
    and the Shmem base is today's (as after the sample's scan).
A tree in a worker cgroup of its own is armed with its `memory.stat` instead (the
sample reads that file alone then): `anon` + `shmem` within the limit, parsed here.
A tree whose exchange ended is paused, and released at the next tick unless its next
exchange resumed it first: back-to-back exchanges cost two flag writes, no system call and
no wakeup of this thread. Anything else (over, grown, a new child, a shared-memory file held, a file or folder that
does not read as expected) is
"look": the tree is disarmed and its key handed to `notify` (with the GIL,
on this thread); the caller then runs the whole Python sample and arms the
tree again. A file that cannot be read (its process is gone) counts 0, as
in the sample. With no tree armed the thread sleeps in poll(2) until one
is: an idle server pays no wakeup.

Owns: `Watcher` (`arm`, `disarm`, `close`) and `shared_memory_bytes`; what each /proc
and cgroup file says is read by leanrpc/_native/proc_reads.pxd (inline, cimported).
May import: the C library, CPython, leanrpc._native.proc_reads and
leanrpc._native.thread_waits (cimport).
Why one room: the table of armed trees, its mutex and the thread that looks at it are one
lifecycle (arm, pause, look, hand back, release); the readers of what it looks at are
already apart (proc_reads.pxd).
"""

from libc.stdlib cimport free, realloc
from libc.string cimport memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport close, dup, read, write

from leanrpc._native.proc_reads cimport (
    c_sysinfo,
    cgroup_bytes,
    get_sysinfo,
    holds_shared_memory,
    new_child,
    statm_pages,
)
from leanrpc._native.thread_waits cimport (
    EFD_CLOEXEC,
    EFD_NONBLOCK,
    POLLIN,
    eventfd,
    poll,
    pollfd,
    pthread_mutex_destroy,
    pthread_mutex_init,
    pthread_mutex_lock,
    pthread_mutex_t,
    pthread_mutex_unlock,
)

import os
import threading


DEF MAX_FDS = 32  # processes per tree; a larger tree is watched by the Python ticker

cdef struct Entry:
    long long key
    int armed
    int paused  # between exchanges: released (not looked at) at the next tick unless resumed
    int cgroup_fd  # memory.stat of the tree's own cgroup (dup'd), or -1: the statm files
    int nfds
    int fds[MAX_FDS]
    int pids[MAX_FDS]  # the process of each statm file (the tree's list, root first)
    double rescan_s  # how long a list refresh and fd scan stay good
    long long held
    long long limit
    long long shmem_base
    long long step
    double due


def shared_memory_bytes():
    """The system's shared memory in bytes (sysinfo's sharedram: NR_SHMEM, /proc/meminfo's
    `Shmem`), one system call; 0 if it fails."""
    cdef c_sysinfo info
    if get_sysinfo(&info) != 0:
        return 0
    return <long long>info.sharedram * <long long>info.mem_unit


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef class Watcher:
    """One poll thread for every armed tree, at one period (see the module docstring)."""

    cdef pthread_mutex_t _mutex
    cdef Entry *_entries
    cdef int _size
    cdef int _capacity
    cdef int _armed
    cdef int _wake
    cdef bint _stop
    cdef bint _idle
    cdef double _period
    cdef double _next
    cdef long long _page
    cdef long long *_out
    cdef int _out_capacity
    cdef object _notify
    cdef object _thread
    cdef readonly long long ticks  # the thread's looks (for tests)

    def __cinit__(self):
        pthread_mutex_init(&self._mutex, NULL)
        self._entries = NULL
        self._out = NULL
        self._wake = -1

    def __init__(self, double period_s, notify, long long page_size):
        """`notify(keys)` is called on the watcher's thread, with the GIL, with the keys
        of the trees to look at in Python (disarmed by then)."""
        if period_s <= 0:
            raise ValueError("the period must be positive")
        self._period = period_s
        self._page = page_size
        self._notify = notify
        self._wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)
        if self._wake < 0:
            raise OSError("eventfd failed")
        self._thread = threading.Thread(
            target=self._run, name=f"leanrpc-memwatch-{period_s:g}s", daemon=True
        )
        self._thread.start()

    def __dealloc__(self):
        cdef int i, j
        if self._entries != NULL:
            for i in range(self._size):
                self._release(i)
            free(self._entries)
        if self._out != NULL:
            free(self._out)
        if self._wake >= 0:
            close(self._wake)
        pthread_mutex_destroy(&self._mutex)

    def arm(self, long long key, fds, long long held, long long limit, long long shmem_base,
            long long step, double due, int cgroup_fd=-1, pids=(), double rescan_s=1.0):
        """Watch tree `key` from the next tick on: `fds` its processes' statm files (dup'd
        here) and `pids` those processes (root first), `held` its shared-memory files'
        bytes, `due` (time.monotonic) when its list refresh and fd scan are next made (then
        every `rescan_s`); or, with `cgroup_fd` (dup'd), its cgroup's memory.stat alone.
        Replaces an earlier arming of `key`. ValueError for too many processes, or pids
        that do not match the files."""
        cdef int count = len(fds)
        cdef int copies[MAX_FDS]
        cdef int pid_of[MAX_FDS]
        cdef int i, j, slot = -1, stat_copy = -1
        cdef bint was_idle
        if count > MAX_FDS:
            raise ValueError(f"more than {MAX_FDS} processes")
        if cgroup_fd >= 0:
            count = 0
        elif len(pids) != count:
            raise ValueError("one pid per statm file")
        for i in range(count):  # read before any file is copied: nothing to undo after
            pid_of[i] = pids[i]
        if cgroup_fd >= 0:
            stat_copy = dup(cgroup_fd)
            if stat_copy < 0:
                raise OSError("dup failed")
        for i in range(count):
            copies[i] = dup(<int>fds[i])
            if copies[i] < 0:
                for j in range(i):
                    close(copies[j])
                raise OSError("dup failed")
        pthread_mutex_lock(&self._mutex)
        try:
            slot = self._find(key)
            if slot < 0:
                slot = self._slot()
            if slot < 0:
                for i in range(count):
                    close(copies[i])
                if stat_copy >= 0:
                    close(stat_copy)
                raise MemoryError()
            self._release(slot)
            self._entries[slot].key = key
            self._entries[slot].cgroup_fd = stat_copy
            self._entries[slot].nfds = count
            for i in range(count):
                self._entries[slot].fds[i] = copies[i]
                self._entries[slot].pids[i] = pid_of[i]
            self._entries[slot].rescan_s = rescan_s
            self._entries[slot].held = held
            self._entries[slot].limit = limit
            self._entries[slot].shmem_base = shmem_base
            self._entries[slot].step = step
            self._entries[slot].due = due
            self._entries[slot].armed = 1
            self._entries[slot].paused = 0
            self._armed += 1
            was_idle = self._idle
            if was_idle:
                self._idle = False
                self._next = _now() + self._period
        finally:
            pthread_mutex_unlock(&self._mutex)
        if was_idle:
            self._signal()

    def disarm(self, long long key):
        """No more looks at tree `key` (until armed again)."""
        pthread_mutex_lock(&self._mutex)
        try:
            slot = self._find(key)
            if slot >= 0:
                self._release(slot)
        finally:
            pthread_mutex_unlock(&self._mutex)

    def pause(self, long long key):
        """Tree `key`'s exchange ended: the next tick releases it without a look, unless
        `resume`d first (back-to-back exchanges keep their arming and wake nobody)."""
        pthread_mutex_lock(&self._mutex)
        slot = self._find(key)
        if slot >= 0:
            self._entries[slot].paused = 1
        pthread_mutex_unlock(&self._mutex)

    def resume(self, long long key):
        """True when tree `key` was still armed (paused or not) and is looked at again."""
        pthread_mutex_lock(&self._mutex)
        slot = self._find(key)
        if slot >= 0:
            self._entries[slot].paused = 0
        pthread_mutex_unlock(&self._mutex)
        return slot >= 0

    @property
    def armed(self):
        return self._armed

    def close(self, double timeout=1.0):
        """Stops the thread (idempotent)."""
        pthread_mutex_lock(&self._mutex)
        self._stop = True
        pthread_mutex_unlock(&self._mutex)
        self._signal()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    cdef int _find(self, long long key) noexcept nogil:
        cdef int i
        for i in range(self._size):
            if self._entries[i].armed and self._entries[i].key == key:
                return i
        return -1

    cdef int _slot(self) noexcept nogil:
        cdef int i
        cdef Entry *grown
        for i in range(self._size):
            if not self._entries[i].armed:
                return i
        if self._size == self._capacity:
            grown = <Entry *>realloc(self._entries, (self._capacity * 2 + 4) * sizeof(Entry))
            if grown == NULL:
                return -1
            self._entries = grown
            self._capacity = self._capacity * 2 + 4
        memset(&self._entries[self._size], 0, sizeof(Entry))
        self._size += 1
        return self._size - 1

    cdef void _release(self, int slot) noexcept nogil:
        cdef int j
        if self._entries[slot].armed:
            for j in range(self._entries[slot].nfds):
                close(self._entries[slot].fds[j])
            if self._entries[slot].cgroup_fd >= 0:
                close(self._entries[slot].cgroup_fd)
                self._entries[slot].cgroup_fd = -1
            self._entries[slot].armed = 0
            self._entries[slot].nfds = 0
            self._armed -= 1

    cdef void _signal(self) noexcept nogil:
        cdef unsigned long long one = 1
        write(self._wake, &one, sizeof(one))

    def _run(self):
        cdef int count
        while True:
            with nogil:  # the GIL is taken only to hand keys back (or to stop)
                count = 0
                while count == 0:
                    count = self._wait_and_look()
            if count < 0:
                return
            if count:
                keys = [self._out[i] for i in range(count)]
                try:
                    self._notify(keys)
                except BaseException:  # noqa: BLE001 - the thread outlives a failed callback
                    pass

    cdef int _wait_and_look(self) noexcept nogil:
        """Sleeps until the next tick (or forever while nothing is armed), then looks; the
        number of keys written to `_out`, -1 to stop."""
        cdef pollfd waiting
        cdef unsigned long long drained
        cdef int timeout_ms
        cdef double now
        cdef long long *grown
        pthread_mutex_lock(&self._mutex)
        if self._stop:
            pthread_mutex_unlock(&self._mutex)
            return -1
        if self._armed == 0:
            self._idle = True
            timeout_ms = -1
        else:
            timeout_ms = <int>((self._next - _now()) * 1000.0 + 0.999)
            if timeout_ms < 0:
                timeout_ms = 0
        pthread_mutex_unlock(&self._mutex)
        waiting.fd = self._wake
        waiting.events = POLLIN
        waiting.revents = 0
        if poll(&waiting, 1, timeout_ms) > 0:
            read(self._wake, &drained, sizeof(drained))
        pthread_mutex_lock(&self._mutex)
        try:
            if self._stop:
                return -1
            now = _now()
            if self._armed == 0 or now < self._next:
                return 0
            self._next = now + self._period
            self.ticks += 1
            if self._out_capacity < self._size:
                grown = <long long *>realloc(self._out, self._size * sizeof(long long))
                if grown == NULL:
                    return 0  # no room to say which; the next tick tries again
                self._out = grown
                self._out_capacity = self._size
            return self._look(now, self._out)
        finally:
            pthread_mutex_unlock(&self._mutex)

    cdef int _look(self, double now, long long *out) noexcept nogil:
        """One look at every armed tree (the mutex held); the keys to look at in Python to
        `out` (room for `_size`)."""
        cdef c_sysinfo info
        cdef long long shmem = -1
        cdef long long total
        cdef int i, found = 0
        cdef bint look
        if get_sysinfo(&info) == 0:
            shmem = <long long>info.sharedram * <long long>info.mem_unit
        for i in range(self._size):
            if not self._entries[i].armed:
                continue
            if self._entries[i].paused:
                self._release(i)  # no exchange since the last tick: not watched any more
                continue
            if self._entries[i].cgroup_fd >= 0:
                total = cgroup_bytes(self._entries[i].cgroup_fd)
                look = total < 0 or total > self._entries[i].limit
            else:
                look = self._statm_look(&self._entries[i], shmem, now)
            if look:
                out[found] = self._entries[i].key
                found += 1
                self._release(i)
        return found

    cdef bint _statm_look(self, Entry *entry, long long shmem, double now) noexcept nogil:
        """Whether Python must look at a tree watched by its statm files."""
        cdef long long total, pages
        cdef int j
        cdef bint look = shmem < 0
        if not look and now >= entry.due:  # the list refresh and fd scan, made here
            if new_child(entry.pids, entry.nfds) or holds_shared_memory(entry.pids, entry.nfds):
                return True
            entry.due = now + entry.rescan_s
            entry.shmem_base = shmem
        if not look:
            if shmem < entry.shmem_base:
                entry.shmem_base = shmem
            look = shmem - entry.shmem_base >= entry.step
        if not look:
            total = entry.held
            for j in range(entry.nfds):
                pages = statm_pages(entry.fds[j])
                if pages < 0:
                    return True
                total += pages * self._page
            look = total > entry.limit
        return look
