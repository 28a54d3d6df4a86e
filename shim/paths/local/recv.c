/* The local path: receiving (ring mode, kernel mode before the switch point,
 * blocking sleeps on the futex word). */
#include "lp_int.h"
#include "recv.h"
#include "bell.h"
#include "efd.h"
#include "handback.h"
#include "pairing.h"
#include "ready.h"
#include "xchg.h"
#include "zc_sys.h"

static int lp_any_norestart(const lp_wait_t *w);

/* A wait of ours was interrupted (EINTR): would the application's blocking
 * call have been?  The kernel restarts a socket call after a handler with
 * SA_RESTART unless the socket has a timeout.  A handler of ours to see
 * (SIGDEFER's trampoline counts them) says which it was; otherwise any
 * installed handler without SA_RESTART counts. */
int lp_interrupted(const lp_wait_t *w)
{
    if (shim_sig_ran != w->sig0)
        return lp_sig_interrupts(w);
    return lp_any_norestart(w);
}

/* A handler of the application's ran on this thread during the call,
 * outside the kernel's wait (while we looked or spun): the kernel would
 * have interrupted it (a handler without SA_RESTART, or any handler when
 * the socket has a timeout), so it must not go to sleep now. */
int lp_sig_interrupts(const lp_wait_t *w)
{
    return w->deadline >= 0 ? shim_sig_ran != w->sig0 : shim_sig_ran_intr != w->sig0_intr;
}

/* Some installed handler has no SA_RESTART (or the socket has a timeout):
 * the guess when the handler that ran is not ours to see
 * (ZCSOCK_SIGNAL_DEFER=0, a raw rt_sigaction). */
static int lp_any_norestart(const lp_wait_t *w)
{
    struct sigaction sa;
    int sig;

    if (w->deadline >= 0)
        return 1;
    for (sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP || shim_sigaction(sig, NULL, &sa))
            continue;
        if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN && !(sa.sa_flags & SA_RESTART))
            return 1;
    }
    return 0;
}

/* What the kernel socket says, without taking data the application still
 * has to read there: EOF, an error, a FIN while we send through the ring. */
void lp_kernel_look(lp_conn_t *c, int fd, int role)
{
    struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };
    char b;
    ssize_t n;

    /* Only a process with one thread that alone holds this side drains
     * doorbells here: elsewhere a byte may be another waiter's wake-up (a
     * poll/epoll waiter for room or data in another thread, woken by it,
     * whose kernel re-check drops the event once the byte is gone: a
     * blocked sender's slice that drained it left that waiter asleep for
     * good).  Their own waits drain them; here only the end is looked for. */
    if (lp_rx_catch_up(c) && lp_alone(c)) {
        lp_drain(c, fd);
        return;
    }
    if (zc_real.poll(&p, 1, 0) <= 0)
        return;
    /* A FIN while we send through the ring means the peer closed (it would
     * have ended its side with an EOF record otherwise). */
    if (role == LP_TX && lp_tx_ring(c) && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        c->kern_eof = 1;
    n = zc_real.recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        c->kern_eof = 1;
    else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        c->kern_err = errno;
}

/* --- spinning before a sleep (the policy: common/zc_spin.h) ---------------------- */

/* Spin up to us microseconds for *word to leave kind, the futex kind we
 * announced (the peer's claim).  1 when it did. */
static int lp_spin(const uint32_t *word, uint32_t kind, unsigned us)
{
    int64_t t0 = zc_now_us();

    for (int i = 0;; i++) {
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != kind)
            return 1;
        __builtin_ia32_pause();
        if ((i & 63) == 63 && zc_now_us() - t0 >= (int64_t)us)
            return 0;
    }
}

/* The length of the next sleep slice in ms, or -EAGAIN past the
 * application's SO_RCVTIMEO / SO_SNDTIMEO (read once per call into w). */
long lp_slice_ms(lp_conn_t *c, int fd, int role, lp_wait_t *w)
{
    /* Closed by another thread while we waited: its number may be another
     * socket's already, so we stop here (PINS keep c itself alive). */
    if (__atomic_load_n(&c->closed, __ATOMIC_ACQUIRE))
        return -EBADF;
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
            return (long)left;
    }
    return LP_SLEEP_SLICE_MS;
}

/* Sleep in a blocking call until the peer wakes our futex word (announced
 * with LOCAL_RING_WAIT_FUTEX for role LP_RX: data; LP_TX: space, or BOTH
 * when a POLLOUT waiter stands beside us), after a spin (above).  The sleep is cut in slices so a peer that died without
 * waking us is noticed through the kernel socket.  Returns 0 (look again)
 * or -errno for the application (EINTR, EAGAIN on SO_*TIMEO). */
int lp_sleep(lp_conn_t *c, int fd, int role, lp_wait_t *w)
{
    uint32_t *word = role == LP_RX
                         ? local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_CONS)
                         : local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_PROD);
    /* what the word holds while our futex part stands: FUTEX, or BOTH (a
     * sender beside a POLLOUT waiter); anything else means it was claimed
     * or replaced meanwhile, so look again (read from the word: the kind
     * last stored may be another thread's) */
    uint32_t kind = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    long ms = lp_slice_ms(c, fd, role, w);
    struct timespec ts = { 0, ms * 1000000L };
    unsigned spin;
    uint32_t *spinning;
    int64_t t0;
    long r;

    if (ms < 0)
        return (int)ms;
    if (kind != LOCAL_RING_WAIT_FUTEX && kind != LOCAL_RING_WAIT_BOTH)
        return 0;
    t0 = zc_now_us();
    spin = zc_spin_for(&c->spin[role]);
    /* SPINNING WAITERS (local_ring.h): only where no other waiter of ours
     * can stand in this announcement */
    spinning = spin && kind == LOCAL_RING_WAIT_FUTEX && lp_alone(c)
                   ? local_ring_spinning(&c->ch, word) : NULL;
    if (spinning)
        __atomic_store_n(spinning, 1, __ATOMIC_SEQ_CST);
    if (spin && lp_spin(word, kind, spin)) {
        if (spinning)
            __atomic_store_n(spinning, 0, __ATOMIC_RELAXED);
        zc_stat_add(ZC_STAT_LOCAL_SPINS_PAID, 1);
        zc_spin_learn(&c->spin[role], t0);
        return 0;
    }
    if (spinning)       /* before the FUTEX_WAIT: a claim from now on wakes */
        __atomic_store_n(spinning, 0, __ATOMIC_SEQ_CST);
    if (spin)
        zc_stat_add(ZC_STAT_LOCAL_SPINS_SLEPT, 1);
    if (lp_sig_interrupts(w))
        return -EINTR;
    zc_stat_add(ZC_STAT_LOCAL_SLEEPS, 1);
    r = zc_syscall(SYS_futex, word, FUTEX_WAIT, kind, &ts, NULL, 0);
    zc_spin_learn(&c->spin[role], t0);
    if (r < 0 && errno == EINTR)
        return lp_interrupted(w) ? -EINTR : 0;
    if (r < 0 && errno == ETIMEDOUT)
        lp_kernel_look(c, fd, role);
    return 0;
}

/* A blocking receive that joins a listening announcement (lp_rx_listened)
 * sleeps where that announcement is heard: the kernel socket (a doorbell
 * byte) and our wake-up eventfd, in slices like lp_sleep.  Returns 0 (look
 * again) or -errno for the application. */
static int lp_sleep_listening(lp_conn_t *c, int fd, int efd, lp_wait_t *w)
{
    struct pollfd p[2] = { { fd, POLLIN | POLLRDHUP, 0 }, { efd, POLLIN, 0 } };
    long ms = lp_slice_ms(c, fd, LP_RX, w);
    int r;

    if (ms < 0)
        return (int)ms;
    if (lp_sig_interrupts(w))
        return -EINTR;
    zc_stat_add(ZC_STAT_LOCAL_SLEEPS, 1);
    r = zc_real.poll(p, efd >= 0 ? 2 : 1, (int)ms);
    if (r < 0 && errno == EINTR)
        return lp_interrupted(w) ? -EINTR : 0;
    if (r == 0)
        lp_kernel_look(c, fd, LP_RX);
    return 0;
}

/* Does a receive announcement another waiter may rely on stand for this
 * connection (a socket or eventfd kind: a poll/epoll waiter in another
 * thread, or another holder)?  Then a blocking receive joins it rather
 * than replacing it with the futex kind, which would wake only itself.  A
 * process with one thread that alone holds this side has no such waiter. */
static int lp_rx_listened(lp_conn_t *c)
{
    uint32_t cur;

    if (lp_alone(c))
        return 0;
    cur = __atomic_load_n(local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_CONS),
                          __ATOMIC_ACQUIRE);
    return cur == LOCAL_RING_WAIT_SOCKET || cur == LOCAL_RING_WAIT_EVENTFD;
}

/* Handed back: the bytes a drain kept first, then the kernel's.  RX lock
 * held. */
static ssize_t lp_recv_plain(lp_conn_t *c, shim_fd_t *f, int fd, struct msghdr *msg, int flags)
{
    ssize_t n;

    if (c->hb.pb_off < c->hb.pb_len) {
        n = (ssize_t)lp_pb_take(c, msg, 0, flags & MSG_PEEK);
        msg->msg_flags = 0;
        msg->msg_controllen = 0;
        msg->msg_namelen = 0;
        shim_copy_account(f, 0, n, 1);
        return n;
    }
    n = shim_kernel_recvmsg(fd, msg, flags & ~MSG_WAITALL);
    shim_copy_account(f, 0, n, 1);
    return n < 0 ? -errno : n;
}

/* No switch point yet: look before taking.  One published while we wait
 * makes what follows it doorbells, or, after a hand-back, data that comes
 * after the ring's (which a read must not take, nor the descriptors that
 * may travel with it).  Returns the bytes seen (> 0, *data_p of them data),
 * or the end: 0 (EOF, msg filled in) or -errno.  RX lock held. */
static ssize_t lp_recv_look(lp_conn_t *c, shim_fd_t *f, int fd, struct msghdr *msg, int flags,
                            size_t *data_p)
{
    struct msghdr pm = *msg;
    ssize_t n;

    pm.msg_control = NULL;
    pm.msg_controllen = 0;
    pm.msg_name = NULL;
    pm.msg_namelen = 0;
    n = zc_real.recvmsg(fd, &pm, (flags & ~MSG_WAITALL) | MSG_PEEK);
    if (n > 0 && c->state == LP_PENDING && lp_r3_due(c))
        lp_pickup_try(c, fd, 1);    /* R3 */
    if (n <= 0) {
        msg->msg_flags = pm.msg_flags;
        msg->msg_controllen = 0;
        msg->msg_namelen = 0;
        shim_copy_account(f, 0, n, 1);
        return n < 0 ? -errno : 0;
    }
    *data_p = local_pair_rx_split(c->state == LP_PAIRED ? &c->ch : NULL, lp_rxdir(c),
                                  c->rx_kernel, (size_t)n);
    return n;
}

/* A MSG_PEEK saw only doorbells (n bytes): consume them, they are not the
 * application's.  RX lock held. */
static void lp_recv_skip_bells(lp_conn_t *c, int fd, size_t n)
{
    char buf[256];

    while (n) {
        ssize_t k = zc_real.recv(fd, buf, n < sizeof(buf) ? n : sizeof(buf), MSG_DONTWAIT);

        if (k <= 0)
            break;
        n -= (size_t)k;
        c->bells_drained += (size_t)k;
    }
}

/* Kernel mode of our receiving direction (rule R1): receive from the kernel
 * socket, never past the switch point, and keep only the data.  RX lock
 * held; returns with it held. */
ssize_t lp_recv_kernel(lp_conn_t *c, shim_fd_t *f, int fd, struct msghdr *msg, int flags,
                              int *again)
{
    struct iovec win[LP_IOV_WIN];
    struct msghdr m = *msg;
    uint64_t sw = c->ch.base ? local_pair_switch_get(&c->ch, lp_rxdir(c))
                             : LOCAL_PAIR_SWITCH_UNSET;
    size_t limit = SIZE_MAX, data = 0;
    ssize_t n;

    *again = 0;
    if (lp_rx_plain(c))
        return lp_recv_plain(c, f, fd, msg, flags);
    if (local_pair_switch_known(sw)) {
        if (c->rx_kernel >= sw) {
            lp_dir_set(c, LP_RX, LP_DIR_RING);
            local_ring_rx_wait_cancel(&c->ch, lp_rxdir(c));   /* R2: take over S3 */
            *again = 1;
            return 0;
        }
        limit = (size_t)(sw - c->rx_kernel);
        m.msg_iov = win;
        m.msg_iovlen = (size_t)lp_iov_window(msg->msg_iov, msg->msg_iovlen, 0, limit, win);
    }
    else if (sw == LOCAL_PAIR_SWITCH_UNSET && !(flags & MSG_PEEK)) {
        n = lp_recv_look(c, f, fd, msg, flags, &data);
        if (n <= 0 || !data) {
            *again = n > 0;     /* all past the switch point: the ring's turn */
            return n > 0 ? 0 : n;
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
    /* R3: the offer precedes the server's first byte, or (deferred) a
     * later one */
    if (c->state == LP_PENDING && lp_r3_due(c))
        lp_pickup_try(c, fd, 1);
    data = local_pair_rx_split(c->state == LP_PAIRED ? &c->ch : NULL, lp_rxdir(c),
                               c->rx_kernel, (size_t)n);
    if (!(flags & MSG_PEEK)) {
        c->rx_kernel += data;
        c->bells_drained += (size_t)n - data;
    } else if (!data) {
        lp_recv_skip_bells(c, fd, (size_t)n);
    }
    shim_copy_account(f, 0, (ssize_t)data, 1);
    if (!data)
        *again = 1;     /* only doorbells: the rest comes from the ring */
    return (ssize_t)data;
}

/* Ring mode of our receiving direction.  RX lock held. */
ssize_t lp_recv_ring(lp_conn_t *c, int fd, struct msghdr *msg, int flags, size_t skip,
                            int *eof)
{
    struct iovec win[LP_IOV_WIN];
    size_t done = 0;
    int n = lp_iov_window(msg->msg_iov, msg->msg_iovlen, skip, SIZE_MAX, win), rc;

    if (zc_config.exchange && !(flags & MSG_PEEK))
        lp_xchg_rx_reclaim(c, win, n);
    rc = local_ring_read(&c->ch, lp_rxdir(c), win, n, (flags & MSG_PEEK) ? LOCAL_RING_PEEK : 0,
                         &done);

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
        rc &= ~(LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX | LOCAL_RING_F_EVENTFD);
    }
    lp_wake(c, fd, rc, local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD));
    if (c->bell_kept && done && !(flags & MSG_PEEK) &&
        local_ring_readable(&c->ch, lp_rxdir(c)) == 0) {
        c->bell_kept = 0;       /* the data a kept doorbell announced is read */
        lp_drain(c, fd);
    }
    if (rc & LOCAL_RING_F_EOF)
        *eof = 1;
    if (!(flags & MSG_PEEK))     /* (a peek receives nothing yet) */
        zc_stat_add(ZC_STAT_LOCAL_RECV_BYTES, done);
    if (done && !(flags & MSG_PEEK))
        c->ch.hot = 1;      /* request/response: our next message may go to the hot window */
    return (ssize_t)done;
}

/* A receive on a connection handed back while our ring still holds bytes
 * for the initiator: give them to the kernel first, and while the kernel
 * takes no more and nothing is there to read, wait for either (the
 * initiator's program may read only after our bytes reached it).  Returns
 * 1 to look again after waiting, 0 to go on receiving. */
int lp_rv_return(lp_conn_t *c, int fd, int flags, lp_wait_t *w)
{
    struct pollfd p = { fd, POLLIN | POLLOUT, 0 };
    int rc;

    lp_lock(c, LP_TX);
    rc = lp_tx_ring(c) ? lp_rv_tx(c, fd, 0) : 0;
    lp_unlock(c, LP_TX);
    if (rc != -EAGAIN || !lp_rx_plain(c) || lp_nonblocking(c, fd, flags))
        return 0;
    if (zc_real.poll(&p, 1, LP_SLEEP_SLICE_MS) < 0 && errno == EINTR && lp_interrupted(w))
        return 0;       /* the receive itself reports the signal */
    return !(p.revents & (POLLIN | POLLHUP | POLLERR));
}

/* One receive call's state across the steps below. */
typedef struct lp_rx {
    struct msghdr *msg;
    int flags, waitall;
    int peekall;            /* MSG_PEEK | MSG_WAITALL, blocking: the kernel waits until
                             * the whole length can be peeked (or EOF, an error, the
                             * timeout) */
    size_t total, got, ctl0;
    socklen_t name0;
    lp_wait_t w;
} lp_rx_t;

/* What the call returns now: the bytes so far, else rc. */
static ssize_t lp_rx_done(const lp_rx_t *r, ssize_t rc)
{
    return r->got ? (ssize_t)r->got : rc;
}

static ssize_t lp_rx_peek_span(lp_conn_t *c, int fd, lp_rx_t *r);

/* Our receiving direction still reads the kernel stream.  RX lock held;
 * released on return. */
static ssize_t lp_rx_kernel_step(lp_conn_t *c, shim_fd_t *f, int fd, lp_rx_t *r)
{
    struct iovec win[LP_IOV_WIN];
    struct msghdr m = *r->msg;
    int again = 0;
    ssize_t n;

    m.msg_iov = win;
    m.msg_iovlen = (size_t)lp_iov_window(r->msg->msg_iov, r->msg->msg_iovlen, r->got, SIZE_MAX,
                                         win);
    m.msg_controllen = r->ctl0;     /* a ring read before may have cleared them */
    m.msg_namelen = r->name0;
    n = lp_recv_kernel(c, f, fd, &m, r->flags, &again);
    lp_unlock(c, LP_RX);
    r->msg->msg_flags = m.msg_flags;        /* what the kernel said goes back */
    r->msg->msg_controllen = m.msg_controllen;
    r->msg->msg_namelen = m.msg_namelen;
    if (n < 0)
        return lp_rx_done(r, n);
    if (n == 0 && !again)
        return (ssize_t)r->got;             /* EOF */
    r->got += (size_t)n;
    if (r->peekall && n > 0 && r->got < r->total)
        return lp_rx_peek_span(c, fd, r);
    if (r->got && (!r->waitall || r->got == r->total))
        return (ssize_t)r->got;
    return LP_CONTINUE;
}

/* The peer's last holder marked its side gone (or the kernel socket ended):
 * what it wrote before it left, then EOF or its error.  RX lock held;
 * released on return. */
static ssize_t lp_rx_gone(lp_conn_t *c, int fd, lp_rx_t *r)
{
    int eof = 0;
    ssize_t n = lp_recv_ring(c, fd, r->msg, r->flags, r->got, &eof);

    lp_unlock(c, LP_RX);
    if (n > 0)
        return (ssize_t)(r->got + (size_t)n);
    if (c->kern_err && !r->got)
        c->err_told = 1;
    return lp_rx_done(r, c->kern_err ? -c->kern_err : 0);
}

/* The ring is empty.  What does the kernel socket say?  (A peer whose last
 * holder closed marked its side gone before its kernel socket closed.)  A
 * blocking call that is owed no doorbell skips the look: its sleep looks
 * every slice, and an orderly close wakes it.  Then wait, or say EAGAIN.
 * RX lock held; released on return. */
static ssize_t lp_rx_empty(lp_conn_t *c, int fd, lp_rx_t *r)
{
    int nonblock = lp_nonblocking(c, fd, r->flags), rc, efd = -1;
    int listened = !nonblock && lp_rx_listened(c);

    /* A non-blocking receive that found the ring empty looks at the kernel
     * socket only when something may be there for it: doorbells owed, or
     * no look (here or by a readiness wait, which drains whatever the
     * kernel reports readable: doorbells, the FIN or reset of a peer that
     * died) for LP_LOOK_US.  Otherwise the look is one more system call per
     * message for an event-driven receiver, and finds nothing. */
    if (listened || c->ch.bells_claimed != c->bells_drained ||
        (nonblock && zc_now_us() - c->kern_look_us >= LP_LOOK_US))
        lp_drain(c, fd);
    if (!c->kern_eof && !c->kern_err &&
        local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE && !lp_peer_lingers(c)) {
        /* Its last holder marked the side gone just before closing: the
         * FIN or reset is behind the doorbells, or about to arrive. */
        lp_drain_ex(c, fd, 1);
        if (!c->kern_eof && !c->kern_err) {
            zc_real.poll(&(struct pollfd){ fd, POLLIN | POLLRDHUP, 0 }, 1, 100);
            lp_drain_ex(c, fd, 1);
        }
    }
    if (c->kern_eof || c->kern_err || local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE)
        return lp_rx_gone(c, fd, r);
    if (nonblock) {
        rc = lp_rx_arm(c, 1);       /* arm for the poll/epoll wait that follows */
        lp_unlock(c, LP_RX);
        return rc == 0 ? LP_CONTINUE : lp_rx_done(r, -EAGAIN);
    }
    if (listened) {
        /* join the standing announcement; its eventfd is reset first (the
         * ring is empty: nothing it announced waits), then the re-check */
        efd = lp_efd_reset(c);
        rc = lp_rx_arm(c, 1);
    } else {
        lp_ring_others(c);
        rc = local_ring_rx_wait_prepare_kind(&c->ch, lp_rxdir(c), LOCAL_RING_WAIT_FUTEX);
    }
    lp_unlock(c, LP_RX);
    if (rc < 0)
        return lp_rx_done(r, lp_broken(c));
    if (rc == 0)
        return LP_CONTINUE;
    if (listened) {         /* the announcement stays for the other waiters */
        rc = lp_sleep_listening(c, fd, efd, &r->w);
        return rc < 0 ? lp_rx_done(r, rc) : LP_CONTINUE;
    }
    rc = lp_sleep(c, fd, LP_RX, &r->w);
    /* a poll/epoll waiter's announcement that replaced ours stays */
    local_ring_rx_wait_cancel_kind(&c->ch, lp_rxdir(c), LOCAL_RING_WAIT_FUTEX);
    return rc < 0 ? lp_rx_done(r, rc) : LP_CONTINUE;
}

/* MSG_PEEK | MSG_WAITALL found some bytes, not all: the ring announces only
 * an empty-to-non-empty change, so look again every half millisecond (the
 * peek starts over each time) until enough arrived, within the socket's
 * receive timeout.  RX lock held; released on return. */
static ssize_t lp_rx_peek_more(lp_conn_t *c, int fd, lp_rx_t *r)
{
    long ms;

    lp_unlock(c, LP_RX);
    ms = lp_slice_ms(c, fd, LP_RX, &r->w);
    if (ms < 0)
        return (ssize_t)r->got;     /* timed out: what could be peeked */
    if (lp_sig_interrupts(&r->w))
        return (ssize_t)r->got;
    zc_syscall(SYS_nanosleep, &(struct timespec){ 0, 500000 }, NULL);
    r->got = 0;
    return LP_CONTINUE;
}

/* MSG_PEEK | MSG_WAITALL peeked some kernel bytes, not all, while our
 * receiving direction still reads the kernel stream: when they reach the
 * peer's switch point the rest is in the ring, peeked behind them (the
 * kernel would have waited for the whole length: a peek that stopped at
 * the switch point returned short); then, short still, look again as
 * lp_rx_peek_more does.  RX lock not held. */
static ssize_t lp_rx_peek_span(lp_conn_t *c, int fd, lp_rx_t *r)
{
    uint64_t sw;
    int eof = 0;
    ssize_t k;

    lp_lock(c, LP_RX);
    sw = c->state == LP_PAIRED && c->ch.base ? local_pair_switch_get(&c->ch, lp_rxdir(c))
                                             : LOCAL_PAIR_SWITCH_UNSET;
    if (local_pair_switch_known(sw) && c->rx_kernel + r->got >= sw) {
        k = lp_recv_ring(c, fd, r->msg, r->flags, r->got, &eof);
        if (k < 0) {
            lp_unlock(c, LP_RX);
            return lp_rx_done(r, k);
        }
        r->got += (size_t)k;
    }
    if (r->got < r->total && !eof && !c->rd_shut && !c->kern_eof && !c->kern_err) {
        struct pollfd p = { fd, POLLRDHUP, 0 };

        /* (the kernel stream ended behind what was peeked: that is all) */
        if (zc_real.poll(&p, 1, 0) <= 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
            return lp_rx_peek_more(c, fd, r);
    }
    lp_unlock(c, LP_RX);
    return (ssize_t)r->got;
}

/* One pass of the receive loop. */
static ssize_t lp_rx_step(lp_conn_t *c, shim_fd_t *f, int fd, lp_rx_t *r)
{
    int eof = 0;
    ssize_t n;

    if (c->state == LP_PAIRED && lp_tx_ring(c) && lp_rv(c) &&
        lp_rv_return(c, fd, r->flags, &r->w))
        return LP_CONTINUE;
    lp_lock(c, LP_RX);
    if (c->state == LP_PAIRED)
        lp_xchg_offered(c);     /* a receive acknowledges the peer's unit transport */
    if (!lp_rx_ring(c))
        return lp_rx_kernel_step(c, f, fd, r);
    n = lp_recv_ring(c, fd, r->msg, r->flags, r->got, &eof);
    if (n < 0) {
        lp_unlock(c, LP_RX);
        return lp_rx_done(r, n);
    }
    r->got += (size_t)n;
    if (r->peekall && n && r->got < r->total && !eof && !c->rd_shut)
        return lp_rx_peek_more(c, fd, r);
    if ((r->got && (!r->waitall || r->got == r->total)) || eof || c->rd_shut) {
        lp_unlock(c, LP_RX);
        return (ssize_t)r->got;
    }
    if (!lp_rx_ring(c) || (!n && lp_rv(c) && lp_rv_sibling(c, LP_RX))) {
        /* handed back at a MARK (here or in another holder): the kernel
         * stream from here */
        lp_unlock(c, LP_RX);
        return LP_CONTINUE;
    }
    return lp_rx_empty(c, fd, r);
}

/* A receive through the kernel while the offer (server) or the announcement
 * (client) waits: counted in the stream position it leaves (rx_kernel) and
 * in flight (lp_kio_enter).  LP_CONTINUE when an offer or announcement was
 * under way meanwhile: look at the connection's state again. */
static ssize_t lp_rx_kernel_counted(lp_conn_t *c, shim_fd_t *f, int fd, struct msghdr *msg,
                                    int flags)
{
    ssize_t n;

    if (!lp_kio_enter(c))
        return LP_CONTINUE;
    n = shim_kernel_recvmsg(fd, msg, flags);
    shim_copy_account(f, 0, n, 1);
    if (n > 0 && !(flags & MSG_PEEK))
        __atomic_add_fetch(&c->rx_kernel, (uint64_t)n, __ATOMIC_RELAXED);
    lp_kio_exit(c);
    return n < 0 ? -errno : n;
}

/* TCP_INQ: with it on, the kernel ends each receive's ancillary data with
 * a TCP_CM_INQ message counting what is left to read, and gRPC trusts a 0
 * (it then waits for the next edge instead of reading to EAGAIN).  On a
 * paired connection the kernel's count is wrong both ways: it counts
 * doorbells and never the ring, so a receive that ended at the switch
 * point said 0 with the ring's bytes waiting, and the edge for them was
 * already taken (a gRPC stream stalled until the readiness net's 100 ms
 * look).  The count becomes what the application can read next (FIONREAD's
 * answer), and a receive through the ring carries one too, as the
 * kernel's would.  Whether TCP_INQ is on is learnt from the kernel's own
 * message, from setsockopt, or once from getsockopt. */
static void lp_rx_inq(lp_conn_t *c, shim_fd_t *f, int fd, struct msghdr *msg, size_t ctl0)
{
    struct cmsghdr *cm = NULL;
    int v, k, ring = 0;

    if (f->family == AF_UNIX || !msg->msg_control || ctl0 < CMSG_SPACE(sizeof(int)))
        return;
    if (msg->msg_controllen >= sizeof(struct cmsghdr))
        for (cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm))
            if (cm->cmsg_level == SOL_TCP && cm->cmsg_type == TCP_CM_INQ &&
                cm->cmsg_len == CMSG_LEN(sizeof(int)))
                break;
    if (cm) {
        c->inq = 2;
        memcpy(&k, CMSG_DATA(cm), sizeof(k));   /* the kernel's queue after this read */
    } else {
        if (!c->inq) {
            socklen_t l = sizeof(v);

            v = 0;
            c->inq = zc_real.getsockopt(fd, SOL_TCP, TCP_INQ, &v, &l) == 0 && v ? 2 : 1;
        }
        if (c->inq != 2 || msg->msg_controllen)
            return;
    }
    if ((v = lp_rx_avail(c, fd, cm ? &k : NULL, &ring)) < 0)
        return;
    /* the kernel counts the FIN's sequence number once it is in (one more
     * than the bytes left, so that a reader reads on to the end) */
    if (ring && c->ch.base && v < INT32_MAX &&
        (__atomic_load_n(&lp_side(c, !c->ch.side)->wr_eof, __ATOMIC_ACQUIRE) ||
         local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE))
        v++;
    if (!cm) {
        cm = (struct cmsghdr *)msg->msg_control;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        cm->cmsg_level = SOL_TCP;
        cm->cmsg_type = TCP_CM_INQ;
        msg->msg_controllen = CMSG_SPACE(sizeof(int));
    }
    memcpy(CMSG_DATA(cm), &v, sizeof(v));
}

ssize_t lp_recvmsg(shim_fd_t *f, int fd, struct msghdr *msg, int flags)
{
    lp_conn_t *c = lp_conn(f);
    lp_rx_t r = { .msg = msg, .flags = flags, .w = LP_WAIT_INIT };
    int rc0 = lp_msg_check(msg);
    ssize_t n;

    if (rc0)
        return rc0;
    r.total = lp_iov_total(msg->msg_iov, msg->msg_iovlen);
    r.waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);
    r.peekall = (flags & (MSG_WAITALL | MSG_PEEK)) == (MSG_WAITALL | MSG_PEEK) &&
                !lp_nonblocking(c, fd, flags);
    r.ctl0 = msg->msg_controllen;
    r.name0 = msg->msg_namelen;
    if (!(flags & MSG_PEEK))
        lp_turn(c, 0);
    while (c->state == LP_OFFER && (lp_offer_defer(c, fd) || lp_offer_wait(c, fd, 0, 0)))
        if ((n = lp_rx_kernel_counted(c, f, fd, msg, flags)) != LP_CONTINUE)
            return n;       /* the offer waits */
    if (c->state == LP_OFFER && lp_offer_due(c, fd)) {     /* the copy path now */
        n = shim_kernel_recvmsg(fd, msg, flags);
        shim_copy_account(f, 0, n, 1);
        return n < 0 ? -errno : n;
    }
again:
    if (c->state == LP_DEFER)
        lp_ann_due(c, fd, 0, 0);
    lp_connect_check(c, fd);
    if (c->state == LP_DEFER && !(flags & MSG_OOB)) {
        /* not announced yet: the kernel's, counted (R1) */
        if ((n = lp_rx_kernel_counted(c, f, fd, msg, flags)) == LP_CONTINUE)
            goto again;
        return n;
    }
    if ((flags & MSG_OOB) ||    /* urgent data: the kernel's */
        (c->state == LP_PLAIN && c->hb.pb_off >= c->hb.pb_len) ||
        (!lp_rx_ring(c) && c->state == LP_PENDING && c->pair.ann < 0)) {
        n = shim_kernel_recvmsg(fd, msg, flags);
        n = n < 0 ? -errno : n;
        if (!(flags & MSG_OOB))
            shim_copy_account(f, 0, n, 1);
        if (c->state == LP_PLAIN && c->why)
            lp_unclaim_plain(c, fd);    /* declined for good: the copy path from now on */
        return n;
    }
    if (lp_rx_ring(c))
        zc_stat_add(ZC_STAT_LOCAL_RECV_CALLS, 1);
    msg->msg_flags = 0;
    if (r.total == 0) {         /* the kernel returns at once for a zero-length read */
        msg->msg_controllen = 0;
        return 0;
    }
    do
        n = lp_rx_step(c, f, fd, &r);
    while (n == LP_CONTINUE);
    if (n >= 0)
        lp_rx_inq(c, f, fd, msg, r.ctl0);
    return n;
}
