/* Process hooks: fork, vfork, _Fork, clone, the exec family, _exit and
 * pthread_create.
 *
 * vfork (x86_64) is a stub that marks the cached pid unsure and jumps to the
 * C library's vfork, with no frame of its own: a wrapper that called it
 * would return into its own frame in the child, which shares the parent's
 * stack.  _Fork and clone make children no atfork handler sees, so they
 * mark it unsure too (zc_getpid, zc_sys.h).  posix_spawn, system and popen
 * use glibc-internal clone and execve, which no hook sees; their children
 * run none of the library's code.  The exec hooks run shim_exec_prepare(),
 * which does nothing in a vfork child (it shares our memory), then the real
 * call. */
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/single_threaded.h>
#include <unistd.h>

#include "shim_int.h"
#include "zc_sys.h"

extern char **environ;

/* _exit skips the destructors: the live statistics file goes here (fork
 * children of servers and test harnesses leave by _exit).  Not in a vfork
 * child, whose memory, and file, are its parent's. */
static __attribute__((noreturn)) void shim_exit_now(int status)
{
    if (!shim_vfork_child())
        zc_live_exit();
    for (;;)
        zc_sys(SYS_exit_group, status, 0, 0);
}

SHIM_EXPORT void _exit(int status)
{
    shim_exit_now(status);
}

SHIM_EXPORT void _Exit(int status)
{
    shim_exit_now(status);
}

ZC_FORK_CODE SHIM_EXPORT pid_t fork(void)
{
    pid_t pid;

    SHIM_ENTER(fork, -1);
    zc_stat_add(ZC_STAT_PROC_FORKS, 1);
    SHIM_PATHS_EACH(fork_hold, 1);
    pid = zc_real.fork();    /* the child's bookkeeping runs in the atfork handlers */
    if (pid < 0) {
        int saved = errno;

        SHIM_PATHS_EACH(fork_hold, -1);
        errno = saved;
    }
    return pid;
}

/* A child made behind the atfork handlers' back: the cached pid is never
 * believed again in this process (nor in the child, which copies it). */
void shim_pid_unsure(void)
{
    __atomic_store_n(&zc_pid_unsure, 1, __ATOMIC_SEQ_CST);
}

#if defined(__x86_64__)
/* The C library's vfork, resolved at the first call (by a call made before
 * the stub touches the stack: nothing of it is left on the stack when the
 * jump is made). */
__attribute__((used)) void *shim_vfork_target;
void *shim_vfork_resolve(void);

__attribute__((used)) void *shim_vfork_resolve(void)
{
    if (!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE))
        shim_init_slow();
    /* (without the C library's vfork, its fork: a vfork may be a fork) */
    shim_vfork_target = zc_real.vfork ? (void *)zc_real.vfork : (void *)zc_real.fork;
    return shim_vfork_target;
}

__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork, @function\n"
        ".globl __vfork\n"
        ".type __vfork, @function\n"
        "vfork:\n"
        "__vfork:\n"
        "    endbr64\n"
        "    movl $1, zc_pid_unsure(%rip)\n"
        "    mfence\n"
        "    movq shim_vfork_target(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    jmp *%rax\n"
        "1:  subq $8, %rsp\n"          /* (aligned for the call) */
        "    call shim_vfork_resolve\n"
        "    addq $8, %rsp\n"
        "    jmp *%rax\n"
        ".size vfork, .-vfork\n"
        ".size __vfork, .-__vfork\n");
#endif

SHIM_EXPORT pid_t _Fork(void)
{
    if (!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE))
        shim_init_slow();
    if (!zc_real._Fork) {
        errno = ENOSYS;
        return -1;
    }
    shim_pid_unsure();
    return zc_real._Fork();
}

/* The child runs fn on its own stack and never returns through this frame.
 * The optional arguments are read as the C library reads them (three; the
 * ones not passed are whatever the caller's frame holds, unused by clone). */
__attribute__((no_sanitize("address")))
SHIM_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
    va_list ap;
    pid_t *ptid;
    void *tls;
    pid_t *ctid;

    va_start(ap, arg);
    ptid = va_arg(ap, pid_t *);
    tls = va_arg(ap, void *);
    ctid = va_arg(ap, pid_t *);
    va_end(ap);
    if (!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE))
        shim_init_slow();
    if (!zc_real.clone) {
        errno = ENOSYS;
        return -1;
    }
    if (!(flags & CLONE_THREAD))
        shim_pid_unsure();
    /* A thread the C library does not know of (clone with CLONE_VM, no
     * vfork-style suspension of this one): the process is no longer
     * single-threaded, which glibc's pthread_create alone would have said
     * (__libc_single_threaded; the local path's ALONE rules, conn.c). */
    if ((flags & CLONE_VM) && !(flags & CLONE_VFORK))
        __libc_single_threaded = 0;
    return zc_real.clone(fn, stack, flags, arg, ptid, tls, ctid);
}

/* Before a process's first thread: its live statistics file is made now,
 * with the counters mapped from it, so that they stay live once threads
 * count too (zc_live_stage; published at the first socket).  glibc's own
 * threads (timer_create, getaddrinfo_a) start without this hook. */
SHIM_EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                               void *(*start)(void *), void *arg)
{
    SHIM_ENTER(pthread_create, EAGAIN);
    if (__libc_single_threaded)
        zc_live_stage();
    return zc_real.pthread_create(thread, attr, start, arg);
}

/* The environment the next image gets: the application's, plus what the
 * paths hand over to it (shim_paths_exec_env; on our stack). */
#define SHIM_EXEC_ENV_MAX 4096
#define SHIM_EXEC_ENV(image, search, fd, in, out)                            \
    size_t envn_ = 0;                                                        \
    while ((in) && (in)[envn_])                                              \
        envn_++;                                                             \
    char *envvec_[envn_ + 8];                                                \
    char envbuf_[SHIM_EXEC_ENV_MAX];                                         \
    char *const *out;                                                        \
    shim_paths_exec_env(&(shim_exec_t){ (image), (search), (fd), (in) }, envvec_, \
                        envn_ + 8, envbuf_, sizeof(envbuf_), &out)

/* The exec returned: it failed, and what we prepared is undone. */
static int shim_exec_failed(int rc)
{
    int saved = errno;

    SHIM_PATHS_EACH(exec_failed);
    if (!shim_vfork_child())
        zc_live_exec_failed();
    errno = saved;
    return rc;
}

SHIM_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    SHIM_ENTER(execve, -1);
    shim_exec_prepare();
    SHIM_EXEC_ENV(path, 0, -1, envp, env);
    return shim_exec_failed(zc_real.execve(path, argv, env));
}

SHIM_EXPORT int execv(const char *path, char *const argv[])
{
    SHIM_ENTER(execv, -1);
    shim_exec_prepare();
    SHIM_EXEC_ENV(path, 0, -1, environ, env);
    if (env == environ)
        return zc_real.execv(path, argv);
    return shim_exec_failed(zc_real.execve(path, argv, env));
}

SHIM_EXPORT int execvp(const char *file, char *const argv[])
{
    SHIM_ENTER(execvp, -1);
    shim_exec_prepare();
    SHIM_EXEC_ENV(file, 1, -1, environ, env);
    if (env == environ || !zc_real.execvpe)
        return shim_exec_failed(zc_real.execvp(file, argv));
    return shim_exec_failed(zc_real.execvpe(file, argv, env));
}

SHIM_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    SHIM_ENTER(execvpe, -1);
    shim_exec_prepare();
    SHIM_EXEC_ENV(file, 1, -1, envp, env);
    return shim_exec_failed(zc_real.execvpe(file, argv, env));
}

SHIM_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    SHIM_ENTER(fexecve, -1);
    shim_exec_prepare();
    SHIM_EXEC_ENV(NULL, 0, fd, envp, env);
    return shim_exec_failed(zc_real.fexecve(fd, argv, env));
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
    SHIM_EXEC_ENV(path, 0, -1, environ, env);
    return shim_exec_failed(zc_real.execve(path, argv, env));
}

SHIM_EXPORT int execlp(const char *file, const char *arg, ...)
{
    SHIM_ENTER(execvp, -1);
    SHIM_EXECL_ARGV(arg, (void)0, argv);
    shim_exec_prepare();
    SHIM_EXEC_ENV(file, 1, -1, environ, env);
    if (env == environ || !zc_real.execvpe)
        return shim_exec_failed(zc_real.execvp(file, argv));
    return shim_exec_failed(zc_real.execvpe(file, argv, env));
}

SHIM_EXPORT int execle(const char *path, const char *arg, ...)
{
    char *const *envp;

    SHIM_ENTER(execve, -1);
    SHIM_EXECL_ARGV(arg, envp = va_arg(ap_, char *const *), argv);
    shim_exec_prepare();
    SHIM_EXEC_ENV(path, 0, -1, envp, env);
    return shim_exec_failed(zc_real.execve(path, argv, env));
}

/* posix_spawn, system and popen: glibc starts the child with its internal
 * clone and execve, which no hook sees, so the hand-over is prepared here.
 * They return once the child has executed (or failed to), after which the
 * channel descriptors are made close-on-exec again. */
SHIM_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                            const posix_spawnattr_t *attr, char *const argv[],
                            char *const envp[])
{
    SHIM_ENTER(posix_spawn, EINVAL);
    SHIM_EXEC_ENV(path, 0, -1, envp, env);
    return shim_exec_failed(zc_real.posix_spawn(pid, path, fa, attr, argv, env));
}

SHIM_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                             const posix_spawnattr_t *attr, char *const argv[],
                             char *const envp[])
{
    SHIM_ENTER(posix_spawnp, EINVAL);
    SHIM_EXEC_ENV(file, 1, -1, envp, env);
    return shim_exec_failed(zc_real.posix_spawnp(pid, file, fa, attr, argv, env));
}

/* system and popen read the process environment: it is swapped for the
 * duration of the call (only when a connection is handed over). */
SHIM_EXPORT int system(const char *cmd)
{
    char **saved = environ;
    int rc;

    SHIM_ENTER(system, -1);
    SHIM_EXEC_ENV("/bin/sh", 0, -1, environ, env);
    environ = (char **)env;
    rc = zc_real.system(cmd);
    environ = saved;
    return shim_exec_failed(rc);
}

SHIM_EXPORT FILE *popen(const char *cmd, const char *mode)
{
    char **saved = environ;
    FILE *fp;

    SHIM_ENTER(popen, NULL);
    SHIM_EXEC_ENV("/bin/sh", 0, -1, environ, env);
    environ = (char **)env;
    fp = zc_real.popen(cmd, mode);
    environ = saved;
    shim_exec_failed(0);
    return fp;
}
