/* The local path: handing a connection back to the kernel (HAND-BACK below). */
#include "lp_int.h"

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
    if (bells < n && c->pb_off >= c->pb_len) {
        memcpy(c->pb, buf + bells, n - bells);
        c->pb_off = 0;
        c->pb_len = (uint16_t)(n - bells);
    }
    return bells;
}

/* Copy kept bytes into msg's iovecs from byte skip on (consume unless peek). */
size_t lp_pb_take(lp_conn_t *c, struct msghdr *msg, size_t skip, int peek)
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
        zc_real.poll(&(struct pollfd){ fd, POLLIN, 0 }, 1, 10);
    }
    return 0;
}

/* Both directions are on the kernel: the connection is plain. */
void lp_rv_check_done(lp_conn_t *c)
{
    if (c->rx_plain && !c->tx_ring && c->tx_never && c->state == LP_PAIRED)
        c->state = LP_PLAIN;
}

/* A holder of our side in another process finished a direction of the
 * hand-back (LP_RV_TX / LP_RV_RX in our side word: it gave the ring to the
 * kernel, or took the MARK and the doorbells): so have we.  The role's lock
 * held; returns 1 when that direction is done. */
int lp_rv_sibling(lp_conn_t *c, int role)
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
void lp_rv_rx_done(lp_conn_t *c, int fd)
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

/* Our sending direction goes to the kernel for good: the ring's unread
 * bytes first (the initiator will not read them), copied in order.
 * wait_ms: 0 do not wait for kernel room, -1 wait as a blocking send would,
 * > 0 wait at most that long.  TX lock held.  Returns 0 when done, -EAGAIN
 * when the kernel took only part (the rest stays in the ring, in order),
 * or the send's -errno. */
int lp_rv_tx(lp_conn_t *c, int fd, int wait_ms)
{
    char buf[16384];
    struct timespec t0, t;

    c->ch.quiet = 1;
    c->rv_seen = 1;
    if (lp_rv_sibling(c, LP_TX))
        return 0;
    if (lp_bells_flush(c, fd) < 0)
        return -ECONNRESET;
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
    __atomic_add_fetch(&lp.handed_back[lp_handback_reason(why)], 1, __ATOMIC_RELAXED);
}

/* Hand the connection back to the kernel (steps 1-5 above).  No lock held. */
void lp_revert(lp_conn_t *c, int fd, const char *why)
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
        lp_wake_ex(c, fd, local_ring_claim(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS), /* 4 */
                   local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS), 1);
        lp_wake_ex(c, fd, local_ring_claim(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD),
                   local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD), 1);
        lp_bells_flush(c, fd);          /* every doorbell before our kernel bytes */
        zc_stat_add(ZC_STAT_LOCAL_HANDED_BACK, 1);
        lp_handback_count(why);
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
    if (c->bell_push && !c->app_nodelay && !c->is_unix)   /* Nagle as the app had it */
        zc_real.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 0 }, sizeof(int));
    c->bell_push = 0;
    lp_unlock(c, LP_RX);
    lp_unlock(c, LP_TX);
}

/* Read doorbell bytes waiting in the kernel socket without blocking (our
 * receiving direction is in the ring, so every kernel byte is one), noting
 * EOF and errors.  Returns bytes drained. */
