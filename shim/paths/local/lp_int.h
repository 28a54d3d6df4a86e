/* The local path's internal header: every file of shim/paths/local/ shares
 * the connection object, the locks, the connection's functions (conn.c)
 * and its state (state.c) below; each feature's functions are in its own
 * header beside its file (bell.h, efd.h, pairing.h, ...), included only by
 * the files that call it (README.md in this folder has the files,
 * invariants and lock order).
 *
 * One lp_conn_t per connection in this process.  Its fields are guarded by
 * two locks in the channel's header page (so forked holders serialise too):
 * the TX lock for everything about our sending direction, the RX lock for
 * our receiving direction.  Before the channel exists (a client waiting for
 * the offer) a process-local lock stands in for both.  No lock is held while
 * sleeping.
 *
 * Doorbells travel in our kernel stream in both directions: "data for you"
 * (the peer consumer slept) and "space for you" (the peer producer slept).
 * Whoever sends one has switched its sending direction first (rule S2 of
 * local_pair.h), so the receiver of a kernel byte always knows whether it is
 * data (before the sender's switch point) or a doorbell (at or after it).
 *
 * Hook-safety: no process allocator (zc_pool), no stdio, no getenv; every
 * socket call through zc_real.  Return convention: what the call returns
 * (>= 0) or -errno. */
#ifndef LP_INT_H
#define LP_INT_H

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <limits.h>
#include <sys/single_threaded.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "local_pair.h"
#include "local_ring.h"
#include "shim_int.h"
#include "shim_proc.h"
#include "zc_config.h"
#include "zc_log.h"
#include "zc_pool.h"
#include "zc_spin.h"
#include "zc_sys.h"

/* System calls of our own: straight to the real syscall() with every
 * argument given (the exported syscall hook reads six). */
#define LP_SYS(nr, a, b, c) \
    zc_real.syscall((long)(nr), (long)(a), (long)(b), (long)(c), 0L, 0L, 0L)

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define LP_SIDE_OFF  2048u      /* per-side shared words in the header page */
#define LP_LOCK_OFF  2560u      /* per-side lock words (LP_TX, LP_RX), a cache line per
                                 * side: the peer reads our side words at every call
                                 * (lp_rv), and lock words beside them made each lock's
                                 * compare-and-swap wait for the line to come back from
                                 * the peer's core (4 % of redis-server's time) */
#define LP_IOV_WIN   64         /* iovecs handled per ring call */
#define LP_XCHG_MIN  (2u << 20) /* a send shorter than a unit never lends (xchg.c) */
#define LP_XCHG_SMALL (256u << 10) /* from here, a shorter send is a refusal: too_small */
#define LP_XCHG_NAP_US 20       /* a blocking send over the send budget naps this long */
#define LP_ROOM_KEEP 64         /* ring bytes a write leaves for the EOF record */
#define LP_LOOK_US 1000         /* most a non-blocking receive goes without a kernel
                                 * look (lp_rx_empty) */
#define LP_BELL_WAIT_MS 50      /* close: most time spent draining owed doorbells */
#define LP_TX_RECHECK_MS 2      /* a wait for space with threads looks again (lp_armed_recheck) */

enum { LP_TX = 0, LP_RX = 1 };
/* Connection states (state.c has the table of changes).  LP_OFFER:
 * accepted, the server's offer is due at its first data call on the
 * connection (pairing.c, lp_offer_due); LP_DEFER: a client that announces
 * once the connection pays (lp_ann_due), then LP_PENDING. */
enum { LP_PENDING = 1, LP_PAIRED = 2, LP_PLAIN = 3, LP_OFFER = 4, LP_DEFER = 5 };
#define LP_STATES 6     /* (0: none, a new object) */
/* A direction's state (lp_conn_t.dir[LP_TX], [LP_RX]; DIRECTIONS in state.c
 * has the table of changes): on the kernel stream and free to switch at its
 * switch point (local_pair.h, S1-S3, R1-R3), switched to the ring, or on the
 * kernel for good (never switched, or handed back). */
enum { LP_DIR_KERNEL = 0, LP_DIR_RING = 1, LP_DIR_PLAIN = 2 };
#define LP_DIRS 3

/* Shared, one per side, written only by that side's holders. */
typedef struct lp_side {
    uint32_t lock_was[2];       /* unused (the lock words moved to LP_LOCK_OFF) */
    uint32_t holders;           /* processes holding this side's socket */
    uint32_t rv;                /* LP_RV_*: hand-back to the kernel (HAND-BACK below) */
    uint32_t hgen;              /* bumped whenever holders changes (lp_cached_t) */
    /* Wake-up eventfd (efd.c): this side, as a consumer, offers its eventfd
     * (process efd_pid, descriptor efd_no, generation efd_gen); as a producer
     * it says which generation of the peer's it holds (efd_ack). */
    int32_t efd_pid, efd_no;
    uint32_t efd_gen, efd_ack;
    /* A socket of this side (process sock_pid, descriptor sock_no), which a
     * hand-back of the peer's fetches when we leave ring bytes unread and
     * stay idle; pump_pid: the peer's pump process moving them (PEER PUMP,
     * handback.c). */
    int32_t sock_pid, sock_no, pump_pid;
    /* Page exchange (xchg.c): this side, as a sender, offers the receiving
     * end of its unit transport (process xs_pid, descriptor xs_no,
     * generation xs_gen); as a receiver it says which generation of the
     * peer's it holds (xs_ack). */
    int32_t xs_pid, xs_no;
    uint32_t xs_gen, xs_ack;
    /* ... and, as a receiver, where its copy of the peer's is (process
     * xi_pid, descriptor xi_no): an exec'd image takes it up. */
    int32_t xi_pid, xi_no;
    /* This side wrote the EOF record of its sending direction (shutdown
     * SHUT_WR): the peer's readiness says EPOLLRDHUP from then on, with
     * data still unread too, as the kernel does once a FIN arrived. */
    uint32_t wr_eof;
} lp_side_t;
/* tests/localpath/lp_lock_self.py and lp_peer_words.py write side words at
 * LP_SIDE_OFF + side * sizeof(lp_side_t), as a hostile peer would */
_Static_assert(LP_SIDE_OFF + 2 * sizeof(lp_side_t) <= LP_LOCK_OFF && LP_LOCK_OFF % 64 == 0,
               "the lock words' lines hold nothing else");
_Static_assert(offsetof(lp_side_t, lock_was) == 0 && offsetof(lp_side_t, efd_pid) == 20 &&
               offsetof(lp_side_t, efd_gen) == 28 && sizeof(lp_side_t) == 76,
               "the side words' layout changed: update lp_lock_self.py, lp_peer_words.py");
_Static_assert(offsetof(local_ring_hdr_t, side_pid) == 40,
               "the header's layout changed: update lp_peer_words.py");

/* The PAGES record being read (xchg.c): its unit files (copies installed by
 * a peek at the transport) and read-only maps made on demand. */
typedef struct lp_xrec {
    uint64_t pos;                   /* the record's ring position */
    int dir, n;                     /* n == 0: none loaded */
    int fd[LOCAL_RING_PAGES_MAX];
    void *map[LOCAL_RING_PAGES_MAX];
} lp_xrec_t;

#define LP_RV_REQ 1u            /* this side handed the connection back */
#define LP_RV_TX  2u            /* this side sends through the kernel for good */
#define LP_RV_RX  4u            /* this side reads the kernel stream for good */
#define LP_RV_LINGER 8u         /* this side closed with ring data unread and posted its
                                 * socket to the peer's mailbox (LINGER, handback.c) */
#define LP_RV_PUMP 16u          /* someone took the job of giving this side's unread
                                 * ring data to the kernel (LINGER, PEER PUMP) */
#define LP_RV_PUMP_PEER 32u     /* ... and it is the peer's pump process (PEER PUMP) */
#define LP_RV_PUMPED 64u        /* the peer's pump left the ring (moved what it could) */
#define LP_RV_PWAIT 128u        /* a holder of this side waits for LP_RV_PUMPED holding
                                 * its TX lock (it writes nothing to the ring) */
#define LP_PUMP_STALL_MS 1000   /* a peer's pump that moves nothing this long, with room
                                 * in our socket, is not working (lp_rv_pump_wait) */
#define LP_LINGER_MS 120000     /* most a lingering socket's pump waits for the reader */
#define LP_RV_WAIT_MS 2000      /* most a hand-back waits for doorbells in flight */
#define LP_RV_CLOSE_MS 2000     /* most a close waits to give its ring to the kernel */

#define LP_LOCK_WAITERS 0x80000000u
#define LP_LOCK_MAX_MS 3000     /* longest a role lock is waited for (lp_lock_word) */
#define LP_LOCK_CHECK_MS 5      /* a lock held this long: is its holder's process one
                                 * that holds our socket? (lp_lock_word) */

/* A socket setting the blocking paths need on every call (O_NONBLOCK,
 * SO_RCVTIMEO, SO_SNDTIMEO), cached instead of asked with a system call each
 * time: valid while this process is the only holder of the socket (nobody
 * else can change it) and no hooked call of ours changed it (fcntl F_SETFL,
 * ioctl FIONBIO, setsockopt bump lgen; a holder change bumps the shared
 * hgen). */
typedef struct lp_cached {
    int64_t v;
    uint32_t hgen, lgen;
    int ok;
} lp_cached_t;

/* PARTS OF A CONNECTION: what a feature keeps on each connection, in its
 * own member of lp_conn_t, written by that feature's file only (the rest
 * of the path reads a few of them). */

/* Page exchange's (xchg.c). */
typedef struct lp_xchg_part {
    int tx, rx;                     /* our unit transport's ends, -1 */
    uint32_t gen;                   /* ... the generation our side words offer */
    int in;                         /* the peer's transport (receiving end), -1 */
    uint32_t in_gen;
    uint8_t off;                    /* no transport of ours can be made */
    uint8_t why;                    /* the last unit refused: SHIM_XU_WHY_* + 1, 0 none */
    uint64_t lent;                  /* bytes lent by page exchange (zcsock stat --conns) */
    uint64_t mark;                  /* stream position past our last lent record (0: none) */
    uint64_t est;                   /* our part of the process's lent-unread sum (xchg.c,
                                     * PER-PROCESS BUDGET) */
    lp_xrec_t rec;                  /* the PAGES record being read */
} lp_xchg_part_t;

/* The wake-up descriptors' (efd.c). */
typedef struct lp_efd_part {
    int fd;                         /* our wake-up eventfd for poll/epoll waits, -1 */
    uint32_t gen;                   /* its generation as offered (lp_side_t) */
    int peer;                       /* the peer's, fetched (pidfd_getfd), -1 */
    uint32_t peer_gen;              /* its generation, acknowledged in our side */
    uint8_t off;                    /* no eventfd for this connection (refused, no room) */
} lp_efd_part_t;

/* Pairing's (pairing.c): pair when it pays, the announcement and the offer. */
typedef struct lp_pair_part {
    int ann;                        /* announcement (pending client), -1 */
    int forked;                     /* pending (requeue) or offer due across a fork */
    unsigned offer_defers;          /* receives that left a shared offer due (lp_offer_defer) */
    unsigned alone_gen;             /* lp.share_gen + 1 when lp_held_elsewhere last said no */
    unsigned turns;                 /* requests answered in this process (a send after
                                     * a receive, lp_turn): when it pairs, what it learns */
    uint8_t last;                   /* ... the last data call: 1 receive, 2 send (0: none
                                     * yet, nothing to learn at its close) */
    uint32_t life_key;              /* its destination (client) or listener (server),
                                     * hashed: the learned lifetime's slot; 0 none */
    unsigned life_after;            /* the turns it waits before pairing (lp_life_begin) */
    unsigned r3_looks;              /* pending client: receives of server bytes so far
                                     * (lp_r3_due) */
    unsigned calls;                 /* data calls counted by lp_offer_wait / lp_ann_due */
    unsigned offer_tries;           /* server: offers that found no announcement yet */
    unsigned offer_retry_at;        /* ... the next try at this many calls */
    uint32_t kio;                   /* offer (server) or announcement (client) due:
                                     * kernel data calls in flight (lp_kio_enter) */
    uint8_t paid_bytes;             /* lp_pays said yes for the bytes moved, not the
                                     * turns (the ring's size, lp_ring_for) */
    uint8_t offering;               /* ... the offer or announcement is being made
                                     * (lp_offer_make, lp_ann_due) */
    uint8_t connect_check;          /* non-blocking connect: check once connected */
    unsigned pickups;
    uint8_t pickup_rebased;         /* pickups counted again from when the offer is due */
    int pickup_busy;                /* a thread is looking for the offer (lp_pickup_try) */
    int pickup_owed;                /* an offer found while the other role's lock was held:
                                     * the next call of either role looks again (atomic) */
} lp_pair_part_t;

/* Hand-back's, lingering sockets' and pumps' (handback.c). */
typedef struct lp_hb_part {
    uint8_t linger_dropped;         /* the peer's lingering socket let go (lp_linger_drop) */
    uint8_t pump_claimed;           /* our hand-back holds the peer's ring job (PREFIX) */
    int64_t pump_moved;             /* the peer's pump last seen moving (ms), 0: not yet */
    uint64_t pump_tail;             /* ... our ring's read position then */
    int pump_q;                     /* ... our socket's send queue then */
    uint16_t pb_off, pb_len;        /* pb: peer data a doorbell drain read */
    uint8_t pb[256];
} lp_hb_part_t;

typedef struct lp_conn {
    shim_obj_t obj;                 /* first: pinned by calls in flight (PINS, shim_path.h) */
    struct lp_conn *next, *prev;    /* all connections (fork) */
    uint8_t closed;                 /* its last descriptor closed: a call still in
                                     * flight (another thread's) ends with EBADF */
    lp_xchg_part_t x;               /* page exchange's (xchg.c) */
    int refs;                       /* descriptors of this process */
    int state;                      /* LP_* */
    uint8_t why;                    /* LOCAL_PAIR_R_* that kept it plain (zcsock stat --conns) */
    int memfd;                      /* the channel (kept for exec), -1 */
    size_t mapped;                  /* its mapping's size as counted in lp.mapped */
    int fds[4];                     /* descriptors referring to it (first few) */
    uint32_t plock[2];              /* before the channel exists */
    uint32_t *held[2];              /* the lock word each role holds now */
    uint32_t inside[2];             /* threads of ours taking or holding each
                                     * role's lock (lp_lock_word: with sole, a
                                     * word held while only the caller is
                                     * inside is forged); none counted in a
                                     * process with one thread (ALONE COUNTS
                                     * NOTHING, conn.c) */
    uint8_t counted[2];             /* the holder of each role's lock counted
                                     * itself in inside */
    uint8_t dir[2];                 /* [LP_TX], [LP_RX]: each direction's LP_DIR_*
                                     * (DIRECTIONS in state.c: lp_dir_set) */
    uint8_t wr_shut, rd_shut;       /* shutdown(SHUT_WR / SHUT_RD) seen */
    uint8_t kern_shut_wr;           /* the kernel socket's sending side is shut */
    uint8_t linger0;                /* SO_LINGER {1, 0} set: close aborts */
    uint8_t bell_push;              /* TCP_NODELAY set for the doorbells */
    uint8_t app_nodelay;            /* TCP_NODELAY as the application set it */
    uint8_t rv_seen;                /* handed back (by either side) */
    int64_t kern_look_us;           /* the kernel socket last drained (zc_now_us) */
    uint8_t is_unix;                /* an AF_UNIX stream (ancillary data possible) */
    uint64_t cookie;                /* SO_COOKIE of the socket, 0: not noted yet (COOKIES) */
    int vfork_held;                 /* a vfork child's exec counted a holder */
    uint32_t lgen;                  /* bumped by hooked calls that change settings */
    lp_cached_t nonblock, timeo[2]; /* O_NONBLOCK; SO_SNDTIMEO (LP_TX), SO_RCVTIMEO (LP_RX) ms */
    uint32_t sndcap;                /* SO_SNDBUF the application set (the kernel's
                                     * doubled value), 0: the whole ring */
    int kern_eof;                   /* kernel stream ended (peer closed) */
    int kern_err;                   /* kernel error seen (ECONNRESET ...) */
    uint8_t err_told;               /* kern_err returned to the application */
    uint8_t fork_shared;            /* forked while pending: attach only as the sole holder */
    uint8_t went_far;               /* it was PENDING or PAIRED once: it paid
                                     * (LEARNED SHORT, lp_short_learn) */
    uint8_t spin_withdrew;          /* a readiness spin withdrew our receive
                                     * announcement (ready.c, lp_spin_arm) */
    uint8_t sole;                   /* paired here, never shared since (no fork, exec,
                                     * SCM_RIGHTS): only our threads take our side's
                                     * locks (lp_lock_word) */
    int lowat;                      /* SO_RCVLOWAT */
    uint8_t inq;                    /* TCP_INQ: 0 not known yet, 1 off, 2 on (recv.c,
                                     * lp_rx_inq) */
    uint64_t tx_kernel, rx_kernel;  /* application bytes on the kernel stream */
    uint64_t bells_drained;         /* doorbell bytes read from the kernel stream */
    zc_spin_t spin[2];              /* adaptive spin per role (lp_sleep) */
    lp_efd_part_t efd;              /* the wake-up descriptors' (efd.c) */
    lp_pair_part_t pair;            /* pairing's (pairing.c) */
    lp_hb_part_t hb;                /* hand-back's, lingering sockets' and pumps' (handback.c) */
    uint8_t bell_kept;              /* a doorbell left in the socket for other waiters
                                     * (ready.c): drained when the ring empties */
    uint32_t bells_unsent;          /* doorbells owed to the peer that the kernel
                                     * refused (EAGAIN): sent before any later
                                     * byte of ours (lp_bells_flush) */
    local_ring_t ch;
} lp_conn_t;

/* (each direction's state, as its readers ask it) */
static inline int lp_tx_ring(const lp_conn_t *c)
{
    return c->dir[LP_TX] == LP_DIR_RING;
}

static inline int lp_rx_ring(const lp_conn_t *c)
{
    return c->dir[LP_RX] == LP_DIR_RING;
}

static inline int lp_tx_plain(const lp_conn_t *c)
{
    return c->dir[LP_TX] == LP_DIR_PLAIN;
}

static inline int lp_rx_plain(const lp_conn_t *c)
{
    return c->dir[LP_RX] == LP_DIR_PLAIN;
}

/* PARTS: the features that keep something on a connection (wake-up
 * eventfds, page exchange, the announcement, the mailbox, the pumps) hook
 * into its life here, and the connection's own code (conn.c) calls them
 * through lp_parts (life.c), in that order, never by name: the dependency
 * points from each feature to the connection, not back (check-layers).
 * Any hook may be NULL. */
typedef struct lp_part {
    void (*made)(lp_conn_t *c);     /* a new connection object (lp_conn_new) */
    void (*adopted)(lp_conn_t *c);  /* its channel became ours (lp_channel_adopt) */
    void (*shared)(lp_conn_t *c);   /* another process may hold our side now
                                     * (lp_holders_add) */
    void (*final)(lp_conn_t *c);    /* the object goes: no call uses it (lp_conn_final) */
    void (*freed)(void);            /* a connection left the list (lp_conn_free) */
    void (*idle)(void);             /* the process's last connection object went */
} lp_part_t;
extern const lp_part_t *const lp_parts[];
extern const lp_part_t lp_part_pairing, lp_part_efd, lp_part_xchg, lp_part_mbox, lp_part_pumps;

/* Why connections were handed back to the kernel (local.handed_back.<name>). */
enum { LP_HB_EXEC, LP_HB_SCM, LP_HB_ANCILLARY, LP_HB_PASSCRED, LP_HB_STDIO, LP_HB_FDOPEN,
       LP_HB_SECCOMP, LP_HB_IO_URING, LP_HB_OOB, LP_HB_SHUT_RD, LP_HB_SPAWN, LP_HB_SHUTDOWN,
       LP_HB_FORK, LP_HB_OTHER, LP_HB_COUNT };

/* Process-wide state of the path. */
typedef struct lp_global {
    int enabled;
    size_t ring_size;
    int list_lock;
    lp_conn_t *head;
    int objects;                        /* connection objects not yet final (lp_conn_final) */
    int chans;                          /* ... of them holding a channel's descriptor
                                         * (lp_fd_limited), and its mapping
                                         * (lp_map_limited) */
    uint64_t mapped;                    /* ... the bytes those mappings span */
    int anns;                           /* ... holding an announcement (lp_ann_keep) */
    /* counters by reason, live (zc_stats_aux; lp_stats_init) */
    uint64_t *declined[LOCAL_PAIR_R_COUNT];
    uint64_t *handed_back[LP_HB_COUNT];  /* by reason (lp_handback_count) */
    uint64_t *never_paired[LP_HB_COUNT]; /* left before the offer, by reason */
    int uring;                          /* liburing is loaded (pairing.c) */
    unsigned share_gen;                 /* bumped whenever our descriptors may reach another
                                         * process (fork, exec, spawn, SCM_RIGHTS, exposure):
                                         * lp_held_elsewhere's "no" holds until then */
} lp_global_t;

extern lp_global_t lp;
extern __thread int lp_tid;
extern const shim_path_t path_local;

/* A blocking call's wait: its deadline from SO_RCVTIMEO / SO_SNDTIMEO (read
 * at the first sleep), -1 for none. */
typedef struct lp_wait {
    int64_t deadline;
    int init;
    unsigned sig0, sig0_intr;   /* shim_sig_ran(_intr) when the call began */
} lp_wait_t;

#define LP_WAIT_INIT { -1, 0, shim_sig_ran, shim_sig_ran_intr }
#define LP_CONTINUE ((ssize_t)INT64_MIN)    /* a step of a call loop: "look again" */
#define LP_SLEEP_SLICE_MS 50

/* The waiter must look again within ms (shim_ready_ask_t). */
static inline void lp_recheck(shim_ready_ask_t *ask, int ms)
{
    if (ask && (!ask->recheck_ms || ms < ask->recheck_ms))
        ask->recheck_ms = ms;
}

/* 1 when f is claimed by this path. */
static inline int lp_claimed(const shim_fd_t *f)
{
    return shim_fd_claimed(f) && f->path == &path_local;
}

/* SCM_RIGHTS hand-over (scm.c): what travels with a passed socket. */
typedef struct path_local_handover {
    uint64_t cookie;            /* SO_COOKIE of the passed socket */
    uint32_t side, flags;
    uint64_t tx_kernel, rx_kernel, bells_drained, bells_claimed;
} path_local_handover_t;

#define PATH_LOCAL_INHERIT_MAX 4096

/* No other waiter can exist on c while we wait: one thread, which alone
 * holds this side (no fork, exec or SCM_RIGHTS since pairing).  A vfork
 * child is alone too: its parent, whose one thread this was, is suspended
 * in vfork until the child execs or exits.  (Not shim_vfork_child: its
 * getpid was a system call per blocking receive on the ring.) */
static inline int lp_alone(const lp_conn_t *c)
{
    return __libc_single_threaded && c->sole;
}

/* Before announcing a wait on c's ring: may another waiter of this process
 * (a thread) stand in the same announcement?  (local_ring_t.others; a vfork
 * child runs while its parent waits, so it is alone here.) */
static inline void lp_ring_others(lp_conn_t *c)
{
    c->ch.others = !(__libc_single_threaded && c->sole);
}
/* conn.c */
int64_t lp_now_ms(void);
int lp_peer_gone(lp_conn_t *c);
ssize_t lp_broken(lp_conn_t *c);
int lp_kernel_revents(int fd, short ev);
int lp_fetch_fd(int32_t pid, int32_t no, int sock);
int lp_gettid(void);
/* (called on every look and data call: inline) */
static inline lp_side_t *lp_side(lp_conn_t *c, int side)
{
    return (lp_side_t *)(c->ch.base + LP_SIDE_OFF) + (side & 1);
}
int lp_rv(lp_conn_t *c);
void lp_futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts);
int lp_lock_word(uint32_t *w, int sole, const uint32_t *inside, uint32_t alone,
                 const int fds[4]);
void lp_unlock_word(uint32_t *w);
uint32_t *lp_lockp(lp_conn_t *c, int role);
uint32_t *lp_side_lock(lp_conn_t *c, int side, int role);
void lp_lock(lp_conn_t *c, int role);
void lp_unlock(lp_conn_t *c, int role);
/* The caller, holding role's lock, is the only thread of ours taking or
 * holding it. */
int lp_only_me(lp_conn_t *c, int role);
static inline int lp_txdir(lp_conn_t *c)
{
    return local_ring_dir_tx(&c->ch);
}

static inline int lp_rxdir(lp_conn_t *c)
{
    return local_ring_dir_rx(&c->ch);
}

static inline lp_conn_t *lp_conn(shim_fd_t *f)
{
    return (lp_conn_t *)f->path_ctx;
}
int lp_nonblocking(lp_conn_t *c, int fd, int flags);
size_t lp_iov_total(const struct iovec *iov, size_t n);
int lp_msg_check(const struct msghdr *msg);
int lp_iov_window(const struct iovec *iov, size_t n, size_t skip, size_t limit,
                         struct iovec *win);
void lp_list_lock(void);
/* Our descriptors may reach another process from now on (lp_held_elsewhere). */
void lp_shared_again(void);
void lp_list_unlock(void);
lp_conn_t *lp_conn_new(int state);
void lp_conn_free(lp_conn_t *c);
void lp_fds_note(lp_conn_t *c, int fd, int add);
void lp_claim(int fd, lp_conn_t *c);
void lp_claim_fresh(int fd, lp_conn_t *c);
uint32_t lp_holders_add(lp_conn_t *c, int delta);
int lp_cached_get(lp_conn_t *c, const lp_cached_t *k, int64_t *v);
void lp_cached_begin(lp_conn_t *c, lp_cached_t *k);
void lp_cached_set(lp_cached_t *k, int64_t v);
void lp_channel_keep(lp_conn_t *c, int memfd);
void lp_parts_adopted(lp_conn_t *c);
void lp_channel_adopt(lp_conn_t *c, int memfd, int fd);
void lp_decline(int reason);
void lp_decline_conn(lp_conn_t *c, int reason);
int64_t lp_tx_room(lp_conn_t *c, uint64_t want);
size_t lp_tx_want(lp_conn_t *c, size_t want);
void lp_side_publish(lp_conn_t *c, int fd);
void lp_side_moved(lp_conn_t *c, int fd);
void lp_cookie_note(lp_conn_t *c, int fd);

/* state.c: the only writer of lp_conn_t.state (its table of transitions
 * at the top of the file); 0, or -1 when the table refuses the change */
int lp_state_set(lp_conn_t *c, int to);
const char *lp_state_name(int s);
/* ... and of lp_conn_t.dir (DIRECTIONS): role LP_TX or LP_RX to LP_DIR_*;
 * 0, or -1 when the table refuses it.  The role's lock held (or the object
 * not shared yet). */
int lp_dir_set(lp_conn_t *c, int role, int to);

#endif
