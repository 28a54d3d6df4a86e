/* Visibility hooks (DESIGN.md §3.10): the ways I/O can reach a descriptor
 * without passing through the other hooks.  Each tells the paths first
 * (shim_fd_exposed / shim_process_exposed), then makes the real call.
 *   fdopen        the stream reads and writes through glibc-internal calls
 *   posix_spawn_file_actions_adddup2
 *                 the child gets the descriptor under another number even
 *                 when ours is close-on-exec (Rust's Command, Python's
 *                 os.posix_spawn), which no exec scan of ours sees
 *   prctl         PR_SET_SECCOMP: a filter that may kill the process for a
 *                 system call the library adds (sshd's sandbox)
 *   syscall       seccomp and io_uring_setup made through syscall(); close
 *                 and close_range (libuv closes through syscall()) keep the
 *                 descriptor table true; other numbers pass straight through */
#include <linux/seccomp.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "shim_int.h"

SHIM_EXPORT FILE *fdopen(int fd, const char *mode)
{
    SHIM_ENTER(fdopen, NULL);
    if (shim_fd_claimed(shim_fd_get(fd)))
        shim_fd_exposed(fd, "fdopen (stdio)");
    return zc_real.fdopen(fd, mode);
}

SHIM_EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd,
                                                 int newfd)
{
    SHIM_ENTER(posix_spawn_file_actions_adddup2, ENOSYS);
    if (shim_fd_claimed(shim_fd_get(fd)))
        shim_fd_exposed(fd, "posix_spawn file action (dup2)");
    return zc_real.posix_spawn_file_actions_adddup2(fa, fd, newfd);
}

SHIM_EXPORT int prctl(int option, ...)
{
    unsigned long a[4];
    va_list ap;
    int i;

    va_start(ap, option);
    for (i = 0; i < 4; i++)
        a[i] = va_arg(ap, unsigned long);
    va_end(ap);
    SHIM_ENTER(prctl, -1);
    if (option == PR_SET_SECCOMP)
        zc_live_seal();         /* no more system calls of the live file's */
    if (option == PR_SET_SECCOMP && a[0] == SECCOMP_MODE_FILTER)
        shim_process_exposed("a seccomp filter");
    return zc_real.prctl(option, a[0], a[1], a[2], a[3]);
}

/* It cannot know how many arguments a caller passed and reads six, as the
 * kernel's convention does: the ones not passed are whatever the caller's
 * frame holds, never used for that system call, which AddressSanitizer
 * would report as a stack underflow in the caller. */
__attribute__((no_sanitize("address")))
SHIM_EXPORT long syscall(long nr, ...)
{
    long a[6];
    va_list ap;
    int i;

    va_start(ap, nr);
    for (i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    /* Not SHIM_ENTER: the library's own futex and gettid calls come through
     * here too, and are no calls of the application's to count. */
    if (__builtin_expect(!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE), 0))
        shim_init_slow();
    if (__builtin_expect(!zc_real.syscall, 0)) {
        errno = ENOSYS;
        return -1;
    }
    if (__builtin_expect(nr == SYS_seccomp || nr == SYS_io_uring_setup, 0)) {
        if (nr == SYS_seccomp)
            zc_live_seal();
        if (nr == SYS_io_uring_setup)
            shim_objects_note(SHIM_OBJ_URING | SHIM_OBJ_PINS);
        shim_process_exposed(nr == SYS_seccomp ? "a seccomp filter" : "io_uring");
    }
    else if (__builtin_expect(nr == SYS_close, 0))
        shim_fd_closing_raw((int)a[0]);
    else if (__builtin_expect(nr == SYS_fork || nr == SYS_vfork || nr == SYS_clone3 ||
                              (nr == SYS_clone && !(a[0] & CLONE_THREAD)), 0))
        shim_pid_unsure();          /* a child no atfork handler sees (zc_getpid) */
    else if (__builtin_expect(nr == SYS_close_range, 0) && zc_real.close_range) {
        zc_stat_add(ZC_STAT_CALLS_close_range, 1);
        return shim_close_range_do((unsigned)a[0], (unsigned)a[1], (int)a[2]);
    }
    return zc_real.syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
