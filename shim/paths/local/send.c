/* The local path: sending, and sendfile/splice through a bounce buffer. */
#include "lp_int.h"
#include "send.h"
#include "bell.h"
#include "handback.h"
#include "life.h"
#include "pairing.h"
#include "recv.h"
#include "xchg.h"
#include "shim_mem.h"
#include "zc_sys.h"

/* Pending client: look for the server's offer without waiting. */
void lp_pickup(lp_conn_t *c, int fd)
{
    if (c->state != LP_PENDING || c->pair.ann < 0)
        return;
    /* Look at the 1st, 2nd, 4th, 8th ... send: a client that streams
     * before the server accepted finds the offer soon, one that never gets
     * one pays a logarithmic number of lookups.  A server that defers its
     * offer (ZCSOCK_LOCAL_PAIR_AFTER) makes it once the bytes moved say the
     * connection pays, which both ends count alike: from there the count
     * starts again (an AF_UNIX stream of 1-byte sends, announced at its
     * connect, was offered at its 262,144th send and looked next at its
     * 524,288th, while the server peeked at every receive meanwhile). */
    if (zc_config.local_pair_after && !c->pair.pickup_rebased && lp_pays_bytes(c, 0)) {
        c->pair.pickup_rebased = 1;
        c->pair.pickups = 0;
    }
    c->pair.pickups++;
    if ((c->pair.pickups & (c->pair.pickups - 1)) && !__atomic_load_n(&c->pair.pickup_owed, __ATOMIC_RELAXED))
        return;
    lp_pickup_try(c, fd, 0);
}

/* A send after shutdown(SHUT_WR): what the kernel answers. */
ssize_t lp_epipe(int flags)
{
    if (!(flags & MSG_NOSIGNAL))
        zc_syscall(SYS_tgkill, zc_getpid(), lp_gettid(), SIGPIPE);
    return -EPIPE;
}

ssize_t lp_send_kernel(shim_fd_t *f, int fd, const struct msghdr *msg, int flags,
                              lp_conn_t *c)
{
    ssize_t n;

    if (c && !c->hb.linger_dropped && lp_peer_lingers(c))
        lp_linger_drop(c);      /* its socket closes: the kernel resets our send */
    n = shim_kernel_sendmsg(fd, msg, flags);
    shim_copy_account(f, 1, n, 1);
    if (n > 0 && c)
        __atomic_add_fetch(&c->tx_kernel, (uint64_t)n, __ATOMIC_RELAXED);
    return n < 0 ? -errno : n;
}

/* Before the ring: the kernel's cases (plain, urgent data, not switched,
 * ancillary data on AF_UNIX), the pickup, a hand-back's leftovers.  Returns
 * the call's result, or LP_CONTINUE with the TX lock held and our sending
 * direction in the ring. */
static ssize_t lp_tx_begin(lp_conn_t *c, shim_fd_t *f, int fd, const struct msghdr *msg,
                           int flags)
{
    ssize_t n;

    lp_turn(c, 1);
    while (c->state == LP_OFFER &&
           lp_offer_wait(c, fd, 1, lp_iov_total(msg->msg_iov, msg->msg_iovlen))) {
        if (!lp_kio_enter(c))
            continue;
        n = lp_send_kernel(f, fd, msg, flags, c);   /* the offer waits, counted */
        lp_kio_exit(c);
        return n;
    }
    if (c->state == LP_DEFER)
        lp_ann_due(c, fd, 1, lp_iov_total(msg->msg_iov, msg->msg_iovlen));
    if (c->state == LP_OFFER && lp_offer_due(c, fd))
        return lp_send_kernel(f, fd, msg, flags, NULL);     /* the copy path now */
    if ((flags & MSG_OOB) && c->state != LP_PLAIN)
        lp_release_to_kernel(c, fd, "MSG_OOB");     /* urgent data only the kernel carries */
    if (c->state == LP_PLAIN) {
        n = lp_send_kernel(f, fd, msg, flags, NULL);
        if (c->why)     /* declined for good: the copy path from now on */
            lp_unclaim_plain(c, fd);
        return n;
    }
    lp_lock(c, LP_TX);
    lp_connect_check(c, fd);
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
    if (c->wr_shut && lp_tx_ring(c)) {
        lp_unlock(c, LP_TX);
        return lp_epipe(flags);
    }
    if (!lp_tx_switch(c)) {
        n = lp_send_kernel(f, fd, msg, flags, c);
        if (c->state == LP_PENDING && __atomic_load_n(&c->pair.pickup_owed, __ATOMIC_RELAXED))
            lp_pickup(c, fd);   /* owed while this send held TX (lp_pickup_try) */
        lp_unlock(c, LP_TX);
        return n;
    }
    if (msg->msg_controllen && f->family == AF_UNIX) {
        /* Descriptors and credentials travel with kernel bytes only. */
        lp_unlock(c, LP_TX);
        lp_revert(c, fd, "ancillary data");
        return lp_sendmsg(f, fd, msg, flags);
    }
    return LP_CONTINUE;
}

/* One send call's state. */
typedef struct lp_tx {
    const struct msghdr *msg;
    int flags;
    size_t total, sent;
    int64_t t0_us;          /* timed (a large send that may lend): its start */
    int64_t xchg_us;        /* of which lending and waiting for lent bytes */
    size_t lent;            /* bytes lent (the rest went through the ring) */
    lp_wait_t w;
} lp_tx_t;

/* The ring is full: wait for space (blocking), or stop (non-blocking, armed
 * so poll sees the space).  TX lock held; LP_CONTINUE returns with it held,
 * anything else without. */
static ssize_t lp_tx_full(lp_conn_t *c, int fd, lp_tx_t *t)
{
    int nonblock = lp_nonblocking(c, fd, t->flags), rc;
    size_t left = t->total - t->sent;

    if (t->sent && nonblock) {
        lp_unlock(c, LP_TX);
        return (ssize_t)t->sent;
    }
    lp_ring_others(c);
    rc = local_ring_tx_wait_prepare_kind(&c->ch, lp_txdir(c),
                                         lp_tx_want(c, left < LOCAL_RING_CHUNK
                                                           ? left + LP_ROOM_KEEP
                                                           : LOCAL_RING_CHUNK),
                                         nonblock ? LOCAL_RING_WAIT_SOCKET
                                         : lp_alone(c) ? LOCAL_RING_WAIT_FUTEX
                                                       : LOCAL_RING_WAIT_FUTEX_JOIN);
    if (rc == 1 && lp_rv(c)) {      /* re-checked after announcing (HAND-BACK 4) */
        local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
        return LP_CONTINUE;
    }
    if (rc == 0)
        return LP_CONTINUE;
    lp_unlock(c, LP_TX);
    if (rc < 0)
        return t->sent ? (ssize_t)t->sent : lp_broken(c);
    if (nonblock)
        return t->sent ? (ssize_t)t->sent : -EAGAIN;
    rc = lp_sleep(c, fd, LP_TX, &t->w);
    /* a poll/epoll waiter's announcement beside ours stays */
    local_ring_tx_wait_cancel_futex(&c->ch, lp_txdir(c));
    if (rc < 0)
        return t->sent ? (ssize_t)t->sent : rc;
    lp_lock(c, LP_TX);
    return LP_CONTINUE;
}

/* A blocking send whose next units are over the send budget (lent bytes the
 * receiver has not read): wait for the receiver, in naps (its consumption
 * rings no bell for this), within the socket's timeout and letting signal
 * handlers interrupt as a blocked send would, and looking at the kernel
 * socket for the end of a peer that died.  TX lock held; LP_CONTINUE
 * returns with it held, anything else without. */
static ssize_t lp_xchg_over(lp_conn_t *c, int fd, lp_tx_t *t)
{
    int64_t t0 = t->t0_us ? zc_now_us() : 0;
    long ms;

    lp_unlock(c, LP_TX);
    ms = lp_slice_ms(c, fd, LP_TX, &t->w);
    if (ms < 0)
        return t->sent ? (ssize_t)t->sent : ms;
    if (lp_sig_interrupts(&t->w))
        return t->sent ? (ssize_t)t->sent : -EINTR;
    zc_stat_add(ZC_STAT_LOCAL_XCHG_BUDGET_WAITS, 1);
    zc_syscall(SYS_nanosleep, &(struct timespec){ 0, LP_XCHG_NAP_US * 1000L }, NULL);
    /* a peer that died reads nothing more: its FIN or reset says so (the
     * next step then answers as the kernel does) */
    lp_kernel_look(c, fd, LP_TX);
    if (t0)
        t->xchg_us += zc_now_us() - t0;
    lp_lock(c, LP_TX);
    return LP_CONTINUE;
}

/* One pass of the ring send loop.  TX lock held; LP_CONTINUE returns with
 * it held, anything else without. */
static ssize_t lp_tx_step(lp_conn_t *c, shim_fd_t *f, int fd, lp_tx_t *t)
{
    struct iovec win[LP_IOV_WIN];
    size_t done = 0, lim;
    int64_t room;
    int k, rc;

    if (lp_rv(c) || lp_peer_gone(c)) {
        /* handed back meanwhile: start again on the kernel; the peer is
         * gone: the kernel answers (EPIPE, SIGPIPE) */
        int rv = lp_rv(c);

        lp_unlock(c, LP_TX);
        if (t->sent)
            return (ssize_t)t->sent;
        if (rv)
            return lp_sendmsg(f, fd, t->msg, t->flags);
        /* A lingering socket of the peer's goes first, so the kernel answers
         * as to a closed peer (a reset); sending into it instead filled it,
         * nobody reading, and a blocking send hung for ever. */
        if (!c->hb.linger_dropped && lp_peer_lingers(c))
            lp_linger_drop(c);
        return lp_send_kernel(f, fd, t->msg, t->flags, NULL);
    }
    room = lp_tx_room(c, t->total - t->sent + LP_ROOM_KEEP);
    if (room < 0) {
        lp_unlock(c, LP_TX);
        return t->sent ? (ssize_t)t->sent : lp_broken(c);
    }
    if (room <= LP_ROOM_KEEP)
        return lp_tx_full(c, fd, t);
    lim = (size_t)(room - LP_ROOM_KEEP);
    if (zc_config.exchange && !t->sent && t->total >= LP_XCHG_SMALL && t->total < LP_XCHG_MIN)
        lp_xchg_small(c);
    if (zc_config.exchange && t->total - t->sent >= LP_XCHG_MIN) {
        int over;
        int64_t x0 = t->t0_us ? zc_now_us() : 0;
        ssize_t x = lp_xchg_send(c, t->msg, t->sent, &lim, &rc, &over);

        if (x0)
            t->xchg_us += zc_now_us() - x0;

        if (x < 0) {
            lp_unlock(c, LP_TX);
            return t->sent ? (ssize_t)t->sent : lp_broken(c);
        }
        if (!x && over && !lp_nonblocking(c, fd, t->flags))
            return lp_xchg_over(c, fd, t);
        if (x > 0) {
            lp_wake(c, fd, rc, local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS));
            t->lent += (size_t)x;
            t->sent += (size_t)x;
            zc_stat_add(ZC_STAT_LOCAL_SEND_BYTES, (uint64_t)x);
            if (t->sent == t->total) {
                lp_unlock(c, LP_TX);
                return (ssize_t)t->sent;
            }
            return LP_CONTINUE;
        }
    }
    k = lp_iov_window(t->msg->msg_iov, t->msg->msg_iovlen, t->sent, lim, win);
    rc = local_ring_write(&c->ch, lp_txdir(c), win, k, &done);
    c->ch.hot = 0;          /* until we read again: a stream keeps walking the ring */
    if (rc < 0) {
        lp_unlock(c, LP_TX);
        return t->sent ? (ssize_t)t->sent : lp_broken(c);
    }
    lp_wake(c, fd, rc, local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS));
    if (!(rc & (LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX | LOCAL_RING_F_EVENTFD)))
        zc_stat_add(ZC_STAT_LOCAL_WAKES_AVOIDED, 1);   /* the peer was not waiting */
    t->sent += done;
    zc_stat_add(ZC_STAT_LOCAL_SEND_BYTES, done);
    if (t->sent == t->total) {
        lp_unlock(c, LP_TX);
        return (ssize_t)t->sent;
    }
    return done ? LP_CONTINUE : lp_tx_full(c, fd, t);
}

ssize_t lp_sendmsg(shim_fd_t *f, int fd, const struct msghdr *msg, int flags)
{
    lp_conn_t *c = lp_conn(f);
    lp_tx_t t = { .msg = msg, .flags = flags, .w = LP_WAIT_INIT };
    ssize_t n = lp_msg_check(msg);

    if (n)
        return n;
    t.total = lp_iov_total(msg->msg_iov, msg->msg_iovlen);
    n = lp_tx_begin(c, f, fd, msg, flags);
    if (n != LP_CONTINUE)
        return n;
    zc_stat_add(ZC_STAT_LOCAL_SEND_CALLS, 1);
    /* the ring's part of a large send says what renting a unit costs
     * (common/zc_rent.h): timed while the connection may lend, once its
     * ring has been written all over (a first pass faults the ring's pages
     * in: 7 ms of CPU for 4 MiB seen here, against 0.14 ms warm, which
     * made every unit look cheap to buy) */
    t.t0_us = zc_config.exchange && !c->x.off && t.total >= LP_XCHG_MIN &&
                      local_ring_head_pos(&c->ch, lp_txdir(c)) >= c->ch.ring_size
                  ? zc_now_us()
                  : 0;
    do
        n = lp_tx_step(c, f, fd, &t);
    while (n == LP_CONTINUE);
    if (t.t0_us && n > 0 && (size_t)n - t.lent >= LP_XCHG_MIN)
        shim_mem_ops.xu_ring_paid((uint64_t)n - t.lent,
                          (uint64_t)(zc_now_us() - t.t0_us - t.xchg_us) * 1000);
    return n;
}

/* --- sendfile and splice: through a bounce buffer and the ring ------------------ */

#define LP_BOUNCE (64u << 10)

/* Room a send can take without waiting (or everything for a blocking one). */
size_t lp_send_room(lp_conn_t *c, int fd, int flags, size_t want)
{
    int64_t room;

    if (!lp_tx_ring(c) || !lp_nonblocking(c, fd, flags))
        return want;
    room = lp_tx_room(c, want + LP_ROOM_KEEP) - LP_ROOM_KEEP;
    if (room <= 0)
        return 1;       /* the send reports EAGAIN before anything is read */
    return (size_t)room < want ? (size_t)room : want;
}

ssize_t path_local_sendfile(shim_fd_t *f, int out_fd, int in_fd, off_t *offset, size_t count)
{
    lp_conn_t *c = lp_conn(f);
    struct stat st;
    char *buf;
    size_t total = 0;
    ssize_t rc = 0;

    /* what the kernel cannot splice from (a pipe, a socket) it refuses;
     * a read would take the bytes */
    if (fstat(in_fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
        return -EINVAL;
    lp_turn(c, 1);
    if (c->state == LP_DEFER)
        lp_ann_due(c, out_fd, 1, count);
    while (c->state == LP_OFFER && lp_offer_wait(c, out_fd, 1, count)) {
        if (!lp_kio_enter(c))
            continue;
        rc = zc_real.sendfile(out_fd, in_fd, offset, count);    /* the offer waits */
        shim_copy_account(f, 1, rc, 0);
        if (rc > 0)
            __atomic_add_fetch(&c->tx_kernel, (uint64_t)rc, __ATOMIC_RELAXED);
        lp_kio_exit(c);
        return rc < 0 ? -errno : rc;
    }
    if ((c->state == LP_OFFER && lp_offer_due(c, out_fd)) || c->state == LP_PLAIN) {
        rc = zc_real.sendfile(out_fd, in_fd, offset, count);    /* the kernel's */
        shim_copy_account(f, 1, rc, 0);
        return rc < 0 ? -errno : rc;
    }
    buf = zc_pool_alloc(LP_BOUNCE);
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

/* Wait until fd (not a claimed socket: a pipe or a file) is ready for ev,
 * as the kernel's splice waits.  0, or -EINTR. */
static int lp_splice_wait(int fd, short ev)
{
    int rc = zc_real.poll(&(struct pollfd){ fd, ev, 0 }, 1, -1);

    return rc < 0 && errno == EINTR ? -EINTR : 0;
}

/* A pipe's bytes copied into buf without consuming them (tee into a
 * short-lived private pipe, read back): what the send does not take must
 * stay in the application's pipe, as with the kernel's splice.  Waits for
 * data unless nonblocking.  Returns bytes, 0 at EOF, or -errno. */
static ssize_t lp_pipe_peek(int fd_in, char *buf, size_t len, int nonblocking)
{
    int pp[2];
    ssize_t t;

    if (zc_syscall(SYS_pipe2, pp, O_CLOEXEC) < 0)
        return -errno;
    for (;;) {
        t = zc_syscall(SYS_tee, fd_in, pp[1], len, SPLICE_F_NONBLOCK);
        if (t >= 0 || errno != EAGAIN || nonblocking)
            break;
        if ((t = lp_splice_wait(fd_in, POLLIN)) < 0) {
            errno = EINTR;
            break;
        }
    }
    if (t > 0)
        t = zc_real.read(pp[0], buf, (size_t)t);
    if (t < 0)
        t = -errno;
    zc_real.close(pp[0]);
    zc_real.close(pp[1]);
    return t;
}

/* Without a peek: how much a pipe may give up now, so that the send takes
 * all of it.  Waits (1 ms naps, interruptible) for ring room unless
 * nonblocking; a connection not (or no longer) in the ring takes len.
 * 0 with *len set, or -EAGAIN / -EINTR. */
static int lp_splice_room(lp_conn_t *c, int nonblocking, size_t *len)
{
    int64_t room = 0;

    while (lp_tx_ring(c) && !lp_peer_gone(c) && (room = lp_tx_room(c, *len + LP_ROOM_KEEP) - LP_ROOM_KEEP) <= 0) {
        if (nonblocking)
            return -EAGAIN;
        if (nanosleep(&(struct timespec){ 0, 1000000 }, NULL) < 0)
            return -EINTR;
    }
    if (lp_tx_ring(c) && !lp_peer_gone(c) && (size_t)room < *len)
        *len = (size_t)room;
    return 0;
}

/* Pipe or file to a claimed socket: only what the send took leaves the
 * input (a file is read at its offset or seeked back, a pipe peeked and
 * then consumed by exactly that much). */
static ssize_t lp_splice_to_sock(shim_fd_t *fo, int fd_in, loff_t *off_in, int fd_out, size_t len,
                                 int sflags, char *buf)
{
    struct stat st;
    int pipe_in = fstat(fd_in, &st) == 0 && S_ISFIFO(st.st_mode), peeked = 0;
    ssize_t r, w;

    if (pipe_in && off_in)
        return -ESPIPE;
    if (pipe_in) {
        int nb = (sflags & MSG_DONTWAIT) || lp_nonblocking(lp_conn(fo), fd_out, 0);

        r = lp_pipe_peek(fd_in, buf, len, nb);
        peeked = r > 0;
        if (r == -EMFILE || r == -ENFILE) {
            /* no descriptor for the peek: read only what the ring takes at
             * once, after waiting for room as a send would */
            if ((r = lp_splice_room(lp_conn(fo), nb, &len)) == 0 &&
                (r = zc_real.read(fd_in, buf, len)) < 0)
                r = -errno;
        }
    } else if ((r = off_in ? pread(fd_in, buf, len, *off_in) : zc_real.read(fd_in, buf, len)) < 0) {
        r = -errno;
    }
    if (r <= 0)
        return r;
    w = lp_sendmsg(fo, fd_out, &(struct msghdr){ .msg_iov = &(struct iovec){ buf, (size_t)r },
                                                .msg_iovlen = 1 }, sflags);
    if (peeked && w > 0)
        zc_real.read(fd_in, buf, (size_t)w);    /* what went out, and only that */
    else if (!pipe_in && off_in && w > 0)
        *off_in += w;
    else if (!pipe_in && !off_in && w < r)
        lseek(fd_in, (off_t)(w < 0 ? 0 : w) - r, SEEK_CUR);
    return w;
}

/* A claimed socket to a pipe or file: never take more than the pipe holds
 * (waiting for room as the kernel does, unless nonblocking). */
static ssize_t lp_splice_from_sock(shim_fd_t *fi, int fd_in, int fd_out, loff_t *off_out,
                                   size_t len, int sflags, char *buf)
{
    int cap = zc_real.fcntl(fd_out, F_GETPIPE_SZ, 0), used = 0;
    ssize_t r, w;

    while (cap > 0 && zc_real.ioctl(fd_out, FIONREAD, &used) == 0 && used >= cap) {
        if ((sflags & MSG_DONTWAIT) || lp_nonblocking(lp_conn(fi), fd_in, 0))
            return -EAGAIN;
        if (lp_splice_wait(fd_out, POLLOUT) < 0)
            return -EINTR;
    }
    if (cap > 0 && (size_t)(cap - used) < len)
        len = (size_t)(cap - used);
    r = lp_recvmsg(fi, fd_in, &(struct msghdr){ .msg_iov = &(struct iovec){ buf, len },
                                               .msg_iovlen = 1 }, sflags);
    if (r <= 0)
        return r;
    w = off_out ? pwrite(fd_out, buf, (size_t)r, *off_out) : zc_real.write(fd_out, buf, (size_t)r);
    if (w < 0)
        return -errno;
    if (off_out)
        *off_out += w;
    return w;
}

ssize_t path_local_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                          unsigned flags)
{
    shim_fd_t *fi = shim_fd_get(fd_in), *fo = shim_fd_get(fd_out);
    int sflags = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
    char *buf;
    ssize_t n;

    if ((off_out && lp_claimed(fo)) || (off_in && lp_claimed(fi)))
        return -ESPIPE;
    if (len > LP_BOUNCE)
        len = LP_BOUNCE;
    buf = zc_pool_alloc(LP_BOUNCE);
    if (!buf)
        return -ENOMEM;
    if (lp_claimed(fi))
        n = lp_splice_from_sock(fi, fd_in, fd_out, off_out, len, sflags, buf);
    else
        n = lp_splice_to_sock(fo, fd_in, off_in, fd_out, len, sflags, buf);
    zc_pool_free(buf, LP_BOUNCE);
    return n;
}
