/* The local path's internal header: every file of shim/paths/local/ shares
 * the connection object, the locks and the functions below (README.md in
 * this folder has the files, invariants and lock order).
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

typedef struct lp_conn {
    shim_obj_t obj;                 /* first: pinned by calls in flight (PINS, shim_path.h) */
    struct lp_conn *next, *prev;    /* all connections (fork) */
    uint8_t closed;                 /* its last descriptor closed: a call still in
                                     * flight (another thread's) ends with EBADF */
    /* page exchange (xchg.c) */
    int x_tx, x_rx;                 /* our unit transport's ends, -1 */
    uint32_t x_gen;                 /* ... the generation our side words offer */
    int x_in;                       /* the peer's transport (receiving end), -1 */
    uint32_t x_in_gen;
    uint8_t x_off;                  /* no transport of ours can be made */
    uint8_t x_why;                  /* the last unit refused: SHIM_XU_WHY_* + 1, 0 none */
    uint64_t x_lent;                /* bytes lent by page exchange (zcsock stat --conns) */
    uint64_t x_mark;                /* stream position past our last lent record (0: none) */
    uint64_t x_est;                 /* our part of the process's lent-unread sum (xchg.c,
                                     * PER-PROCESS BUDGET) */
    lp_xrec_t xr;
    int refs;                       /* descriptors of this process */
    int state;                      /* LP_* */
    uint8_t why;                    /* LOCAL_PAIR_R_* that kept it plain (zcsock stat --conns) */
    int ann;                        /* announcement (pending client), -1 */
    int memfd;                      /* the channel (kept for exec), -1 */
    int fds[4];                     /* descriptors referring to it (first few) */
    int forked;                     /* pending (requeue) or offer due across a fork */
    unsigned offer_defers;          /* receives that left a shared offer due (lp_offer_defer) */
    unsigned alone_gen;             /* lp.share_gen + 1 when lp_held_elsewhere last said no */
    unsigned pair_turns;            /* requests answered in this process (a send after
                                     * a receive, lp_turn): when it pairs, what it learns */
    uint8_t pair_last;              /* ... the last data call: 1 receive, 2 send (0: none
                                     * yet, nothing to learn at its close) */
    uint32_t life_key;              /* its destination (client) or listener (server),
                                     * hashed: the learned lifetime's slot; 0 none */
    unsigned life_after;            /* the turns it waits before pairing (lp_life_begin) */
    unsigned r3_looks;              /* pending client: receives of server bytes so far
                                     * (lp_r3_due) */
    unsigned pair_calls;            /* data calls counted by lp_offer_wait / lp_ann_due */
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
    uint32_t plock[2];              /* before the channel exists */
    uint32_t *held[2];              /* the lock word each role holds now */
    uint32_t inside[2];             /* threads of ours taking or holding each
                                     * role's lock (lp_lock_word: with sole, a
                                     * word held while only the caller is
                                     * inside is forged) */
    uint8_t tx_ring, rx_ring;       /* direction switched to the ring */
    uint8_t tx_never;               /* our sending direction stays kernel */
    uint8_t wr_shut, rd_shut;       /* shutdown(SHUT_WR / SHUT_RD) seen */
    uint8_t kern_shut_wr;           /* the kernel socket's sending side is shut */
    uint8_t linger0;                /* SO_LINGER {1, 0} set: close aborts */
    uint8_t bell_push;              /* TCP_NODELAY set for the doorbells */
    uint8_t app_nodelay;            /* TCP_NODELAY as the application set it */
    uint8_t rx_plain;               /* handed back: every kernel byte is data */
    uint8_t rv_seen;                /* handed back (by either side) */
    uint8_t linger_dropped;         /* the peer's lingering socket let go (lp_linger_drop) */
    uint8_t pump_claimed;           /* our hand-back holds the peer's ring job (PREFIX) */
    int64_t kern_look_us;           /* the kernel socket last drained (zc_now_us) */
    int64_t pump_moved;             /* the peer's pump last seen moving (ms), 0: not yet */
    uint64_t pump_tail;             /* ... our ring's read position then */
    int pump_q;                     /* ... our socket's send queue then */
    uint8_t is_unix;                /* an AF_UNIX stream (ancillary data possible) */
    uint16_t pb_off, pb_len;        /* pb: peer data a doorbell drain read */
    uint64_t cookie;                /* SO_COOKIE of the socket, 0: not noted yet (COOKIES) */
    int vfork_held;                 /* a vfork child's exec counted a holder */
    uint32_t lgen;                  /* bumped by hooked calls that change settings */
    lp_cached_t nonblock, timeo[2]; /* O_NONBLOCK; SO_SNDTIMEO (LP_TX), SO_RCVTIMEO (LP_RX) ms */
    uint8_t pb[256];
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
    int efd;                        /* our wake-up eventfd for poll/epoll waits, -1 */
    uint32_t efd_gen;               /* its generation as offered (lp_side_t) */
    int peer_efd;                   /* the peer's, fetched (pidfd_getfd), -1 */
    uint32_t peer_efd_gen;          /* its generation, acknowledged in our side */
    uint8_t efd_off;                /* no eventfd for this connection (refused, no room) */
    uint8_t bell_kept;              /* a doorbell left in the socket for other waiters
                                     * (ready.c): drained when the ring empties */
    uint32_t bells_unsent;          /* doorbells owed to the peer that the kernel
                                     * refused (EAGAIN): sent before any later
                                     * byte of ours (lp_bells_flush) */
    local_ring_t ch;
} lp_conn_t;

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
                                         * (lp_fd_limited) */
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

/* efd.c: wake-up eventfds for poll/epoll waiters */
int lp_rx_arm(lp_conn_t *c, int listening);
/* next: announced even with bytes in the ring (SHIM_READY_ARM_NEXT). */
int lp_rx_arm_ex(lp_conn_t *c, int listening, int next);
int lp_wake_fd(shim_fd_t *f, int fd, int unusable);
void lp_efd_offered(lp_conn_t *c);
int lp_efd_reset(lp_conn_t *c);
void lp_efd_ring(lp_conn_t *c, int fd);
void lp_efd_retire(lp_conn_t *c);
void lp_efd_close(lp_conn_t *c);
int lp_efd_moved(lp_conn_t *c, int from, int to);

/* bell.c */
int lp_tx_switch(lp_conn_t *c);
void lp_bell(lp_conn_t *c, int fd);
void lp_wake(lp_conn_t *c, int fd, int flags, uint32_t *word);
void lp_wake_ex(lp_conn_t *c, int fd, int flags, uint32_t *word, int tx_held);
size_t lp_drain_ex(lp_conn_t *c, int fd, int full);
size_t lp_drain(lp_conn_t *c, int fd);
int lp_rx_catch_up(lp_conn_t *c);

/* pairing.c: pair when it pays (issue 31) */
#define LP_PAIR_BYTES (128u << 10)    /* moved bytes per ZCSOCK_LOCAL_PAIR_AFTER unit */
/* Has c moved enough bytes through the kernel to pay (extra: a send's
 * bytes about to go)?  Both ends count alike (lp_pays, lp_pickup). */
static inline int lp_pays_bytes(const lp_conn_t *c, size_t extra)
{
    return c->rx_kernel + c->tx_kernel + extra >=
           (uint64_t)zc_config.local_pair_after * LP_PAIR_BYTES;
}
/* Has c made enough data calls on the kernel to pay?  A stream of small
 * messages in one direction answers no request and moves few bytes (1-byte
 * sends: 256 KiB after 262,144 of them), yet each call is a system call the
 * ring would save: LP_PAIR_CALLS calls per ZCSOCK_LOCAL_PAIR_AFTER unit,
 * twice that for the server (offer: 1), whose offer should find the
 * client's announcement made (each end counts its own calls; a receiver
 * that reads several messages at a time makes fewer). */
#define LP_PAIR_CALLS 512u
static inline int lp_pays_calls(const lp_conn_t *c, int offer)
{
    return (uint64_t)c->pair_calls >=
           ((uint64_t)zc_config.local_pair_after * LP_PAIR_CALLS << (offer ? 1 : 0));
}
/* The ring of a connection that paired for its turns, not its bytes: at
 * most this much a direction (ZCSOCK_LOCAL_RING still caps it).  The
 * pages a ring touches and the page tables behind its mapping are paid
 * again at every close (unmapped, with a TLB shootdown to the other CPUs):
 * 1,000 redis-benchmark connections that paired after a few requests each
 * cost both ends 40% more CPU with 4 MiB rings than with 256 KiB. */
#define LP_RING_CHATTY (256u << 10)
#define LP_R3_PATIENCE 4096u       /* receives a pending client waits for a deferred offer */
int lp_offer_wait(lp_conn_t *c, int fd, int is_send, size_t len);
/* Count a data call's turn (a send after a receive is one), paired or not:
 * the learned lifetime counts every connection's turns (lp_life_learn). */
static inline void lp_turn(lp_conn_t *c, int is_send)
{
    if (is_send && c->pair_last == 1)
        c->pair_turns++;
    c->pair_last = is_send ? 2 : 1;
}
uint32_t lp_life_key(const struct sockaddr *addr, socklen_t len, int lfd);
void lp_short_bulk(uint32_t key);
void lp_life_start(lp_conn_t *c, uint32_t key);
void lp_life_learn(lp_conn_t *c);
void lp_life_table(void);
int lp_kio_enter(lp_conn_t *c);
void lp_kio_exit(lp_conn_t *c);
int lp_r3_due(lp_conn_t *c);
void lp_ann_due(lp_conn_t *c, int fd, int is_send, size_t len);

/* adopt.c: the hand-over's description and adoption (exec, SCM_RIGHTS) */
enum {
    LP_F_TX_RING = 1, LP_F_RX_RING = 2, LP_F_TX_NEVER = 4, LP_F_WR_SHUT = 8,
    LP_F_RD_SHUT = 16, LP_F_KERN_SHUT_WR = 32, LP_F_KERN_EOF = 64, LP_F_RX_PLAIN = 128,
    LP_F_ARMED = 256,   /* 4 bits, [dir][role]: lp_armed_bells */
};
unsigned lp_flags(const lp_conn_t *c);
int lp_inherit_one(const int *fds, int nfds, int memfd, int side, unsigned flags,
                   const uint64_t v[4], const int xfds[2]);
int path_local_handover_prepare(shim_fd_t *f, int fd, path_local_handover_t *h, int *memfd_p);
void path_local_hand_back(shim_fd_t *f, int fd, const char *why);
void path_local_handover_posted(shim_fd_t *f);
int path_local_handover_adopt(int fd, const path_local_handover_t *h, int memfd, int counted);

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
int lp_lock_word(uint32_t *w, int sole, const uint32_t *inside, const int fds[4]);
void lp_unlock_word(uint32_t *w);
uint32_t *lp_lockp(lp_conn_t *c, int role);
uint32_t *lp_side_lock(lp_conn_t *c, int side, int role);
void lp_lock(lp_conn_t *c, int role);
void lp_unlock(lp_conn_t *c, int role);
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
int64_t lp_tx_room(lp_conn_t *c);
size_t lp_tx_want(lp_conn_t *c, size_t want);

/* exec.c */
size_t lp_exec_prepare(const shim_exec_t *e, char *buf, size_t bufsz);
void path_local_exec_failed(void);
void path_local_inherit(void);

/* handback.c */
int64_t lp_rv_owed(lp_conn_t *c);
void lp_pumps_reap(void);
void lp_pumps_exit(void);
void lp_pumps_fork_child(void);
extern __thread int lp_execing;
size_t lp_rv_keep(lp_conn_t *c, const char *buf, size_t n);
size_t lp_pb_take(lp_conn_t *c, struct msghdr *msg, size_t skip, int peek);
int lp_bells_take(lp_conn_t *c, int fd, int64_t n);
void lp_rv_check_done(lp_conn_t *c);
int lp_rv_sibling(lp_conn_t *c, int role);
void lp_rv_rx_done(lp_conn_t *c, int fd);
int lp_rv_take_mark(lp_conn_t *c, int fd);
int lp_rv_tx(lp_conn_t *c, int fd, int wait_ms);
int lp_linger_offer(lp_conn_t *c, int fd);
void lp_linger_wake(lp_conn_t *c, int fd);
void lp_linger_drop(lp_conn_t *c);
int lp_peer_lingers(lp_conn_t *c);
void lp_side_publish(lp_conn_t *c, int fd);
void lp_side_moved(lp_conn_t *c, int fd);
void lp_wait_fd(int fd, short ev, int ms);
int lp_rv_peer_pumping(lp_conn_t *c);
void lp_revert(lp_conn_t *c, int fd, const char *why);
/* Send the doorbells the kernel refused earlier, waiting (bounded) for
 * room: before anything of ours that is not a doorbell enters the kernel
 * stream.  0, or -1 (the connection is then broken). */
int lp_bells_flush(lp_conn_t *c, int fd);
uint32_t lp_bells_send(lp_conn_t *c, int fd);
/* Whatever the state (offer due, pending, paired): plain from now on. */
void lp_release_to_kernel(lp_conn_t *c, int fd, const char *why);
int lp_unclaim_plain(lp_conn_t *c, int fd);
void lp_cookie_note(lp_conn_t *c, int fd);
void lp_handback_count(const char *why);
extern const char *const lp_handback_names[LP_HB_COUNT];

/* life.c */
int path_local_shutdown(shim_fd_t *f, int fd, int how);
void lp_bells_settle(lp_conn_t *c, int fd);
void lp_conn_release(lp_conn_t *c, int fd);
void lp_forget(shim_fd_t *f, int fd);
void lp_dup(shim_fd_t *f, int fd);
void lp_fork_hold(int delta);
void lp_fork_prepare(void);
void lp_fork_parent(void);
void lp_fork_child(void);
void lp_init(void);

/* state.c: the only writer of lp_conn_t.state (its table of transitions
 * at the top of the file); 0, or -1 when the table refuses the change */
int lp_state_set(lp_conn_t *c, int to);
const char *lp_state_name(int s);

/* pairing.c */
/* A client connection's announcement held / let go (counted: lp_fd_limited). */
void lp_ann_keep(lp_conn_t *c, int ann);
void lp_ann_drop(lp_conn_t *c);
void lp_pickup_done(lp_conn_t *c, int rc, int memfd, int fd);
void lp_pickup_try(lp_conn_t *c, int fd, int r3);
void lp_pending_end(lp_conn_t *c);
int lp_offer_due(lp_conn_t *c, int fd);
int lp_offer_defer(lp_conn_t *c, int fd);
void lp_offer_cancel(lp_conn_t *c, const char *why);
int lp_handback_reason(const char *why);
void lp_connect_check_(lp_conn_t *c, int fd);
/* (every data call: the flag looked at here, the rest out of line) */
static inline void lp_connect_check(lp_conn_t *c, int fd)
{
    if (c->connect_check)
        lp_connect_check_(c, fd);
}
int path_local_enabled(void);
int lp_wants_creds(int fd);
int lp_candidate(int fd);
void path_local_listened(int fd);
void path_local_connect_prepare(int fd, const struct sockaddr *addr, socklen_t len);
void path_local_connect_done(int fd, int rc, int err);
void path_local_accepted(int lfd, int fd);

/* ready.c */
/* The bytes the application can read next (FIONREAD's answer): the kernel's
 * data before the switch point, the ring's from it; *kernel the kernel's
 * queue length when known (a TCP_CM_INQ count), else NULL (asked); *ring
 * (when not NULL) set to 1 when the ring's bytes were counted.  -1 when the
 * kernel cannot say.  Takes the RX lock. */
int lp_rx_avail(lp_conn_t *c, int fd, const int *kernel, int *ring);
short lp_kernel_events(shim_fd_t *f, short ev);
int lp_kernel_quiet(shim_fd_t *f);
uint64_t lp_change(shim_fd_t *f, int fd);
void lp_armed_recheck(lp_conn_t *c, shim_ready_ask_t *ask);
int lp_rv_progress(lp_conn_t *c, int fd, short ev, int kev, shim_ready_ask_t *ask);
short lp_revents(shim_fd_t *f, int fd, short ev, int kev, int arm, shim_ready_ask_t *ask);
int path_local_ioctl(shim_fd_t *f, int fd, unsigned long req, void *arg, int *rc);
void path_local_settings_changed(shim_fd_t *f);
void path_local_setsockopt(shim_fd_t *f, int fd, int level, int name, const void *val,
                           socklen_t len);
int path_local_getsockopt(shim_fd_t *f, int fd, int level, int name, void *val, socklen_t *len);

/* recv.c */
int lp_interrupted(const lp_wait_t *w);
int lp_sig_interrupts(const lp_wait_t *w);
/* The slice a wait of role may sleep (ms, the socket's timeout left), or
 * -EAGAIN when that timeout passed. */
long lp_slice_ms(lp_conn_t *c, int fd, int role, lp_wait_t *w);
void lp_kernel_look(lp_conn_t *c, int fd, int role);
int lp_sleep(lp_conn_t *c, int fd, int role, lp_wait_t *w);
ssize_t lp_recv_kernel(lp_conn_t *c, shim_fd_t *f, int fd, struct msghdr *msg, int flags,
                              int *again);
ssize_t lp_recv_ring(lp_conn_t *c, int fd, struct msghdr *msg, int flags, size_t skip,
                            int *eof);
int lp_rv_return(lp_conn_t *c, int fd, int flags, lp_wait_t *w);
ssize_t lp_recvmsg(shim_fd_t *f, int fd, struct msghdr *msg, int flags);

/* send.c */
void lp_pickup(lp_conn_t *c, int fd);
ssize_t lp_epipe(int flags);
ssize_t lp_send_kernel(shim_fd_t *f, int fd, const struct msghdr *msg, int flags,
                              lp_conn_t *c);
ssize_t lp_sendmsg(shim_fd_t *f, int fd, const struct msghdr *msg, int flags);
size_t lp_send_room(lp_conn_t *c, int fd, int flags, size_t want);
ssize_t path_local_sendfile(shim_fd_t *f, int out_fd, int in_fd, off_t *offset, size_t count);
ssize_t path_local_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                          unsigned flags);

/* scm.c */
void path_local_mbox_ensure(void);
int path_local_mbox_usable(void);
void path_local_mbox_ensure_scm(void);
void path_local_mbox_idle(void);
/* Post our socket sock, lingering after our close, to process pid's mailbox
 * with the channel memfd as proof (0 or -errno); take the lingering socket
 * posted for the channel memfd serves (-1: none came). */
int lp_linger_post(int pid, int memfd, int sock);
int lp_linger_take(int memfd);
void path_local_mbox_fork_child(void);
void path_local_mbox_fork_parent(void);
void path_local_mbox_exit(void);
int path_local_mbox_moved(void *ctx, int from, int to);
void path_local_scm_send(int fd, const struct msghdr *msg);
void path_local_scm_received(struct msghdr *msg);

/* Page exchange (xchg.c). */
void lp_xchg_init(lp_conn_t *c);
void lp_xchg_attach(lp_conn_t *c);
void lp_xchg_offered(lp_conn_t *c);
/* A ring receive into win[0..n) is about to copy: units received earlier
 * and mapped in place there that the ring's bytes will overwrite whole get
 * their own memory back first (shim_xu_reclaim).  RX lock held. */
void lp_xchg_rx_reclaim(lp_conn_t *c, const struct iovec *win, int n);
/* Lend the whole 2 MiB units at stream byte `sent` of msg (TX lock held):
 * the bytes lent (one PAGES record, *flags_p its ring flags), 0 when none
 * (the ring window is then cut to *lim_p: up to the next unit, or the one
 * refused; *over_p: refused because the send budget is spent, which a
 * blocking send waits out rather than copying), or -errno (the channel
 * broke). */
/* A send of LP_XCHG_SMALL bytes or more but under a unit, where exchange
 * could lend: counted and charged to its call site as too_small. */
void lp_xchg_small(lp_conn_t *c);
ssize_t lp_xchg_send(lp_conn_t *c, const struct msghdr *msg, size_t sent, size_t *lim_p,
                     int *flags_p, int *over_p);
void lp_xchg_close(lp_conn_t *c);
void lp_xchg_exec(lp_conn_t *c, int keep, int xfds[2]);
void lp_xchg_inherit(lp_conn_t *c, const int xfds[2]);
int lp_xchg_moved(lp_conn_t *c, int from, int to);

#endif
