/* The interface every data path implements, and the one table paths
 * register in.
 *
 * A descriptor no path claimed takes the copy path: the hook forwards the
 * very call the application made to the kernel, so nothing about it can
 * differ from running without the library.  A path (shim/paths/<name>/)
 * claims a descriptor with shim_fd_claim() once it has made sure it can keep
 * every contract of DESIGN.md §3 for it; from then on every hook hands the
 * call to the path's per-descriptor operations (shim_path_ops_t).  The
 * lifecycle operations (shim_path_t) let a path see sockets being made,
 * listened on, connected, accepted, passed with SCM_RIGHTS, and the process
 * fork and exec.  Hooks and the readiness engine (shim_ready.c, shim_epoll.c)
 * never name a path: they iterate the registry or dispatch through the
 * descriptor's entry.  Adding a path is adding a folder whose objects
 * register a shim_path_t with SHIM_PATH_REGISTER; the hooks do not change.
 *
 * Conventions.  Per-descriptor operations return what the call returns
 * (>= 0) or -errno; the hook sets errno.  Operations that may decline to
 * handle a call return SHIM_PATH_PASS, and the hook then makes the real
 * call.  Every operation may run inside a hook: no process allocator, no
 * stdio, no getenv; socket calls through zc_real.  Lifecycle operations must
 * leave errno as they found it (the hooks save it around them anyway). */
#ifndef SHIM_PATH_H
#define SHIM_PATH_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "shim_fd.h"

#define SHIM_PATH_PASS 1

/* What a readiness question may say back besides the revents. */
typedef struct shim_ready_ask {
    int recheck_ms;     /* > 0: the waiter must look again within this many
                         * milliseconds even without a kernel event (0: no
                         * limit); the engine keeps the smallest */
    int wake_listening; /* in, arming looks: this waiter listens to the
                         * descriptor's wake_fd (POLLIN) besides the socket */
    int ring;           /* out, or'd: 1 the descriptor may become ready without
                         * the kernel hearing of it (a paired connection), 2
                         * the kernel follows it alone: a wait spins only
                         * after looks that met a 1 */
    int withdrew;       /* out, SHIM_READY_SPIN looks: a wake-up of this
                         * descriptor was withdrawn for the spin, so the end
                         * of the spin must give it SHIM_READY_SPUN (an
                         * epoll wait gives SPUN to these only, not to every
                         * registration of the set) */
} shim_ready_ask_t;

/* What a readiness look may do besides looking (revents' arm argument). */
enum {
    SHIM_READY_LOOK = 0,    /* look only */
    SHIM_READY_ARM = 1,     /* look, and arm the wake-up before a sleep */
    SHIM_READY_SPIN = 2,    /* look for a waiter that spins over the descriptor
                             * (no sleep): a wake-up armed earlier for a waiter
                             * that cannot exist meanwhile may be withdrawn */
    SHIM_READY_SPUN = 3,    /* the spin is over: re-arm what SPIN withdrew */
    SHIM_READY_ARM_NEXT = 4,    /* edge-triggered epoll: what ev has ready was
                                 * reported already, and the waiter sleeps;
                                 * arm the wake-up for the next change (new
                                 * bytes), as the kernel's edge comes with
                                 * every new packet.  The answer is not used */
};

typedef struct shim_path_ops {
    /* send/sendto/sendmsg/sendmmsg/write/writev (flags 0 for write). */
    ssize_t (*sendmsg)(shim_fd_t *f, int fd, const struct msghdr *msg, int flags);
    /* recv/recvfrom/recvmsg/recvmmsg/read/readv and the fortify variants
     * (flags 0 for read). */
    ssize_t (*recvmsg)(shim_fd_t *f, int fd, struct msghdr *msg, int flags);
    /* sendfile/sendfile64 with claimed out_fd. */
    ssize_t (*sendfile)(shim_fd_t *f, int out_fd, int in_fd, off_t *offset, size_t count);
    /* splice with fd_in or fd_out (or both) claimed by this path. */
    ssize_t (*splice)(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                      unsigned flags);
    /* shutdown: the result, or SHIM_PATH_PASS for "the kernel's answer". */
    int (*shutdown)(shim_fd_t *f, int fd, int how);
    /* ioctl before the real call: SHIM_PATH_PASS, or the result in *rc_p and
     * 0.  Optional. */
    int (*ioctl)(shim_fd_t *f, int fd, unsigned long req, void *arg, int *rc_p);
    /* getsockopt before the real call: SHIM_PATH_PASS or 0 (answered). */
    int (*getsockopt)(shim_fd_t *f, int fd, int level, int name, void *val, socklen_t *len);
    /* setsockopt after the real call succeeded. */
    void (*setsockopt)(shim_fd_t *f, int fd, int level, int name, const void *val,
                       socklen_t len);
    /* The file status flags changed (fcntl F_SETFL, ioctl FIONBIO), after
     * the real call. */
    void (*flags_changed)(shim_fd_t *f, int fd);

    /* Readiness (the engine in shim_ready.c / shim_epoll.c).
     * revents: the poll events of ev (POLLIN, POLLOUT, POLLRDHUP, ...) the
     * descriptor has now, given the kernel socket's revents kev for the
     * events kernel_events asked for (-1: the kernel was not asked).  With
     * arm SHIM_READY_ARM and nothing of ev ready, the path makes sure the
     * waiter will be woken through the kernel events it asked for (or says
     * in *ask when to look again); SHIM_READY_SPIN / SHIM_READY_SPUN bracket
     * a spin (above); SHIM_READY_ARM_NEXT (edge-triggered epoll, ev ready
     * but reported already) arms the wake-up for what comes next.  kernel_events: what to ask the kernel socket for in
     * place of ev.  change: a counter that moves whenever revents may have
     * moved (edge-triggered epoll reports only after it moved). */
    short (*revents)(shim_fd_t *f, int fd, short ev, int kev, int arm, shim_ready_ask_t *ask);
    short (*kernel_events)(shim_fd_t *f, short ev);
    /* Optional: a descriptor of the path's own that a poll/select/epoll
     * waiter on fd listens to as well (its POLLIN wakes the waiter, which
     * then looks again; poll drains it), made when the path wants one;
     * -1 for none.  Once a path returned one it must be in every wait over
     * fd.  unusable: the engine could not listen to it (the path must stop
     * counting on it for fd). */
    int (*wake_fd)(shim_fd_t *f, int fd, int unusable);
    uint64_t (*change)(shim_fd_t *f, int fd);
    /* Optional: 1 when the kernel socket carries only wake-ups for f now
     * (doorbells, EOF, resets; the bytes move elsewhere in both
     * directions), so an epoll registration the application deletes may
     * stay in the kernel, where an event on it costs one spurious wake-up
     * (shim_epoll.c, KEPT DELETES).  Read without the path's locks. */
    int (*kernel_quiet)(shim_fd_t *f);

    /* fd is about to be closed (or replaced by dup2/dup3); the entry is
     * cleared afterwards.  Also called for descriptors the path watches. */
    void (*forget)(shim_fd_t *f, int fd);
    /* newfd now refers to the same socket as f (dup, dup2, dup3, F_DUPFD). */
    void (*dup)(shim_fd_t *f, int newfd);
    /* fd's state for `zcsock stat --conns`: ` key=value` pairs into buf
     * (path=..., state=..., bytes, why=...); returns their length.  Called
     * at a hook's entry with the claim pinned; hook-safe. */
    size_t (*describe)(shim_fd_t *f, int fd, char *buf, size_t size);
} shim_path_ops_t;

/* The exec the process is about to make (shim_path_t.exec_prepare). */
typedef struct shim_exec {
    const char *image;      /* program path or name, NULL with image_fd */
    int search;             /* image is searched in PATH */
    int image_fd;           /* fexecve, else -1 */
    char *const *envp;      /* the environment the application passes */
} shim_exec_t;

typedef struct shim_path {
    const char *name;
    int order;                      /* lower asks first at connect/accept */
    const shim_path_ops_t *ops;     /* for descriptors it claims */

    /* Lifecycle, every one optional. */
    void (*init)(void);             /* once, configuration loaded */
    void (*inherit)(void);          /* once after init: what the previous image left */
    void (*socket_made)(int fd, int domain, int type);  /* socket, socketpair, accept */
    void (*listened)(int fd);
    void (*connect_before)(int fd, const struct sockaddr *addr, socklen_t len);
    void (*connect_after)(int fd, int rc, int err);
    void (*accepted)(int lfd, int fd);
    /* a socket the path left to the kernel with key (shim_fd_t.left_key)
     * moved SHIM_BULK_CALL bytes or more in one copied call (once a socket) */
    void (*left_bulk)(uint32_t key);
    /* sendmsg with SCM_RIGHTS on any socket, before the real call / recvmsg
     * that received descriptors, after it. */
    void (*fds_passing)(int fd, const struct msghdr *msg);
    void (*fds_received)(int fd, struct msghdr *msg);
    /* fork: before the real fork (delta +1: the child will hold what we
     * hold), or after it failed (-1). */
    void (*fork_hold)(int delta);
    void (*fork_prepare)(void);     /* pthread_atfork handlers */
    void (*fork_parent)(void);
    void (*fork_child)(void);
    /* exec: a "NAME=value" to add to the next image's environment (written
     * to buf, its length returned; 0 for none; NAME= entries already in
     * envp are dropped).  In a vfork child it changes only what the parent
     * must see too. */
    size_t (*exec_prepare)(const shim_exec_t *x, char *buf, size_t size);
    void (*exec_failed)(void);      /* the exec returned */
    /* Visibility (DESIGN.md §3.10): I/O the hooks cannot see may meet
     * descriptor fd from now on (fdopen, dup2 onto stdin/stdout/stderr) /
     * any descriptor of the process (a seccomp filter that may refuse the
     * library's own system calls, io_uring).  The path gives what it holds
     * back to the kernel first, and for the process case claims nothing
     * more. */
    void (*fd_exposed)(int fd, const char *why);
    void (*process_exposed)(const char *why);
    /* the process exits through exit() (the destructor), descriptors still
     * open: the kernel closes them next, no hook sees it */
    void (*process_exit)(const char *why);
    /* dup2/dup3 onto a descriptor the path keeps (shim_fd_internal_keep):
     * ctx's descriptor moved from one number to another. */
    void (*internal_moved)(void *ctx, int from, int to);
} shim_path_t;

/* Register path p (one line at file scope in the path's folder).  The
 * library holds every path whose objects it links: the test-only path is
 * linked only into the test variant. */
#define SHIM_PATH_REGISTER(p)                                                   \
    static const shim_path_t *const shim_path_reg_##p                           \
        __attribute__((used, section("zcsock_paths"), aligned(sizeof(void *)))) = &p

/* The registered paths, in order (NULL-terminated); built at init. */
extern const shim_path_t *shim_paths[];

/* Call member op(args...) of every entry of table (a NULL-terminated array
 * of pointers to tables of operations) that has it. */
#define SHIM_TABLE_EACH(table, op, ...)                                         \
    do {                                                                        \
        for (__typeof__(*(table)) const *e_ = (table); *e_; e_++)               \
            if ((*e_)->op)                                                      \
                (*e_)->op(__VA_ARGS__);                                         \
    } while (0)

/* Call lifecycle operation op(args...) of every path that has it. */
#define SHIM_PATHS_EACH(op, ...) SHIM_TABLE_EACH(shim_paths, op, __VA_ARGS__)

/* Sort the registered paths into shim_paths[] (init). */
void shim_paths_init(void);

/* PINS.  The state a path keeps for a claimed descriptor (its ctx) starts
 * with a shim_obj_t.  A hook that hands a call to the path pins the claim
 * first: a copy of the entry taken under its seize byte, and one more count
 * in obj.pins, so the state outlives the call even when another thread
 * closes the descriptor, hands it back or dup2()s over it meanwhile (the
 * kernel too keeps a file alive while a call is inside it).  The path never
 * frees such state itself: shim_obj_retire() marks it dead once no
 * descriptor entry names it any more, and free_fn runs when the last pin
 * goes (at once when none is held).  A process with one thread pins
 * nothing (no other thread can close anything meanwhile). */
#define SHIM_OBJ_DEAD 0x80000000u

typedef struct shim_obj {
    uint32_t pins;                          /* calls in flight | SHIM_OBJ_DEAD */
    void (*free_fn)(struct shim_obj *o);    /* releases the state for good */
} shim_obj_t;

typedef struct shim_pin {
    shim_fd_t f;            /* the entry as pinned: pass &pin.f to the path's ops */
    shim_obj_t *obj;        /* counted in obj->pins, NULL when nothing was counted */
} shim_pin_t;

int shim_fd_pin_slow(shim_fd_t *f, shim_pin_t *p);
void shim_obj_unpin_slow(shim_obj_t *o);

/* Pin the claim of fd: 1 when a path claims it (p->f is the entry, its
 * ops may be called with &p->f until shim_fd_unpin), else 0 (nothing to
 * undo).  Hook-safe, never sleeps. */
static inline int shim_fd_pin(int fd, shim_pin_t *p)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (!f || __builtin_expect(f->claim != SHIM_CLAIM_DATA, 1))
        return 0;
    return shim_fd_pin_slow(f, p);
}

static inline void shim_fd_unpin(shim_pin_t *p)
{
    if (p->obj)
        shim_obj_unpin_slow(p->obj);
}

/* Path state o is no longer named by any descriptor entry: o->free_fn(o)
 * now, or when the last pin goes. */
void shim_obj_retire(shim_obj_t *o);

/* A path's kernel call for a message: sendto or recvfrom where the message
 * is one buffer without ancillary data, which the kernel serves without
 * copying in a header and a vector (about 0.1-0.2 us of a 1-byte call),
 * sendmsg or recvmsg otherwise.  A receive takes recvfrom only when the
 * application made it through recv, recvfrom or read (shim_path_recv marks
 * its message SHIM_MSG_UNSEEN): recvmsg would set msg_flags (MSG_CTRUNC for
 * credentials nobody made room for), which such a caller never sees. */
#define SHIM_MSG_UNSEEN 0x5a430000
ssize_t shim_kernel_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t shim_kernel_recvmsg(int fd, struct msghdr *msg, int flags);

/* Claim descriptor fd for path p with per-descriptor state ctx (starting
 * with a shim_obj_t): every hook hands its calls to p->ops from now on.
 * Epoll registrations made while it was unclaimed are taken over by the
 * readiness engine (shim_ep_claimed). */
void shim_fd_claim(int fd, const shim_path_t *p, void *ctx);
/* The same for a descriptor whose readiness is, for now, exactly the
 * kernel's (a connection that has not paired): its epoll registrations
 * stay the application's own in the kernel, only recorded, until the path
 * calls shim_ep_plain_end(fd) before anything of its own can make it ready
 * (shim_epoll.c, PLAIN UNTIL PAIRED; ZCSOCK_EPOLL_PLAIN=0: as
 * shim_fd_claim). */
void shim_fd_claim_plain(int fd, const shim_path_t *p, void *ctx);
/* fd's registrations become the engine's (tagged) from now on; nothing
 * when they are already.  Takes the engine's lock: not under it. */
void shim_ep_plain_end(int fd);

/* Let path p hear when fd closes (p->ops->forget) without claiming its
 * data (a listener's pairing state). */
void shim_fd_watch(int fd, const shim_path_t *p, void *ctx);

/* Keep descriptor fd as the library's (high, close-on-exec, refused to the
 * application by close and dup2, moved away by dup2 onto it, telling
 * p->internal_moved(ctx, ...)).  Returns the (new) number. */
int shim_fd_internal_keep(int fd, const shim_path_t *p, void *ctx);

/* Move a descriptor the library holds for a while but does not keep in the
 * table (a listener's beacon, a pending announcement) out of the
 * application's range: a close-on-exec copy at shim_fd_internal_floor() or
 * above, the original closed.  Returns the new number, or fd when it
 * cannot move (no free number up there).  Hook-safe. */
int shim_fd_internal_raise(int fd);

/* A close-on-exec copy of fd at shim_fd_internal_floor() or above, else at
 * any free number (the original stays open).  The copy, or -errno. */
int shim_fd_dup_high(int fd);

/* Give a kept descriptor up (closes it). */
void shim_fd_internal_drop(int fd);
/* The same for one no epoll set can hold as a wake fd (the engine's own
 * kick eventfds: closed with its lock held). */
void shim_fd_internal_close(int fd);

/* The lowest number the library's own descriptors take. */
int shim_fd_internal_floor(void);

/* Copy up to n bytes of src into msg's buffers from byte skip of them on
 * (a path's bytes of its own into a receive); returns the bytes copied. */
size_t shim_msg_fill(struct msghdr *msg, size_t skip, const void *src, size_t n);

/* 1 when f is claimed by a path (its data calls go to f->path->ops). */
static inline int shim_fd_claimed(const shim_fd_t *f)
{
    return f && __builtin_expect(f->claim == SHIM_CLAIM_DATA, 0);
}

/* sigaction as the application sees it (hooks_sig.c): what the exported
 * hook does, without entering it (the library never calls its own hooks). */
struct sigaction;
int shim_sigaction(int sig, const struct sigaction *act, struct sigaction *old);

#endif
