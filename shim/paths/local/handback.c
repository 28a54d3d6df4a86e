/* The local path: handing a connection back to the kernel (HAND-BACK below). */
#include "lp_int.h"
#include "handback.h"
#include "bell.h"
#include "pairing.h"
#include "scm.h"

#include <linux/sockios.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include "zc_sys.h"

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
int64_t lp_rv_owed(lp_conn_t *c)
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
size_t lp_rv_keep(lp_conn_t *c, const char *buf, size_t n)
{
    int64_t owed = lp_rv_owed(c);
    size_t bells = owed <= 0 ? 0 : (uint64_t)owed < n ? (size_t)owed : n;

    c->bells_drained += bells;
    if (bells < n && c->hb.pb_off >= c->hb.pb_len) {
        memcpy(c->hb.pb, buf + bells, n - bells);
        c->hb.pb_off = 0;
        c->hb.pb_len = (uint16_t)(n - bells);
    }
    return bells;
}

/* Copy kept bytes into msg's iovecs from byte skip on (consume unless peek). */
size_t lp_pb_take(lp_conn_t *c, struct msghdr *msg, size_t skip, int peek)
{
    size_t done = shim_msg_fill(msg, skip, c->hb.pb + c->hb.pb_off, (size_t)(c->hb.pb_len - c->hb.pb_off));

    if (!peek)
        c->hb.pb_off = (uint16_t)(c->hb.pb_off + done);
    return done;
}

/* Read exactly n doorbells owed to us (sent, or being sent): 0, or -1 when
 * they did not come (the peer died, or LP_RV_WAIT_MS passed). */
int lp_bells_take(lp_conn_t *c, int fd, int64_t n)
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
        lp_wait_fd(fd, POLLIN, 10);
    }
    return 0;
}

/* Both directions are on the kernel: the connection is plain. */
void lp_rv_check_done(lp_conn_t *c)
{
    if (lp_rx_plain(c) && lp_tx_plain(c) && c->state == LP_PAIRED)
        lp_state_set(c, LP_PLAIN);
}

/* A holder of our side in another process finished a direction of the
 * hand-back (LP_RV_TX / LP_RV_RX in our side word: it gave the ring to the
 * kernel, or took the MARK and the doorbells): so have we.  The role's lock
 * held; returns 1 when that direction is done. */
int lp_rv_sibling(lp_conn_t *c, int role)
{
    uint32_t mine = __atomic_load_n(&lp_side(c, c->ch.side)->rv, __ATOMIC_ACQUIRE);

    if (role == LP_RX && (mine & LP_RV_RX) && !lp_rx_plain(c)) {
        lp_dir_set(c, LP_RX, LP_DIR_PLAIN);
    } else if (role == LP_TX && (mine & LP_RV_TX) && !lp_tx_plain(c)) {
        lp_dir_set(c, LP_TX, LP_DIR_PLAIN);
    }
    lp_rv_check_done(c);
    return role == LP_RX ? lp_rx_plain(c) : lp_tx_plain(c);
}

/* Our receiving direction reads the kernel stream for good (at the
 * initiator's MARK, or with no ring data to come).  RX lock held. */
void lp_rv_rx_done(lp_conn_t *c, int fd)
{
    int64_t owed = lp_rv_owed(c);

    zc_log(ZC_LOG_TRACE, "local path: fd %d reads the kernel stream after %lld owed doorbell(s)"
           " (claimed %llu, read %llu, kept %d)", fd, (long long)owed,
           (unsigned long long)c->ch.bells_claimed, (unsigned long long)c->bells_drained,
           c->hb.pb_len - c->hb.pb_off);
    if (owed > 0 && lp_bells_take(c, fd, owed) < 0 && !c->kern_eof && !c->kern_err)
        zc_log(ZC_LOG_WARN, "local path: fd %d handed back with %lld doorbell(s) that did not "
               "come", fd, (long long)(c->ch.bells_claimed - c->bells_drained));
    lp_dir_set(c, LP_RX, LP_DIR_PLAIN);
    __atomic_or_fetch(&lp_side(c, c->ch.side)->rv, LP_RV_RX, __ATOMIC_ACQ_REL);
    lp_rv_check_done(c);
}

/* The initiator's MARK at our read position: take it and read the kernel
 * stream from here.  RX lock held.  1 taken, 0 not there (something else
 * is), -1 the record cannot be taken. */
int lp_rv_take_mark(lp_conn_t *c, int fd)
{
    local_ring_frame_t fr;

    if (local_ring_frame_next(&c->ch, lp_rxdir(c), &fr) || fr.type != LOCAL_RING_REC_MARK)
        return 0;
    if (local_ring_frame_consume(&c->ch, lp_rxdir(c), &fr) < 0)
        return -1;
    lp_rv_rx_done(c, fd);
    return 1;
}

/* Move what ring direction dir holds from its reader's position into kernel
 * socket fd, in order, consuming it.  wait_ms: 0 do not wait for kernel
 * room, -1 wait as a blocking send would, > 0 wait at most that long.
 * Returns 0 when all moved (*eof: an EOF record ended it), -EAGAIN when the
 * kernel took only part (the rest stays in the ring, in order), -EPROTO for a
 * broken ring, or the send's -errno.  No library state besides the ring: a
 * pump process runs it too (LINGER below). */
static int lp_ring_to_kernel(local_ring_t *ch, int dir, int fd, int wait_ms, int *eof)
{
    char buf[16384];
    struct timespec t0, t;

    *eof = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct iovec v = { buf, sizeof(buf) };
        size_t got = 0;
        ssize_t n;
        int rc = local_ring_read(ch, dir, &v, 1, LOCAL_RING_PEEK, &got);

        if (rc < 0)
            return -EPROTO;
        if (!got) {
            *eof = (rc & LOCAL_RING_F_EOF) != 0;
            return 0;
        }
        shim_sig_wait_begin();          /* SIGDEFER: a blocking send lets handlers in */
        n = zc_real.send(fd, buf, got, MSG_NOSIGNAL | (wait_ms < 0 ? 0 : MSG_DONTWAIT));
        shim_sig_wait_end();
        if (n < 0 && errno == EINTR && wait_ms < 0)
            return -EINTR;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) && wait_ms > 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > wait_ms)
                return -EAGAIN;
            lp_wait_fd(fd, POLLOUT, 10);
            continue;
        }
        if (n < 0)
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        v.iov_len = (size_t)n;
        if (local_ring_read(ch, dir, &v, 1, 0, &got) < 0 || got != (size_t)n)
            return -EPROTO;
        zc_stat_add(ZC_STAT_LOCAL_RETURNED_BYTES, (uint64_t)n);
    }
}

/* PEER PUMP (below): the job of giving our ring to the kernel is ours
 * (claimed now, or before), or the peer's pump has it: then wait, as wait_ms
 * says (lp_ring_to_kernel), until the pump left the ring or died.  A pump
 * that moves nothing for LP_PUMP_STALL_MS while our socket has room is not
 * working (a peer that wrote garbage into the side words can name one): the
 * connection reads as reset.  TX lock held.  0 go on (what the ring still
 * holds is ours to move), -EAGAIN, -EINTR (a blocking wait interrupted), or
 * -ECONNRESET. */
static int lp_rv_pump_wait(lp_conn_t *c, int fd, int wait_ms)
{
    lp_side_t *me = lp_side(c, c->ch.side);
    uint32_t old = __atomic_load_n(&me->rv, __ATOMIC_SEQ_CST);
    int64_t t0 = lp_now_ms();
    int32_t pid;
    int rc;

    for (;;) {
        local_ring_snap_t sn;
        int nq = -1;

        if (!(old & LP_RV_PUMP)) {
            if (__atomic_compare_exchange_n(&me->rv, &old, old | LP_RV_PUMP, 0,
                                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
                return 0;
            continue;
        }
        if (!(old & LP_RV_PUMP_PEER) || (old & LP_RV_PUMPED))
            return 0;
        pid = __atomic_load_n(&me->pump_pid, __ATOMIC_ACQUIRE);
        if (pid > 0 && kill(pid, 0) < 0 && errno == ESRCH)
            return 0;   /* the pump is gone: what it left is ours */
        /* progress, kept across calls (a non-blocking caller polls) */
        if (local_ring_ctl_snap(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_PROD, &sn))
            return (int)lp_broken(c);
        zc_syscall(SYS_ioctl, fd, SIOCOUTQ, &nq);
        if (!c->hb.pump_moved || sn.tail != c->hb.pump_tail || nq != c->hb.pump_q ||
            !(lp_kernel_revents(fd, POLLOUT) & POLLOUT)) {
            c->hb.pump_tail = sn.tail;     /* moving, or the kernel has no room for it */
            c->hb.pump_q = nq;
            c->hb.pump_moved = lp_now_ms();
        } else if (lp_now_ms() - c->hb.pump_moved > LP_PUMP_STALL_MS) {
            zc_log(ZC_LOG_NOTICE, "local path: fd %d: the peer's pump moved nothing for %d ms: "
                   "the connection reads as reset", fd, LP_PUMP_STALL_MS);
            return (int)lp_broken(c);
        }
        if (!wait_ms || (wait_ms > 0 && lp_now_ms() - t0 > wait_ms))
            return -EAGAIN;
        if (!(old & LP_RV_PWAIT)) {     /* we write nothing now: the pump may start */
            __atomic_compare_exchange_n(&me->rv, &old, old | LP_RV_PWAIT, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
            continue;
        }
        shim_sig_wait_begin();
        rc = (int)zc_syscall(SYS_futex, &me->rv, FUTEX_WAIT, old,
                          &(struct timespec){ 0, 10 * 1000 * 1000 }, NULL, 0);
        shim_sig_wait_end();
        if (rc < 0 && errno == EINTR && wait_ms < 0)
            return -EINTR;
        old = __atomic_load_n(&me->rv, __ATOMIC_SEQ_CST);
    }
}

/* The peer's pump has our ring now (a close need not wait for it: the pump
 * holds a socket of ours). */
int lp_rv_peer_pumping(lp_conn_t *c)
{
    uint32_t w = c->ch.base ? __atomic_load_n(&lp_side(c, c->ch.side)->rv, __ATOMIC_ACQUIRE) : 0;

    return (w & LP_RV_PUMP_PEER) && !(w & LP_RV_PUMPED);
}

/* Our sending direction goes to the kernel for good: the ring's unread
 * bytes first (the initiator will not read them), copied in order.
 * wait_ms as lp_ring_to_kernel.  TX lock held.  Returns 0 when done,
 * -EAGAIN when the kernel took only part (the rest stays in the ring, in
 * order), or the send's -errno. */
int lp_rv_tx(lp_conn_t *c, int fd, int wait_ms)
{
    int rc, eof;

    c->ch.quiet = 1;
    c->rv_seen = 1;
    if (lp_rv_sibling(c, LP_TX))
        return 0;
    if (lp_bells_flush(c, fd) < 0)
        return -ECONNRESET;
    if (!lp_tx_ring(c)) {
        if (local_pair_switch_refuse(&c->ch, lp_txdir(c)) == -EALREADY &&
            local_pair_switch_get(&c->ch, lp_txdir(c)) != LOCAL_PAIR_SWITCH_NEVER)
            lp_dir_set(c, LP_TX, LP_DIR_RING);  /* a holder in another process switched it */
    }
    if (lp_tx_ring(c) && (rc = lp_rv_pump_wait(c, fd, wait_ms)) < 0)
        return rc;
    if (lp_tx_ring(c)) {
        rc = lp_ring_to_kernel(&c->ch, lp_txdir(c), fd, wait_ms, &eof);
        if (rc == -EPROTO)
            return (int)lp_broken(c);
        if (rc < 0)
            return rc;
        if (eof && !c->kern_shut_wr) {
            zc_real.shutdown(fd, SHUT_WR);
            c->kern_shut_wr = 1;
        }
    }
    lp_dir_set(c, LP_TX, LP_DIR_PLAIN);
    __atomic_or_fetch(&lp_side(c, c->ch.side)->rv, LP_RV_TX, __ATOMIC_ACQ_REL);
    lp_rv_check_done(c);
    return 0;
}

/* --- LINGER ---------------------------------------------------------------------
 *
 * The kernel keeps sending a socket's queue after close(); the ring holds our
 * sent, unread bytes instead, and the peer reads them there, so our socket
 * is not needed for them... unless the peer later hands the connection back
 * (exec of a program without the library, fdopen): its reader then reads
 * the kernel stream, and only our socket can put the ring's bytes there.
 * So a last close that leaves bytes of ours unread in the ring does not end
 * our socket: it posts it to the peer's mailbox first (lp_linger_offer, with
 * the channel memfd as proof), where it stays alive, and sets LP_RV_LINGER.
 * The peer takes it out when it closes (and closes it: the FIN) or hands the
 * connection back: then a pump process of its own (lp_pump_spawn) gives the
 * ring's unread bytes to that socket, in order, and closes it.
 *
 * Who gives the bytes back is decided once (LP_RV_PUMP, set by whoever sees
 * the other first): a close that finds LP_RV_REQ after posting gives them
 * itself, as an ordinary hand-back close does; a hand-back that finds
 * LP_RV_LINGER after its LP_RV_REQ takes the pump.  Both flags are stored
 * and then the other's loaded sequentially consistent, so at least one side
 * sees the other. */

/* Take the job of giving the ring back (LP_RV_PUMP, with bits, in side
 * word w): 1 ours. */
static int lp_pump_claim(uint32_t *w, uint32_t bits)
{
    uint32_t old = __atomic_load_n(w, __ATOMIC_SEQ_CST);

    do {
        if (old & LP_RV_PUMP)
            return 0;
    } while (!__atomic_compare_exchange_n(w, &old, old | bits, 0, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST));
    return 1;
}

/* Bytes no socket can deliver any more: counted, warned. */
static void lp_lost(int fd, int64_t n, const char *what)
{
    zc_stat_add(ZC_STAT_LOCAL_LOST_BYTES, (uint64_t)n);
    zc_log(ZC_LOG_WARN, "local path: fd %d handed back with %lld byte(s) %s", fd, (long long)n,
           what);
}

/* The doorbells owed to us stay in the kernel stream behind bytes we did not
 * read (PREFIX could not be done): the new reader will take them for data. */
static void lp_behind_warn(lp_conn_t *c, int fd, const char *why)
{
    int64_t owed = (int64_t)(c->ch.bells_claimed - c->bells_drained);

    if (owed <= 0)
        return;
    zc_stat_add(ZC_STAT_LOCAL_BELLS_LEFT, (uint64_t)owed);
    zc_log(ZC_LOG_WARN, "local path: fd %d handed back before reading all the data that "
           "preceded the peer's switch-over: %lld doorbell byte(s) stay in the stream (%s)", fd,
           (long long)owed, why);
}

/* Our last close (connection paired, not handed back): post our socket to
 * the peer's mailbox when the ring holds bytes of ours it has not read.
 * 1 when it lingers: the caller wakes the peer once our side is gone (no
 * FIN comes now to wake a poll/epoll waiter). */
int lp_linger_offer(lp_conn_t *c, int fd)
{
    int posted = 0;
    uint32_t *mine = &lp_side(c, c->ch.side)->rv;
    local_ring_snap_t s;
    int pid;

    if (!lp_tx_ring(c) || c->memfd < 0 ||
        local_ring_ctl_snap(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_PROD, &s) || s.head == s.tail ||
        local_ring_peer_state(&c->ch) != LOCAL_RING_PEER_ATTACHED)
        return 0;
    pid = __atomic_load_n(&c->ch.hdr->side_pid[!c->ch.side], __ATOMIC_ACQUIRE);
    lp_lock(c, LP_TX);
    if (pid > 0 && (!c->bells_unsent || lp_bells_flush(c, fd) == 0) &&
        lp_linger_post(pid, c->memfd, fd) == 0) {
        zc_stat_add(ZC_STAT_LOCAL_LINGERED, 1);
        posted = 1;
        __atomic_or_fetch(mine, LP_RV_LINGER, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&lp_side(c, !c->ch.side)->rv, __ATOMIC_SEQ_CST) & LP_RV_REQ) {
            /* The peer handed back meanwhile: a hand-back that did not see
             * our LINGER (or lost the job to us) never takes the copy we
             * posted, which then keeps the connection open in its mailbox
             * (no FIN for the new reader).  So when we give the ring (or
             * the peer's pump did, PEER PUMP), the end is ours to send;
             * only a linger pump (LP_RV_PUMP alone) took the copy. */
            int ours = lp_pump_claim(mine, LP_RV_PUMP), rc = 0;

            if (ours || (__atomic_load_n(mine, __ATOMIC_SEQ_CST) & LP_RV_PUMP_PEER)) {
                rc = lp_rv_tx(c, fd, LP_RV_CLOSE_MS);
                if (rc == -EAGAIN)
                    zc_log(ZC_LOG_WARN, "local path: fd %d closed with ring data the kernel "
                           "did not take within %d ms", fd, LP_RV_CLOSE_MS);
                if (rc == 0 || ours)
                    zc_real.shutdown(fd, SHUT_WR);
            }
        }
    } else {
        zc_log(ZC_LOG_NOTICE, "local path: fd %d closes with ring data unread and no "
               "lingering socket (process %d has no mailbox we may use)", fd, pid);
    }
    lp_unlock(c, LP_TX);
    return posted;
}

/* Our side is gone and our socket lingers: wake whatever waiter the peer
 * announced (a doorbell, its eventfd, a futex) to find that out. */
void lp_linger_wake(lp_conn_t *c, int fd)
{
    lp_lock(c, LP_TX);
    lp_wake_ex(c, fd, local_ring_claim(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS),
               local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS), 1);
    lp_unlock(c, LP_TX);
}

/* Socket sock (a lingering one, or one fetched from the peer) is the other
 * end of our fd. */
static int lp_linger_is_peer(lp_conn_t *c, int fd, int sock)
{
    struct sockaddr_storage a[4];
    socklen_t l[4] = { sizeof(a[0]), sizeof(a[0]), sizeof(a[0]), sizeof(a[0]) };
    struct stat st;
    uint64_t ino;

    if (c->is_unix)
        return !local_pair_unix_peer_ino(fd, &ino) && !fstat(sock, &st) &&
               (uint64_t)st.st_ino == ino;
    if (getsockname(fd, (struct sockaddr *)&a[0], &l[0]) ||
        getpeername(sock, (struct sockaddr *)&a[1], &l[1]) ||
        getpeername(fd, (struct sockaddr *)&a[2], &l[2]) ||
        getsockname(sock, (struct sockaddr *)&a[3], &l[3]))
        return 0;
    return l[0] == l[1] && l[2] == l[3] && !memcmp(&a[0], &a[1], l[0]) &&
           !memcmp(&a[2], &a[3], l[2]);
}

/* What a pump process does (lp_pump_run). */
typedef struct lp_pump_job {
    lp_side_t *peer;            /* an alive peer's side words (PEER PUMP), NULL: LINGER */
    uint32_t *peer_txlock;      /* ... and its TX lock word (LP_LOCK_OFF) */
    int grace_ms;               /* PEER PUMP: the job stays the peer's this long; -1: the
                                 * hand-back took it already (a prefix must go first) */
    const char *pre;            /* bytes before the ring's (PREFIX below), or NULL */
    size_t plen;
} lp_pump_job_t;

/* All of buf to socket sock, waiting for room at most LP_LINGER_MS in all.
 * 0, or -1. */
static int lp_send_all(int sock, const char *buf, size_t len)
{
    int64_t t0 = lp_now_ms();

    while (len) {
        ssize_t n = zc_real.send(sock, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) &&
                   lp_now_ms() - t0 < LP_LINGER_MS) {
            zc_real.poll(&(struct pollfd){ sock, POLLOUT, 0 }, 1, 10);
        } else {
            return -1;
        }
    }
    return 0;
}

/* PEER PUMP: the pump's job over the ring of a peer that is alive: leave it
 * to the peer for the grace, take it, wait until no ring write of the
 * peer's is in progress, move (a prefix first), say so.  0 when the bytes
 * went (or the peer took the job), -1 otherwise. */
static int lp_pump_peer(local_ring_t *ch, int dir, int sock, const lp_pump_job_t *job)
{
    lp_side_t *peer = job->peer;
    uint32_t old;
    int i, eof = 0, rc = -1;

    for (i = 0; i < job->grace_ms; i++) {
        if (__atomic_load_n(&peer->rv, __ATOMIC_SEQ_CST) & LP_RV_PUMP)
            return 0;                   /* the peer is at it */
        zc_real.poll(NULL, 0, 1);
    }
    __atomic_store_n(&peer->pump_pid, (int32_t)zc_getpid(), __ATOMIC_RELEASE);
    old = __atomic_load_n(&peer->rv, __ATOMIC_SEQ_CST);
    while (job->grace_ms >= 0) {
        if (old & LP_RV_PUMP)
            return 0;
        if (__atomic_compare_exchange_n(&peer->rv, &old, old | LP_RV_PUMP | LP_RV_PUMP_PEER, 0,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            break;
    }
    /* A write the peer began before it could see the hand-back ends before
     * its TX lock is free; every later one sees it and writes nothing (the
     * lock's compare-and-swap and the hand-back's loads are sequentially
     * consistent).  A holder waiting for us (LP_RV_PWAIT) writes nothing. */
    for (i = 0; i < 1000; i++) {
        if (!__atomic_load_n(job->peer_txlock, __ATOMIC_SEQ_CST) ||
            (__atomic_load_n(&peer->rv, __ATOMIC_SEQ_CST) & LP_RV_PWAIT))
            break;
        zc_real.poll(NULL, 0, 1);
    }
    if (i < 1000 || job->pre) {         /* a prefix goes whatever comes after it */
        rc = job->pre ? lp_send_all(sock, job->pre, job->plen) : 0;
        if (rc == 0 && i < 1000)
            rc = lp_ring_to_kernel(ch, dir, sock, LP_LINGER_MS, &eof);
        if (rc == 0 && eof)
            zc_real.shutdown(sock, SHUT_WR);
    }
    /* what is left (a busy peer, a kernel that took nothing) is the peer's */
    __atomic_or_fetch(&peer->rv, LP_RV_PUMPED, __ATOMIC_SEQ_CST);
    if (i < 1000 && rc == 0 && (__atomic_load_n(&peer->rv, __ATOMIC_SEQ_CST) & LP_RV_LINGER))
        zc_real.shutdown(sock, SHUT_WR);    /* it closed and posted a copy nobody takes */
    zc_syscall(SYS_futex, &peer->rv, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    return rc == 0 ? 0 : -1;
}

/* The pump process: nothing of the application's (no descriptor, no signal
 * handler), only the ring and the socket; gives the job's prefix and the
 * ring's unread bytes to the socket (job->peer: an alive peer's, PEER PUMP;
 * NULL: a lingering socket, LINGER), waits until the kernel delivered them,
 * closes.  Never returns. */
static void lp_pump_run(local_ring_t *ch, int dir, int sock, const lp_pump_job_t *job)
{
    struct sigaction sa;
    sigset_t none;
    int sig, eof, i, q = 0, rc;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            zc_syscall(SYS_rt_sigaction, sig, &sa, NULL, _NSIG / 8);
    sigemptyset(&none);
    zc_syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, _NSIG / 8);
    if (sock > 0)
        zc_syscall(SYS_close_range, 0, sock - 1, 0);
    zc_syscall(SYS_close_range, sock + 1, ~0u, 0);
    if (job->peer)
        rc = lp_pump_peer(ch, dir, sock, job);
    else if ((rc = job->pre ? lp_send_all(sock, job->pre, job->plen) : 0) == 0)
        rc = lp_ring_to_kernel(ch, dir, sock, LP_LINGER_MS, &eof);
    if (rc == 0)
        for (i = 0; i < LP_LINGER_MS / 10; i++) {   /* delivered before the close's FIN/RST */
            if (zc_syscall(SYS_ioctl, sock, SIOCOUTQ, &q) || q <= 0)
                break;
            zc_real.poll(NULL, 0, 10);
        }
    zc_syscall(SYS_exit, 0);
    for (;;)
        ;
}

/* Our pumps, direct children made without an exit signal: nobody's wait()
 * or SIGCHLD sees them (only a wait with __WCLONE or __WALL would), and the
 * library reaps them (lp_pumps_reap: at each connection's end, each new
 * pump, the process's exit).  0: a free slot, -1: one being filled. */
#define LP_PUMPS 16
ZC_FORK_DATA static int lp_pumps[LP_PUMPS];
ZC_FORK_DATA static int lp_pumps_lock, lp_pumps_n;
__thread int lp_execing;    /* lp_exec_prepare is handing connections back */

static void lp_pumps_take_lock(void)
{
    while (__atomic_exchange_n(&lp_pumps_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

/* Reap the pumps that ended; never blocks.  A pid that is not our child
 * (a fork child's copy of its parent's table) is forgotten. */
void lp_pumps_reap(void)
{
    int i;

    if (!__atomic_load_n(&lp_pumps_n, __ATOMIC_ACQUIRE))
        return;
    lp_pumps_take_lock();
    for (i = 0; i < LP_PUMPS; i++) {
        long rc;

        if (lp_pumps[i] <= 0)
            continue;
        rc = zc_syscall(SYS_wait4, lp_pumps[i], NULL, WNOHANG | __WCLONE, NULL);
        if (rc == lp_pumps[i] || (rc < 0 && errno == ECHILD)) {
            lp_pumps[i] = 0;
            __atomic_sub_fetch(&lp_pumps_n, 1, __ATOMIC_RELEASE);
        }
    }
    __atomic_store_n(&lp_pumps_lock, 0, __ATOMIC_RELEASE);
}

/* fork child: the parent's pumps are not its children (and a lock another
 * thread held at the fork is nobody's). */
ZC_FORK_CODE void lp_pumps_fork_child(void)
{
    memset(lp_pumps, 0, sizeof(lp_pumps));
    lp_pumps_n = 0;
    lp_pumps_lock = 0;
}

/* At the process's exit: pumps that end within LP_PUMPS_EXIT_MS are reaped
 * here; one still at work then goes on, re-parented (to init or the
 * nearest subreaper) like any orphan. */
#define LP_PUMPS_EXIT_MS 100
void lp_pumps_exit(void)
{
    int64_t t0 = lp_now_ms();

    for (lp_pumps_reap(); __atomic_load_n(&lp_pumps_n, __ATOMIC_ACQUIRE) &&
                          lp_now_ms() - t0 < LP_PUMPS_EXIT_MS; lp_pumps_reap())
        zc_real.poll(NULL, 0, 2);
}

/* A free slot, marked being filled (-1), or -1 when all are taken. */
static int lp_pump_slot(void)
{
    int i;

    lp_pumps_reap();
    lp_pumps_take_lock();
    for (i = 0; i < LP_PUMPS && lp_pumps[i]; i++)
        ;
    if (i < LP_PUMPS) {
        lp_pumps[i] = -1;
        __atomic_add_fetch(&lp_pumps_n, 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&lp_pumps_lock, 0, __ATOMIC_RELEASE);
    return i < LP_PUMPS ? i : -1;
}

static void lp_pump_slot_set(int i, int pid)
{
    lp_pumps_take_lock();
    lp_pumps[i] = pid;
    if (!pid)
        __atomic_sub_fetch(&lp_pumps_n, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&lp_pumps_lock, 0, __ATOMIC_RELEASE);
}

/* Start the pump for socket sock (ours to close) over our receiving
 * direction: a child made by a raw clone without an exit signal, reaped by
 * the library.  When this image is about to be replaced (an exec that
 * hands connections back, a vfork child) or every slot is taken, nobody
 * here could reap it: then a grandchild, re-parented to init (or the
 * nearest subreaper) when its parent, reaped here, ends.  0, or -errno. */
static int lp_pump_spawn(lp_conn_t *c, int sock, const lp_pump_job_t *job)
{
    int slot = lp_execing || shim_vfork_child() ? -1 : lp_pump_slot();
    long mid = zc_syscall(SYS_clone, 0L, NULL, NULL, NULL, 0L);

    if (mid < 0) {
        if (slot >= 0)
            lp_pump_slot_set(slot, 0);
        return -errno;
    }
    if (mid == 0) {
        /* a child no atfork handler saw: its pid is asked (zc_getpid), and
         * it is the vfork child it was taken for before */
        __atomic_store_n(&zc_pid_unsure, 1, __ATOMIC_SEQ_CST);
        if (slot >= 0 || zc_syscall(SYS_clone, 0L, NULL, NULL, NULL, 0L) == 0)
            lp_pump_run(&c->ch, lp_rxdir(c), sock, job);
        zc_syscall(SYS_exit, 0);
    }
    if (slot >= 0) {
        lp_pump_slot_set(slot, (int)mid);
        return 0;
    }
    while (zc_syscall(SYS_wait4, (pid_t)mid, NULL, __WCLONE, NULL) < 0 && errno == EINTR)
        ;
    return 0;
}

/* --- PREFIX ---------------------------------------------------------------------
 *
 * A doorbell the peer rang after its switch-over follows, in the kernel
 * stream, the bytes it sent there before; a hand-back that comes before we
 * read those (a connection handed on right after its first data call, with
 * the peer's first message unread) could not read the doorbells out of the
 * stream: the new reader would take them for data.  So the hand-back reads
 * the unread kernel bytes before the switch-over (the prefix) and the
 * doorbells, and a pump writes the prefix back through the peer's socket
 * before the ring's bytes (the peer's kernel sends wait for it, PEER PUMP);
 * the pump must hold the job before anything is read (lp_peer_pump). */

#define LP_PREFIX_MAX (64u << 20)   /* most prefix bytes a hand-back takes in */

/* Read the k prefix bytes (in flight or there) and the doorbells owed after
 * them; *pre: an anonymous mapping of them (k bytes, to unmap).  0, or -1
 * (the stream ended or stalled for LP_RV_WAIT_MS: what was read is in *pre,
 * *got says how much). */
static int lp_prefix_take(lp_conn_t *c, int fd, size_t k, char **pre, size_t *got)
{
    int64_t t0 = lp_now_ms();
    char *buf = (char *)zc_syscall(SYS_mmap, NULL, k, PROT_READ | PROT_WRITE,
                                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    *got = 0;
    *pre = NULL;
    if (buf == MAP_FAILED)
        return -1;
    *pre = buf;
    while (*got < k) {
        ssize_t n = zc_real.recv(fd, buf + *got, k - *got, MSG_DONTWAIT);

        if (n > 0) {
            *got += (size_t)n;
            c->rx_kernel += (uint64_t)n;
            t0 = lp_now_ms();
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) &&
                   lp_now_ms() - t0 < LP_RV_WAIT_MS) {
            lp_wait_fd(fd, POLLIN, 10);
        } else {
            return -1;
        }
    }
    return lp_bells_take(c, fd, lp_rv_owed(c));
}

/* --- PEER PUMP ------------------------------------------------------------------
 *
 * A hand-back leaves what the peer sent into the ring and we did not read to
 * the peer's next call on the socket (HAND-BACK above).  A peer that stays
 * idle meanwhile (it sent and now waits on something else: a timer, another
 * descriptor, an answer from the exec'd program by another way) would leave
 * the new reader waiting for ever.  So the hand-back, when the peer is alive,
 * the ring holds bytes of its unread and every doorbell owed to us came
 * (none can follow the pumped bytes), fetches a socket of the peer's
 * (pidfd_getfd on the process and descriptor its side words name; it must be
 * the other end of ours) and starts a pump process with it (lp_pump_peer):
 *
 *   - for ZCSOCK_LOCAL_PUMP_MS (50) the job stays the peer's: an active peer takes it
 *     in its next call (LP_RV_PUMP in its own side word, lp_rv_pump_wait);
 *   - then the pump takes it (LP_RV_PUMP | LP_RV_PUMP_PEER: one
 *     compare-and-swap decides between them), waits until no ring write of
 *     the peer's can be in progress, moves the bytes (an EOF record becomes
 *     shutdown(SHUT_WR)), and sets LP_RV_PUMPED;
 *   - the peer's kernel sends wait for LP_RV_PUMPED (or the pump's end), so
 *     they follow the pumped bytes; a close need not wait (the pump holds a
 *     socket of the peer's, so the FIN follows the bytes too).
 *
 * A peer we may not fetch from (no ptrace permission over it, gone, our
 * seccomp filter) keeps the old behaviour: the bytes come at its next call. */
static void lp_peer_pump(lp_conn_t *c, int fd, int64_t unread, size_t behind)
{
    lp_side_t *peer = lp_side(c, !c->ch.side);
    int32_t pid = __atomic_load_n(&peer->sock_pid, __ATOMIC_ACQUIRE);
    int32_t no = __atomic_load_n(&peer->sock_no, __ATOMIC_RELAXED);
    lp_pump_job_t job = { peer, lp_side_lock(c, !c->ch.side, LP_TX),
                          (int)zc_config.local_pump_ms, NULL, 0 };
    const char *why = NULL;
    char *pre = NULL;
    int sock = -1;

    if (!zc_config.local_pump_ms)
        why = "ZCSOCK_LOCAL_PUMP_MS=0";
    else if (!c->hb.pump_claimed && (__atomic_load_n(&peer->rv, __ATOMIC_SEQ_CST) & LP_RV_PUMP))
        why = "the peer gives them itself";
    else if (!behind && lp_rv_owed(c) > 0)
        why = "doorbells of the peer's still to come";
    else if (behind > LP_PREFIX_MAX)
        why = "too much unread before the peer's switch-over";
    else if (pid <= 0 || no < 0 || shim_vfork_child())
        why = "no socket of the peer's named";
    else if ((sock = lp_fetch_fd(pid, no, 1)) < 0)
        why = "its socket cannot be fetched";
    else if (!lp_linger_is_peer(c, fd, sock))
        why = "the socket named is not the peer's";
    else if (behind && !c->hb.pump_claimed &&
             !(c->hb.pump_claimed = (uint8_t)lp_pump_claim(&peer->rv, LP_RV_PUMP | LP_RV_PUMP_PEER)))
        why = "the peer gives them itself";
    if (!why && behind) {               /* the job is ours: the prefix goes first */
        job.grace_ms = -1;
        if (lp_prefix_take(c, fd, behind, &pre, &job.plen) < 0)
            lp_behind_warn(c, fd, "the stream stalled");
        job.pre = pre;
    }
    if (!why && lp_pump_spawn(c, sock, &job) < 0) {
        why = "no pump process";
        if (job.plen)
            lp_lost(fd, (int64_t)job.plen, "read before the peer's switch-over, and no pump "
                    "process to give them back");
    }
    if (why && c->hb.pump_claimed) {       /* the job goes back to the peer */
        __atomic_or_fetch(&peer->rv, LP_RV_PUMPED, __ATOMIC_SEQ_CST);
        zc_syscall(SYS_futex, &peer->rv, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    }
    c->hb.pump_claimed = 0;
    if (pre)
        zc_syscall(SYS_munmap, pre, behind);
    if (sock >= 0)
        zc_real.close(sock);
    if (why) {
        if (behind && !job.pre)
            lp_behind_warn(c, fd, why);
        if (unread > 0)
            zc_log(ZC_LOG_NOTICE, "local path: fd %d handed back with %lld byte(s) of its "
                   "peer's unread in the ring; they come at the peer's next call (%s)", fd,
                   (long long)unread, why);
        return;
    }
    zc_stat_add(ZC_STAT_LOCAL_PEER_PUMPS, 1);
    zc_log(ZC_LOG_TRACE, "local path: fd %d: a pump gives %zu byte(s) read before the peer's "
           "switch-over and the %lld its peer left unread in the ring to the kernel%s", fd,
           job.plen, (long long)unread, behind ? "" : " unless the peer does first");
}

/* Our hand-back (lp_revert, both locks held), after our LP_RV_REQ: the
 * ring's unread bytes (and behind: that many unread kernel bytes before the
 * peer's switch-over, with doorbells owed after them, PREFIX) go to the
 * peer's lingering socket, or to an alive peer's through a pump. */
static void lp_linger_pump(lp_conn_t *c, int fd, size_t behind)
{
    uint32_t *theirs = &lp_side(c, !c->ch.side)->rv;
    int64_t unread = local_ring_readable(&c->ch, lp_rxdir(c));
    lp_pump_job_t job = { NULL, NULL, 0, NULL, 0 };
    int sock, rc = -ENOENT, state = local_ring_peer_state(&c->ch);
    char *pre = NULL;

    if (!(__atomic_load_n(theirs, __ATOMIC_SEQ_CST) & LP_RV_LINGER)) {
        if ((unread > 0 || behind) && state == LOCAL_RING_PEER_ATTACHED) {
            lp_peer_pump(c, fd, unread, behind);
            return;
        }
        if (c->hb.pump_claimed) {          /* gone since: nobody waits for the job */
            __atomic_or_fetch(theirs, LP_RV_PUMPED, __ATOMIC_SEQ_CST);
            c->hb.pump_claimed = 0;
        }
        if (behind)
            lp_behind_warn(c, fd, "the peer is gone");
        if (unread > 0 && state == LOCAL_RING_PEER_GONE)
            lp_lost(fd, unread, "its peer sent and closed on, which no socket can deliver "
                    "any more");
        return;
    }
    if (!c->hb.pump_claimed && !lp_pump_claim(theirs, LP_RV_PUMP)) {
        if (behind)
            lp_behind_warn(c, fd, "the peer gives its ring itself");
        return;         /* the peer saw our hand-back first and gives them itself */
    }
    sock = lp_linger_take(c->memfd);
    if (sock >= 0 && lp_linger_is_peer(c, fd, sock)) {
        if (behind && behind <= LP_PREFIX_MAX &&
            lp_prefix_take(c, fd, behind, &pre, &job.plen) < 0)
            lp_behind_warn(c, fd, "the stream stalled");
        else if (behind > LP_PREFIX_MAX)
            lp_behind_warn(c, fd, "too much unread before the peer's switch-over");
        job.pre = pre;
        rc = unread > 0 || job.plen ? lp_pump_spawn(c, sock, &job) : 0;
    } else if (behind) {
        lp_behind_warn(c, fd, "its lingering socket never came");
    }
    if (pre)
        zc_syscall(SYS_munmap, pre, behind);
    if (sock >= 0)
        zc_real.close(sock);
    if (rc == 0 && (unread > 0 || job.plen)) {
        zc_stat_add(ZC_STAT_LOCAL_LINGER_PUMPS, 1);
        zc_log(ZC_LOG_NOTICE, "local path: fd %d: a pump gives the %lld byte(s) its closed peer "
               "left in the ring to the kernel", fd, (long long)unread);
    } else if (rc < 0 && (unread > 0 || job.plen)) {
        lp_lost(fd, unread + (int64_t)job.plen, sock < 0 ? "its closed peer left, and its "
                "socket never came" : rc == -ENOENT ? "its closed peer left, and the socket "
                "that came is not its" : "its closed peer left, and no pump process");
    }
}

/* The peer closed and its socket lingers for us: no FIN comes until we let
 * it go, so its side gone is the end of the stream (after the ring). */
int lp_peer_lingers(lp_conn_t *c)
{
    return c->ch.base &&
           (__atomic_load_n(&lp_side(c, !c->ch.side)->rv, __ATOMIC_ACQUIRE) & LP_RV_LINGER) &&
           local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE;
}

/* Our connection ends here (last close), or we send to the closed peer
 * through the kernel (whose answer, a reset, needs its socket closed): a
 * lingering socket of the peer's goes. */
void lp_linger_drop(lp_conn_t *c)
{
    int sock;

    if (!c->ch.base || !(__atomic_load_n(&lp_side(c, !c->ch.side)->rv, __ATOMIC_ACQUIRE) &
                         LP_RV_LINGER))
        return;
    c->hb.linger_dropped = 1;
    sock = lp_linger_take(c->memfd);
    if (sock >= 0)
        zc_real.close(sock);
}

const char *const lp_handback_names[LP_HB_COUNT] = {
    "exec", "scm_rights", "ancillary", "passcred", "stdio", "fdopen", "seccomp", "io_uring",
    "oob", "shut_rd", "posix_spawn", "shutdown", "fork", "other",
};

/* The reason index of a why we log (its start). */
int lp_handback_reason(const char *why)
{
    static const struct {
        const char *prefix;
        int reason;
    } map[] = {
        { "exec", LP_HB_EXEC }, { "SCM_RIGHTS", LP_HB_SCM }, { "ancillary", LP_HB_ANCILLARY },
        { "SO_PASS", LP_HB_PASSCRED }, { "a descriptor on stdin", LP_HB_STDIO },
        { "fdopen", LP_HB_FDOPEN }, { "a seccomp", LP_HB_SECCOMP }, { "io_uring", LP_HB_IO_URING },
        { "MSG_OOB", LP_HB_OOB }, { "shutdown(SHUT_RD", LP_HB_SHUT_RD },
        { "posix_spawn", LP_HB_SPAWN }, { "shutdown", LP_HB_SHUTDOWN }, { "fork", LP_HB_FORK },
    };
    size_t i;
    int r = LP_HB_OTHER;

    for (i = 0; why && i < sizeof(map) / sizeof(map[0]); i++)
        if (!strncmp(why, map[i].prefix, strlen(map[i].prefix))) {
            r = map[i].reason;
            break;
        }
    return r;
}

/* Count a hand-back under its reason. */
void lp_handback_count(const char *why)
{
    __atomic_add_fetch(lp.handed_back[lp_handback_reason(why)], 1, __ATOMIC_RELAXED);
}

/* PREFIX: doorbells are owed to us (our announcements withdrawn) behind
 * kernel bytes from before the peer's switch-over we have not read: how many
 * bytes (0: none, or no doorbell behind them). */
static size_t lp_behind(lp_conn_t *c)
{
    uint64_t sw = local_pair_switch_get(&c->ch, lp_rxdir(c));

    if (c->ch.bells_claimed == c->bells_drained || lp_rx_ring(c) ||
        !local_pair_switch_known(sw) || c->rx_kernel >= sw)
        return 0;
    return (size_t)(sw - c->rx_kernel);
}

/* Hand the connection back to the kernel (steps 1-5 above).  No lock held. */
void lp_revert(lp_conn_t *c, int fd, const char *why)
{
    lp_side_t *me;
    size_t behind;
    int64_t owed;

    if (c->state == LP_PENDING || c->state == LP_DEFER) {
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
            lp_dir_set(c, LP_TX, LP_DIR_RING);
        c->ch.quiet = 1;                                                        /* 1 */
        if (lp_tx_ring(c) && !c->wr_shut &&
            local_ring_mark_write(&c->ch, lp_txdir(c), LOCAL_RING_MARK_REVERT) < 0)
            lp_broken(c);
        local_ring_rx_wait_cancel(&c->ch, lp_rxdir(c));                         /* 2 */
        local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
        if (lp_behind(c) && zc_config.local_pump_ms &&
            local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_ATTACHED &&
            !(__atomic_load_n(&lp_side(c, !c->ch.side)->rv, __ATOMIC_SEQ_CST) & LP_RV_LINGER))
            /* PREFIX: the job is ours before the peer hears of the hand-back */
            c->hb.pump_claimed = (uint8_t)lp_pump_claim(&lp_side(c, !c->ch.side)->rv,
                                                     LP_RV_PUMP | LP_RV_PUMP_PEER);
        __atomic_or_fetch(&me->rv, LP_RV_REQ | LP_RV_TX | LP_RV_RX, __ATOMIC_SEQ_CST); /* 3 */
        c->rv_seen = 1;
        lp_wake_ex(c, fd, local_ring_claim(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS), /* 4 */
                   local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS), 1);
        lp_wake_ex(c, fd, local_ring_claim(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD),
                   local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD), 1);
        lp_bells_flush(c, fd);          /* every doorbell before our kernel bytes */
        zc_stat_add(ZC_STAT_LOCAL_HANDED_BACK, 1);
        lp_handback_count(why);
        zc_log(ZC_LOG_NOTICE, "local path: fd %d handed back to the kernel (%s)", fd, why);
    } else if (c->state == LP_PAIRED && lp_tx_ring(c) &&
               lp_rv_tx(c, fd, LP_RV_CLOSE_MS) == -EAGAIN) {
        /* the peer handed back first: what it did not read of ours goes to
         * the kernel before anything we send there (our sends are plain now) */
        zc_log(ZC_LOG_WARN, "local path: fd %d handed back with ring data the kernel did "
               "not take within %d ms", fd, LP_RV_CLOSE_MS);
    }
    owed = lp_rv_owed(c);                                                       /* 5 */
    behind = lp_behind(c);      /* the doorbells follow that many unread bytes: PREFIX */
    if (!behind && owed > 0)
        lp_bells_take(c, fd, owed);
    lp_linger_pump(c, fd, behind);
    lp_dir_set(c, LP_TX, LP_DIR_PLAIN);
    lp_dir_set(c, LP_RX, LP_DIR_PLAIN);
    lp_state_set(c, LP_PLAIN);
    if (c->bell_push && !c->app_nodelay && !c->is_unix)   /* Nagle as the app had it */
        zc_real.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 0 }, sizeof(int));
    c->bell_push = 0;
    lp_unlock(c, LP_RX);
    lp_unlock(c, LP_TX);
}

/* Read doorbell bytes waiting in the kernel socket without blocking (our
 * receiving direction is in the ring, so every kernel byte is one), noting
 * EOF and errors.  Returns bytes drained. */

/* PARTS (lp_int.h): pumps that finished are reaped whenever a connection
 * leaves. */
const lp_part_t lp_part_pumps = { .freed = lp_pumps_reap };
