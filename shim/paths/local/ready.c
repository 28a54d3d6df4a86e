/* The local path: readiness for the engine (revents, kernel events, the
 * change counter), FIONREAD, socket options. */
#include "lp_int.h"
#include "ready.h"
#include "bell.h"
#include "efd.h"
#include "handback.h"

#include <sys/single_threaded.h>

short lp_kernel_events(shim_fd_t *f, short ev)
{
    lp_conn_t *c = lp_conn(f);
    short k = ev;

    if (c->state != LP_PAIRED)
        return ev;
    if (lp_tx_ring(c))
        k &= ~(POLLOUT | POLLWRNORM | POLLWRBAND);
    if (ev & (POLLOUT | POLLWRNORM))
        k |= POLLIN;    /* space doorbells arrive as readable bytes */
    return k;
}

/* Both directions on the ring: the kernel socket carries doorbells, EOF
 * and resets only (KEPT DELETES). */
int lp_kernel_quiet(shim_fd_t *f)
{
    lp_conn_t *c = lp_conn(f);
    uint64_t sw;

    if (c->state != LP_PAIRED || !lp_tx_ring(c) || !c->ch.base || lp_rx_plain(c))
        return 0;
    if (lp_rx_ring(c))
        return 1;
    /* (rule R2 not applied yet: the peer's switch point passed) */
    sw = local_pair_switch_get(&c->ch, lp_rxdir(c));
    return local_pair_switch_known(sw) && c->rx_kernel >= sw;
}

/* Moves whenever data arrives or space frees, and when the stream ends:
 * received ring positions (any record: an EOF record moves it too) and
 * kernel bytes, the position the peer consumed up to, and the ends the
 * kernel would signal with a FIN or a reset (the peer gone from the ring,
 * a kernel EOF or error).  An edge-triggered waiter hears of each. */
uint64_t lp_change(shim_fd_t *f, int fd)
{
    lp_conn_t *c = lp_conn(f);
    uint64_t ends = (uint64_t)(c->kern_eof != 0) << 61 | (uint64_t)(c->kern_err != 0) << 62;

    (void)fd;
    if (!c->ch.base)
        return c->rx_kernel + ends;
    return __atomic_load_n(&c->ch.hdr->ctl[lp_rxdir(c)].head, __ATOMIC_ACQUIRE) +
           c->rx_kernel +
           __atomic_load_n(&c->ch.hdr->ctl[lp_txdir(c)].tail, __ATOMIC_ACQUIRE) + ends +
           ((uint64_t)(local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE) << 60);
}

/* A poll/epoll waiter announced a wait for space: if the connection was
 * handed back meanwhile the initiator may not have seen the announcement
 * (HAND-BACK 4), so withdraw it and look again soon.  In a process with
 * more than one thread the "space for you" doorbell byte it waits for may
 * be read by another thread's wait for input first (a byte says nothing of
 * its kind), before this waiter slept on it: it looks again within
 * LP_TX_RECHECK_MS, so a stolen doorbell costs that, never a hang (a
 * client sending in one thread and receiving in another stopped for
 * good).  Only while the ring is full. */
void lp_armed_recheck(lp_conn_t *c, shim_ready_ask_t *ask)
{
    if (lp_rv(c)) {
        local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
        lp_recheck(ask, 1);
    } else if (!__libc_single_threaded) {
        lp_recheck(ask, LP_TX_RECHECK_MS);
    }
}

/* Readiness of a connection handed back: move it on without blocking (give
 * the ring to the kernel, take the initiator's MARK), then answer with the
 * kernel's readiness when a direction changed.  Returns kev to use. */
int lp_rv_progress(lp_conn_t *c, int fd, short ev, int kev, shim_ready_ask_t *ask)
{
    int changed = 0;

    lp_lock(c, LP_TX);
    if (c->state == LP_PAIRED && !lp_tx_plain(c)) {
        if (lp_rv_tx(c, fd, 0) == -EAGAIN)
            lp_recheck(ask, 10);        /* the kernel takes the rest later */
        changed |= lp_tx_plain(c);
    }
    lp_unlock(c, LP_TX);
    lp_lock(c, LP_RX);
    if (c->state == LP_PAIRED && !lp_rx_plain(c) && lp_rv_sibling(c, LP_RX)) {
        changed = 1;
    } else if (c->state == LP_PAIRED && !lp_rx_plain(c)) {
        uint64_t sw = local_pair_switch_get(&c->ch, lp_rxdir(c));

        if (lp_rx_ring(c)) {
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

/* A receive announcement (armed by a non-blocking receive that found the
 * ring empty, so that whatever the application sleeps in next is woken)
 * while a waiter spins over the ring: in a process with one thread that
 * alone holds this side, that spinner is the only possible waiter, so the
 * announcement is withdrawn for the spin (the peer then sends no doorbell
 * for what it writes meanwhile) and re-armed when the spin ends, unless the
 * ring has bytes by then.  An arming look (the spin gave up) re-arms anyway.
 * RX lock held; empty: nothing to read now. */
static void lp_spin_arm(lp_conn_t *c, int arm, int empty, shim_ready_ask_t *ask)
{
    int dir = lp_rxdir(c);

    if (arm == SHIM_READY_SPIN) {
        /* Not lp_alone: its vfork-child test is a system call per wait, and
         * a vfork child is alone here too (its parent is suspended in
         * vfork; the withdrawal and the re-arm both happen in this call). */
        if (!c->spin_withdrew && __libc_single_threaded && c->sole && !lp_rv(c) &&
            local_ring_rx_armed(&c->ch, dir)) {
            local_ring_rx_wait_cancel(&c->ch, dir);
            c->spin_withdrew = 1;
        }
        if (ask && c->spin_withdrew)
            ask->withdrew = 1;  /* (the engine gives it SPUN at the end) */
        return;
    }
    if (!c->spin_withdrew)
        return;
    c->spin_withdrew = 0;
    if (arm == SHIM_READY_SPUN && empty)
        lp_rx_arm(c, c->efd.fd >= 0);                  /* withdraws itself if bytes came */
}

/* SHIM_READY_ARM_NEXT: an edge-triggered waiter that reported the bytes in
 * the ring sleeps on; the kernel would give it an edge at the next packet,
 * so the peer's next write must wake it (announced with data there).
 * Without it, a reader that stops short of EAGAIN (gRPC, trusting
 * TCP_CM_INQ or FIONREAD) while another thread's wait had looked at the
 * bytes before it read them was never woken for the next ones. */
static void lp_arm_next(lp_conn_t *c, short ev, shim_ready_ask_t *ask)
{
    if (!(ev & (POLLIN | POLLRDNORM)) || c->state != LP_PAIRED || !lp_rx_ring(c) || !c->ch.base)
        return;
    lp_lock(c, LP_RX);
    if (lp_rx_ring(c) && !lp_rv(c))
        lp_rx_arm_ex(c, ask && ask->wake_listening, 1);
    lp_unlock(c, LP_RX);
}

/* NOTHING NEW (issue 33): a look for input alone at a connection that
 * receives through its ring, with nothing left over from a hand-back,
 * nothing the kernel said (kev: the kernel's answer, -1 when it was not
 * asked; its socket's end or error comes through it), no end or error
 * seen, no rendezvous under way, and no record in the ring, has nothing
 * ready: said without the receive lock and the ring's validating reads
 * (an MPI progress loop's zero-timeout wait is mostly this, about 450
 * instructions a look before).  A peer gone without a record leaves
 * either a lingering socket, looked at here, or its socket's end. */
static int lp_rx_idle(lp_conn_t *c, int kev)
{
    return kev <= 0 && c->state == LP_PAIRED && lp_rx_ring(c) && !c->rv_seen &&
           c->hb.pb_off >= c->hb.pb_len && !c->kern_err && !c->kern_eof && !c->rd_shut &&
           local_ring_rx_idle(&c->ch, lp_rxdir(c)) && !lp_rv(c) && !lp_peer_lingers(c);
}

short lp_revents(shim_fd_t *f, int fd, short ev, int kev, int arm, shim_ready_ask_t *ask)
{
    lp_conn_t *c = lp_conn(f);
    short rev = 0, ein = ev & (POLLIN | POLLRDNORM), eout = ev & (POLLOUT | POLLWRNORM);
    int64_t rd, wr;
    int rc = 0;

    if (arm == SHIM_READY_ARM_NEXT) {
        lp_arm_next(c, ev, ask);
        return 0;
    }

    lp_ring_others(c);
    if (ask)                    /* (spinning over a paired one may pay) */
        ask->ring |= c->state == LP_PAIRED && c->ch.base ? 1 : 2;
    if (arm == SHIM_READY_LOOK && !eout && lp_rx_idle(c, kev))
        return 0;
    if (c->state == LP_PAIRED && (c->rv_seen || lp_rv(c)))
        kev = lp_rv_progress(c, fd, ev, kev, ask);
    else if (c->rv_seen && kev < 0)
        kev = lp_kernel_revents(fd, ev);        /* its epoll registration may be stale */
    lp_rx_catch_up(c);
    if (c->hb.pb_off < c->hb.pb_len)
        rev |= ein;
    if (c->state != LP_PAIRED || !lp_rx_ring(c)) {
        /* Receiving in the kernel: its readiness is the truth, except for
         * doorbells beyond the switch point, which the next read drops
         * (they make at most one early wake-up). */
        rev |= kev < 0 ? 0 : (short)(kev & (ev | POLLHUP | POLLERR | POLLNVAL));
        if (c->state == LP_PAIRED && lp_tx_ring(c)) {
            rev &= ~(POLLOUT | POLLWRNORM);
            wr = lp_tx_room(c, LP_ROOM_KEEP + 1);
            if (eout && (wr > LP_ROOM_KEEP || wr < 0 || lp_peer_gone(c)))
                rev |= eout;
            else if (eout && arm == SHIM_READY_ARM &&
                     local_ring_tx_wait_prepare(&c->ch, lp_txdir(c),
                                                lp_tx_want(c, LOCAL_RING_CHUNK)) == 1)
                lp_armed_recheck(c, ask);
        }
        return rev;
    }
    lp_lock(c, LP_RX);
    rd = local_ring_readable(&c->ch, lp_rxdir(c));
    /* The kernel says readable: doorbells (or EOF, a reset), drained here.
     * Except in a process with more than one thread while the ring has
     * data for this waiter: then the doorbell stays until the receive that
     * empties the ring (bell_kept), so that every other waiter woken by the
     * same byte (another thread's poll, a second epoll set, whose kernel
     * re-check would drop the event once the byte is gone) sees it too.
     * (Not for longer: a process that exits with a byte unread in its
     * socket makes the kernel reset the connection.) */
    if (kev > 0 && (kev & POLLIN)) {
        /* (a wait for output only keeps it too: the byte may be the wake-up
         * of another thread's wait for input that has not slept yet) */
        if (!__libc_single_threaded && rd > 0 &&
            (rd >= (c->lowat > 0 ? c->lowat : 1) || c->rd_shut))
            c->bell_kept = 1;
        else
            lp_drain(c, fd);
    }
    if (rd == 0) {
        local_ring_frame_t fr;

        if ((local_ring_frame_next(&c->ch, lp_rxdir(c), &fr) == 0 &&
             fr.type == LOCAL_RING_REC_EOF) || lp_peer_lingers(c))
            rev |= ein | (ev & POLLRDHUP);  /* a lingering peer sends no FIN: gone is EOF */
    } else if (rd > 0 && (__atomic_load_n(&lp_side(c, !c->ch.side)->wr_eof, __ATOMIC_ACQUIRE) ||
                          local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE)) {
        /* the end is behind the data: the kernel says EPOLLRDHUP once the FIN
         * is in, unread bytes or not (nginx reads an upstream to its end
         * only when told so with the data: its edge-triggered wait hears
         * nothing more) */
        rev |= ev & POLLRDHUP;
    }
    if (rd < 0 || c->kern_err)
        rev |= POLLERR | POLLHUP | ein;
    else if (c->kern_eof)
        rev |= ein | (ev & POLLRDHUP) | POLLHUP;
    else if (rd >= (c->lowat > 0 ? c->lowat : 1) || (rd > 0 && c->rd_shut) || c->rd_shut)
        rev |= ein;
    if (arm != SHIM_READY_LOOK)
        lp_spin_arm(c, arm, ein && !(rev & ein) && rd == 0, ask);
    if (ein && !(rev & ein) && arm == SHIM_READY_ARM) {
        if (rd == 0) {
            if (lp_rx_arm(c, ask && ask->wake_listening) == 0 && c->lowat <= 1)
                rev |= ein;
        } else {
            /* Some bytes, fewer than SO_RCVLOWAT: the ring cannot ring at a
             * level, so the waiter looks again every few milliseconds. */
            lp_recheck(ask, 5);
        }
    }
    lp_unlock(c, LP_RX);
    if (eout) {
        if (!lp_tx_ring(c)) {
            rev |= kev < 0 ? 0 : (short)(kev & eout);
        } else {
            wr = lp_tx_room(c, LP_ROOM_KEEP + 1);
            if (wr > LP_ROOM_KEEP || wr < 0 || lp_peer_gone(c))
                rev |= eout;
            else if (arm == SHIM_READY_ARM && (rc = local_ring_tx_wait_prepare(&c->ch, lp_txdir(c),
                                                             lp_tx_want(c, LOCAL_RING_CHUNK))) == 0)
                rev |= eout;
            else if (rc == 1)
                lp_armed_recheck(c, ask);
        }
    }
    if (kev > 0)
        rev |= (short)(kev & (POLLERR | POLLNVAL));
    return rev;
}

int lp_rx_avail(lp_conn_t *c, int fd, const int *kernel, int *ring)
{
    int64_t rd = 0;
    uint64_t sw;
    int k = 0;

    lp_lock(c, LP_RX);
    if (!lp_rx_ring(c)) {   /* the kernel's queue counts */
        if (kernel)
            k = *kernel;
        else if (zc_real.ioctl(fd, FIONREAD, &k) < 0) {
            lp_unlock(c, LP_RX);
            return -1;
        }
    }
    if (lp_rx_plain(c)) {
        rd = (int64_t)k + c->hb.pb_len - c->hb.pb_off;
        lp_unlock(c, LP_RX);
        return rd > INT32_MAX ? INT32_MAX : (int)rd;
    }
    sw = c->ch.base ? local_pair_switch_get(&c->ch, lp_rxdir(c)) : LOCAL_PAIR_SWITCH_UNSET;
    if (!lp_rx_ring(c)) {
        /* Kernel bytes before the switch point are data, the rest doorbells. */
        if (local_pair_switch_known(sw) && (uint64_t)k > sw - c->rx_kernel)
            k = (int)(sw - c->rx_kernel);
    }
    if (lp_rx_ring(c) || (local_pair_switch_known(sw) && c->rx_kernel + (uint64_t)k == sw)) {
        rd = local_ring_readable(&c->ch, lp_rxdir(c));
        if (ring)
            *ring = 1;
    }
    lp_unlock(c, LP_RX);
    rd = rd < 0 ? 0 : rd + k;
    return rd > INT32_MAX ? INT32_MAX : (int)rd;
}

int path_local_ioctl(shim_fd_t *f, int fd, unsigned long req, void *arg, int *rc)
{
    lp_conn_t *c = lp_conn(f);
    int n;

    if (req != FIONREAD || !arg || (c->state != LP_PAIRED && c->hb.pb_off >= c->hb.pb_len))
        return 0;
    if ((n = lp_rx_avail(c, fd, NULL, NULL)) < 0)
        return 0;       /* the kernel's own answer (and error) */
    *(int *)arg = n;
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
    if (level == IPPROTO_TCP && name == TCP_INQ && len >= sizeof(int)) {
        c->inq = *(const int *)val ? 2 : 1;
        return;
    }
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


/* SO_ERROR: an internal read (a doorbell drain) that met the kernel's
 * pending error took it from the socket; the application gets it once, as
 * the kernel would have given it. */
static int lp_so_error(lp_conn_t *c, int fd, void *val, socklen_t *len)
{
    int k = 0;

    if (!c->kern_err || c->err_told || !val || !len || *len < sizeof(int) ||
        zc_real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &k, &(socklen_t){ sizeof(k) }) < 0)
        return 0;
    *(int *)val = k ? k : c->kern_err;
    *len = sizeof(int);
    c->err_told = 1;
    return 1;
}

int path_local_getsockopt(shim_fd_t *f, int fd, int level, int name, void *val, socklen_t *len)
{
    lp_conn_t *c = lp_conn(f);

    if (level == SOL_SOCKET && name == SO_ERROR)
        return lp_so_error(c, fd, val, len);
    if (level != IPPROTO_TCP || name != TCP_NODELAY || !c->bell_push || !val || !len ||
        *len < sizeof(int))
        return 0;
    *(int *)val = c->app_nodelay;
    *len = sizeof(int);
    return 1;
}

