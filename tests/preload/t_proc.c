/* fork (the child keeps using inherited sockets), the exec family (execve,
 * execv, execvp, execvpe, execl, execlp, execle, fexecve: the new image has
 * the library again when preloaded), vfork + exec, posix_spawn and system;
 * children made behind the atfork handlers' back (vfork, clone with and
 * without CLONE_VM, _Fork, fork and vfork through syscall()) that close a
 * connection of ours: the library must know it is not the parent there (a
 * vfork child shares the parent's memory: a close there that forgot the
 * parent's descriptor would break the parent's connection). */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "t_common.h"
#include "t_net.h"

extern char **environ;

/* The exec'd image: /bin/sh checks that the library is mapped into it
 * exactly when the runner preloaded it, then writes to the inherited socket. */
static const char *t_script =
    "if grep -q libzcsock /proc/$$/maps; then p=1; else p=0; fi; "
    "[ \"${T_EXPECT_PRELOAD:-0}\" = \"$p\" ] || exit 3; printf x >&$1";

static int t_wait_ok(pid_t pid)
{
    int status;

    T_CHECK(pid > 0);
    T_CHECK(waitpid(pid, &status, 0) == pid);
    T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return T_PASS;
}

/* Run one exec variant in a child; the child writes one byte to fd. */
static int t_exec_variant(int which, int fd)
{
    char fdstr[16];
    char *argv[] = { "sh", "-c", (char *)t_script, "sh", fdstr, NULL };
    pid_t pid;

    snprintf(fdstr, sizeof(fdstr), "%d", fd);
    pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        int sh;

        /* a zero-length send is invisible to the peer but counts as socket
         * activity, so under ZCSOCK_STATS=1 each hooked exec reports (the
         * env/exec-family-reports case counts those reports) */
        if (send(fd, "", 0, 0) != 0)
            _exit(126);
        switch (which) {
        case 0: execve("/bin/sh", argv, environ); break;
        case 1: execv("/bin/sh", argv); break;
        case 2: execvp("sh", argv); break;
        case 3: execvpe("sh", argv, environ); break;
        case 4: execl("/bin/sh", "sh", "-c", t_script, "sh", fdstr, (char *)NULL); break;
        case 5: execlp("sh", "sh", "-c", t_script, "sh", fdstr, (char *)NULL); break;
        case 6: execle("/bin/sh", "sh", "-c", t_script, "sh", fdstr, (char *)NULL, environ); break;
        case 7:
            sh = open("/bin/sh", O_RDONLY);
            fexecve(sh, argv, environ);
            break;
        }
        _exit(127);
    }
    return t_wait_ok(pid);
}

static int t_close_fd(void *arg)
{
    close(*(int *)arg);
    return 0;
}

/* A child made the way `how' says closes fd and leaves; its pid. */
static pid_t t_child_closes(int how, int fd)
{
    static char stack[64 * 1024] __attribute__((aligned(16)));
    pid_t pid = -1;

    switch (how) {
    case 0:
        pid = vfork();
        break;
    case 1:
        pid = _Fork();
        break;
    case 2:
        pid = (pid_t)syscall(SYS_fork);
        break;
    case 3:
        return clone(t_close_fd, stack + sizeof(stack), SIGCHLD, &fd);
    case 4:
        return clone(t_close_fd, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, &fd);
    }
    if (pid == 0) {
        close(fd);
        _exit(0);
    }
    return pid;
}

static int t_raw_thread(void *arg)
{
    __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
    return 0;
}

/* A thread the C library does not know of (clone with CLONE_VM and no
 * vfork-style wait): under the library the process is not single-threaded
 * any more (__libc_single_threaded, on which the local path's one-thread
 * rules rest; hooks_proc.c).  In a child of its own: the flag stays. */
static int t_raw_thread_counts(void)
{
    static char stack[64 * 1024] __attribute__((aligned(16)));
    static int done;
    pid_t pid = fork(), t;
    int i;

    if (pid != 0)
        return t_wait_ok(pid);
    t = clone(t_raw_thread, stack + sizeof(stack),
              CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM,
              &done);
    for (i = 0; i < 5000 && !__atomic_load_n(&done, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    _exit(t > 0 && __atomic_load_n(&done, __ATOMIC_ACQUIRE) &&
          (!t_preloaded() || !__libc_single_threaded) ? 0 : 1);
}

int t_main(void)
{
    int c, s, i, status;
    char buf[16], fdstr[16], cmd[512];
    char *argv[] = { "sh", "-c", (char *)t_script, "sh", fdstr, NULL };
    pid_t pid;
    T_COUNT(fork);
    uint64_t execs = t_stat("proc.execs");

    T_CHECK(t_tcp_pair(AF_INET, &c, &s) == 0);
    /* fork: child and parent both use the socket */
    pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0)
        _exit(send(c, "child", 5, 0) == 5 ? 0 : 1);
    T_CHECK(t_wait_ok(pid) == T_PASS);
    T_CHECK(send(c, "parent", 6, 0) == 6);
    T_CHECK(recv(s, buf, 11, MSG_WAITALL) == 11 && !memcmp(buf, "childparent", 11));
    /* children behind the atfork handlers' back close c: ours stays (a
     * table that forgot c would count our calls on it as untracked).  Each
     * way in a process of its own, before any of them was seen. */
    for (i = 0; i < 5; i++) {
        pid = fork();
        T_CHECK(pid >= 0);
        if (pid == 0) {
            uint64_t untracked = t_stat("copy_why.untracked_fd");

            if (t_wait_ok(t_child_closes(i, c)) != T_PASS || send(c, "z", 1, 0) != 1 ||
                recv(s, buf, 1, 0) != 1 || buf[0] != 'z' || send(s, "w", 1, 0) != 1 ||
                recv(c, buf, 1, 0) != 1 || buf[0] != 'w' ||
                t_stat("copy_why.untracked_fd") != untracked)
                _exit(10 + i);
            _exit(0);
        }
        T_CHECK(t_wait_ok(pid) == T_PASS);
    }
    /* every exec variant */
    for (i = 0; i < 8; i++) {
        T_CHECK(t_exec_variant(i, c) == T_PASS);
        T_CHECK(recv(s, buf, 1, 0) == 1 && buf[0] == 'x');
    }
    /* vfork + exec: nothing of ours may run in the child's borrowed frame */
    snprintf(fdstr, sizeof(fdstr), "%d", c);
    pid = vfork();
    if (pid == 0) {
        execve("/bin/sh", argv, environ);
        _exit(127);
    }
    T_CHECK(t_wait_ok(pid) == T_PASS);
    T_CHECK(recv(s, buf, 1, 0) == 1 && buf[0] == 'x');
    /* posix_spawn and system */
    T_CHECK(posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ) == 0);
    T_CHECK(t_wait_ok(pid) == T_PASS);
    T_CHECK(recv(s, buf, 1, 0) == 1 && buf[0] == 'x');
    snprintf(cmd, sizeof(cmd), "printf y >&%d", c);
    status = system(cmd);
    T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    T_CHECK(recv(s, buf, 1, 0) == 1 && buf[0] == 'y');
    T_CHECK(t_raw_thread_counts() == T_PASS);
    close(c);
    close(s);
    T_CALLED(fork);
    /* exec calls are counted in the children, which share nothing with us
     * after fork: only the vfork child's exec could show here, and it must
     * not (nothing of ours runs in a vfork child).  That the exec hooks ran
     * is proven by env/exec-family-reports. */
    T_CHECK(t_stat("proc.execs") == execs);
    return T_PASS;
}
