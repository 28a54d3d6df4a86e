/* Shared by the shim's hook files: initialisation state and the prologue
 * every hook runs. */
#ifndef SHIM_INT_H
#define SHIM_INT_H

#include <errno.h>

#include "shim_fd.h"
#include "shim_path.h"
#include "zc_real.h"
#include "zc_stats.h"
#include "zc_live.h"

#define SHIM_EXPORT __attribute__((visibility("default")))
#define shim_likely(x) __builtin_expect(!!(x), 1)
#define shim_unlikely(x) __builtin_expect(!!(x), 0)

/* 1 once the constructor (or the first hook) finished initialising. */
extern int shim_ready;

/* Initialise on first use when a hook runs before our constructor (another
 * library's constructor calling into libc).  Returns 0, or -errno when the
 * real functions cannot be resolved yet (a hook re-entered from dlsym). */
int shim_init_slow(void);
void shim_pid_unsure(void);

/* Process identity kept for exec and fork decisions. */

/* 1 in a vfork child (posix_spawn-like launchers, Python's subprocess): it
 * shares our memory but not our descriptor table, so the descriptor hooks
 * must leave the state table (the parent's) alone.  A getpid system call:
 * ask only when there is state to touch. */
int shim_vfork_child(void);

/* SIGDEFER (hooks_sig.c): a signal handler of the application's that
 * interrupts this thread inside a critical section of ours (a connection's
 * lock held) runs when the outermost one ends; inside a blocking wait of one
 * (shim_sig_wait_begin/end) it runs at once. */
extern __thread int shim_sig_crit __attribute__((tls_model("initial-exec")));
/* The application's call site of the send hook now running (its return
 * address): page exchange charges a refusal to it (shim_xu_refused). */
extern __thread uintptr_t shim_send_site __attribute__((tls_model("initial-exec")));
/* Calls of this thread into the library's hooks (SHIM_ENTER), and among
 * them the sends and receives a path served (SHIM_DATA_HOOK): a zero-timeout
 * wait that finds the difference moved by exactly its own entry since the
 * thread's last one knows the thread did nothing else in between but move
 * data on claimed connections (shim_ready.c, KERNEL SKIP). */
extern __thread uint64_t shim_entries __attribute__((tls_model("initial-exec")));
extern __thread uint64_t shim_path_calls __attribute__((tls_model("initial-exec")));
extern __thread int shim_sig_open __attribute__((tls_model("initial-exec")));
extern __thread uint64_t shim_sig_pend __attribute__((tls_model("initial-exec")));
extern __thread unsigned shim_sig_ran __attribute__((tls_model("initial-exec")));
extern __thread unsigned shim_sig_ran_intr __attribute__((tls_model("initial-exec")));
void shim_sig_release(void);

static inline void shim_crit_enter(void)
{
    shim_sig_crit++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void shim_crit_leave(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (--shim_sig_crit <= 0) {
        shim_sig_crit = 0;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (__builtin_expect(shim_sig_pend != 0, 0))
            shim_sig_release();
    }
}

static inline void shim_sig_wait_begin(void)
{
    shim_sig_open++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void shim_sig_wait_end(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    shim_sig_open--;
}

/* Every hook starts here: make sure we are initialised and count the call.
 * When the real function is unknown (from inside dlsym itself, or an optional
 * function this libc lacks) the call fails with ENOSYS rather than crashing. */
#define SHIM_ENTER(name, fail_ret)                                              \
    do {                                                                        \
        if (shim_unlikely(!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE)))     \
            shim_init_slow();                                                   \
        if (shim_unlikely(!zc_real.name)) {                                     \
            errno = ENOSYS;                                                     \
            return fail_ret;                                                    \
        }                                                                       \
        zc_stat_add(ZC_STAT_CALLS_##name, 1);                                   \
        shim_entries++;                                                         \
        zc_live_poll();                                                         \
    } while (0)

/* Convert a path's -errno result into the libc convention. */
static inline ssize_t shim_ret(ssize_t rc)
{
    if (rc < 0) {
        errno = (int)-rc;
        return -1;
    }
    return rc;
}

/* Charge a copy-path data call on a descriptor known to be a socket (send,
 * recv and their relatives) or possibly one (read, write: only sockets the
 * library knows are charged). */
void shim_copy_account(shim_fd_t *f, int is_send, ssize_t n, int must_be_socket);

/* Lifecycle dispatch to every registered path (shim_paths.c); errno kept. */
void shim_socket_made(int fd, int domain, int type);
void shim_fds_passing(int fd, const struct msghdr *msg);
void shim_fds_received(int fd, struct msghdr *msg);
/* Initialise the paths, let them adopt what the previous image left, and
 * register their fork handlers (initialisation). */
void shim_paths_start(void);
/* The environment the next image gets: x->envp plus what the paths add,
 * built in vec (vec_n entries) and buf (size bytes); *env_p is x->envp
 * when nothing was added.  Returns the number of variables added. */
size_t shim_paths_exec_env(const shim_exec_t *x, char **vec, size_t vec_n, char *buf,
                           size_t size, char *const **env_p);
/* I/O the hooks cannot see may meet fd / every descriptor (shim_path_t
 * fd_exposed / process_exposed); errno kept. */
void shim_fd_exposed(int fd, const char *why);
/* syscall(SYS_close, fd): forget fd's entry first (hooks_sock.c). */
void shim_fd_closing_raw(int fd);

/* close_range's work past its entry (closefrom, syscall(SYS_close_range);
 * hooks_sock.c). */
int shim_close_range_do(unsigned first, unsigned last, int flags);
void shim_process_exposed(const char *why);
/* The destructor: the process exits with its descriptors open. */
void shim_process_exit(void);
/* dup2/dup3 onto internal descriptor fd: move it away.  0 or -errno. */
int shim_fd_internal_move(int fd);

/* Forget the epoll registrations of epoll descriptor fd (it is closing). */
void shim_ep_forget_fd(int fd);
/* Socket fd is closing: its registrations go from the table. */
void shim_ep_fd_closed(int fd);
/* The application operated on claimed fd (a send, a receive, a shutdown, a
 * poll): what that did to its path's wake-up is unknown, so its epoll
 * registrations go back on their sets' ready lists.  One load when none
 * is off them (shim_epoll.c, READY LIST). */
void shim_ep_touched(int fd);
static inline void shim_ep_touch(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (f && shim_unlikely(__atomic_load_n(&f->ep_clean, __ATOMIC_RELAXED)))
        shim_ep_touched(fd);
}
/* fd was just claimed: registrations recorded while it was unclaimed are
 * taken over (shim_epoll.c, REGISTERED BEFORE CLAIMED). */
void shim_ep_claimed(int fd);
/* What the process's loaded objects can do behind the library's back
 * (shim_objs.c): SHIM_OBJ_URING (liburing: system calls no hook sees),
 * SHIM_OBJ_PINS (memory pinned for the kernel or a device: io_uring fixed
 * buffers, RDMA, CUDA).  Looks again only when the loader added an object.
 * shim_objects_note: io_uring met otherwise (syscall()); shim_pinners: is
 * SHIM_OBJ_PINS set.  Hook-safe. */
#define SHIM_OBJ_URING 1
#define SHIM_OBJ_PINS 2
int shim_objects(void);
void shim_objects_note(int flags);
int shim_pinners(void);
/* QUIET SETS (shim_epoll.c): epfd made by epoll_create here; fd (maybe a
 * set) watched or shared from now on; fd closed or replaced; every set
 * shared (exec, spawn); the hooks' fast test. */
void shim_ep_created(int epfd);
void shim_ep_exposed(int fd);
/* epfd was put in another set (shim_epoll.c, NESTED SETS); a set was
 * ever marked SHIM_FD_EPOLL (a poll over one may be one of them). */
extern int shim_ep_marked_any;
/* (shim_ep_nested) */
void shim_ep_nested(int epfd);
/* A thread goes to sleep in a wait that is not the engine's own look at
 * a set (an outer epoll set's, a poll's): what nested sets reported is
 * armed first (shim_epoll.c, NESTED SETS). */
void shim_ep_outer_sleep(void);
void shim_ep_priv_gone(int fd);
void shim_ep_all_public(void);
/* Bit (epfd & 63) of every set ever made private (never cleared: a stale
 * bit only costs a look at the table): a close or dup of a number whose
 * bit is clear names no private set, without scanning the table (2 of
 * every nginx request's closes did, 100 instructions each). */
extern uint64_t shim_ep_priv_bits;
static inline int shim_ep_priv_some(void)
{
    return __atomic_load_n(&shim_ep_priv_bits, __ATOMIC_RELAXED) != 0;
}
static inline int shim_ep_priv_maybe(int fd)
{
    return fd >= 0 && ((__atomic_load_n(&shim_ep_priv_bits, __ATOMIC_RELAXED) >> (fd & 63)) & 1);
}
/* Empty a path's wake-up descriptor (an epoll instance,
 * shim_path_ops_t.wake_fd) without waiting (shim_ready.c). */
void shim_wake_drain(int fd);
/* The application's epoll_ctl met ELOOP: every wake fd out of every set
 * (shim_epoll.c, WAKE FDS AND NESTING).  1 when any left: try again. */
int shim_ep_wake_strip(void);
/* The epoll table's lock around fork (shim_init.c). */
void shim_ep_fork_prepare(void);
void shim_ep_fork_parent(void);
void shim_ep_fork_child(void);

/* Run the exec preparation (statistics of the image being replaced); skipped
 * in a vfork child, which shares our memory. */
void shim_exec_prepare(void);

#endif
