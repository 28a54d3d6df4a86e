/* The real (next) implementations of every function zcsock interposes.
 *
 * One X-macro list gives, per function, its return type, name, parameter
 * list and whether it must exist (1) or may be missing from this libc (0).
 * zc_real_resolve() fills the table with dlsym(RTLD_NEXT) once; it is the
 * only place in the library that calls dlsym.  While it runs, entries may
 * still be NULL: the allocator hooks serve those calls from their bootstrap
 * arena (dlsym may call calloc).
 *
 * Hooks call zc_real.<name>(...).  Reading an entry is hook-safe and
 * signal-safe; zc_real_resolve() is not (it may allocate through dlsym).
 */
#ifndef ZC_REAL_H
#define ZC_REAL_H

/* FORK PAGES.  A fork copies no page tables of file mappings, and every
 * page of ours either process writes after it is copied: each page the
 * child runs or writes, and each the parent writes again, is a fault
 * (1-2 us on bare metal, up to 20 us in a VM), paid by a forking server
 * once per connection.  So the lock and pid words the atfork handlers
 * write live together (ZC_FORK_DATA: a section of their own, which the
 * linker keeps whole), and so do the handlers the child runs
 * (ZC_FORK_CODE: among the sorted text, one 64 KiB fault-around window). */
#define ZC_FORK_DATA __attribute__((section("zc_fork_data")))
#define ZC_FORK_CODE __attribute__((section(".text.sorted.zc_fork")))

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* ZC_REAL(ret, name, params, mandatory) */
#define ZC_REAL_SOCKET_LIST(X)                                                        \
    X(int, socket, (int, int, int), 1)                                                \
    X(int, socketpair, (int, int, int, int *), 1)                                     \
    X(int, connect, (int, const struct sockaddr *, socklen_t), 1)                     \
    X(int, bind, (int, const struct sockaddr *, socklen_t), 1)                        \
    X(int, listen, (int, int), 1)                                                     \
    X(int, accept, (int, struct sockaddr *, socklen_t *), 1)                          \
    X(int, accept4, (int, struct sockaddr *, socklen_t *, int), 1)                    \
    X(int, close, (int), 1)                                                           \
    X(int, close_range, (unsigned, unsigned, int), 0)                                 \
    X(void, closefrom, (int), 0)                                                      \
    X(int, shutdown, (int, int), 1)                                                   \
    X(int, dup, (int), 1)                                                             \
    X(int, dup2, (int, int), 1)                                                       \
    X(int, dup3, (int, int, int), 1)                                                  \
    X(int, fcntl, (int, int, ...), 1)                                                 \
    X(int, fcntl64, (int, int, ...), 0)                                               \
    X(int, ioctl, (int, unsigned long, ...), 1)                                       \
    X(int, getsockopt, (int, int, int, void *, socklen_t *), 1)                       \
    X(int, setsockopt, (int, int, int, const void *, socklen_t), 1)                   \
    X(ssize_t, send, (int, const void *, size_t, int), 1)                             \
    X(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *,      \
                        socklen_t), 1)                                                \
    X(ssize_t, sendmsg, (int, const struct msghdr *, int), 1)                         \
    X(int, sendmmsg, (int, struct mmsghdr *, unsigned, int), 1)                       \
    X(ssize_t, write, (int, const void *, size_t), 1)                                 \
    X(ssize_t, writev, (int, const struct iovec *, int), 1)                           \
    X(ssize_t, recv, (int, void *, size_t, int), 1)                                   \
    X(ssize_t, recvfrom, (int, void *, size_t, int, struct sockaddr *, socklen_t *), 1) \
    X(ssize_t, recvmsg, (int, struct msghdr *, int), 1)                               \
    X(int, recvmmsg, (int, struct mmsghdr *, unsigned, int, struct timespec *), 1)    \
    X(ssize_t, read, (int, void *, size_t), 1)                                        \
    X(ssize_t, readv, (int, const struct iovec *, int), 1)                            \
    X(ssize_t, __recv_chk, (int, void *, size_t, size_t, int), 0)                     \
    X(ssize_t, __recvfrom_chk, (int, void *, size_t, size_t, int, struct sockaddr *,  \
                                socklen_t *), 0)                                      \
    X(ssize_t, __read_chk, (int, void *, size_t, size_t), 0)                          \
    X(ssize_t, preadv2, (int, const struct iovec *, int, off_t, int), 0)              \
    X(ssize_t, pwritev2, (int, const struct iovec *, int, off_t, int), 0)             \
    X(ssize_t, preadv64v2, (int, const struct iovec *, int, off64_t, int), 0)         \
    X(ssize_t, pwritev64v2, (int, const struct iovec *, int, off64_t, int), 0)        \
    X(ssize_t, sendfile, (int, int, off_t *, size_t), 1)                              \
    X(ssize_t, sendfile64, (int, int, off_t *, size_t), 0)                            \
    X(ssize_t, splice, (int, loff_t *, int, loff_t *, size_t, unsigned), 1)           \
    X(int, poll, (struct pollfd *, nfds_t, int), 1)                                   \
    X(int, ppoll, (struct pollfd *, nfds_t, const struct timespec *,                  \
                   const sigset_t *), 1)                                              \
    X(int, select, (int, fd_set *, fd_set *, fd_set *, struct timeval *), 1)          \
    X(int, pselect, (int, fd_set *, fd_set *, fd_set *, const struct timespec *,      \
                     const sigset_t *), 1)                                            \
    X(int, epoll_create, (int), 1)                                                    \
    X(int, epoll_create1, (int), 1)                                                   \
    X(int, epoll_ctl, (int, int, int, struct epoll_event *), 1)                       \
    X(int, epoll_wait, (int, struct epoll_event *, int, int), 1)                      \
    X(int, epoll_pwait, (int, struct epoll_event *, int, int, const sigset_t *), 1)   \
    X(int, epoll_pwait2, (int, struct epoll_event *, int, const struct timespec *,     \
                          const sigset_t *), 0)                                       \
    X(int, __poll_chk, (struct pollfd *, nfds_t, int, size_t), 0)                     \
    X(int, __ppoll_chk, (struct pollfd *, nfds_t, const struct timespec *,            \
                         const sigset_t *, size_t), 0)                                \
    X(pid_t, fork, (void), 1)                                                         \
    X(pid_t, vfork, (void), 0)                                                        \
    X(pid_t, _Fork, (void), 0)                                                        \
    X(int, clone, (int (*)(void *), void *, int, void *, ...), 0)                     \
    X(int, execve, (const char *, char *const[], char *const[]), 1)                   \
    X(int, execv, (const char *, char *const[]), 1)                                   \
    X(int, execvp, (const char *, char *const[]), 1)                                  \
    X(int, execvpe, (const char *, char *const[], char *const[]), 1)                  \
    X(int, fexecve, (int, char *const[], char *const[]), 1)                           \
    X(int, posix_spawn, (pid_t *, const char *, const posix_spawn_file_actions_t *,   \
                         const posix_spawnattr_t *, char *const[], char *const[]), 1)  \
    X(int, posix_spawnp, (pid_t *, const char *, const posix_spawn_file_actions_t *,  \
                          const posix_spawnattr_t *, char *const[], char *const[]), 1) \
    X(int, system, (const char *), 1)                                                 \
    X(FILE *, popen, (const char *, const char *), 1)                                 \
    X(int, posix_spawn_file_actions_adddup2, (posix_spawn_file_actions_t *, int, int), 1) \
    X(FILE *, fdopen, (int, const char *), 1)                                         \
    X(int, prctl, (int, ...), 1)                                                      \
    X(int, pthread_create, (pthread_t *, const pthread_attr_t *, void *(*)(void *),    \
                            void *), 0)                                               \
    X(long, syscall, (long, ...), 1)

/* The allocator and mapping family, interposed by malloc-hooks/. */
#define ZC_REAL_MEM_LIST(X)                                                           \
    X(void *, malloc, (size_t), 1)                                                    \
    X(void *, calloc, (size_t, size_t), 1)                                            \
    X(void *, realloc, (void *, size_t), 1)                                           \
    X(void *, reallocarray, (void *, size_t, size_t), 0)                              \
    X(void, free, (void *), 1)                                                        \
    X(int, posix_memalign, (void **, size_t, size_t), 1)                              \
    X(void *, aligned_alloc, (size_t, size_t), 1)                                     \
    X(void *, memalign, (size_t, size_t), 1)                                          \
    X(void *, valloc, (size_t), 1)                                                    \
    X(void *, pvalloc, (size_t), 0)                                                   \
    X(size_t, malloc_usable_size, (void *), 1)                                        \
    X(void *, mmap, (void *, size_t, int, int, int, off_t), 1)                        \
    X(void *, mmap64, (void *, size_t, int, int, int, off_t), 0)                      \
    X(int, munmap, (void *, size_t), 1)                                               \
    X(void *, mremap, (void *, size_t, size_t, int, ...), 1)                          \
    X(int, madvise, (void *, size_t, int), 1)                                         \
    X(int, mprotect, (void *, size_t, int), 1)                                        \
    X(int, pkey_mprotect, (void *, size_t, int, int), 0)                              \
    X(int, brk, (void *), 1)                                                          \
    X(void *, sbrk, (intptr_t), 1)                                                    \
    X(void *, shmat, (int, const void *, int), 1)                                     \
    X(int, shmdt, (const void *), 1)                                                  \
    X(int, setrlimit, (__rlimit_resource_t, const struct rlimit *), 1)                                \
    X(int, setrlimit64, (__rlimit_resource_t, const struct rlimit64 *), 0)                            \
    X(int, prlimit, (pid_t, __rlimit_resource_t, const struct rlimit *, struct rlimit *), 0)          \
    X(int, prlimit64, (pid_t, __rlimit_resource_t, const struct rlimit64 *, struct rlimit64 *), 0)

#define ZC_REAL_LIST(X) ZC_REAL_SOCKET_LIST(X) ZC_REAL_MEM_LIST(X)

typedef struct zc_real {
#define ZC_REAL_FIELD(ret, name, params, mandatory) ret(*name) params;
    ZC_REAL_LIST(ZC_REAL_FIELD)
#undef ZC_REAL_FIELD
} zc_real_t;

extern zc_real_t zc_real;

/* Resolve every entry once (idempotent, thread-safe: concurrent callers wait
 * for the first).  Returns 0, or -ENOENT when a mandatory function is missing
 * or resolves to our own definition; *missing_p then names it. */
int zc_real_resolve(const char **missing_p);

/* 1 once zc_real_resolve() has completed. */
int zc_real_ready(void);

#endif
