/* System calls made by the library itself, straight to the kernel: never
 * through the C library's syscall(), which the library interposes (its own
 * hook would run), and usable before the real-function table is resolved
 * (a hook called from another library's constructor, the sanitizer
 * runtimes' set-up).  Returns what the kernel returns: >= 0, or -errno. */
#ifndef ZC_SYS_H
#define ZC_SYS_H

#include <sys/syscall.h>

#if defined(__x86_64__)
static inline long zc_sys6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    long ret;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;

    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__)
static inline long zc_sys6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a1;
    register long x1 __asm__("x1") = a2;
    register long x2 __asm__("x2") = a3;
    register long x3 __asm__("x3") = a4;
    register long x4 __asm__("x4") = a5;
    register long x5 __asm__("x5") = a6;

    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
}
#else
#include <errno.h>
#include <unistd.h>
/* Elsewhere the C library's: only before the real-function table exists. */
static inline long zc_sys6(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    long r = syscall(nr, a1, a2, a3, a4, a5, a6);

    return r < 0 ? -errno : r;
}
#endif

#define zc_sys(nr, a1, a2, a3) zc_sys6((long)(nr), (long)(a1), (long)(a2), (long)(a3), 0, 0, 0)

#include <errno.h>
#include <stdarg.h>

/* The C library's syscall() contract (-1 and errno on failure) for the
 * library's own code, which must never reach its exported syscall hook
 * through the PLT (`make check-symbols` fails on such a relocation).  Six
 * arguments are read, as the C library's syscall() reads them. */
static inline long zc_syscall(long nr, ...)
{
    va_list ap;
    long a[6], r;
    int i;

    va_start(ap, nr);
    for (i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    r = zc_sys6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

/* This process's id without a system call (the C library keeps no cache
 * since glibc 2.25, and the library asked about 18 times a connection).
 * zc_pid_cached is set at initialisation and first thing in a fork child
 * (the first atfork child handler of the library's); it is not believed
 * while a fork is under way (zc_pid_forking: the child copies the count,
 * and a foreign atfork handler that runs before ours asks the kernel) nor
 * ever again once a child was made that no atfork handler saw
 * (zc_pid_unsure: vfork, clone, _Fork, a fork, vfork or clone through
 * syscall(), a pump of the library's): from then on the kernel is asked
 * each time, as before.  A vfork child shares our memory, so it always
 * finds zc_pid_unsure set by the vfork that made it. */
extern int zc_pid_cached;
extern int zc_pid_unsure;
extern int zc_pid_forking;

/* 1 when zc_pid_cached may not be this process's id. */
static inline int zc_pid_stale(void)
{
    return __atomic_load_n(&zc_pid_unsure, __ATOMIC_RELAXED) |
           __atomic_load_n(&zc_pid_forking, __ATOMIC_RELAXED) |
           !__atomic_load_n(&zc_pid_cached, __ATOMIC_RELAXED);
}

static inline int zc_getpid(void)
{
    if (__builtin_expect(!zc_pid_stale(), 1))
        return __atomic_load_n(&zc_pid_cached, __ATOMIC_RELAXED);
    return (int)zc_sys(SYS_getpid, 0, 0, 0);
}

#endif
