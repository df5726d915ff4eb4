# cython: language_level=3
"""The REPLs' stdout read on a thread of its own that holds no GIL, and handed to the event
loop once per exchange, not once per answer (issue 38 item 6).

Why: a pipelined batch (worker/channel.py `exchange_batch`) writes a group's commands at
once, and the REPL answers them one at a time, each in its own write. Read on the event
loop, every answer woke the server: at the benchmark's pace about 1.3 wakeups per snippet,
each paid cold (epoll, the loop, Python) while the REPLs held both cores. Nothing is done
with an answer before the fence's answer comes (the channel returns a batch only after its
fence and audit), so waking for each bought nothing. A watched pipe is parked (the loop's
own reader has it) but from a `gather` to the next `park` (worker/gathered.py: from a batch's
start to the next single exchange); in between, a C loop reads it as bytes come, keeps them
with the time each read came (CLOCK_MONOTONIC, the clock of Python's `time.monotonic`), and
wakes the loop's door (an eventfd the loop reads) only when the loop has something to do:
  * the batch's needle (its fence nonce) is in what was read since the last hand-over:
    the fence's answer came (a forged one that names the nonce wakes it too: the channel
    then reads everything in order, as before, and poisons);
  * no needle is set (a channel without a fence): every read, as the loop's reader did;
  * `cap` bytes are waiting (the loop decodes them; memory stays bounded);
  * the pipe ended, failed, or this loop could not keep its bytes: the pipe is `ended`,
    read here no more, and the caller hands it back to the loop's own transport.
`take` also hands over at any time (the channel's timers call it before they decide), and
`park` hands over what waits as it parks. Nothing is decided here: every byte reaches the
channel, in order, with its time. One snippet per call never comes here: the thread would
add its own wakeups to the loop's one.

The watched file is a `dup` of the pipe's read end (close-on-exec: no child inherits it),
read non-blocking under the table's mutex, so once `park` or `unwatch` returns the thread
never reads it again (until the next `gather`), and a closed and reused descriptor number is
never read for an entry it does not belong to. The thread sleeps in epoll_wait(2) on a set
that holds exactly the pipes to be read now: `gather`, `park`, `take` and `unwatch` change
the set themselves (epoll_ctl, under the mutex), so none of them wakes the thread, and a
wakeup reads only the pipes that have bytes. (With poll(2), the set was rebuilt after a
wakeup that each of them caused: two per exchange, besides one per answer.)

Owns: `Gatherer` (`watch`, `gather`, `park`, `take`, `ready`, `unwatch`, `close`): the table of
watched pipes, its mutex, the thread and the doors; one pipe's bytes, reads and needle search
are leanrpc/_native/pipe_buffer.pxd's (inline, cimported).
May import: the C library, CPython, os and threading, leanrpc._native.pipe_buffer and
leanrpc._native.thread_waits (cimport).
"""

from libc.errno cimport errno
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from posix.fcntl cimport F_GETFL, F_SETFL, O_NONBLOCK, fcntl
from posix.unistd cimport close, read, write

from leanrpc._native.pipe_buffer cimport (
    NEEDLE_MAX,
    Entry,
    Taken,
    entry_read,
    entry_release,
    entry_search,
    entry_steal,
    taken_chunks,
)
from leanrpc._native.thread_waits cimport (
    EFD_CLOEXEC,
    EFD_NONBLOCK,
    EPOLL_CLOEXEC,
    EPOLL_CTL_ADD,
    EPOLL_CTL_DEL,
    EPOLLIN,
    epoll_create1,
    epoll_ctl,
    epoll_event,
    epoll_wait,
    eventfd,
    pthread_mutex_destroy,
    pthread_mutex_init,
    pthread_mutex_lock,
    pthread_mutex_t,
    pthread_mutex_unlock,
)

import os
import threading

cdef extern from "<fcntl.h>" nogil:
    int F_DUPFD_CLOEXEC

# Forks seen by this process (os.register_at_fork). A forked child shares its parent's epoll
# instance (a descriptor, copied) though not its thread: a Gatherer made before the fork never
# changes that set from the child, or the parent's thread would stop hearing of its pipes.
cdef long long _forks = 0


def _count_fork():
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_count_fork)


cdef class Gatherer:
    """One reader thread for every watched pipe of a process (see the module docstring)."""

    cdef pthread_mutex_t _mutex
    cdef Entry *_entries
    cdef int _size
    cdef int _capacity
    cdef int _epoll  # the thread's epoll set: the wake eventfd, and the pipes read now
    cdef int _wake
    cdef bint _stop
    cdef size_t _cap
    cdef object _thread
    cdef readonly long long reads  # the thread's read calls that moved bytes (for tests)
    cdef readonly long long signals  # door writes (for tests and benchmarks)
    cdef readonly long long wakeups  # the thread's returns from epoll_wait (for tests)
    cdef long long _born  # `_forks` when made: another value means a forked child's copy

    def __cinit__(self):
        pthread_mutex_init(&self._mutex, NULL)
        self._entries = NULL
        self._epoll = -1
        self._wake = -1

    def __init__(self, size_t cap=1 << 20):
        """`cap`: bytes kept for one pipe before the loop is woken to take them."""
        if cap < 1:
            raise ValueError("the cap must be positive")
        cdef epoll_event event
        self._cap = cap
        self._born = _forks
        self._epoll = epoll_create1(EPOLL_CLOEXEC)
        if self._epoll < 0:
            raise OSError(errno, "epoll_create1 failed")
        self._wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)
        if self._wake < 0:
            raise OSError(errno, "eventfd failed")
        event.events = EPOLLIN
        event.data.u64 = 0  # the wake; a pipe's event carries its slot plus one
        if epoll_ctl(self._epoll, EPOLL_CTL_ADD, self._wake, &event) < 0:
            raise OSError(errno, "epoll_ctl failed")
        self._thread = threading.Thread(target=self._run, name="leanrpc-stdout", daemon=True)
        self._thread.start()

    def __dealloc__(self):
        cdef int i
        if self._entries != NULL:
            for i in range(self._size):
                entry_release(&self._entries[i])
            free(self._entries)
        if self._epoll >= 0:
            close(self._epoll)
        if self._wake >= 0:
            close(self._wake)
        pthread_mutex_destroy(&self._mutex)

    def watch(self, long long key, int fd, int door, long long door_tag):
        """Pipe `fd` (dup'd, made non-blocking) for `key`, parked: read only between a
        `gather` and the next `park`; eventfd `door` (dup'd) is written when its bytes are to
        be taken, and `ready(door_tag)` names them. Replaces an earlier watch of `key`."""
        cdef int pipe_copy, door_copy, flags
        cdef Entry *entry
        pipe_copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)  # no child ever inherits it
        if pipe_copy < 0:
            raise OSError(errno, "dup failed")
        door_copy = fcntl(door, F_DUPFD_CLOEXEC, 0)
        if door_copy < 0:
            close(pipe_copy)
            raise OSError(errno, "dup failed")
        flags = fcntl(pipe_copy, F_GETFL)
        if flags < 0 or fcntl(pipe_copy, F_SETFL, flags | O_NONBLOCK) < 0:
            close(pipe_copy)
            close(door_copy)
            raise OSError(errno, "fcntl failed")
        pthread_mutex_lock(&self._mutex)
        try:
            entry = self._find(key)
            if entry == NULL:
                entry = self._slot()
            if entry == NULL:
                close(pipe_copy)
                close(door_copy)
                raise MemoryError()
            self._release(entry)
            entry.key = key
            entry.fd = pipe_copy
            entry.door = door_copy
            entry.door_tag = door_tag
            entry.parked = 1
            entry.used = 1
        finally:
            pthread_mutex_unlock(&self._mutex)

    def gather(self, long long key, needle):
        """Reads `key`'s pipe from now on, and wakes its door only once `needle` (bytes, at
        most 64) was read since the last hand-over (or the pipe ended, or `cap` bytes wait);
        None: at every read."""
        cdef const unsigned char[:] view
        cdef Py_ssize_t length = 0
        cdef Entry *entry
        if needle is not None:
            view = needle
            length = view.shape[0]
            if length < 1 or length > NEEDLE_MAX:
                raise ValueError(f"a needle is 1 to {NEEDLE_MAX} bytes")
        pthread_mutex_lock(&self._mutex)
        try:
            entry = self._find(key)
            if entry == NULL:
                return
            entry.needle_len = <int>length
            if length:
                memcpy(entry.needle, &view[0], length)
            entry.searched = 0
            entry.found = 0
            entry.parked = 0
            self._settle(entry)
            self._poll(entry)  # read from now on: no wakeup of the thread to ask for it
        finally:
            pthread_mutex_unlock(&self._mutex)

    def park(self, long long key):
        """Stops reading `key`'s pipe (never again once this returns, until the next
        `gather`): the caller's own reader takes over. The bytes still waiting, as `take`
        gives them."""
        cdef Taken taken
        cdef Entry *entry
        memset(&taken, 0, sizeof(Taken))
        pthread_mutex_lock(&self._mutex)
        entry = self._find(key)
        if entry != NULL and not entry.parked:
            entry_steal(entry, &taken)
            entry.parked = 1
            entry.needle_len = 0
            self._poll(entry)  # out of the epoll set before the caller's reader polls it
        pthread_mutex_unlock(&self._mutex)
        return taken_chunks(&taken)

    def take(self, long long key):
        """(chunks, ended): the bytes read for `key` since the last hand-over, one
        `(bytes, time.monotonic() when read)` per read, in order; `ended` once the pipe is
        read here no more (its end, an error, or no memory for it), and the watch is gone
        then. ([], True) for a key not watched."""
        cdef Taken taken
        cdef Entry *entry
        cdef bint ended = True
        memset(&taken, 0, sizeof(Taken))
        pthread_mutex_lock(&self._mutex)
        entry = self._find(key)
        if entry != NULL:
            entry_steal(entry, &taken)
            ended = entry.ended
            if ended:
                self._release(entry)
            else:
                self._poll(entry)  # read again if it waited at the cap
        pthread_mutex_unlock(&self._mutex)
        return taken_chunks(&taken), ended

    def ready(self, long long door_tag):
        """The keys of door `door_tag` whose bytes are to be taken."""
        cdef long long *found = NULL
        cdef int i, count = 0
        pthread_mutex_lock(&self._mutex)
        if self._size:
            found = <long long *>malloc(self._size * sizeof(long long))
        if found != NULL:
            for i in range(self._size):
                if (self._entries[i].used and self._entries[i].signalled
                        and self._entries[i].door_tag == door_tag):
                    found[count] = self._entries[i].key
                    count += 1
        pthread_mutex_unlock(&self._mutex)
        try:
            return [found[i] for i in range(count)]
        finally:
            free(found)

    def unwatch(self, long long key):
        """Stops reading for `key` (never again once this returns); the bytes still
        waiting, as `take` gives them."""
        cdef Taken taken
        cdef Entry *entry
        memset(&taken, 0, sizeof(Taken))
        pthread_mutex_lock(&self._mutex)
        entry = self._find(key)
        if entry != NULL:
            entry_steal(entry, &taken)
            self._release(entry)
        pthread_mutex_unlock(&self._mutex)
        return taken_chunks(&taken)

    @property
    def watched(self):
        cdef int i, count = 0
        pthread_mutex_lock(&self._mutex)
        for i in range(self._size):
            count += self._entries[i].used
        pthread_mutex_unlock(&self._mutex)
        return count

    def close(self, double timeout=1.0):
        """Stops the thread (idempotent); the watches stay until unwatched."""
        pthread_mutex_lock(&self._mutex)
        self._stop = True
        pthread_mutex_unlock(&self._mutex)
        self._signal_thread()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the table (the mutex held) ---------------------------------------------

    cdef Entry *_find(self, long long key) noexcept nogil:
        cdef int i
        for i in range(self._size):
            if self._entries[i].used and self._entries[i].key == key:
                return &self._entries[i]
        return NULL

    cdef Entry *_slot(self) noexcept nogil:
        cdef int i
        cdef Entry *grown
        for i in range(self._size):
            if not self._entries[i].used:
                return &self._entries[i]
        if self._size == self._capacity:
            grown = <Entry *>realloc(self._entries, (self._capacity * 2 + 4) * sizeof(Entry))
            if grown == NULL:
                return NULL
            self._entries = grown
            self._capacity = self._capacity * 2 + 4
        memset(&self._entries[self._size], 0, sizeof(Entry))
        self._entries[self._size].fd = -1
        self._entries[self._size].door = -1
        self._size += 1
        return &self._entries[self._size - 1]

    cdef void _settle(self, Entry *entry) noexcept nogil:
        """Searches the new bytes for the needle; writes the door if they are to be taken."""
        cdef unsigned long long one = 1
        cdef bint due
        entry_search(entry)
        due = entry.ended or entry.size >= self._cap or (
            entry.size > 0 and (entry.needle_len == 0 or entry.found)
        )
        if due and not entry.signalled:
            entry.signalled = 1
            self.signals += 1
            write(entry.door, &one, sizeof(one))

    cdef void _poll(self, Entry *entry) noexcept nogil:
        """Puts the entry's pipe in the thread's epoll set while it is to be read (watched,
        gathering, not ended, under the cap) and takes it out otherwise, so that the thread
        needs no wakeup to learn of it: an epoll set changed from another thread applies to a
        wait in progress. A pipe that cannot be added is `ended`: handed back to the loop."""
        cdef epoll_event event
        cdef bint due = (entry.used and not entry.ended and not entry.parked
                         and entry.size < self._cap)
        if due == entry.polled or self._born != _forks:
            return
        if not due:
            epoll_ctl(self._epoll, EPOLL_CTL_DEL, entry.fd, NULL)
            entry.polled = 0
            return
        event.events = EPOLLIN
        event.data.u64 = <unsigned long long>(entry - self._entries) + 1
        if epoll_ctl(self._epoll, EPOLL_CTL_ADD, entry.fd, &event) < 0:
            entry.ended = 1
            self._settle(entry)
            return
        entry.polled = 1

    cdef void _release(self, Entry *entry) noexcept nogil:
        """Out of the epoll set (a registration outlives a closed copy while the pipe's other
        descriptors stay open), then the entry's copies closed and its bytes freed."""
        if entry.polled and self._born == _forks:
            epoll_ctl(self._epoll, EPOLL_CTL_DEL, entry.fd, NULL)
        entry_release(entry)

    cdef void _signal_thread(self) noexcept nogil:
        cdef unsigned long long one = 1
        write(self._wake, &one, sizeof(one))

    # -- the thread --------------------------------------------------------------

    def _run(self):
        with nogil:
            self._loop()

    cdef void _loop(self) noexcept nogil:
        cdef epoll_event events[16]
        cdef int ready, i
        cdef unsigned long long slot, drained
        cdef Entry *entry
        while True:
            ready = epoll_wait(self._epoll, events, 16, -1)  # < 0: EINTR, nothing ready
            pthread_mutex_lock(&self._mutex)
            if self._stop:
                pthread_mutex_unlock(&self._mutex)
                return
            self.wakeups += 1
            for i in range(ready):
                slot = events[i].data.u64
                if slot == 0:
                    read(self._wake, &drained, sizeof(drained))
                    continue
                # An event collected before its pipe left the set (parked, unwatched, the
                # slot reused) is read only if the slot's entry is to be read now.
                entry = &self._entries[slot - 1]
                if entry.polled:
                    self.reads += entry_read(entry, self._cap)
                    self._settle(entry)
                    self._poll(entry)  # out at its end or at the cap
            pthread_mutex_unlock(&self._mutex)
