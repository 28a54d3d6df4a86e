/* Process hooks: fork and the exec family.
 *
 * vfork is deliberately not interposed: a wrapper would return into its own
 * frame in the child, which shares the parent's stack.  posix_spawn, system
 * and popen use glibc-internal clone and execve, which no hook sees; they
 * need none.  The exec hooks run shim_exec_prepare(), which does nothing in a
 * vfork child (it shares our memory), then the real call. */
#include <stdarg.h>
#include <unistd.h>

#include "shim_int.h"

SHIM_EXPORT pid_t fork(void)
{
    SHIM_ENTER(fork, -1);
    zc_stat_add(ZC_STAT_PROC_FORKS, 1);
    return zc_real.fork();   /* the child's bookkeeping runs in the atfork handler */
}

SHIM_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    SHIM_ENTER(execve, -1);
    shim_exec_prepare();
    return zc_real.execve(path, argv, envp);
}

SHIM_EXPORT int execv(const char *path, char *const argv[])
{
    SHIM_ENTER(execv, -1);
    shim_exec_prepare();
    return zc_real.execv(path, argv);
}

SHIM_EXPORT int execvp(const char *file, char *const argv[])
{
    SHIM_ENTER(execvp, -1);
    shim_exec_prepare();
    return zc_real.execvp(file, argv);
}

SHIM_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    SHIM_ENTER(execvpe, -1);
    shim_exec_prepare();
    return zc_real.execvpe(file, argv, envp);
}

SHIM_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    SHIM_ENTER(fexecve, -1);
    shim_exec_prepare();
    return zc_real.fexecve(fd, argv, envp);
}

/* execl, execlp and execle: glibc builds the vector and calls its internal
 * execve, which we would miss; build it here (on the stack) instead. */
#define SHIM_EXECL_ARGV(arg0, last, argv)                                   \
    size_t argc_ = 0;                                                       \
    const char *arg0_ = (arg0);                                             \
    va_list ap_;                                                            \
    __asm__("" : "+r"(arg0_)); /* libc declares it nonnull; NULL is legal */ \
    va_start(ap_, arg0);                                                    \
    if (arg0_)                                                              \
        for (argc_ = 1; va_arg(ap_, const char *); argc_++)                 \
            ;                                                               \
    va_end(ap_);                                                            \
    char *argv[argc_ + 1];                                                  \
    va_start(ap_, arg0);                                                    \
    argv[0] = (char *)(arg0);                                               \
    for (size_t i_ = 1; i_ <= argc_; i_++)                                  \
        argv[i_] = va_arg(ap_, char *);                                     \
    last;                                                                   \
    va_end(ap_)

SHIM_EXPORT int execl(const char *path, const char *arg, ...)
{
    SHIM_ENTER(execv, -1);
    SHIM_EXECL_ARGV(arg, (void)0, argv);
    shim_exec_prepare();
    return zc_real.execv(path, argv);
}

SHIM_EXPORT int execlp(const char *file, const char *arg, ...)
{
    SHIM_ENTER(execvp, -1);
    SHIM_EXECL_ARGV(arg, (void)0, argv);
    shim_exec_prepare();
    return zc_real.execvp(file, argv);
}

SHIM_EXPORT int execle(const char *path, const char *arg, ...)
{
    char *const *envp;

    SHIM_ENTER(execve, -1);
    SHIM_EXECL_ARGV(arg, envp = va_arg(ap_, char *const *), argv);
    shim_exec_prepare();
    return zc_real.execve(path, argv, envp);
}
