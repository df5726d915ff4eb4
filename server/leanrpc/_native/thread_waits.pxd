# The system calls our native threads wait and lock with (native/memwatch.pyx,
# native/gather.pyx): eventfd(2) to be woken, poll(2) or epoll(7) to sleep, a pthread mutex for
# the table the thread shares with the event loop's thread. Declarations only.
#
# Inline only: no runtime module leanrpc._native.thread_waits exists.
# Owns: those declarations. May cimport: nothing (C headers only).

cdef extern from "<sys/eventfd.h>" nogil:
    int eventfd(unsigned int initval, int flags)
    int EFD_CLOEXEC
    int EFD_NONBLOCK

cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd *fds, unsigned long nfds, int timeout)
    short POLLIN

cdef extern from "<sys/epoll.h>" nogil:
    ctypedef union epoll_data_t:
        void *ptr
        int fd
        unsigned int u32
        unsigned long long u64
    struct epoll_event:
        unsigned int events
        epoll_data_t data
    int epoll_create1(int flags)
    int epoll_ctl(int epfd, int op, int fd, epoll_event *event)
    int epoll_wait(int epfd, epoll_event *events, int maxevents, int timeout)
    int EPOLL_CLOEXEC
    int EPOLL_CTL_ADD
    int EPOLL_CTL_DEL
    unsigned int EPOLLIN

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_init(pthread_mutex_t *mutex, void *attr)
    int pthread_mutex_lock(pthread_mutex_t *mutex)
    int pthread_mutex_unlock(pthread_mutex_t *mutex)
    int pthread_mutex_destroy(pthread_mutex_t *mutex)
