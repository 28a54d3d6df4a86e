/* The local path: doorbells (one byte through the kernel socket for a peer
 * waiting in poll/epoll, a futex wake for one blocked in a call), and
 * draining the doorbells owed to us. */
#include "lp_int.h"
#include "bell.h"
#include "efd.h"
#include "handback.h"
#include "zc_sys.h"

/* Our sending direction to the ring, when rule S1 allows.  TX lock held. */
int lp_tx_switch(lp_conn_t *c)
{
    uint64_t at;
    int rc;

    if (lp_tx_ring(c))
        return 1;
    if (c->state != LP_PAIRED || lp_tx_plain(c) || c->kern_shut_wr || c->rv_seen)
        return 0;
    if (c->ch.side == LOCAL_RING_SIDE_A && !local_pair_peer_attached(&c->ch))
        return 0;
    rc = local_pair_switch_publish(&c->ch, lp_txdir(c), c->tx_kernel);
    at = local_pair_switch_get(&c->ch, lp_txdir(c));
    if (rc == -EALREADY && at == LOCAL_PAIR_SWITCH_NEVER) {
        lp_dir_set(c, LP_TX, LP_DIR_PLAIN);
        return 0;
    }
    lp_dir_set(c, LP_TX, LP_DIR_RING);  /* published by us, or by a holder in another process */
    zc_stat_add(ZC_STAT_LOCAL_SWITCHES, 1);
    return 1;
}

/* Ring the peer: one byte in the kernel stream.  Our sending direction is
 * switched first (S2), so the byte can only be a doorbell to the peer. */
void lp_bell(lp_conn_t *c, int fd)
{
    int saved = errno;

    if (!lp_tx_ring(c)) {
        lp_lock(c, LP_TX);
        lp_tx_switch(c);
        lp_unlock(c, LP_TX);
        if (!lp_tx_ring(c))
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
    __atomic_add_fetch(&c->bells_unsent, 1, __ATOMIC_ACQ_REL);
    lp_bells_send(c, fd);
    zc_stat_add(ZC_STAT_LOCAL_DOORBELLS, 1);
    lp_efd_offered(c);          /* the peer's later waits may take an eventfd */
    errno = saved;
}

/* Send every doorbell owed (bells_unsent) without blocking.  One the kernel
 * refuses (a full send buffer: the peer is not reading) stays owed and goes
 * with the next: the peer counts every doorbell claimed, so a lost one would
 * make it take one of our later data bytes for a doorbell.  Returns what is
 * still owed; errors other than EAGAIN drop them (the connection is gone). */
uint32_t lp_bells_send(lp_conn_t *c, int fd)
{
    static const char zeros[64];
    uint32_t k = __atomic_exchange_n(&c->bells_unsent, 0, __ATOMIC_ACQ_REL);

    while (k > 0) {
        ssize_t n = zc_real.send(fd, zeros, k < sizeof(zeros) ? k : sizeof(zeros),
                                 MSG_DONTWAIT | MSG_NOSIGNAL);

        if (n > 0) {
            k -= (uint32_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return __atomic_add_fetch(&c->bells_unsent, k, __ATOMIC_ACQ_REL);
            break;
        }
    }
    return __atomic_load_n(&c->bells_unsent, __ATOMIC_ACQUIRE);
}

int lp_bells_flush(lp_conn_t *c, int fd)
{
    struct timespec t0, t;
    int saved = errno;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (lp_bells_send(c, fd)) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > LP_RV_WAIT_MS) {
            errno = saved;
            lp_broken(c);
            return -1;
        }
        lp_wait_fd(fd, POLLOUT, 10);
    }
    errno = saved;
    return 0;
}

/* Wait up to ms for fd's events ev (a bounded wait inside a critical
 * section: an application's signal handler may run meanwhile, SIGDEFER). */
void lp_wait_fd(int fd, short ev, int ms)
{
    shim_sig_wait_begin();
    zc_real.poll(&(struct pollfd){ fd, ev, 0 }, 1, ms);
    shim_sig_wait_end();
}

/* The peer must be woken (flags of a ring call): a doorbell byte through the
 * kernel socket for a peer waiting in poll/epoll, a futex wake for one
 * sleeping in a blocking call.  word: the peer's waiting word. */
void lp_wake(lp_conn_t *c, int fd, int flags, uint32_t *word)
{
    lp_wake_ex(c, fd, flags, word, 0);
}

/* lp_wake with our TX lock held by the caller (tx_held): a doorbell that
 * would need our sending direction switched first cannot be rung then (the
 * switch takes that lock; a hand-back that never switched has no doorbell
 * to give: the peer reads the kernel stream in that direction). */
void lp_wake_ex(lp_conn_t *c, int fd, int flags, uint32_t *word, int tx_held)
{
    if ((flags & LOCAL_RING_F_DOORBELL) && !(tx_held && !lp_tx_ring(c)))
        lp_bell(c, fd);
    if (flags & LOCAL_RING_F_EVENTFD)
        lp_efd_ring(c, tx_held && !lp_tx_ring(c) ? -1 : fd);
    if (flags & LOCAL_RING_F_FUTEX) {
        /* (SPINNING WAITERS, local_ring.h: read after the claim) */
        uint32_t *spinning = word ? local_ring_spinning(&c->ch, word) : NULL;

        if (!spinning || !__atomic_load_n(spinning, __ATOMIC_SEQ_CST)) {
            zc_syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
            zc_stat_add(ZC_STAT_LOCAL_FUTEX_WAKES, 1);
        }
    }
}

size_t lp_drain_ex(lp_conn_t *c, int fd, int full)
{
    char buf[256];
    size_t total = 0;
    int saved = errno, i;

    c->kern_look_us = zc_now_us();
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

size_t lp_drain(lp_conn_t *c, int fd)
{
    return lp_drain_ex(c, fd, 0);
}

/* --- receive ---------------------------------------------------------------------- */

/* Rule R2 outside a receive: our receiving direction reached the peer's
 * switch point, so what follows in the kernel stream are doorbells.
 * Returns 1 when the direction is (now) in the ring. */
int lp_rx_catch_up(lp_conn_t *c)
{
    uint64_t sw;

    if (lp_rx_ring(c))
        return 1;
    if (c->state != LP_PAIRED || lp_rx_plain(c))
        return 0;
    sw = local_pair_switch_get(&c->ch, lp_rxdir(c));
    if (!local_pair_switch_known(sw))
        return 0;
    lp_lock(c, LP_RX);
    if (!lp_rx_ring(c) && c->rx_kernel >= sw) {
        lp_dir_set(c, LP_RX, LP_DIR_RING);
        local_ring_rx_wait_cancel(&c->ch, lp_rxdir(c));
    }
    lp_unlock(c, LP_RX);
    return lp_rx_ring(c);
}
