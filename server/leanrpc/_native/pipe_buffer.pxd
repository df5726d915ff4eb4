# One watched pipe's bytes for the stdout reader thread (native/gather.pyx): what was read since
# the last hand-over, each read with its time, the search for the exchange's needle, and the
# hand-over itself.
#
# Inline only: compiled into gather, no runtime module leanrpc._native.pipe_buffer exists.
# Owns: `Entry` (one watched pipe), `Taken` (bytes moved out for the hand-over), and their
# operations; the table, its mutex and the thread are gather.pyx's (every function here runs
# with that mutex held, but `taken_chunks`, which must not).
# May cimport: libc, posix, cpython.

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.errno cimport EAGAIN, EINTR, errno
from libc.stdlib cimport free, realloc
from libc.string cimport memset
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from posix.unistd cimport close, read

cdef extern from "<string.h>" nogil:
    void *memmem(const void *haystack, size_t haystacklen, const void *needle, size_t needlelen)

cdef enum:
    NEEDLE_MAX = 64
    READ_SIZE = 65536


cdef struct Entry:
    long long key
    int used
    int fd  # the pipe's read end (a close-on-exec copy)
    int door  # the loop's eventfd (a close-on-exec copy)
    long long door_tag
    char *data  # bytes read since the last hand-over
    size_t size
    size_t capacity
    size_t *ends  # where each read's bytes end in `data`
    double *times  # when each read came
    int marks
    int marks_capacity
    char needle[NEEDLE_MAX]
    int needle_len  # 0: every read is handed over
    size_t searched  # bytes of `data` already searched for the needle
    int found
    int ended  # read here no more (end, error, no memory)
    int parked  # not read now: the loop's own reader has the pipe
    int signalled  # the door was written since the last hand-over
    int polled  # in the reader thread's epoll set (gather.pyx keeps it so: read now)


cdef struct Taken:
    char *data
    size_t *ends
    double *times
    int marks


cdef inline double monotonic_now() noexcept nogil:
    """time.monotonic()'s clock."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef inline void entry_steal(Entry *entry, Taken *taken) noexcept nogil:
    """Moves the entry's waiting bytes to `taken` (freed by `taken_chunks`, without the mutex:
    building Python objects may run a collection, and a finalizer may call back in)."""
    taken.data = entry.data
    taken.ends = entry.ends
    taken.times = entry.times
    taken.marks = entry.marks
    entry.data = NULL
    entry.ends = NULL
    entry.times = NULL
    entry.size = 0
    entry.capacity = 0
    entry.marks = 0
    entry.marks_capacity = 0
    entry.searched = 0
    entry.found = 0
    entry.signalled = 0


cdef inline list taken_chunks(Taken *taken):
    """`(bytes, time)` per read of what `entry_steal` moved out; frees it."""
    cdef list chunks = []
    cdef size_t start = 0
    cdef int i
    try:
        for i in range(taken.marks):
            chunks.append(
                (PyBytes_FromStringAndSize(taken.data + start, taken.ends[i] - start),
                 taken.times[i])
            )
            start = taken.ends[i]
    finally:
        free(taken.data)
        free(taken.ends)
        free(taken.times)
    return chunks


cdef inline void entry_release(Entry *entry) noexcept nogil:
    """Closes the entry's copies and frees its bytes: the slot is free."""
    if entry.fd >= 0:
        close(entry.fd)
    if entry.door >= 0:
        close(entry.door)
    free(entry.data)
    free(entry.ends)
    free(entry.times)
    memset(entry, 0, sizeof(Entry))
    entry.fd = -1
    entry.door = -1


cdef inline void entry_search(Entry *entry) noexcept nogil:
    """Searches the bytes not searched yet (and the needle's length less one before them, for
    a needle cut across reads) for the needle."""
    cdef size_t start
    if entry.needle_len and not entry.found and entry.size > entry.searched:
        start = entry.searched
        if start >= <size_t>(entry.needle_len - 1):
            start -= entry.needle_len - 1
        else:
            start = 0
        if memmem(entry.data + start, entry.size - start, entry.needle, entry.needle_len) != NULL:
            entry.found = 1
        entry.searched = entry.size


cdef inline long long entry_read(Entry *entry, size_t cap) noexcept nogil:
    """Reads what the pipe holds now (up to `cap` bytes waiting), each read marked with its
    time; the number of reads that moved bytes. The end, an error or no memory set `ended`."""
    cdef ssize_t got
    cdef char *grown
    cdef size_t *ends
    cdef double *times
    cdef int capacity
    cdef long long reads = 0
    while not entry.ended:
        if entry.capacity - entry.size < READ_SIZE:
            grown = <char *>realloc(entry.data, entry.size + READ_SIZE)
            if grown == NULL:
                entry.ended = 1  # handed back to the loop's own reader
                break
            entry.data = grown
            entry.capacity = entry.size + READ_SIZE
        if entry.marks == entry.marks_capacity:
            capacity = entry.marks_capacity * 2 + 8
            ends = <size_t *>realloc(entry.ends, capacity * sizeof(size_t))
            if ends != NULL:
                entry.ends = ends
            times = <double *>realloc(entry.times, capacity * sizeof(double))
            if times != NULL:
                entry.times = times
            if ends == NULL or times == NULL:
                entry.ended = 1
                break
            entry.marks_capacity = capacity
        got = read(entry.fd, entry.data + entry.size, READ_SIZE)
        if got > 0:
            entry.size += got
            entry.ends[entry.marks] = entry.size
            entry.times[entry.marks] = monotonic_now()
            entry.marks += 1
            reads += 1
            if got < READ_SIZE or entry.size >= cap:
                break
        elif got == 0:
            entry.ended = 1  # the pipe's end
        elif errno == EINTR:
            continue
        elif errno == EAGAIN:
            break
        else:
            entry.ended = 1  # an error: the loop's reader meets it too
    return reads
