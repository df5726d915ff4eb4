# What a worker tree's /proc and cgroup files say, read in C for the memory watch's thread
# (native/memwatch.pyx), each the same reading as its Python twin in worker/memory.py and
# worker/proctree.py.
#
# Inline only: compiled into memwatch, no runtime module leanrpc._native.proc_reads exists.
# Owns: a statm file's resident pages, a memory.stat's anon + shmem, whether a tree has a
# child it does not know, whether it holds a shared-memory file, and sysinfo's declaration.
# May cimport: libc, posix.

from libc.stdio cimport snprintf
from libc.string cimport strncmp
from posix.fcntl cimport O_CLOEXEC, O_RDONLY, open as c_open
from posix.unistd cimport close, pread, read

cdef extern from "<sys/sysinfo.h>" nogil:
    struct c_sysinfo "sysinfo":
        unsigned long sharedram
        unsigned int mem_unit
    int get_sysinfo "sysinfo" (c_sysinfo *info)

cdef extern from "<dirent.h>" nogil:
    ctypedef struct DIR:
        pass
    struct dirent:
        char d_name[256]
    DIR *opendir(const char *name)
    dirent *readdir(DIR *dirp)
    int closedir(DIR *dirp)
    int dirfd(DIR *dirp)

cdef extern from "<unistd.h>" nogil:
    ssize_t readlinkat(int dirfd, const char *pathname, char *buf, size_t bufsiz)


cdef inline long long statm_pages(int fd) noexcept nogil:
    """Resident pages (statm's second field); 0 when unreadable (gone), -1 when malformed."""
    cdef char buf[256]
    cdef ssize_t n = pread(fd, buf, 255, 0)
    cdef ssize_t i = 0
    cdef long long value = 0
    cdef int digits = 0
    if n <= 0:
        return 0
    while i < n and buf[i] >= 48 and buf[i] <= 57:
        i += 1
    if i == 0 or i >= n or buf[i] != 32:
        return -1
    i += 1
    while i < n and buf[i] >= 48 and buf[i] <= 57:
        value = value * 10 + (buf[i] - 48)
        digits += 1
        i += 1
    if digits == 0 or digits > 15 or i >= n or (buf[i] != 32 and buf[i] != 10):
        return -1
    return value


cdef inline long long cgroup_bytes(int fd) noexcept nogil:
    """`anon` + `shmem` of a memory.stat file in bytes; -1 when unreadable or either is missing."""
    cdef char buf[16384]
    cdef ssize_t n = pread(fd, buf, 16383, 0)
    cdef ssize_t i = 0
    cdef long long total = 0, value
    cdef int found = 0, digits
    if n <= 0 or n >= 16383:
        return -1
    while i < n:  # at a line's start
        if n - i > 5 and buf[i] == 97 and buf[i + 1] == 110 and buf[i + 2] == 111 and buf[i + 3] == 110 and buf[i + 4] == 32:
            i += 5  # "anon "
        elif n - i > 6 and buf[i] == 115 and buf[i + 1] == 104 and buf[i + 2] == 109 and buf[i + 3] == 101 and buf[i + 4] == 109 and buf[i + 5] == 32:
            i += 6  # "shmem "
        else:
            while i < n and buf[i] != 10:
                i += 1
            i += 1
            continue
        value = 0
        digits = 0
        while i < n and buf[i] >= 48 and buf[i] <= 57:
            value = value * 10 + (buf[i] - 48)
            digits += 1
            i += 1
        if digits == 0 or digits > 18 or (i < n and buf[i] != 10):
            return -1
        total += value
        found += 1
        i += 1
    return total if found == 2 else -1


cdef inline bint _known(const int *pids, int count, long long pid) noexcept nogil:
    cdef int j
    for j in range(count):
        if pids[j] == pid:
            return True
    return False


cdef inline DIR *_proc_folder(int pid, const char *leaf) noexcept nogil:
    """/proc/<pid>/<leaf>, opened (NULL when the process is gone)."""
    cdef char path[64]
    snprintf(path, sizeof(path), "/proc/%d/%s", pid, leaf)
    return opendir(path)


cdef inline dirent *_next_entry(DIR *folder) noexcept nogil:
    """The folder's next entry but `.` and `..`; NULL at its end."""
    cdef dirent *entry = readdir(folder)
    while entry != NULL and entry.d_name[0] == 46:
        entry = readdir(folder)
    return entry


cdef inline bint new_child(const int *pids, int count) noexcept nogil:
    """Whether a process of the tree has a child the tree does not know (or the root's
    children cannot be read: the sample's own fallback decides then)."""
    cdef char path[320]
    cdef char buf[4096]
    cdef DIR *tasks
    cdef dirent *task
    cdef int j, fd
    cdef ssize_t n, i
    cdef long long child
    cdef bint digits, root_read
    for j in range(count):
        tasks = _proc_folder(pids[j], "task")
        if tasks == NULL:
            if j == 0:
                return True
            continue  # ended meanwhile: its statm reads count 0
        root_read = False
        task = _next_entry(tasks)
        while task != NULL:
            snprintf(path, sizeof(path), "/proc/%d/task/%s/children", pids[j], task.d_name)
            task = _next_entry(tasks)
            fd = c_open(path, O_RDONLY | O_CLOEXEC)
            if fd < 0:
                continue  # a thread that ended meanwhile
            n = read(fd, buf, sizeof(buf))
            close(fd)
            if n < 0:
                continue
            if n == sizeof(buf):
                closedir(tasks)
                return True  # more children than one read holds: the sample lists them
            root_read = True
            child = 0
            digits = False
            for i in range(n + 1):
                if i < n and buf[i] >= 48 and buf[i] <= 57:
                    child = child * 10 + (buf[i] - 48)
                    digits = True
                elif digits:
                    if not _known(pids, count, child):
                        closedir(tasks)
                        return True
                    child = 0
                    digits = False
        closedir(tasks)
        if j == 0 and not root_read:
            return True  # no children file read for the root (no CONFIG_PROC_CHILDREN?)
    return False


cdef inline bint holds_shared_memory(const int *pids, int count) noexcept nogil:
    """Whether a process of the tree holds a shared-memory file open (or the root's fds
    cannot be listed)."""
    cdef char link[256]
    cdef DIR *fds
    cdef dirent *fd
    cdef ssize_t n
    cdef int j
    for j in range(count):
        fds = _proc_folder(pids[j], "fd")
        if fds == NULL:
            if j == 0:
                return True
            continue
        fd = _next_entry(fds)
        while fd != NULL:
            n = readlinkat(dirfd(fds), fd.d_name, link, sizeof(link) - 1)
            fd = _next_entry(fds)
            if n <= 0:
                continue  # closed meanwhile
            link[n] = 0
            if (
                strncmp(link, "/memfd:", 7) == 0
                or strncmp(link, "/dev/shm/", 9) == 0
                or strncmp(link, "/SYSV", 5) == 0
            ):
                closedir(fds)
                return True
        closedir(fds)
    return False
