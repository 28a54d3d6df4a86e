/* The local path (path_local.h): pairing decisions from the descriptor hooks,
 * the switch-over of each direction, and the ring data path.
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
 * data (before the sender's switch point) or a doorbell (at or after it). */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <limits.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "local_pair.h"
#include "local_ring.h"
#include "path_local.h"
#include "shim_int.h"
#include "shim_proc.h"
#include "zc_config.h"
#include "zc_log.h"
#include "zc_pool.h"

#define LP_SIDE_OFF  2048u      /* per-side shared words in the header page */
#define LP_IOV_WIN   64         /* iovecs handled per ring call */
#define LP_ROOM_KEEP 64         /* ring bytes a write leaves for the EOF record */
#define LP_BELL_WAIT_MS 50      /* close: most time spent draining owed doorbells */

enum { LP_TX = 0, LP_RX = 1 };
enum { LP_PENDING = 1, LP_PAIRED = 2, LP_PLAIN = 3 };

/* Shared, one per side, written only by that side's holders. */
typedef struct lp_side {
    uint32_t lock[2];           /* LP_TX, LP_RX: holder tid | LP_LOCK_WAITERS */
    uint32_t holders;           /* processes holding this side's socket */
    uint32_t rv;                /* LP_RV_*: hand-back to the kernel (HAND-BACK below) */
    uint32_t hgen;              /* bumped whenever holders changes (lp_cached_t) */
} lp_side_t;

#define LP_RV_REQ 1u            /* this side handed the connection back */
#define LP_RV_TX  2u            /* this side sends through the kernel for good */
#define LP_RV_RX  4u            /* this side reads the kernel stream for good */
#define LP_RV_WAIT_MS 2000      /* most a hand-back waits for doorbells in flight */
#define LP_RV_CLOSE_MS 2000     /* most a close waits to give its ring to the kernel */

#define LP_LOCK_WAITERS 0x80000000u

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
    struct lp_conn *next, *prev;    /* all connections (fork) */
    int refs;                       /* descriptors of this process */
    int state;                      /* LP_* */
    int ann;                        /* announcement (pending client), -1 */
    int memfd;                      /* the channel (kept for exec), -1 */
    int fds[4];                     /* descriptors referring to it (first few) */
    int forked;                     /* pending across a fork: requeue */
    unsigned pickups;
    int pickup_busy;                /* a thread is looking for the offer (lp_pickup_try) */
    uint32_t plock[2];              /* before the channel exists */
    uint32_t *held[2];              /* the lock word each role holds now */
    uint8_t tx_ring, rx_ring;       /* direction switched to the ring */
    uint8_t tx_never;               /* our sending direction stays kernel */
    uint8_t wr_shut, rd_shut;       /* shutdown(SHUT_WR / SHUT_RD) seen */
    uint8_t kern_shut_wr;           /* the kernel socket's sending side is shut */
    uint8_t linger0;                /* SO_LINGER {1, 0} set: close aborts */
    uint8_t bell_push;              /* TCP_NODELAY set for the doorbells */
    uint8_t app_nodelay;            /* TCP_NODELAY as the application set it */
    uint8_t rx_plain;               /* handed back: every kernel byte is data */
    uint8_t rv_seen;                /* handed back (by either side) */
    uint8_t is_unix;                /* an AF_UNIX stream (ancillary data possible) */
    uint16_t pb_off, pb_len;        /* pb: peer data a doorbell drain read */
    uint64_t cookie;                /* SO_COOKIE of the socket (exec finds it by it) */
    int vfork_held;                 /* a vfork child's exec counted a holder */
    uint32_t lgen;                  /* bumped by hooked calls that change settings */
    lp_cached_t nonblock, timeo[2]; /* O_NONBLOCK; SO_SNDTIMEO (LP_TX), SO_RCVTIMEO (LP_RX) ms */
    uint8_t pb[256];
    uint32_t sndcap;                /* SO_SNDBUF the application set (the kernel's
                                     * doubled value), 0: the whole ring */
    int kern_eof;                   /* kernel stream ended (peer closed) */
    int kern_err;                   /* kernel error seen (ECONNRESET ...) */
    int lowat;                      /* SO_RCVLOWAT */
    uint64_t tx_kernel, rx_kernel;  /* application bytes on the kernel stream */
    uint64_t bells_drained;         /* doorbell bytes read from the kernel stream */
    local_ring_t ch;
} lp_conn_t;

static struct {
    int enabled;
    unsigned spin_us;
    size_t ring_size;
    int list_lock;
    lp_conn_t *head;
    uint64_t declined[LOCAL_PAIR_R_COUNT];
} lp = { .enabled = 1 };

static __thread int lp_tid;
__thread int path_local_poll_slice_ms;

/* --- small helpers -------------------------------------------------------- */

static int lp_gettid(void)
{
    if (!lp_tid)
        lp_tid = (int)syscall(SYS_gettid);
    return lp_tid;
}

static lp_side_t *lp_side(lp_conn_t *c, int side)
{
    return (lp_side_t *)(c->ch.base + LP_SIDE_OFF) + (side & 1);
}

/* The connection was handed back to the kernel (by either side). */
static int lp_rv(lp_conn_t *c)
{
    if (!c->ch.base)
        return 0;
    return ((__atomic_load_n(&lp_side(c, 0)->rv, __ATOMIC_ACQUIRE) |
             __atomic_load_n(&lp_side(c, 1)->rv, __ATOMIC_ACQUIRE)) & LP_RV_REQ) != 0;
}

static void lp_futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

/* A lock a crashed holder cannot wedge: waiters sleep at most 20 ms at a
 * time and take over a lock whose holder thread is gone. */
static void lp_lock_word(uint32_t *w)
{
    uint32_t me = (uint32_t)lp_gettid(), cur = 0;
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    int i;

    for (i = 0;; i++) {
        cur = 0;
        if (__atomic_compare_exchange_n(w, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        if (i < 64) {
            __builtin_ia32_pause();
            continue;
        }
        if (!(cur & LP_LOCK_WAITERS) &&
            !__atomic_compare_exchange_n(w, &cur, cur | LP_LOCK_WAITERS, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue;
        cur |= LP_LOCK_WAITERS;
        lp_futex(w, FUTEX_WAIT, cur, &ts);
        if ((i & 7) == 7 && kill((pid_t)(cur & ~LP_LOCK_WAITERS), 0) < 0 && errno == ESRCH)
            __atomic_compare_exchange_n(w, &cur, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
}

static void lp_unlock_word(uint32_t *w)
{
    if (__atomic_exchange_n(w, 0, __ATOMIC_RELEASE) & LP_LOCK_WAITERS)
        lp_futex(w, FUTEX_WAKE, INT32_MAX, NULL);
}

static uint32_t *lp_lockp(lp_conn_t *c, int role)
{
    return c->ch.base ? &lp_side(c, c->ch.side)->lock[role] : &c->plock[role];
}

/* The word is chosen before locking and remembered, so a channel that
 * appears while the lock is held (the pickup) does not change what unlock
 * releases. */
static void lp_lock(lp_conn_t *c, int role)
{
    int saved = errno;
    uint32_t *w = lp_lockp(c, role);

    lp_lock_word(w);
    c->held[role] = w;
    errno = saved;
}

static void lp_unlock(lp_conn_t *c, int role)
{
    lp_unlock_word(c->held[role]);
}

static int lp_txdir(lp_conn_t *c)
{
    return local_ring_dir_tx(&c->ch);
}

static int lp_rxdir(lp_conn_t *c)
{
    return local_ring_dir_rx(&c->ch);
}

static lp_conn_t *lp_conn(shim_fd_t *f)
{
    return (lp_conn_t *)f->path_ctx;
}

static int lp_cached_get(lp_conn_t *c, const lp_cached_t *k, int64_t *v);
static void lp_cached_begin(lp_conn_t *c, lp_cached_t *k);
static void lp_cached_set(lp_cached_t *k, int64_t v);

static int lp_nonblocking(lp_conn_t *c, int fd, int flags)
{
    int64_t v;
    int fl;

    if (flags & MSG_DONTWAIT)
        return 1;
    if (lp_cached_get(c, &c->nonblock, &v))
        return (int)v;
    lp_cached_begin(c, &c->nonblock);
    fl = zc_real.fcntl(fd, F_GETFL, 0);
    if (fl < 0)
        return 0;
    lp_cached_set(&c->nonblock, (fl & O_NONBLOCK) != 0);
    return (fl & O_NONBLOCK) != 0;
}

static size_t lp_iov_total(const struct iovec *iov, size_t n)
{
    size_t t = 0, i;

    for (i = 0; i < n; i++)
        t += iov[i].iov_len;
    return t;
}

/* What the kernel checks of a msghdr before anything else. */
static int lp_msg_check(const struct msghdr *msg)
{
    if (!msg)
        return -EFAULT;
    if (msg->msg_iovlen > IOV_MAX)
        return -EMSGSIZE;
    if (msg->msg_iovlen && !msg->msg_iov)
        return -EFAULT;
    return 0;
}

/* At most LP_IOV_WIN iovecs of iov, starting skip bytes in, holding at most
 * limit bytes, into win.  Returns how many. */
static int lp_iov_window(const struct iovec *iov, size_t n, size_t skip, size_t limit,
                         struct iovec *win)
{
    size_t i;
    int k = 0;

    for (i = 0; i < n && k < LP_IOV_WIN && limit; i++) {
        size_t len = iov[i].iov_len;

        if (skip >= len) {
            skip -= len;
            continue;
        }
        win[k].iov_base = (char *)iov[i].iov_base + skip;
        win[k].iov_len = len - skip < limit ? len - skip : limit;
        limit -= win[k].iov_len;
        skip = 0;
        k++;
    }
    return k;
}

/* --- connection objects ----------------------------------------------------- */

static void lp_list_lock(void)
{
    while (__atomic_exchange_n(&lp.list_lock, 1, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
}

static void lp_list_unlock(void)
{
    __atomic_store_n(&lp.list_lock, 0, __ATOMIC_RELEASE);
}

static lp_conn_t *lp_conn_new(int state)
{
    lp_conn_t *c = zc_pool_alloc(sizeof(*c));

    if (!c)
        return NULL;
    c->refs = 1;
    c->state = state;
    c->ann = c->memfd = -1;
    c->fds[0] = c->fds[1] = c->fds[2] = c->fds[3] = -1;
    c->lowat = 1;
    lp_list_lock();
    c->next = lp.head;
    if (lp.head)
        lp.head->prev = c;
    lp.head = c;
    lp_list_unlock();
    return c;
}

static void lp_conn_free(lp_conn_t *c)
{
    lp_list_lock();
    if (c->prev)
        c->prev->next = c->next;
    else
        lp.head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    lp_list_unlock();
    zc_pool_free(c, sizeof(*c));
}

static void lp_fds_note(lp_conn_t *c, int fd, int add)
{
    int i;

    for (i = 0; i < 4; i++)
        if (c->fds[i] == (add ? -1 : fd)) {
            c->fds[i] = add ? fd : -1;
            return;
        }
}

static void lp_claim(int fd, lp_conn_t *c)
{
    shim_fd_t *f = shim_fd_get(fd);

    lp_fds_note(c, fd, 1);
    if (!f) {
        lp_conn_free(c);
        return;
    }
    c->is_unix = f->family == AF_UNIX;
    if (!c->cookie)
        zc_real.getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c->cookie,
                           &(socklen_t){ sizeof(c->cookie) });
    f->path_ctx = c;
    __atomic_store_n(&f->path, &path_local_ops, __ATOMIC_RELEASE);
}

/* The lowest number our descriptors take: high, out of the application's
 * way (the memory subsystem's arena descriptors sit above three quarters). */
static int lp_fd_floor(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur < 64)
        return 0;
    return (int)(rl.rlim_cur / 2);
}

#define LP_MBOX_TAG ((void *)&lp)   /* path_ctx of the mailbox descriptor */

/* Keep memfd for conn c at a high number (close-on-exec), marked as the
 * library's so close and dup2 leave it alone.  Returns the number. */
static int lp_fd_keep(void *c, int memfd)
{
    int floor = lp_fd_floor(), hi = -1;
    shim_fd_t *f;

    if (floor > memfd)
        hi = zc_real.fcntl(memfd, F_DUPFD_CLOEXEC, floor);
    if (hi >= 0) {
        zc_real.close(memfd);
        memfd = hi;
    }
    f = shim_fd_get(memfd);
    if (f) {
        memset(f, 0, sizeof(*f));
        f->path_ctx = c;
        __atomic_store_n(&f->kind, SHIM_FD_INTERNAL, __ATOMIC_RELEASE);
    }
    return memfd;
}

static void lp_fd_drop(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (fd < 0)
        return;
    if (f)
        memset(f, 0, sizeof(*f));
    local_pair_fd_close(fd);
}

int path_local_fd_keep_internal(int fd)
{
    return lp_fd_keep(LP_MBOX_TAG, fd);
}

void path_local_fd_release(int fd)
{
    lp_fd_drop(fd);
}

int path_local_fd_move(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);
    void *ctx = f ? f->path_ctx : NULL;
    int to;

    if (!ctx)
        return 0;
    to = zc_real.fcntl(fd, F_DUPFD_CLOEXEC, lp_fd_floor());
    if (to < 0)
        to = zc_real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (to < 0)
        return -errno;
    *shim_fd_get(to) = *f;
    memset(f, 0, sizeof(*f));
    if (ctx == LP_MBOX_TAG)
        path_local_mbox_moved(fd, to);
    else
        ((lp_conn_t *)ctx)->memfd = to;
    zc_real.close(fd);
    return 0;
}

/* Count delta more (or fewer) processes holding our side; the new count. */
static uint32_t lp_holders_add(lp_conn_t *c, int delta)
{
    lp_side_t *s = lp_side(c, c->ch.side);
    uint32_t n = __atomic_add_fetch(&s->holders, (uint32_t)delta, __ATOMIC_ACQ_REL);

    __atomic_add_fetch(&s->hgen, 1, __ATOMIC_ACQ_REL);
    return n;
}

/* A cached setting, when still valid (lp_cached_t): 1 and *v, else 0. */
static int lp_cached_get(lp_conn_t *c, const lp_cached_t *k, int64_t *v)
{
    lp_side_t *s;

    if (!k->ok || !c->ch.base || k->lgen != __atomic_load_n(&c->lgen, __ATOMIC_ACQUIRE))
        return 0;
    s = lp_side(c, c->ch.side);
    if (__atomic_load_n(&s->holders, __ATOMIC_ACQUIRE) != 1 ||
        __atomic_load_n(&s->hgen, __ATOMIC_ACQUIRE) != k->hgen)
        return 0;
    *v = k->v;
    return 1;
}

/* Before asking the kernel: the generations the answer will be valid for. */
static void lp_cached_begin(lp_conn_t *c, lp_cached_t *k)
{
    k->ok = 0;
    k->lgen = __atomic_load_n(&c->lgen, __ATOMIC_ACQUIRE);
    k->hgen = c->ch.base ? __atomic_load_n(&lp_side(c, c->ch.side)->hgen, __ATOMIC_ACQUIRE) : 0;
}

static void lp_cached_set(lp_cached_t *k, int64_t v)
{
    k->v = v;
    k->ok = 1;
}

/* A channel is ours: keep its memfd (for exec) and count this process as a
 * holder of our side. */
static void lp_channel_adopt(lp_conn_t *c, int memfd)
{
    c->memfd = lp_fd_keep(c, memfd);
    lp_holders_add(c, 1);
}

static void lp_decline(int reason)
{
    if (reason > 0 && reason < LOCAL_PAIR_R_COUNT)
        __atomic_add_fetch(&lp.declined[reason], 1, __ATOMIC_RELAXED);
    zc_stat_add(ZC_STAT_LOCAL_DECLINED, 1);
    zc_log(ZC_LOG_TRACE, "local path declined: %s", local_pair_reason_name(reason));
}

/* Payload bytes a write may add now: the ring's room, less what an
 * application-set SO_SNDBUF leaves out (a program that shrinks its buffers
 * expects sends to block or fail early, as on the kernel path). */
static int64_t lp_tx_room(lp_conn_t *c)
{
    int64_t room = local_ring_writable(&c->ch, lp_txdir(c));

    if (room > 0 && c->sndcap && c->sndcap < c->ch.ring_size) {
        int64_t keep_free = (int64_t)(c->ch.ring_size - c->sndcap);

        room = room > keep_free ? room - keep_free : 0;
    }
    return room;
}

/* What to wait for (tx_wait_prepare's want) so that lp_tx_room reaches want:
 * the room a cap keeps free and the record headers' share on top. */
static size_t lp_tx_want(lp_conn_t *c, size_t want)
{
    if (c->sndcap && c->sndcap < c->ch.ring_size) {
        if (want > c->sndcap / 2)
            want = c->sndcap / 2;
        want += (size_t)(c->ch.ring_size - c->sndcap) + LP_ROOM_KEEP +
                8 * (size_t)(c->ch.ring_size / (LOCAL_RING_CHUNK + 8) + 2);
    }
    return want;
}

/* A pending client's pickup ended with rc (local_pair_channel_recv's
 * answer): attached, or plain TCP for good. */
static void lp_pickup_done(lp_conn_t *c, int rc, int memfd)
{
    local_pair_fd_close(c->ann);
    c->ann = -1;
    if (rc == 0) {
        c->state = LP_PAIRED;
        lp_channel_adopt(c, memfd);
        zc_stat_add(ZC_STAT_LOCAL_PAIRED_CLIENT, 1);
    } else {
        c->state = LP_PLAIN;
        lp_decline(LOCAL_PAIR_R_NOT_ZCSOCK);
    }
}

/* A pending client looks for the server's offer.  The send path (under the
 * TX lock) and rule R3 of the receive path (under the RX lock) may do so at
 * once from two threads: one at a time, or the one that finds the offer
 * already taken would decline a connection the other just attached.  r3:
 * server bytes arrived, so the offer is there or never comes (waits for a
 * pickup in progress, and a missing offer means plain TCP); otherwise a
 * busy or empty look changes nothing. */
static void lp_pickup_try(lp_conn_t *c, int fd, int r3)
{
    int memfd = -1, rc;

    while (__atomic_exchange_n(&c->pickup_busy, 1, __ATOMIC_ACQUIRE)) {
        if (!r3)
            return;
        sched_yield();
    }
    if (c->state == LP_PENDING && c->ann >= 0) {
        rc = local_pair_channel_recv(fd, c->ann, c->forked ? LOCAL_PAIR_F_REQUEUE : 0, &c->ch,
                                     &memfd);
        if (rc != -EAGAIN || r3)
            lp_pickup_done(c, rc, memfd);
    }
    __atomic_store_n(&c->pickup_busy, 0, __ATOMIC_RELEASE);
}

/* A pending client gives up the offer for good (shutdown, hand-back): plain
 * TCP, after any pickup in progress in another thread. */
static void lp_pending_end(lp_conn_t *c)
{
    while (__atomic_exchange_n(&c->pickup_busy, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    if (c->state == LP_PENDING)
        lp_pickup_done(c, -ECANCELED, -1);
    __atomic_store_n(&c->pickup_busy, 0, __ATOMIC_RELEASE);
}

/* --- doorbells ------------------------------------------------------------------ */

/* Our sending direction to the ring, when rule S1 allows.  TX lock held. */
static int lp_tx_switch(lp_conn_t *c)
{
    uint64_t at;
    int rc;

    if (c->tx_ring)
        return 1;
    if (c->state != LP_PAIRED || c->tx_never || c->kern_shut_wr || c->rv_seen)
        return 0;
    if (c->ch.side == LOCAL_RING_SIDE_A && !local_pair_peer_attached(&c->ch))
        return 0;
    rc = local_pair_switch_publish(&c->ch, lp_txdir(c), c->tx_kernel);
    at = local_pair_switch_get(&c->ch, lp_txdir(c));
    if (rc == -EALREADY && at == LOCAL_PAIR_SWITCH_NEVER) {
        c->tx_never = 1;
        return 0;
    }
    c->tx_ring = 1;     /* published by us, or by a holder in another process */
    zc_stat_add(ZC_STAT_LOCAL_SWITCHES, 1);
    return 1;
}

/* Ring the peer: one byte in the kernel stream.  Our sending direction is
 * switched first (S2), so the byte can only be a doorbell to the peer. */
static void lp_bell(lp_conn_t *c, int fd)
{
    int saved = errno;
    ssize_t n;

    if (!c->tx_ring) {
        lp_lock(c, LP_TX);
        lp_tx_switch(c);
        lp_unlock(c, LP_TX);
        if (!c->tx_ring)
            return;     /* cannot happen for an honest peer (see header) */
    }
    if (!c->bell_push) {
        /* Nagle would hold a doorbell behind the previous unacknowledged
         * one, whose ACK the peer delays (its replies go through the ring).
         * getsockopt still reports the application's own setting. */
        int one = 1, cur = 0;

        if (!zc_real.getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &cur, &(socklen_t){ sizeof(cur) }))
            c->app_nodelay = cur != 0;
        c->bell_push = 1;
        zc_real.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    do
        n = zc_real.send(fd, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    zc_stat_add(ZC_STAT_LOCAL_DOORBELLS, 1);
    errno = saved;
}

/* The peer must be woken (flags of a ring call): a doorbell byte through the
 * kernel socket for a peer waiting in poll/epoll, a futex wake for one
 * sleeping in a blocking call.  word: the peer's waiting word. */
static void lp_wake(lp_conn_t *c, int fd, int flags, uint32_t *word)
{
    if (flags & LOCAL_RING_F_DOORBELL)
        lp_bell(c, fd);
    if (flags & LOCAL_RING_F_FUTEX) {
        syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
        zc_stat_add(ZC_STAT_LOCAL_FUTEX_WAKES, 1);
    }
}

/* The channel is unusable (a peer broke the rules): the connection reads as
 * reset, like a TCP connection whose peer misbehaved. */
static ssize_t lp_broken(lp_conn_t *c)
{
    zc_stat_add(ZC_STAT_LOCAL_PROTO_ERRORS, 1);
    c->kern_err = ECONNRESET;
    return -ECONNRESET;
}

/* --- HAND-BACK ---------------------------------------------------------------------
 *
 * A connection goes back to plain kernel TCP (or AF_UNIX) for good when it
 * is about to reach a program that cannot read the channel (exec of an image
 * without the library, SCM_RIGHTS to a process without a mailbox) or needs
 * what the ring cannot carry (ancillary data, SO_PASSCRED).  The side that
 * decides (the initiator, lp_revert) needs nothing from its peer:
 *
 *   1. its sending direction ends in the ring with a MARK record (or never
 *      switches), written quietly (claiming no announcement);
 *   2. it withdraws its own announcements: the doorbells owed to it are now
 *      all counted (bells_claimed);
 *   3. it sets LP_RV_REQ in its side word (sequentially consistent);
 *   4. it claims whatever announcements the peer has out and wakes it
 *      (doorbells sent now precede everything it sends later);
 *   5. it reads exactly the doorbells it is owed out of the kernel stream and
 *      is plain from then on: what the peer sent into the ring and it did
 *      not read is given back to the kernel by the peer ("returned").
 *
 * The peer, in whatever call of its own finds LP_RV_REQ (announcing a wait
 * re-checks it, and step 4 wakes every announced waiter):
 *   - sending: copies the unread part of its ring into the kernel socket, in
 *     order, before anything new (lp_rv_tx; an EOF record there becomes
 *     shutdown(SHUT_WR)), then sends through the kernel;
 *   - receiving: reads the ring up to the initiator's MARK, then exactly the
 *     doorbells it is owed from the kernel stream, then the kernel stream
 *     (lp_rv_rx_done).  A doorbell drain that ran into the initiator's data
 *     keeps it (pb) for the application.
 * Neither side rings a doorbell after it knows (the ring is quiet), so the
 * doorbell counts are exact. */

/* Doorbells still owed to us, with our announcements withdrawn first (a
 * handed-back connection: no more can be claimed). */
static int64_t lp_rv_owed(lp_conn_t *c)
{
    local_ring_rx_wait_cancel(&c->ch, lp_rxdir(c));
    local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
    c->ch.quiet = 1;
    c->rv_seen = 1;
    return (int64_t)(c->ch.bells_claimed - c->bells_drained);
}

/* A drain read n kernel bytes and then found the connection handed back:
 * the doorbells owed come first, the rest is the peer's data (kept for the
 * application).  Returns the doorbells among them. */
static size_t lp_rv_keep(lp_conn_t *c, const char *buf, size_t n)
{
    int64_t owed = lp_rv_owed(c);
    size_t bells = owed <= 0 ? 0 : (uint64_t)owed < n ? (size_t)owed : n;

    c->bells_drained += bells;
    if (bells < n && c->pb_off >= c->pb_len) {
        memcpy(c->pb, buf + bells, n - bells);
        c->pb_off = 0;
        c->pb_len = (uint16_t)(n - bells);
    }
    return bells;
}

/* Copy kept bytes into msg's iovecs from byte skip on (consume unless peek). */
static size_t lp_pb_take(lp_conn_t *c, struct msghdr *msg, size_t skip, int peek)
{
    size_t have = (size_t)(c->pb_len - c->pb_off), done = 0, i;

    for (i = 0; i < msg->msg_iovlen && done < have; i++) {
        size_t l = msg->msg_iov[i].iov_len, k;

        if (skip >= l) {
            skip -= l;
            continue;
        }
        k = l - skip < have - done ? l - skip : have - done;
        memcpy((char *)msg->msg_iov[i].iov_base + skip, c->pb + c->pb_off + done, k);
        done += k;
        skip = 0;
    }
    if (!peek)
        c->pb_off = (uint16_t)(c->pb_off + done);
    return done;
}

/* Read exactly n doorbells owed to us (sent, or being sent): 0, or -1 when
 * they did not come (the peer died, or LP_RV_WAIT_MS passed). */
static int lp_bells_take(lp_conn_t *c, int fd, int64_t n)
{
    struct timespec t0, t;
    char buf[256];

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (n > 0) {
        ssize_t k = zc_real.recv(fd, buf, n < (int64_t)sizeof(buf) ? (size_t)n : sizeof(buf),
                                 MSG_DONTWAIT);

        if (k > 0) {
            n -= k;
            c->bells_drained += (uint64_t)k;
            continue;
        }
        if (k == 0) {
            c->kern_eof = 1;
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            c->kern_err = errno;
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > LP_RV_WAIT_MS)
            return -1;
        zc_real.poll(&(struct pollfd){ fd, POLLIN, 0 }, 1, 10);
    }
    return 0;
}

/* Both directions are on the kernel: the connection is plain. */
static void lp_rv_check_done(lp_conn_t *c)
{
    if (c->rx_plain && !c->tx_ring && c->tx_never && c->state == LP_PAIRED)
        c->state = LP_PLAIN;
}

/* A holder of our side in another process finished a direction of the
 * hand-back (LP_RV_TX / LP_RV_RX in our side word: it gave the ring to the
 * kernel, or took the MARK and the doorbells): so have we.  The role's lock
 * held; returns 1 when that direction is done. */
static int lp_rv_sibling(lp_conn_t *c, int role)
{
    uint32_t mine = __atomic_load_n(&lp_side(c, c->ch.side)->rv, __ATOMIC_ACQUIRE);

    if (role == LP_RX && (mine & LP_RV_RX) && !c->rx_plain) {
        c->rx_ring = 0;
        c->rx_plain = 1;
    } else if (role == LP_TX && (mine & LP_RV_TX) && !(c->tx_never && !c->tx_ring)) {
        c->tx_ring = 0;
        c->tx_never = 1;
    }
    lp_rv_check_done(c);
    return role == LP_RX ? c->rx_plain : c->tx_never && !c->tx_ring;
}

/* Our receiving direction reads the kernel stream for good (at the
 * initiator's MARK, or with no ring data to come).  RX lock held. */
static void lp_rv_rx_done(lp_conn_t *c, int fd)
{
    int64_t owed = lp_rv_owed(c);

    zc_log(ZC_LOG_TRACE, "local path: fd %d reads the kernel stream after %lld owed doorbell(s)"
           " (claimed %llu, read %llu, kept %d)", fd, (long long)owed,
           (unsigned long long)c->ch.bells_claimed, (unsigned long long)c->bells_drained,
           c->pb_len - c->pb_off);
    if (owed > 0 && lp_bells_take(c, fd, owed) < 0 && !c->kern_eof && !c->kern_err)
        zc_log(ZC_LOG_WARN, "local path: fd %d handed back with %lld doorbell(s) that did not "
               "come", fd, (long long)(c->ch.bells_claimed - c->bells_drained));
    c->rx_ring = 0;
    c->rx_plain = 1;
    __atomic_or_fetch(&lp_side(c, c->ch.side)->rv, LP_RV_RX, __ATOMIC_ACQ_REL);
    lp_rv_check_done(c);
}

/* The initiator's MARK at our read position: take it and read the kernel
 * stream from here.  RX lock held.  1 taken, 0 not there (something else
 * is), -1 the record cannot be taken. */
static int lp_rv_take_mark(lp_conn_t *c, int fd)
{
    local_ring_frame_t fr;

    if (local_ring_frame_next(&c->ch, lp_rxdir(c), &fr) || fr.type != LOCAL_RING_REC_MARK)
        return 0;
    if (local_ring_frame_consume(&c->ch, lp_rxdir(c), &fr) < 0)
        return -1;
    lp_rv_rx_done(c, fd);
    return 1;
}

/* Our sending direction goes to the kernel for good: the ring's unread
 * bytes first (the initiator will not read them), copied in order.
 * wait_ms: 0 do not wait for kernel room, -1 wait as a blocking send would,
 * > 0 wait at most that long.  TX lock held.  Returns 0 when done, -EAGAIN
 * when the kernel took only part (the rest stays in the ring, in order),
 * or the send's -errno. */
static int lp_rv_tx(lp_conn_t *c, int fd, int wait_ms)
{
    char buf[16384];
    struct timespec t0, t;

    c->ch.quiet = 1;
    c->rv_seen = 1;
    if (lp_rv_sibling(c, LP_TX))
        return 0;
    if (!c->tx_ring) {
        if (local_pair_switch_refuse(&c->ch, lp_txdir(c)) == -EALREADY &&
            local_pair_switch_get(&c->ch, lp_txdir(c)) != LOCAL_PAIR_SWITCH_NEVER)
            c->tx_ring = 1;     /* a holder in another process switched it */
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (c->tx_ring) {
        struct iovec v = { buf, sizeof(buf) };
        size_t got = 0;
        ssize_t n;
        int rc = local_ring_read(&c->ch, lp_txdir(c), &v, 1, LOCAL_RING_PEEK, &got);

        if (rc < 0)
            return (int)lp_broken(c);
        if (!got) {
            if ((rc & LOCAL_RING_F_EOF) && !c->kern_shut_wr) {
                zc_real.shutdown(fd, SHUT_WR);
                c->kern_shut_wr = 1;
            }
            break;
        }
        n = zc_real.send(fd, buf, got, MSG_NOSIGNAL | (wait_ms < 0 ? 0 : MSG_DONTWAIT));
        if (n < 0 && errno == EINTR && wait_ms < 0)
            return -EINTR;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_ms > 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > wait_ms)
                return -EAGAIN;
            zc_real.poll(&(struct pollfd){ fd, POLLOUT, 0 }, 1, 10);
            continue;
        }
        if (n < 0)
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        v.iov_len = (size_t)n;
        if (local_ring_read(&c->ch, lp_txdir(c), &v, 1, 0, &got) < 0 || got != (size_t)n)
            return (int)lp_broken(c);
        zc_stat_add(ZC_STAT_LOCAL_RETURNED_BYTES, (uint64_t)n);
    }
    c->tx_ring = 0;
    c->tx_never = 1;
    __atomic_or_fetch(&lp_side(c, c->ch.side)->rv, LP_RV_TX, __ATOMIC_ACQ_REL);
    lp_rv_check_done(c);
    return 0;
}

/* Hand the connection back to the kernel (steps 1-5 above).  No lock held. */
static void lp_revert(lp_conn_t *c, int fd, const char *why)
{
    lp_side_t *me;
    int64_t owed;
    uint64_t sw;

    if (c->state == LP_PENDING) {
        lp_lock(c, LP_TX);
        lp_pending_end(c);              /* never attach: it is plain TCP for good */
        lp_unlock(c, LP_TX);
    }
    if (c->state != LP_PAIRED)
        return;
    lp_lock(c, LP_TX);
    lp_lock(c, LP_RX);
    me = lp_side(c, c->ch.side);
    if (c->state == LP_PAIRED && !lp_rv(c)) {
        if (!c->wr_shut && !lp_tx_switch(c) &&
            local_pair_switch_refuse(&c->ch, lp_txdir(c)) == -EALREADY &&
            local_pair_switch_get(&c->ch, lp_txdir(c)) != LOCAL_PAIR_SWITCH_NEVER)
            c->tx_ring = 1;
        c->ch.quiet = 1;                                                        /* 1 */
        if (c->tx_ring && !c->wr_shut &&
            local_ring_mark_write(&c->ch, lp_txdir(c), LOCAL_RING_MARK_REVERT) < 0)
            lp_broken(c);
        local_ring_rx_wait_cancel(&c->ch, lp_rxdir(c));                         /* 2 */
        local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
        __atomic_or_fetch(&me->rv, LP_RV_REQ | LP_RV_TX | LP_RV_RX, __ATOMIC_SEQ_CST); /* 3 */
        c->rv_seen = 1;
        lp_wake(c, fd, local_ring_claim(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS),  /* 4 */
                local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS));
        lp_wake(c, fd, local_ring_claim(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD),
                local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD));
        zc_stat_add(ZC_STAT_LOCAL_HANDED_BACK, 1);
        zc_log(ZC_LOG_NOTICE, "local path: fd %d handed back to the kernel (%s)", fd, why);
    }
    owed = lp_rv_owed(c);                                                       /* 5 */
    sw = local_pair_switch_get(&c->ch, lp_rxdir(c));
    if (owed > 0 && !c->rx_ring && sw != LOCAL_PAIR_SWITCH_UNSET &&
        sw != LOCAL_PAIR_SWITCH_NEVER && c->rx_kernel < sw)
        zc_log(ZC_LOG_WARN, "local path: fd %d handed back before reading all the data that "
               "preceded the peer's switch-over: %lld doorbell byte(s) stay in the stream",
               fd, (long long)owed);
    else if (owed > 0)
        lp_bells_take(c, fd, owed);
    c->tx_ring = c->rx_ring = 0;
    c->tx_never = 1;
    c->rx_plain = 1;
    c->state = LP_PLAIN;
    lp_unlock(c, LP_RX);
    lp_unlock(c, LP_TX);
}

/* Read doorbell bytes waiting in the kernel socket without blocking (our
 * receiving direction is in the ring, so every kernel byte is one), noting
 * EOF and errors.  Returns bytes drained. */
static size_t lp_drain_ex(lp_conn_t *c, int fd, int full)
{
    char buf[256];
    size_t total = 0;
    int saved = errno, i;

    for (i = 0; i < 16; i++) {
        int rv = lp_rv(c);
        size_t want = sizeof(buf);
        ssize_t n;

        if (rv) {       /* handed back: the peer's data follows the doorbells owed */
            int64_t owed = lp_rv_owed(c);

            if (owed <= 0)
                break;
            if ((uint64_t)owed < want)
                want = (size_t)owed;
        }
        /* AF_UNIX: look first, so that a hand-back's descriptors or
         * credentials are never read here (they would be lost). */
        n = zc_real.recv(fd, buf, want, MSG_DONTWAIT | (c->is_unix ? MSG_PEEK : 0));
        if (n > 0 && !rv && lp_rv(c)) {
            /* Handed back while we read: past the doorbells owed it is data. */
            if (!c->is_unix) {
                total += lp_rv_keep(c, buf, (size_t)n);
            } else {
                int64_t owed = lp_rv_owed(c);

                if (owed > 0 && lp_bells_take(c, fd, owed < n ? owed : n) == 0)
                    total += (size_t)(owed < n ? owed : n);
            }
            break;
        }
        if (n > 0 && c->is_unix) {
            ssize_t k = zc_real.recv(fd, buf, (size_t)n, MSG_DONTWAIT);

            if (k != n) {       /* another reader took them: count what we read */
                if (k > 0) {
                    total += (size_t)k;
                    c->bells_drained += (size_t)k;
                }
                break;
            }
        }
        if (n > 0) {
            total += (size_t)n;
            c->bells_drained += (size_t)n;
            if ((size_t)n < want && !full)
                break;
            continue;
        }
        if (n == 0)
            c->kern_eof = 1;
        else if (errno == EINTR)
            continue;
        else if (errno != EAGAIN && errno != EWOULDBLOCK)
            c->kern_err = errno;
        break;
    }
    errno = saved;
    return total;
}

static size_t lp_drain(lp_conn_t *c, int fd)
{
    return lp_drain_ex(c, fd, 0);
}

/* --- receive ---------------------------------------------------------------------- */

/* Rule R2 outside a receive: our receiving direction reached the peer's
 * switch point, so what follows in the kernel stream are doorbells.
 * Returns 1 when the direction is (now) in the ring. */
static int lp_rx_catch_up(lp_conn_t *c)
{
    uint64_t sw;

    if (c->rx_ring)
        return 1;
    if (c->state != LP_PAIRED || c->rx_plain)
        return 0;
    sw = local_pair_switch_get(&c->ch, lp_rxdir(c));
    if (sw == LOCAL_PAIR_SWITCH_UNSET || sw == LOCAL_PAIR_SWITCH_NEVER)
        return 0;
    lp_lock(c, LP_RX);
    if (!c->rx_ring && c->rx_kernel >= sw) {
        c->rx_ring = 1;
        local_ring_rx_wait_cancel(&c->ch, lp_rxdir(c));
    }
    lp_unlock(c, LP_RX);
    return c->rx_ring;
}

/* A blocking call's wait: its deadline from SO_RCVTIMEO / SO_SNDTIMEO (read
 * at the first sleep), -1 for none. */
typedef struct lp_wait {
    int64_t deadline;
    int init;
} lp_wait_t;

#define LP_WAIT_INIT { -1, 0 }
#define LP_SLEEP_SLICE_MS 50

static int64_t lp_now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* poll() was interrupted: would the application's blocking call have been?
 * The kernel restarts a socket call after a handler with SA_RESTART unless
 * the socket has a timeout; we cannot tell which signal it was, so any
 * installed handler without SA_RESTART counts. */
static int lp_interrupted(const lp_wait_t *w)
{
    struct sigaction sa;
    int sig;

    if (w->deadline >= 0)
        return 1;
    for (sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa))
            continue;
        if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN && !(sa.sa_flags & SA_RESTART))
            return 1;
    }
    return 0;
}

/* What the kernel socket says, without taking data the application still
 * has to read there: EOF, an error, a FIN while we send through the ring. */
static void lp_kernel_look(lp_conn_t *c, int fd, int role)
{
    struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };
    char b;
    ssize_t n;

    if (lp_rx_catch_up(c)) {
        lp_drain(c, fd);
        return;
    }
    if (zc_real.poll(&p, 1, 0) <= 0)
        return;
    /* A FIN while we send through the ring means the peer closed (it would
     * have ended its side with an EOF record otherwise). */
    if (role == LP_TX && c->tx_ring && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        c->kern_eof = 1;
    n = zc_real.recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        c->kern_eof = 1;
    else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        c->kern_err = errno;
}

/* Sleep in a blocking call until the peer wakes our futex word (announced
 * with LOCAL_RING_WAIT_FUTEX for role LP_RX: data; LP_TX: space), after an
 * optional spin (ZCSOCK_SPIN_US).  The sleep is cut in slices so a peer that
 * died without waking us is noticed through the kernel socket.  Returns 0
 * (look again) or -errno for the application (EINTR, EAGAIN on SO_*TIMEO). */
static int lp_sleep(lp_conn_t *c, int fd, int role, lp_wait_t *w)
{
    uint32_t *word = role == LP_RX
                         ? local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_CONS)
                         : local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_PROD);
    struct timespec ts = { 0, LP_SLEEP_SLICE_MS * 1000000L };
    long r;

    if (!w->init) {
        lp_cached_t *k = &c->timeo[role];
        int64_t ms;

        w->init = 1;
        if (!lp_cached_get(c, k, &ms)) {
            struct timeval tv = { 0, 0 };

            lp_cached_begin(c, k);
            ms = -1;
            if (!zc_real.getsockopt(fd, SOL_SOCKET, role == LP_RX ? SO_RCVTIMEO : SO_SNDTIMEO,
                                    &tv, &(socklen_t){ sizeof(tv) })) {
                ms = tv.tv_sec || tv.tv_usec ? tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000 : 0;
                lp_cached_set(k, ms);
            }
        }
        if (ms > 0)
            w->deadline = lp_now_ms() + ms;
    }
    if (w->deadline >= 0) {
        int64_t left = w->deadline - lp_now_ms();

        if (left <= 0)
            return -EAGAIN;
        if (left < LP_SLEEP_SLICE_MS)
            ts.tv_nsec = left * 1000000L;
    }
    if (lp.spin_us) {
        struct timespec t0, t;
        int i;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (i = 0;; i++) {
            if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != LOCAL_RING_WAIT_FUTEX)
                return 0;
            __builtin_ia32_pause();
            if ((i & 63) == 63) {
                clock_gettime(CLOCK_MONOTONIC, &t);
                if ((t.tv_sec - t0.tv_sec) * 1000000 + (t.tv_nsec - t0.tv_nsec) / 1000 >=
                    (long)lp.spin_us)
                    break;
            }
        }
    }
    zc_stat_add(ZC_STAT_LOCAL_SLEEPS, 1);
    r = syscall(SYS_futex, word, FUTEX_WAIT, LOCAL_RING_WAIT_FUTEX, &ts, NULL, 0);
    if (r < 0 && errno == EINTR)
        return lp_interrupted(w) ? -EINTR : 0;
    if (r < 0 && errno == ETIMEDOUT)
        lp_kernel_look(c, fd, role);
    return 0;
}

/* Kernel mode of our receiving direction (rule R1): receive from the kernel
 * socket, never past the switch point, and keep only the data.  RX lock
 * held; returns with it held. */
static ssize_t lp_recv_kernel(lp_conn_t *c, shim_fd_t *f, int fd, struct msghdr *msg, int flags,
                              int *again)
{
    struct iovec win[LP_IOV_WIN];
    struct msghdr m = *msg;
    uint64_t sw = c->ch.base ? local_pair_switch_get(&c->ch, lp_rxdir(c))
                             : LOCAL_PAIR_SWITCH_UNSET;
    size_t limit = SIZE_MAX, data;
    ssize_t n;

    *again = 0;
    if (c->rx_plain) {          /* handed back: kept bytes first, then the kernel's */
        if (c->pb_off < c->pb_len) {
            n = (ssize_t)lp_pb_take(c, msg, 0, flags & MSG_PEEK);
            msg->msg_flags = 0;
            msg->msg_controllen = 0;
            msg->msg_namelen = 0;
            shim_copy_account(f, 0, n, 1);
            return n;
        }
        n = zc_real.recvmsg(fd, msg, flags & ~MSG_WAITALL);
        shim_copy_account(f, 0, n, 1);
        return n < 0 ? -errno : n;
    }
    if (sw != LOCAL_PAIR_SWITCH_UNSET && sw != LOCAL_PAIR_SWITCH_NEVER) {
        if (c->rx_kernel >= sw) {
            c->rx_ring = 1;
            local_ring_rx_wait_cancel(&c->ch, lp_rxdir(c));   /* R2: take over S3 */
            *again = 1;
            return 0;
        }
        limit = (size_t)(sw - c->rx_kernel);
        m.msg_iov = win;
        m.msg_iovlen = (size_t)lp_iov_window(msg->msg_iov, msg->msg_iovlen, 0, limit, win);
    }
    else if (sw == LOCAL_PAIR_SWITCH_UNSET && !(flags & MSG_PEEK)) {
        /* No switch point yet: look before taking.  One published while we
         * wait makes what follows it doorbells, or, after a hand-back, data
         * that comes after the ring's (which a read must not take, nor the
         * descriptors that may travel with it). */
        struct msghdr pm = m;

        pm.msg_control = NULL;
        pm.msg_controllen = 0;
        pm.msg_name = NULL;
        pm.msg_namelen = 0;
        n = zc_real.recvmsg(fd, &pm, (flags & ~MSG_WAITALL) | MSG_PEEK);
        if (n > 0 && c->state == LP_PENDING)
            lp_pickup_try(c, fd, 1);    /* R3 */
        if (n <= 0) {
            msg->msg_flags = pm.msg_flags;
            msg->msg_controllen = 0;
            msg->msg_namelen = 0;
            shim_copy_account(f, 0, n, 1);
            return n < 0 ? -errno : 0;
        }
        data = local_pair_rx_split(c->state == LP_PAIRED ? &c->ch : NULL, lp_rxdir(c),
                                   c->rx_kernel, (size_t)n);
        if (!data) {
            *again = 1;         /* all past the switch point: the ring's turn */
            return 0;
        }
        m.msg_iov = win;
        m.msg_iovlen = (size_t)lp_iov_window(msg->msg_iov, msg->msg_iovlen, 0, data, win);
        flags |= MSG_DONTWAIT;  /* they are there */
    }
    n = zc_real.recvmsg(fd, &m, flags & ~MSG_WAITALL);
    msg->msg_flags = m.msg_flags;
    msg->msg_controllen = m.msg_controllen;
    msg->msg_namelen = m.msg_namelen;
    if (n <= 0) {
        shim_copy_account(f, 0, n, 1);
        return n < 0 ? -errno : 0;
    }
    if (c->state == LP_PENDING)         /* R3: the offer precedes the server's first byte */
        lp_pickup_try(c, fd, 1);
    data = local_pair_rx_split(c->state == LP_PAIRED ? &c->ch : NULL, lp_rxdir(c),
                               c->rx_kernel, (size_t)n);
    if (!(flags & MSG_PEEK)) {
        c->rx_kernel += data;
        c->bells_drained += (size_t)n - data;
    } else if (data < (size_t)n) {
        /* Peeked doorbells: consume them (they are not the application's). */
        char buf[256];
        size_t skip = (size_t)n - data;

        if (!data)
            while (skip) {
                ssize_t k = zc_real.recv(fd, buf, skip < sizeof(buf) ? skip : sizeof(buf),
                                         MSG_DONTWAIT);
                if (k <= 0)
                    break;
                skip -= (size_t)k;
                c->bells_drained += (size_t)k;
            }
    }
    shim_copy_account(f, 0, (ssize_t)data, 1);
    if (!data)
        *again = 1;     /* only doorbells: the rest comes from the ring */
    return (ssize_t)data;
}

/* Ring mode of our receiving direction.  RX lock held. */
static ssize_t lp_recv_ring(lp_conn_t *c, int fd, struct msghdr *msg, int flags, size_t skip,
                            int *eof)
{
    struct iovec win[LP_IOV_WIN];
    size_t done = 0;
    int n = lp_iov_window(msg->msg_iov, msg->msg_iovlen, skip, SIZE_MAX, win);
    int rc = local_ring_read(&c->ch, lp_rxdir(c), win, n,
                             (flags & MSG_PEEK) ? LOCAL_RING_PEEK : 0, &done);

    *eof = 0;
    msg->msg_controllen = 0;    /* a stream through the ring: no address, no ancillary data */
    msg->msg_namelen = 0;
    if (rc < 0)
        return lp_broken(c);
    if ((rc & LOCAL_RING_F_RECORD) && (!done || !(flags & MSG_PEEK))) {
        /* At a record: the initiator's MARK of a hand-back (page exchange
         * is not produced yet). */
        if (lp_rv_take_mark(c, fd) <= 0)
            return lp_broken(c);
        rc &= ~(LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX);
    }
    lp_wake(c, fd, rc, local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD));
    if (rc & LOCAL_RING_F_EOF)
        *eof = 1;
    zc_stat_add(ZC_STAT_LOCAL_RECV_BYTES, done);
    return (ssize_t)done;
}

/* A receive on a connection handed back while our ring still holds bytes
 * for the initiator: give them to the kernel first, and while the kernel
 * takes no more and nothing is there to read, wait for either (the
 * initiator's program may read only after our bytes reached it).  Returns
 * 1 to look again after waiting, 0 to go on receiving. */
static int lp_rv_return(lp_conn_t *c, int fd, int flags, lp_wait_t *w)
{
    struct pollfd p = { fd, POLLIN | POLLOUT, 0 };
    int rc;

    lp_lock(c, LP_TX);
    rc = c->tx_ring ? lp_rv_tx(c, fd, 0) : 0;
    lp_unlock(c, LP_TX);
    if (rc != -EAGAIN || !c->rx_plain || lp_nonblocking(c, fd, flags))
        return 0;
    if (zc_real.poll(&p, 1, LP_SLEEP_SLICE_MS) < 0 && errno == EINTR && lp_interrupted(w))
        return 0;       /* the receive itself reports the signal */
    return !(p.revents & (POLLIN | POLLHUP | POLLERR));
}

static ssize_t lp_recvmsg(shim_fd_t *f, int fd, struct msghdr *msg, int flags)
{
    lp_conn_t *c = lp_conn(f);
    size_t total, got = 0;
    int waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
    int rc0 = lp_msg_check(msg);
    lp_wait_t w = LP_WAIT_INIT;
    size_t ctl0;
    socklen_t name0;

    if (rc0)
        return rc0;
    total = lp_iov_total(msg->msg_iov, msg->msg_iovlen);
    ctl0 = msg->msg_controllen;
    name0 = msg->msg_namelen;
    if (flags & MSG_OOB) {      /* urgent data: the kernel's */
        ssize_t n = zc_real.recvmsg(fd, msg, flags);

        return n < 0 ? -errno : n;
    }

    if ((c->state == LP_PLAIN && c->pb_off >= c->pb_len) ||
        (!c->rx_ring && c->state == LP_PENDING && c->ann < 0)) {
        ssize_t n = zc_real.recvmsg(fd, msg, flags);

        shim_copy_account(f, 0, n, 1);
        return n < 0 ? -errno : n;
    }
    if (c->rx_ring)
        zc_stat_add(ZC_STAT_LOCAL_RECV_CALLS, 1);
    if (total == 0) {           /* the kernel returns at once for a zero-length read */
        msg->msg_flags = 0;
        msg->msg_controllen = 0;
        return 0;
    }
    msg->msg_flags = 0;
    for (;;) {
        ssize_t n;
        int again = 0, eof = 0, rc, nonblock;

        if (c->state == LP_PAIRED && c->tx_ring && lp_rv(c) && lp_rv_return(c, fd, flags, &w))
            continue;
        lp_lock(c, LP_RX);
        if (!c->rx_ring) {
            struct iovec win[LP_IOV_WIN];
            struct msghdr m = *msg;

            m.msg_iov = win;
            m.msg_iovlen = (size_t)lp_iov_window(msg->msg_iov, msg->msg_iovlen, got, SIZE_MAX,
                                                 win);
            m.msg_controllen = ctl0;    /* a ring read before may have cleared them */
            m.msg_namelen = name0;
            n = lp_recv_kernel(c, f, fd, &m, flags, &again);
            lp_unlock(c, LP_RX);
            msg->msg_flags = m.msg_flags;       /* what the kernel said goes back */
            msg->msg_controllen = m.msg_controllen;
            msg->msg_namelen = m.msg_namelen;
            if (n < 0)
                return got ? (ssize_t)got : n;
            if (n == 0 && !again)
                return (ssize_t)got;        /* EOF */
            got += (size_t)n;
            if (got && (!waitall || got == total))
                return (ssize_t)got;
            continue;
        }
        n = lp_recv_ring(c, fd, msg, flags, got, &eof);
        if (n < 0) {
            lp_unlock(c, LP_RX);
            return got ? (ssize_t)got : n;
        }
        got += (size_t)n;
        if ((got && (!waitall || got == total)) || eof || c->rd_shut) {
            lp_unlock(c, LP_RX);
            return (ssize_t)got;
        }
        if (!c->rx_ring || (!n && lp_rv(c) && lp_rv_sibling(c, LP_RX))) {
            /* handed back at a MARK (here or in another holder): the kernel
             * stream from here */
            lp_unlock(c, LP_RX);
            continue;
        }
        /* Empty.  What does the kernel socket say?  (A peer whose last holder
         * closed marked its side gone before its kernel socket closed.)  A
         * blocking call that is owed no doorbell skips the look: its sleep
         * looks every slice, and an orderly close wakes it. */
        nonblock = lp_nonblocking(c, fd, flags);
        if (nonblock || c->ch.bells_claimed != c->bells_drained)
            lp_drain(c, fd);
        if (!c->kern_eof && !c->kern_err &&
            local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE) {
            /* Its last holder marked the side gone just before closing: the
             * FIN or reset is behind the doorbells, or about to arrive. */
            lp_drain_ex(c, fd, 1);
            if (!c->kern_eof && !c->kern_err) {
                zc_real.poll(&(struct pollfd){ fd, POLLIN | POLLRDHUP, 0 }, 1, 100);
                lp_drain_ex(c, fd, 1);
            }
        }
        if (c->kern_eof || c->kern_err ||
            local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE) {
            n = lp_recv_ring(c, fd, msg, flags, got, &eof);    /* written before it left */
            lp_unlock(c, LP_RX);
            if (n > 0)
                return (ssize_t)(got + (size_t)n);
            if (got)
                return (ssize_t)got;
            return c->kern_err ? -c->kern_err : 0;
        }
        if (nonblock) {
            rc = local_ring_rx_wait_prepare(&c->ch, lp_rxdir(c));  /* arm for poll */
            lp_unlock(c, LP_RX);
            if (rc == 0)
                continue;
            return got ? (ssize_t)got : -EAGAIN;
        }
        rc = local_ring_rx_wait_prepare_kind(&c->ch, lp_rxdir(c), LOCAL_RING_WAIT_FUTEX);
        lp_unlock(c, LP_RX);
        if (rc < 0)
            return got ? (ssize_t)got : lp_broken(c);
        if (rc == 0)
            continue;
        rc = lp_sleep(c, fd, LP_RX, &w);
        local_ring_rx_wait_cancel(&c->ch, lp_rxdir(c));
        if (rc < 0)
            return got ? (ssize_t)got : rc;
    }
}

/* --- send ------------------------------------------------------------------------- */

/* Pending client: look for the server's offer without waiting. */
static void lp_pickup(lp_conn_t *c, int fd)
{
    if (c->state != LP_PENDING || c->ann < 0)
        return;
    /* Look at the 1st, 2nd, 4th, 8th ... send: a client that streams
     * before the server accepted finds the offer soon, one that never gets
     * one pays a logarithmic number of lookups. */
    c->pickups++;
    if (c->pickups & (c->pickups - 1))
        return;
    lp_pickup_try(c, fd, 0);
}

/* The peer is gone for good (its last holder closed or it crashed): sends
 * go to the kernel, which answers exactly as it would (EPIPE, SIGPIPE). */
static int lp_peer_gone(lp_conn_t *c)
{
    return c->kern_eof || c->kern_err ||
           local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE;
}

/* A send after shutdown(SHUT_WR): what the kernel answers. */
static ssize_t lp_epipe(int flags)
{
    if (!(flags & MSG_NOSIGNAL))
        syscall(SYS_tgkill, getpid(), lp_gettid(), SIGPIPE);
    return -EPIPE;
}

static ssize_t lp_send_kernel(shim_fd_t *f, int fd, const struct msghdr *msg, int flags,
                              lp_conn_t *c)
{
    ssize_t n = zc_real.sendmsg(fd, msg, flags);

    shim_copy_account(f, 1, n, 1);
    if (n > 0 && c)
        c->tx_kernel += (uint64_t)n;
    return n < 0 ? -errno : n;
}

static ssize_t lp_sendmsg(shim_fd_t *f, int fd, const struct msghdr *msg, int flags)
{
    lp_conn_t *c = lp_conn(f);
    size_t total, sent = 0;
    ssize_t n = lp_msg_check(msg);
    lp_wait_t w = LP_WAIT_INIT;

    if (n)
        return n;
    total = lp_iov_total(msg->msg_iov, msg->msg_iovlen);

    if (c->state == LP_PLAIN || (flags & MSG_OOB))     /* urgent data: the kernel's */
        return lp_send_kernel(f, fd, msg, flags, NULL);
    lp_lock(c, LP_TX);
    if (c->state == LP_PENDING)
        lp_pickup(c, fd);
    if (c->state == LP_PAIRED && lp_rv(c)) {
        /* Handed back: what the ring still holds goes to the kernel first. */
        n = lp_rv_tx(c, fd, lp_nonblocking(c, fd, flags) ? 0 : -1);
        if (n < 0) {
            lp_unlock(c, LP_TX);
            return n == -EPIPE ? lp_epipe(flags) : n;
        }
    }
    if (c->wr_shut && c->tx_ring) {
        lp_unlock(c, LP_TX);
        return lp_epipe(flags);
    }
    if (!lp_tx_switch(c)) {
        n = lp_send_kernel(f, fd, msg, flags, c);
        lp_unlock(c, LP_TX);
        return n;
    }
    if (msg->msg_controllen && f->family == AF_UNIX) {
        /* Descriptors and credentials travel with kernel bytes only. */
        lp_unlock(c, LP_TX);
        lp_revert(c, fd, "ancillary data");
        return lp_sendmsg(f, fd, msg, flags);
    }
    zc_stat_add(ZC_STAT_LOCAL_SEND_CALLS, 1);
    for (;;) {
        struct iovec win[LP_IOV_WIN];
        int64_t room;
        size_t done = 0;
        int k, rc, nonblock;

        if (lp_rv(c)) {         /* handed back meanwhile: start again on the kernel */
            lp_unlock(c, LP_TX);
            if (sent)
                return (ssize_t)sent;
            return lp_sendmsg(f, fd, msg, flags);
        }
        if (lp_peer_gone(c)) {
            lp_unlock(c, LP_TX);
            if (sent)
                return (ssize_t)sent;
            return lp_send_kernel(f, fd, msg, flags, NULL);
        }
        room = lp_tx_room(c);
        if (room < 0) {
            lp_unlock(c, LP_TX);
            return sent ? (ssize_t)sent : lp_broken(c);
        }
        if (room > LP_ROOM_KEEP) {
            k = lp_iov_window(msg->msg_iov, msg->msg_iovlen, sent,
                              (size_t)(room - LP_ROOM_KEEP), win);
            rc = local_ring_write(&c->ch, lp_txdir(c), win, k, &done);
            if (rc < 0) {
                lp_unlock(c, LP_TX);
                return sent ? (ssize_t)sent : lp_broken(c);
            }
            lp_wake(c, fd, rc, local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS));
            sent += done;
            zc_stat_add(ZC_STAT_LOCAL_SEND_BYTES, done);
            if (sent == total)
                break;
            if (done)
                continue;
        }
        /* Full. */
        if (sent && lp_nonblocking(c, fd, flags))
            break;
        nonblock = lp_nonblocking(c, fd, flags);
        rc = local_ring_tx_wait_prepare_kind(&c->ch, lp_txdir(c),
                                             lp_tx_want(c, total - sent < LOCAL_RING_CHUNK
                                                               ? total - sent + LP_ROOM_KEEP
                                                               : LOCAL_RING_CHUNK),
                                             nonblock ? LOCAL_RING_WAIT_SOCKET
                                                      : LOCAL_RING_WAIT_FUTEX);
        if (rc == 1 && lp_rv(c)) {      /* re-checked after announcing (HAND-BACK 4) */
            local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
            continue;
        }
        if (rc == 0)
            continue;
        lp_unlock(c, LP_TX);
        if (rc < 0)
            return sent ? (ssize_t)sent : lp_broken(c);
        if (nonblock)
            return sent ? (ssize_t)sent : -EAGAIN;     /* armed: poll will see the space */
        rc = lp_sleep(c, fd, LP_TX, &w);
        local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
        if (rc < 0)
            return sent ? (ssize_t)sent : (rc == -EAGAIN ? -EAGAIN : rc);
        lp_lock(c, LP_TX);
    }
    lp_unlock(c, LP_TX);
    return (ssize_t)sent;
}

/* --- sendfile and splice: through a bounce buffer and the ring ------------------ */

#define LP_BOUNCE (64u << 10)

/* Room a send can take without waiting (or everything for a blocking one). */
static size_t lp_send_room(lp_conn_t *c, int fd, int flags, size_t want)
{
    int64_t room;

    if (!c->tx_ring || !lp_nonblocking(c, fd, flags))
        return want;
    room = lp_tx_room(c) - LP_ROOM_KEEP;
    if (room <= 0)
        return 1;       /* the send reports EAGAIN before anything is read */
    return (size_t)room < want ? (size_t)room : want;
}

ssize_t path_local_sendfile(shim_fd_t *f, int out_fd, int in_fd, off_t *offset, size_t count)
{
    lp_conn_t *c = lp_conn(f);
    char *buf = zc_pool_alloc(LP_BOUNCE);
    size_t total = 0;
    ssize_t rc = 0;

    if (!buf)
        return -ENOMEM;
    while (total < count) {
        size_t want = lp_send_room(c, out_fd, 0, count - total < LP_BOUNCE ? count - total
                                                                         : LP_BOUNCE);
        ssize_t r = offset ? pread(in_fd, buf, want, *offset) : zc_real.read(in_fd, buf, want);
        ssize_t s;

        if (r <= 0) {
            rc = r < 0 ? -errno : 0;
            break;
        }
        s = lp_sendmsg(f, out_fd, &(struct msghdr){ .msg_iov = &(struct iovec){ buf, (size_t)r },
                                                   .msg_iovlen = 1 }, 0);
        if (s < (ssize_t)r && !offset)      /* give back what did not go */
            lseek(in_fd, (off_t)(s < 0 ? 0 : s) - r, SEEK_CUR);
        if (s < 0) {
            rc = s;
            break;
        }
        total += (size_t)s;
        if (offset)
            *offset += s;
        if (s < r)
            break;
    }
    zc_pool_free(buf, LP_BOUNCE);
    return total ? (ssize_t)total : rc;
}

ssize_t path_local_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                          unsigned flags)
{
    shim_fd_t *fi = shim_fd_get(fd_in), *fo = shim_fd_get(fd_out);
    int sflags = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
    char *buf;
    ssize_t r, w;

    if (off_out && path_local_claimed(fo))
        return -ESPIPE;
    if (off_in && path_local_claimed(fi))
        return -ESPIPE;
    if (len > LP_BOUNCE)
        len = LP_BOUNCE;
    if (path_local_claimed(fi)) {
        /* Socket to pipe (or file): never take more than the other end holds. */
        int cap = zc_real.fcntl(fd_out, F_GETPIPE_SZ, 0), used = 0;

        if (cap > 0 && zc_real.ioctl(fd_out, FIONREAD, &used) == 0)
            len = (size_t)(cap - used) < len ? (size_t)(cap - used) : len;
        if (!len)
            return -EAGAIN;
    } else {
        len = lp_send_room(lp_conn(fo), fd_out, sflags, len);
    }
    buf = zc_pool_alloc(LP_BOUNCE);
    if (!buf)
        return -ENOMEM;
    if (path_local_claimed(fi))
        r = lp_recvmsg(fi, fd_in, &(struct msghdr){ .msg_iov = &(struct iovec){ buf, len },
                                                   .msg_iovlen = 1 }, sflags);
    else
        r = off_in ? pread(fd_in, buf, len, *off_in) : zc_real.read(fd_in, buf, len);
    if (r < 0 && !path_local_claimed(fi))
        r = -errno;
    w = r;
    if (r > 0) {
        if (off_in)
            *off_in += r;
        if (path_local_claimed(fo))
            w = lp_sendmsg(fo, fd_out, &(struct msghdr){ .msg_iov = &(struct iovec){ buf, (size_t)r },
                                                       .msg_iovlen = 1 }, sflags);
        else {
            w = off_out ? pwrite(fd_out, buf, (size_t)r, *off_out) : zc_real.write(fd_out, buf, (size_t)r);
            if (w < 0)
                w = -errno;
            else if (off_out)
                *off_out += w;
        }
    }
    zc_pool_free(buf, LP_BOUNCE);
    return w;
}

/* --- shutdown, close -------------------------------------------------------------- */

int path_local_shutdown(shim_fd_t *f, int fd, int how)
{
    lp_conn_t *c = lp_conn(f);
    int rc = 1;

    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
        return 1;
    if (how != SHUT_WR) {
        lp_lock(c, LP_RX);
        c->rd_shut = 1;
        lp_unlock(c, LP_RX);
    }
    if (how == SHUT_RD || c->state == LP_PLAIN)
        return 1;
    lp_lock(c, LP_TX);
    if (c->state == LP_PENDING) {
        lp_pending_end(c);  /* never attach now: we could not ring a switched peer any more */
    } else if (!c->wr_shut) {
        if (!lp_tx_switch(c) && local_pair_switch_refuse(&c->ch, lp_rxdir(c)) == -EALREADY)
            lp_tx_switch(c);    /* the peer switched: it attached, so may we */
        if (c->tx_ring) {
            int w = local_ring_eof_write(&c->ch, lp_txdir(c));

            if (w >= 0) {
                c->wr_shut = 1;
                lp_wake(c, fd, w, local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS));
                if (lp_rv(c) && lp_rv_tx(c, fd, 0) == -EAGAIN)
                    path_local_poll_slice_ms = 10;  /* the rest, then the FIN, later */
                /* The kernel socket stays open for doorbells; SHUT_RD and
                 * SHUT_RDWR still reach it for the reading side. */
                rc = how == SHUT_RDWR ? (int)shim_ret(zc_real.shutdown(fd, SHUT_RD)) : 0;
                if (rc < 0)
                    rc = -errno;
            } else {
                rc = lp_broken(c);
            }
        } else {
            c->kern_shut_wr = 1;
            c->wr_shut = 1;
        }
    }
    lp_unlock(c, LP_TX);
    return rc;
}

/* Doorbells the peer sent us (or is sending) and we have not read: reading
 * them before the last close keeps the kernel from resetting the connection
 * over "unread data" that was never the application's. */
static void lp_bells_settle(lp_conn_t *c, int fd)
{
    struct timespec t0, t;
    int64_t owed;

    local_ring_rx_wait_cancel(&c->ch, lp_rxdir(c));
    local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
    if (!lp_rx_catch_up(c))
        return;     /* kernel bytes are still data: the kernel decides */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        lp_drain(c, fd);
        owed = (int64_t)(c->ch.bells_claimed - c->bells_drained);
        if (owed <= 0 || c->kern_eof || c->kern_err)
            return;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > LP_BELL_WAIT_MS) {
            zc_log(ZC_LOG_TRACE, "local path: fd %d closes with %lld doorbell(s) owed that did "
                   "not come (claimed %llu, read %llu) side %d tx %d rx %d wr_shut %d kshut %d "
                   "rd_shut %d", fd, (long long)owed,
                   (unsigned long long)c->ch.bells_claimed, (unsigned long long)c->bells_drained,
                   c->ch.side, c->tx_ring, c->rx_ring, c->wr_shut, c->kern_shut_wr, c->rd_shut);
            return;
        }
        zc_real.poll(&(struct pollfd){ fd, POLLIN, 0 }, 1, 1);
    }
}

static void lp_conn_release(lp_conn_t *c, int fd)
{
    lp_fds_note(c, fd, 0);
    if (--c->refs > 0)
        return;
    local_pair_fd_close(c->ann);
    lp_fd_drop(c->memfd);
    if (c->ch.base) {
        int last = lp_holders_add(c, -1) == 0;

        if (last && c->state == LP_PAIRED && lp_rv(c)) {
            /* Handed back: what the ring holds goes to the kernel before the
             * close, as the kernel would still send its queue. */
            lp_lock(c, LP_TX);
            if (lp_rv_tx(c, fd, LP_RV_CLOSE_MS) == -EAGAIN)
                zc_log(ZC_LOG_WARN, "local path: fd %d closed with ring data the kernel did "
                       "not take within %d ms", fd, LP_RV_CLOSE_MS);
            lp_unlock(c, LP_TX);
        }
        if (last && c->state == LP_PAIRED) {
            int64_t unread = local_ring_readable(&c->ch, lp_rxdir(c));

            lp_bells_settle(c, fd);
            if (unread > 0 && !c->rd_shut && !c->linger0) {
                /* The kernel resets a connection closed with unread data
                 * (SO_LINGER {1, 0} already asks the kernel for it): the
                 * peer reads what it has, then gets ECONNRESET, as on Linux. */
                zc_real.setsockopt(fd, SOL_SOCKET, SO_LINGER,
                                   &(struct linger){ 1, 0 }, sizeof(struct linger));
            }
        }
        if (last) {
            /* Gone first, then wake the peer's blocking sleepers: they find
             * the side gone (or our data) instead of sleeping a slice. */
            local_ring_side_gone(&c->ch);
            syscall(SYS_futex, local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS),
                    FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
            syscall(SYS_futex, local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD),
                    FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
        }
        local_ring_close(&c->ch, 0);
    }
    lp_conn_free(c);
}

static void lp_forget(shim_fd_t *f, int fd)
{
    lp_conn_t *c = lp_conn(f);

    f->path = NULL;
    f->path_ctx = NULL;
    if (c)
        lp_conn_release(c, fd);
}

static void lp_dup(shim_fd_t *f, int fd)
{
    __atomic_add_fetch(&lp_conn(f)->refs, 1, __ATOMIC_RELAXED);
    lp_fds_note(lp_conn(f), fd, 1);
}

const shim_path_ops_t path_local_ops = {
    .name = "local",
    .sendmsg = lp_sendmsg,
    .recvmsg = lp_recvmsg,
    .forget = lp_forget,
    .dup = lp_dup,
};

/* --- pairing from the descriptor hooks ------------------------------------------ */

int path_local_enabled(void)
{
    return lp.enabled;
}

/* SO_PASSCRED / SO_PASSSEC on an AF_UNIX socket: every read returns the
 * sender's credentials, which only kernel bytes carry. */
static int lp_wants_creds(int fd)
{
    int on = 0, sec = 0;

    zc_real.getsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, &(socklen_t){ sizeof(on) });
    zc_real.getsockopt(fd, SOL_SOCKET, SO_PASSSEC, &sec, &(socklen_t){ sizeof(sec) });
    return on || sec;
}

static int lp_candidate(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (!lp.enabled || !f || f->kind != SHIM_FD_SOCKET || !f->stream || f->path ||
        !(f->family == AF_INET || f->family == AF_INET6 ||
          (f->family == AF_UNIX && zc_config.local_unix)))
        return 0;
    if (f->family == AF_UNIX && lp_wants_creds(fd)) {
        lp_decline(LOCAL_PAIR_R_UNSUPPORTED);
        return 0;
    }
    return 1;
}

void path_local_listened(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);
    int beacon = -1;

    if (!lp_candidate(fd) || f->family == AF_UNIX || f->aux_fd)
        return;
    if (local_pair_listen(fd, &beacon) == 0 && beacon >= 0)
        f->aux_fd = beacon + 1;
    else
        f->aux_fd = -1;     /* tried: another process holds the name */
}

void path_local_connect_prepare(int fd, const struct sockaddr *addr, socklen_t len)
{
    int ann = -1, reason = LOCAL_PAIR_R_NONE, dec;
    lp_conn_t *c;

    if (!lp_candidate(fd))
        return;
    dec = local_pair_connect_prepare(fd, addr, len, &ann, &reason);
    if (dec != LOCAL_PAIR_PENDING) {
        lp_decline(reason);
        return;
    }
    c = lp_conn_new(LP_PENDING);
    if (!c) {
        local_pair_fd_close(ann);
        lp_decline(LOCAL_PAIR_R_ERROR);
        return;
    }
    c->ann = ann;
    c->state = LP_PENDING;
    lp_claim(fd, c);
}

void path_local_connect_done(int fd, int rc, int err)
{
    shim_fd_t *f = shim_fd_get(fd);
    lp_conn_t *c;
    int reason = LOCAL_PAIR_R_NONE;

    if (!path_local_claimed(f))
        return;
    c = lp_conn(f);
    if (c->state != LP_PENDING || c->ann < 0)
        return;
    if (rc < 0 && (err == EINPROGRESS || err == EALREADY || err == EINTR))
        return;     /* decided on the first data call (connected or not) */
    if (rc < 0 || local_pair_connected(fd, c->ann, &reason) != LOCAL_PAIR_PENDING) {
        local_pair_fd_close(c->ann);
        c->ann = -1;
        c->state = LP_PLAIN;
        lp_decline(rc < 0 ? LOCAL_PAIR_R_ERROR : reason);
    }
}

void path_local_accepted(int lfd, int fd)
{
    shim_fd_t *l = shim_fd_get(lfd);
    int memfd = -1, reason = LOCAL_PAIR_R_NONE, dec;
    lp_conn_t *c;

    if (!lp_candidate(fd))
        return;
    if (l && l->kind == SHIM_FD_SOCKET && !l->aux_fd && l->family != AF_UNIX)
        path_local_listened(lfd);   /* inherited listener: our beacon too */
    c = lp_conn_new(LP_PAIRED);
    if (!c) {
        lp_decline(LOCAL_PAIR_R_ERROR);
        return;
    }
    dec = local_pair_accepted(lfd, fd, lp.ring_size, &c->ch, &memfd, &reason);
    if (dec != LOCAL_PAIR_PAIRED) {
        lp_conn_free(c);
        lp_decline(reason);
        return;
    }
    lp_channel_adopt(c, memfd);
    zc_stat_add(ZC_STAT_LOCAL_PAIRED_SERVER, 1);
    lp_claim(fd, c);
}

/* --- readiness, ioctl, options ---------------------------------------------------- */

short path_local_kernel_events(shim_fd_t *f, short ev)
{
    lp_conn_t *c = lp_conn(f);
    short k = ev;

    if (c->state != LP_PAIRED)
        return ev;
    if (c->tx_ring)
        k &= ~(POLLOUT | POLLWRNORM | POLLWRBAND);
    if (ev & (POLLOUT | POLLWRNORM))
        k |= POLLIN;    /* space doorbells arrive as readable bytes */
    return k;
}

uint64_t path_local_rx_gen(shim_fd_t *f)
{
    lp_conn_t *c = lp_conn(f);

    return c->ch.base ? __atomic_load_n(&c->ch.hdr->ctl[lp_rxdir(c)].bytes_head,
                                        __ATOMIC_ACQUIRE) + c->rx_kernel
                      : c->rx_kernel;
}

uint64_t path_local_tx_gen(shim_fd_t *f)
{
    lp_conn_t *c = lp_conn(f);

    return c->ch.base ? __atomic_load_n(&c->ch.hdr->ctl[lp_txdir(c)].bytes_tail,
                                        __ATOMIC_ACQUIRE)
                      : 0;
}

/* The kernel socket's readiness for ev, asked now. */
static int lp_kernel_revents(int fd, short ev)
{
    struct pollfd p = { fd, (short)(ev | POLLIN), 0 };

    return zc_real.poll(&p, 1, 0) < 0 ? -1 : p.revents;
}

/* A poll/epoll waiter announced a wait for space: if the connection was
 * handed back meanwhile the initiator may not have seen the announcement
 * (HAND-BACK 4), so withdraw it and look again soon. */
static void lp_armed_recheck(lp_conn_t *c)
{
    if (lp_rv(c)) {
        local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
        path_local_poll_slice_ms = 1;
    }
}

/* Readiness of a connection handed back: move it on without blocking (give
 * the ring to the kernel, take the initiator's MARK), then answer with the
 * kernel's readiness when a direction changed.  Returns kev to use. */
static int lp_rv_progress(lp_conn_t *c, int fd, short ev, int kev)
{
    int changed = 0;

    lp_lock(c, LP_TX);
    if (c->state == LP_PAIRED && !(c->tx_never && !c->tx_ring)) {
        if (lp_rv_tx(c, fd, 0) == -EAGAIN)
            path_local_poll_slice_ms = 10;      /* the kernel takes the rest later */
        changed |= c->tx_never && !c->tx_ring;
    }
    lp_unlock(c, LP_TX);
    lp_lock(c, LP_RX);
    if (c->state == LP_PAIRED && !c->rx_plain && lp_rv_sibling(c, LP_RX)) {
        changed = 1;
    } else if (c->state == LP_PAIRED && !c->rx_plain) {
        uint64_t sw = local_pair_switch_get(&c->ch, lp_rxdir(c));

        if (c->rx_ring) {
            changed |= lp_rv_take_mark(c, fd) > 0;
        } else if (sw == LOCAL_PAIR_SWITCH_UNSET || sw == LOCAL_PAIR_SWITCH_NEVER) {
            local_pair_switch_refuse(&c->ch, lp_rxdir(c));
            if (local_pair_switch_get(&c->ch, lp_rxdir(c)) == LOCAL_PAIR_SWITCH_NEVER) {
                lp_rv_rx_done(c, fd);   /* the peer never sent into the ring */
                changed = 1;
            }
        }
    }
    lp_rv_check_done(c);
    lp_unlock(c, LP_RX);
    return changed || kev < 0 ? lp_kernel_revents(fd, ev) : kev;
}

short path_local_revents(shim_fd_t *f, int fd, short ev, int kev, int arm)
{
    lp_conn_t *c = lp_conn(f);
    short rev = 0, ein = ev & (POLLIN | POLLRDNORM), eout = ev & (POLLOUT | POLLWRNORM);
    int64_t rd, wr;
    int rc = 0;

    if (c->state == LP_PAIRED && (c->rv_seen || lp_rv(c)))
        kev = lp_rv_progress(c, fd, ev, kev);
    else if (c->rv_seen && kev < 0)
        kev = lp_kernel_revents(fd, ev);        /* its epoll registration may be stale */
    lp_rx_catch_up(c);
    if (c->pb_off < c->pb_len)
        rev |= ein;
    if (c->state != LP_PAIRED || !c->rx_ring) {
        /* Receiving in the kernel: its readiness is the truth, except for
         * doorbells beyond the switch point, which the next read drops
         * (they make at most one early wake-up). */
        rev |= kev < 0 ? 0 : (short)(kev & (ev | POLLHUP | POLLERR | POLLNVAL));
        if (c->state == LP_PAIRED && c->tx_ring) {
            rev &= ~(POLLOUT | POLLWRNORM);
            wr = lp_tx_room(c);
            if (eout && (wr > LP_ROOM_KEEP || wr < 0 || lp_peer_gone(c)))
                rev |= eout;
            else if (eout && arm &&
                     local_ring_tx_wait_prepare(&c->ch, lp_txdir(c),
                                                lp_tx_want(c, LOCAL_RING_CHUNK)) == 1)
                lp_armed_recheck(c);
        }
        return rev;
    }
    lp_lock(c, LP_RX);
    if (kev > 0 && (kev & POLLIN))
        lp_drain(c, fd);
    rd = local_ring_readable(&c->ch, lp_rxdir(c));
    if (rd == 0) {
        local_ring_frame_t fr;

        if (local_ring_frame_next(&c->ch, lp_rxdir(c), &fr) == 0 && fr.type == LOCAL_RING_REC_EOF)
            rev |= ein | (ev & POLLRDHUP);
    }
    if (rd < 0 || c->kern_err)
        rev |= POLLERR | POLLHUP | ein;
    else if (c->kern_eof)
        rev |= ein | (ev & POLLRDHUP) | POLLHUP;
    else if (rd >= (c->lowat > 0 ? c->lowat : 1) || (rd > 0 && c->rd_shut) || c->rd_shut)
        rev |= ein;
    if (ein && !(rev & ein) && arm) {
        if (rd == 0) {
            if (local_ring_rx_wait_prepare(&c->ch, lp_rxdir(c)) == 0 && c->lowat <= 1)
                rev |= ein;
        } else {
            /* Some bytes, fewer than SO_RCVLOWAT: the ring cannot ring at a
             * level, so the waiter looks again every few milliseconds. */
            path_local_poll_slice_ms = 5;
        }
    }
    lp_unlock(c, LP_RX);
    if (eout) {
        if (!c->tx_ring) {
            rev |= kev < 0 ? 0 : (short)(kev & eout);
        } else {
            wr = lp_tx_room(c);
            if (wr > LP_ROOM_KEEP || wr < 0 || lp_peer_gone(c))
                rev |= eout;
            else if (arm && (rc = local_ring_tx_wait_prepare(&c->ch, lp_txdir(c),
                                                             lp_tx_want(c, LOCAL_RING_CHUNK))) == 0)
                rev |= eout;
            else if (rc == 1)
                lp_armed_recheck(c);
        }
    }
    if (kev > 0)
        rev |= (short)(kev & (POLLERR | POLLNVAL));
    return rev;
}

int path_local_ioctl(shim_fd_t *f, int fd, unsigned long req, void *arg, int *rc)
{
    lp_conn_t *c = lp_conn(f);
    int64_t rd = 0;
    uint64_t sw;
    int k = 0;

    if (req != FIONREAD || !arg || (c->state != LP_PAIRED && c->pb_off >= c->pb_len))
        return 0;
    lp_lock(c, LP_RX);
    if (c->rx_plain) {
        if (zc_real.ioctl(fd, FIONREAD, &k) < 0) {
            lp_unlock(c, LP_RX);
            return 0;
        }
        k += c->pb_len - c->pb_off;
        lp_unlock(c, LP_RX);
        *(int *)arg = k;
        *rc = 0;
        return 1;
    }
    sw = local_pair_switch_get(&c->ch, lp_rxdir(c));
    if (!c->rx_ring) {
        /* Kernel bytes before the switch point are data, the rest doorbells. */
        if (zc_real.ioctl(fd, FIONREAD, &k) < 0) {
            lp_unlock(c, LP_RX);
            return 0;
        }
        if (sw != LOCAL_PAIR_SWITCH_UNSET && sw != LOCAL_PAIR_SWITCH_NEVER &&
            (uint64_t)k > sw - c->rx_kernel)
            k = (int)(sw - c->rx_kernel);
    }
    if (c->rx_ring || (sw != LOCAL_PAIR_SWITCH_UNSET && sw != LOCAL_PAIR_SWITCH_NEVER &&
                       c->rx_kernel + (uint64_t)k == sw))
        rd = local_ring_readable(&c->ch, lp_rxdir(c));
    lp_unlock(c, LP_RX);
    rd = rd < 0 ? 0 : rd + k;
    *(int *)arg = rd > INT32_MAX ? INT32_MAX : (int)rd;
    *rc = 0;
    return 1;
}

void path_local_settings_changed(shim_fd_t *f)
{
    __atomic_add_fetch(&lp_conn(f)->lgen, 1, __ATOMIC_ACQ_REL);
}

void path_local_setsockopt(shim_fd_t *f, int fd, int level, int name, const void *val,
                           socklen_t len)
{
    lp_conn_t *c = lp_conn(f);

    path_local_settings_changed(f);
    if (!val)
        return;
    if (level == IPPROTO_TCP && name == TCP_NODELAY && len >= sizeof(int)) {
        c->app_nodelay = *(const int *)val != 0;
        if (c->bell_push && !c->app_nodelay)    /* the doorbells still need it */
            zc_real.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
        return;
    }
    if (level != SOL_SOCKET)
        return;
    if ((name == SO_PASSCRED || name == SO_PASSSEC) && f->family == AF_UNIX &&
        len >= sizeof(int) && *(const int *)val)
        lp_revert(c, fd, name == SO_PASSCRED ? "SO_PASSCRED" : "SO_PASSSEC");
    else if (name == SO_RCVLOWAT && len >= sizeof(int))
        c->lowat = *(const int *)val;
    else if ((name == SO_SNDBUF || name == SO_SNDBUFFORCE) && len >= sizeof(int)) {
        int v = *(const int *)val;

        v = v > INT_MAX / 2 ? INT_MAX : 2 * v;   /* what the kernel makes of it */
        c->sndcap = (uint32_t)(v < 4608 ? 4608 : v);
    }
    else if (name == SO_LINGER && len >= sizeof(struct linger))
        c->linger0 = ((const struct linger *)val)->l_onoff &&
                     !((const struct linger *)val)->l_linger;
}

/* --- exec: handing connections to the next image ------------------------------------ */

#define LP_INHERIT_VAR "ZCSOCK_INHERIT="

enum {
    LP_F_TX_RING = 1, LP_F_RX_RING = 2, LP_F_TX_NEVER = 4, LP_F_WR_SHUT = 8,
    LP_F_RD_SHUT = 16, LP_F_KERN_SHUT_WR = 32, LP_F_KERN_EOF = 64, LP_F_RX_PLAIN = 128,
};

static unsigned lp_flags(const lp_conn_t *c)
{
    return (c->tx_ring ? LP_F_TX_RING : 0) | (c->rx_ring ? LP_F_RX_RING : 0) |
           (c->tx_never ? LP_F_TX_NEVER : 0) | (c->wr_shut ? LP_F_WR_SHUT : 0) |
           (c->rd_shut ? LP_F_RD_SHUT : 0) | (c->kern_shut_wr ? LP_F_KERN_SHUT_WR : 0) |
           (c->kern_eof ? LP_F_KERN_EOF : 0) | (c->rx_plain ? LP_F_RX_PLAIN : 0);
}

static int lp_env_loads_us(char *const *envp)
{
    size_t i;

    for (i = 0; envp && envp[i]; i++)
        if (!strncmp(envp[i], "LD_PRELOAD=", 11) && strstr(envp[i], "libzcsock"))
            return 1;
    return 0;
}

#define LP_EXEC_FDS 256
#define LP_INHERIT_FDS 8        /* descriptors per connection in ZCSOCK_INHERIT */

/* The socket descriptors that survive an exec (no FD_CLOEXEC), from the
 * kernel's table: a vfork child's is not the one the state table describes
 * (Python's subprocess dup2()s and closes descriptors there). */
typedef struct lp_exec_fds {
    int n;
    int fds[LP_EXEC_FDS];
    uint64_t cookies[LP_EXEC_FDS];
} lp_exec_fds_t;

static int lp_exec_scan_fn(int dirfd, long fd, void *arg)
{
    lp_exec_fds_t *x = arg;
    int fl = zc_real.fcntl((int)fd, F_GETFD, 0);

    (void)dirfd;
    if (fl >= 0 && !(fl & FD_CLOEXEC) &&
        !zc_real.getsockopt((int)fd, SOL_SOCKET, SO_COOKIE, &x->cookies[x->n],
                            &(socklen_t){ sizeof(uint64_t) }))
        x->fds[x->n++] = (int)fd;
    return x->n == LP_EXEC_FDS;
}

char *const *path_local_exec_env(const char *image, int search, int image_fd,
                                 char *const *envp, char **vec, size_t vec_n, char *buf,
                                 size_t bufsz)
{
    size_t len, n = 0, i;
    int loads, handed = 0, j, saved = errno, vforked;
    lp_exec_fds_t x = { 0 };
    lp_conn_t *c;

    if (!__atomic_load_n(&lp.head, __ATOMIC_ACQUIRE))
        return envp;
    shim_proc_each_num("/proc/self/fd", lp_exec_scan_fn, &x);
    loads = x.n && lp_env_loads_us(envp) &&
            shim_exec_image_preloads(image, search, image_fd) != 0;
    vforked = shim_vfork_child();
    for (c = lp.head; c; c = c->next)
        c->vfork_held = 0;
    len = (size_t)zc_fmt(buf, bufsz, "%s", LP_INHERIT_VAR);
    for (c = lp.head; c; c = c->next) {
        size_t start = len;
        unsigned flags;
        int kept = 0;

        if (c->state != LP_PAIRED || c->memfd < 0)
            continue;
        /* One entry per connection, with every descriptor that survives. */
        for (j = 0; j < x.n; j++) {
            int fd = x.fds[j];

            if (x.cookies[j] != c->cookie)
                continue;
            if (!loads || len + 200 > bufsz || kept == LP_INHERIT_FDS) {
                /* The next image reads the kernel socket itself: the
                 * connection goes back to the kernel first (HAND-BACK). */
                lp_revert(c, fd, loads ? "exec, too many connections to describe"
                                       : "exec of a program that will not load libzcsock");
                break;
            }
            len += zc_fmt(buf + len, bufsz - len, "%s%d", kept ? "," : "", fd);
            kept++;
        }
        if (!kept || c->state != LP_PAIRED) {
            len = start;
            continue;
        }
        flags = lp_flags(c);
        len += zc_fmt(buf + len, bufsz - len, ":%d:%d:%x:%llx:%llx:%llx:%llx;", c->memfd,
                      c->ch.side, flags, (unsigned long long)c->tx_kernel,
                      (unsigned long long)c->rx_kernel, (unsigned long long)c->bells_drained,
                      (unsigned long long)c->ch.bells_claimed);
        zc_real.fcntl(c->memfd, F_SETFD, 0);
        if (vforked) {
            /* No fork hook counted this child: the next image is a holder. */
            lp_holders_add(c, 1);
            c->vfork_held = 1;
        }
        handed++;
    }
    errno = saved;
    if (!handed)
        return envp;
    for (i = 0; envp && envp[i] && n + 2 < vec_n; i++)
        if (strncmp(envp[i], LP_INHERIT_VAR, sizeof(LP_INHERIT_VAR) - 1))
            vec[n++] = envp[i];
    vec[n++] = buf;
    vec[n] = NULL;
    return vec;
}

void path_local_exec_failed(void)
{
    lp_conn_t *c;
    int saved = errno;

    for (c = lp.head; c; c = c->next) {
        if (c->memfd >= 0)
            zc_real.fcntl(c->memfd, F_SETFD, FD_CLOEXEC);
        if (c->vfork_held && c->ch.base)
            lp_holders_add(c, -1);
        c->vfork_held = 0;
    }
    errno = saved;
}

static uint64_t lp_hex(const char **p)
{
    uint64_t v = 0;

    for (; **p && **p != ':' && **p != ';'; (*p)++) {
        char ch = **p;

        v = v * 16 + (uint64_t)(ch >= 'a' ? ch - 'a' + 10 : ch >= 'A' ? ch - 'A' + 10 : ch - '0');
    }
    if (**p == ':')
        (*p)++;
    return v;
}

static int64_t lp_dec(const char **p)
{
    int64_t v = 0;
    int neg = **p == '-';

    for (*p += neg; **p >= '0' && **p <= '9'; (*p)++)
        v = v * 10 + (**p - '0');
    if (**p == ':')
        (*p)++;
    return neg ? -v : v;
}

/* One handed-over connection: its descriptors, channel memfd and state. */
static void lp_inherit_one(const int *fds, int nfds, int memfd, int side, unsigned flags,
                           const uint64_t v[4])
{
    struct stat st;
    lp_conn_t *c;
    int family = 0, fd = fds[0], i;

    if (fstat(fd, &st) || !S_ISSOCK(st.st_mode) ||
        zc_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &(socklen_t){ sizeof(int) })) {
        local_pair_fd_close(memfd);
        return;
    }
    c = lp_conn_new(LP_PAIRED);
    if (!c || local_ring_adopt(memfd, side, &c->ch)) {
        if (c)
            lp_conn_free(c);
        local_pair_fd_close(memfd);
        return;
    }
    c->memfd = lp_fd_keep(c, memfd);
    zc_real.fcntl(c->memfd, F_SETFD, FD_CLOEXEC);
    c->tx_ring = !!(flags & LP_F_TX_RING);
    c->rx_ring = !!(flags & LP_F_RX_RING);
    c->tx_never = !!(flags & LP_F_TX_NEVER);
    c->wr_shut = !!(flags & LP_F_WR_SHUT);
    c->rd_shut = !!(flags & LP_F_RD_SHUT);
    c->kern_shut_wr = !!(flags & LP_F_KERN_SHUT_WR);
    c->kern_eof = !!(flags & LP_F_KERN_EOF);
    c->rx_plain = !!(flags & LP_F_RX_PLAIN);
    c->rv_seen = (uint8_t)lp_rv(c);
    c->ch.quiet = c->rv_seen;
    c->tx_kernel = v[0];
    c->rx_kernel = v[1];
    c->bells_drained = v[2];
    c->ch.bells_claimed = v[3];
    for (i = 0; i < nfds; i++) {
        if (i && (fstat(fds[i], &st) || !S_ISSOCK(st.st_mode)))
            continue;
        shim_fd_socket_track(fds[i], family, SOCK_STREAM);
        if (i)
            c->refs++;
        lp_claim(fds[i], c);
    }
    zc_stat_add(ZC_STAT_LOCAL_INHERITED, 1);
}

void path_local_inherit(void)
{
    extern char **environ;
    const char *p = NULL;
    size_t i;

    for (i = 0; environ && environ[i]; i++)
        if (!strncmp(environ[i], LP_INHERIT_VAR, sizeof(LP_INHERIT_VAR) - 1)) {
            p = environ[i] + sizeof(LP_INHERIT_VAR) - 1;
            break;
        }
    if (!p)
        return;
    while (*p) {
        int fds[LP_INHERIT_FDS], nfds = 0, memfd, side, k, ok = 1;
        unsigned flags;
        uint64_t v[4];

        do {
            int fd = (int)lp_dec(&p);

            if (nfds < LP_INHERIT_FDS)
                fds[nfds++] = fd;
        } while (*p == ',' && p++);
        if (*p == ':')
            p++;
        memfd = (int)lp_dec(&p);
        side = (int)lp_dec(&p);
        flags = (unsigned)lp_hex(&p);
        for (k = 0; k < 4; k++)
            v[k] = lp_hex(&p);
        if (*p != ';')
            break;
        p++;
        /* the entries were written by our previous image: still check them */
        for (k = 0; k < nfds; k++)
            ok &= fds[k] >= 0 && fds[k] != memfd;
        if (ok && memfd >= 0 && lp.enabled)
            lp_inherit_one(fds, nfds, memfd, side, flags, v);
        else if (memfd >= 0)
            local_pair_fd_close(memfd);
    }
    /* The application's environment is its own again. */
    for (; environ[i]; i++)
        environ[i] = environ[i + 1];
}

int path_local_getsockopt(shim_fd_t *f, int level, int name, void *val, socklen_t *len)
{
    lp_conn_t *c = lp_conn(f);

    if (level != IPPROTO_TCP || name != TCP_NODELAY || !c->bell_push || !val || !len ||
        *len < sizeof(int))
        return 0;
    *(int *)val = c->app_nodelay;
    *len = sizeof(int);
    return 1;
}

/* --- SCM_RIGHTS hand-over (the mailbox itself is in path_local_scm.c) ------------- */

int path_local_handover_prepare(shim_fd_t *f, int fd, path_local_handover_t *h, int *memfd_p)
{
    lp_conn_t *c = lp_conn(f);
    socklen_t l = sizeof(h->cookie);

    if (c->state != LP_PAIRED || c->memfd < 0 ||
        zc_real.getsockopt(fd, SOL_SOCKET, SO_COOKIE, &h->cookie, &l))
        return -EINVAL;
    h->side = (uint32_t)c->ch.side;
    h->flags = lp_flags(c);
    h->tx_kernel = c->tx_kernel;
    h->rx_kernel = c->rx_kernel;
    h->bells_drained = c->bells_drained;
    h->bells_claimed = c->ch.bells_claimed;
    *memfd_p = c->memfd;
    return 0;
}

void path_local_hand_back(shim_fd_t *f, int fd, const char *why)
{
    lp_revert(lp_conn(f), fd, why);
}

void path_local_handover_posted(shim_fd_t *f)
{
    lp_holders_add(lp_conn(f), 1);
}

void path_local_handover_adopt(int fd, const path_local_handover_t *h, int memfd)
{
    uint64_t v[4] = { h->tx_kernel, h->rx_kernel, h->bells_drained, h->bells_claimed };
    shim_fd_t *f = shim_fd_get(fd);

    if (path_local_claimed(f))
        lp_forget(f, fd);   /* a number reused behind our back */
    lp_inherit_one(&fd, 1, memfd, (int)h->side, h->flags, v);
}

/* --- fork, statistics, configuration ------------------------------------------ */

/* The child holds every connection as soon as it exists: count it before
 * the fork (a parent closing right after fork must not be "the last"), and
 * take it back when the fork failed. */
void path_local_fork_hold(int delta)
{
    lp_conn_t *c;

    lp_list_lock();
    for (c = lp.head; c; c = c->next)
        if (c->ch.base)
            lp_holders_add(c, delta);
    lp_list_unlock();
}

void path_local_fork_prepare(void)
{
    lp_list_lock();
}

void path_local_fork_parent(void)
{
    lp_list_unlock();
}

void path_local_fork_child(void)
{
    lp_conn_t *c;

    lp_tid = 0;
    for (c = lp.head; c; c = c->next)
        if (c->state == LP_PENDING)
            c->forked = 1;
    lp_list_unlock();
    path_local_mbox_fork_child();
}

static void lp_stats_visit(void *arg, zc_stats_emit_func_t emit, void *ctx)
{
    char key[64];
    int r;

    (void)arg;
    for (r = 1; r < LOCAL_PAIR_R_COUNT; r++) {
        uint64_t v = __atomic_load_n(&lp.declined[r], __ATOMIC_RELAXED);

        if (!v)
            continue;
        zc_fmt(key, sizeof(key), "local.declined.%s", local_pair_reason_name(r));
        emit(ctx, key, v);
    }
}

static const zc_stats_source_t lp_stats_source = { lp_stats_visit, NULL };

void path_local_init(void)
{
    lp.enabled = (int)zc_config.local;
    lp.spin_us = (unsigned)zc_config.spin_us;
    lp.ring_size = (size_t)zc_config.local_ring;
    if (lp.ring_size & (lp.ring_size - 1)) {
        zc_log(ZC_LOG_WARN, "ZCSOCK_LOCAL_RING=%zu is not a power of two; using the default",
               lp.ring_size);
        lp.ring_size = 0;
    }
    zc_stats_source_add(&lp_stats_source);
}
