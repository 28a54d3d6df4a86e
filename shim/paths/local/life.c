/* The local path: shutdown, close, fork, statistics, initialisation, and
 * the interface tables the shim dispatches through. */
#include "lp_int.h"
#include "life.h"
#include "bell.h"
#include "efd.h"
#include "exec.h"
#include "handback.h"
#include "pairing.h"
#include "ready.h"
#include "recv.h"
#include "scm.h"
#include "send.h"
#include "xchg.h"

/* PARTS (lp_int.h), in the order their hooks run. */
const lp_part_t *const lp_parts[] = {
    &lp_part_pairing, &lp_part_efd, &lp_part_xchg, &lp_part_mbox, &lp_part_pumps, NULL
};

/* Wake a futex sleeper that word announces (LOCAL_RING_WAIT_FUTEX, or BOTH:
 * the kinds that sleep in FUTEX_WAIT on it), after our side's state was
 * stored as gone (both sequentially consistent): a sleeper that announced
 * later finds the side gone, one that announced before is seen here.
 * Nobody announced (the common close): no system call. */
static void lp_wake_sleeper(uint32_t *word)
{
    uint32_t k = __atomic_load_n(word, __ATOMIC_SEQ_CST);

    if (k == LOCAL_RING_WAIT_FUTEX || k == LOCAL_RING_WAIT_BOTH)
        zc_syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}
#include "zc_key.h"
#include "shim_mem.h"
#include "zc_sys.h"

/* --- shutdown, close -------------------------------------------------------------- */

int path_local_shutdown(shim_fd_t *f, int fd, int how)
{
    lp_conn_t *c = lp_conn(f);
    int rc = 1;

    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
        return 1;
    lp_offer_cancel(c, "shutdown"); /* shut before its first data call: never paired */
    if (how != SHUT_WR && c->state != LP_PLAIN) {
        /* What the kernel does with bytes that arrive after SHUT_RD (and
         * what recv then returns) is the kernel's to say: plain first. */
        lp_release_to_kernel(c, fd, how == SHUT_RD ? "shutdown(SHUT_RD)" : "shutdown(SHUT_RDWR)");
    }
    if (how != SHUT_WR) {
        lp_lock(c, LP_RX);
        c->rd_shut = 1;
        lp_unlock(c, LP_RX);
    }
    if (how == SHUT_RD || c->state == LP_PLAIN)
        return 1;
    lp_lock(c, LP_TX);
    if (c->state == LP_PENDING || c->state == LP_DEFER) {
        lp_pending_end(c);  /* never attach now: we could not ring a switched peer any more */
    } else if (!c->wr_shut) {
        if (!lp_tx_switch(c) && local_pair_switch_refuse(&c->ch, lp_rxdir(c)) == -EALREADY)
            lp_tx_switch(c);    /* the peer switched: it attached, so may we */
        if (lp_tx_ring(c)) {
            int w = local_ring_eof_write(&c->ch, lp_txdir(c));

            if (w >= 0) {
                __atomic_store_n(&lp_side(c, c->ch.side)->wr_eof, 1, __ATOMIC_RELEASE);
                c->wr_shut = 1;
                lp_wake(c, fd, w, local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS));
                if (lp_rv(c))   /* the rest, then the FIN, later: readiness returns it */
                    (void)lp_rv_tx(c, fd, 0);
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
void lp_bells_settle(lp_conn_t *c, int fd)
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
                   c->ch.side, lp_tx_ring(c), lp_rx_ring(c), c->wr_shut, c->kern_shut_wr, c->rd_shut);
            return;
        }
        zc_real.poll(&(struct pollfd){ fd, POLLIN, 0 }, 1, 1);
    }
}

void lp_conn_release(lp_conn_t *c, int fd)
{
    lp_fds_note(c, fd, 0);
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) > 0) {
        lp_side_moved(c, fd);
        return;
    }
    if ((c->state == LP_OFFER || c->state == LP_DEFER) && c->pair.last)
        lp_decline(LOCAL_PAIR_R_SHORT);     /* closed before it paid for pairing */
    lp_life_learn(c);
    if (c->ch.base) {
        int last = lp_holders_add(c, -1) == 0, lingers = 0;

        if (last && c->state == LP_PAIRED && lp_rv(c)) {
            /* Handed back: what the ring holds goes to the kernel before the
             * close, as the kernel would still send its queue. */
            lp_lock(c, LP_TX);
            if (lp_rv_tx(c, fd, lp_rv_peer_pumping(c) ? 0 : LP_RV_CLOSE_MS) == -EAGAIN &&
                !lp_rv_peer_pumping(c))
                zc_log(ZC_LOG_WARN, "local path: fd %d closed with ring data the kernel did "
                       "not take within %d ms", fd, LP_RV_CLOSE_MS);
            lp_unlock(c, LP_TX);
        } else if (last && c->state == LP_PAIRED && !c->linger0 &&
                   (c->rd_shut || local_ring_readable(&c->ch, lp_rxdir(c)) <= 0)) {
            /* A graceful close (an abortive one must reset the peer now):
             * ring bytes of ours still unread keep the socket alive for a
             * hand-back of the peer's (LINGER, handback.c). */
            lingers = lp_linger_offer(c, fd);
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
            lp_linger_drop(c);
            local_ring_side_gone(&c->ch);
            if (lingers)
                lp_linger_wake(c, fd);
            lp_wake_sleeper(local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS));
            lp_wake_sleeper(local_ring_wait_word(&c->ch, lp_rxdir(c), LOCAL_RING_ROLE_PROD));
        }
    }
    /* The unit transport, the channel's mapping and its memfd (which the
     * linger's post proves with) go when no call uses them any more
     * (lp_conn_final). */
    lp_conn_free(c);
}

/* A claimed descriptor closes, or a watched listener (ctx: its beacon + 1,
 * 0 when it has none).  f is the entry as it was: the shim cleared the
 * table's already (shim_fd_release). */
void lp_forget(shim_fd_t *f, int fd)
{
    void *ctx = f->path_ctx;
    int watched = f->claim == SHIM_CLAIM_WATCH;

    if (watched)
        local_pair_fd_close((int)(intptr_t)ctx - 1);
    else if (ctx)
        lp_conn_release(ctx, fd);
}

void lp_dup(shim_fd_t *f, int fd)
{
    __atomic_add_fetch(&lp_conn(f)->refs, 1, __ATOMIC_RELAXED);
    lp_fds_note(lp_conn(f), fd, 1);
}

/* --- fork, statistics, configuration ------------------------------------------ */

/* The child holds every connection as soon as it exists: count it before
 * the fork (a parent closing right after fork must not be "the last"), and
 * take it back when the fork failed. */
void lp_fork_hold(int delta)
{
    lp_conn_t *c;

    lp_list_lock();
    for (c = lp.head; c; c = c->next)
        if (c->ch.base)
            lp_holders_add(c, delta);
    lp_list_unlock();
}

void lp_fork_prepare(void)
{
    lp_list_lock();
    lp_shared_again();
}

/* After a fork, parent and child hold every connection: an offer not made
 * yet, or a pickup not made yet, happens in whichever of them is the only
 * holder by then (a forking server's handler: the child, once the parent
 * closed its copy; a test harness that connects, forks and splits the two
 * ends: each process its own end); while both hold it, never (two readers
 * of one stream cannot both follow a switch-over). */
void lp_fork_parent(void)
{
    lp_conn_t *c;

    for (c = lp.head; c; c = c->next) {
        if (c->state == LP_DEFER)
            lp_offer_cancel(c, "fork");     /* not announced: never */
        if (c->state == LP_PENDING || c->state == LP_OFFER) {
            c->pair.forked = 1;
            c->fork_shared = c->state == LP_PENDING;
        }
    }
    lp_list_unlock();
    path_local_mbox_fork_parent();
}

ZC_FORK_CODE void lp_fork_child(void)
{
    lp_conn_t *c;

    lp_tid = 0;
    zc_key_fork_child();    /* a load another thread of the parent was making */
    lp_pumps_fork_child();
    for (c = lp.head; c; c = c->next) {
        /* the forking thread is the child's only one: a pickup another
         * thread of the parent was making (git's sideband reader, while
         * the main thread forks pack-objects) is not under way here */
        c->pair.pickup_busy = 0;
        if (c->state == LP_DEFER)
            lp_offer_cancel(c, "fork");     /* not announced: never */
        if (c->state == LP_PENDING || c->state == LP_OFFER) {
            c->pair.forked = 1;  /* requeue the pickup / offer only once the parent let go */
            c->fork_shared = c->state == LP_PENDING;
        }
    }
    lp_list_unlock();
    path_local_mbox_fork_child();
}

/* The counters by reason, named once: live with the shim's (zc_stats_aux),
 * reported when not zero. */
static void lp_stats_init(void)
{
    static char names[LOCAL_PAIR_R_COUNT + 2 * LP_HB_COUNT][ZC_STATS_AUX_NAME];
    static uint64_t none;
    int r, k = 0;

    for (r = 0; r < LOCAL_PAIR_R_COUNT; r++) {
        lp.declined[r] = &none;
        if (!r)
            continue;
        zc_fmt(names[k], sizeof(names[k]), "local.declined.%s", local_pair_reason_name(r));
        lp.declined[r] = zc_stats_aux(names[k++]);
    }
    for (r = 0; r < LP_HB_COUNT; r++) {
        zc_fmt(names[k], sizeof(names[k]), "local.handed_back.%s", lp_handback_names[r]);
        lp.handed_back[r] = zc_stats_aux(names[k++]);
    }
    for (r = 0; r < LP_HB_COUNT; r++) {
        zc_fmt(names[k], sizeof(names[k]), "local.never_paired.%s", lp_handback_names[r]);
        lp.never_paired[r] = zc_stats_aux(names[k++]);
    }
}

void lp_init(void)
{
    lp.enabled = (int)zc_config.local;
    if (lp.enabled && shim_proc_seccomp_mode() > 0) {
        /* started under a seccomp filter (systemd SystemCallFilter=, a
         * sandbox that execs): a system call the path adds (memfd_create,
         * futex, pidfd_getfd ...) might be refused or kill the process */
        lp.enabled = 0;
        zc_log(ZC_LOG_NOTICE, "local path off: this process runs under a seccomp filter");
    }
    lp.ring_size = (size_t)zc_config.local_ring;
    if (lp.ring_size & (lp.ring_size - 1)) {
        zc_log(ZC_LOG_WARN, "ZCSOCK_LOCAL_RING=%zu is not a power of two; using the default",
               lp.ring_size);
        lp.ring_size = 0;
    }
    lp_stats_init();
}

/* --- the interface (shim_path.h) ------------------------------------------------ */

static int lp_op_ioctl(shim_fd_t *f, int fd, unsigned long req, void *arg, int *rc_p)
{
    return path_local_ioctl(f, fd, req, arg, rc_p) ? 0 : SHIM_PATH_PASS;
}

static int lp_op_getsockopt(shim_fd_t *f, int fd, int level, int name, void *val,
                            socklen_t *len)
{
    return path_local_getsockopt(f, fd, level, name, val, len) ? 0 : SHIM_PATH_PASS;
}

static void lp_op_flags_changed(shim_fd_t *f, int fd)
{
    (void)fd;
    path_local_settings_changed(f);
}

/* Our descriptor (a channel memfd, ctx its connection; the mailbox, ctx
 * &mbox) moved from one number to another. */
static void lp_internal_moved(void *ctx, int from, int to)
{
    if (!path_local_mbox_moved(ctx, from, to) && !lp_efd_moved(ctx, from, to) &&
        !lp_xchg_moved(ctx, from, to))
        ((lp_conn_t *)ctx)->memfd = to;
}

static void lp_socket_made(int fd, int domain, int type)
{
    (void)fd;
    (void)type;
    if (domain == AF_UNIX)
        path_local_mbox_ensure_scm();   /* descriptors may come through it */
}

static void lp_fds_received(int fd, struct msghdr *msg)
{
    (void)fd;
    path_local_scm_received(msg);
}

/* I/O the hooks cannot see may meet the connection of fd: it is never
 * paired, or goes back to the kernel now (HAND-BACK). */
void lp_release_to_kernel(lp_conn_t *c, int fd, const char *why)
{
    lp_offer_cancel(c, why);
    if (c->state == LP_PENDING) {
        lp_lock(c, LP_TX);
        lp_pending_end(c);
        lp_unlock(c, LP_TX);
    }
    if (c->state == LP_PAIRED)
        lp_revert(c, fd, why);
}

static void lp_fd_exposed(int fd, const char *why)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (lp_claimed(f)) {
        lp_conn_t *c = lp_conn(f);
        int had_channel = c->ch.base != NULL;

        lp_release_to_kernel(c, fd, why);
        if (!had_channel)
            lp_unclaim_plain(c, fd);
    }
}

/* exit() with paired sockets still open: the kernel closes them next and
 * no hook runs, so what a last close does for the ring's unread bytes of
 * ours is done here (a hand-back of the peer's: give them to the kernel; a
 * graceful end: let the socket linger, LINGER in handback.c).  Only in a
 * process with one thread left (another may hold a connection's lock). */
static void lp_process_exit(const char *why)
{
    lp_conn_t *c;

    (void)why;
    lp_pumps_exit();        /* no subreaper's wait() sees them */
    path_local_mbox_exit();
    if (!__libc_single_threaded)
        return;
    /* what its connections still open lived (a PostgreSQL backend leaves
     * its client's socket to the kernel at exit) */
    for (c = __atomic_load_n(&lp.head, __ATOMIC_ACQUIRE); c; c = c->next)
        lp_life_learn(c);
    for (c = __atomic_load_n(&lp.head, __ATOMIC_ACQUIRE); c; c = c->next) {
        int fd = c->fds[0] >= 0 ? c->fds[0] : c->fds[1];

        if (fd < 0 || c->state != LP_PAIRED || !c->ch.base ||
            __atomic_load_n(&lp_side(c, c->ch.side)->holders, __ATOMIC_ACQUIRE) != 1)
            continue;
        if (lp_rv(c)) {
            lp_lock(c, LP_TX);
            (void)lp_rv_tx(c, fd, lp_rv_peer_pumping(c) ? 0 : LP_RV_CLOSE_MS);
            lp_unlock(c, LP_TX);
        } else if (!c->linger0 && (c->rd_shut || local_ring_readable(&c->ch, lp_rxdir(c)) <= 0) &&
                   lp_linger_offer(c, fd)) {
            local_ring_side_gone(&c->ch);
            lp_linger_wake(c, fd);
        }
    }
}

/* The whole process: every connection, and no new pairing. */
static void lp_process_exposed(const char *why)
{
    lp_conn_t *c;

    lp.enabled = 0;
    for (c = __atomic_load_n(&lp.head, __ATOMIC_ACQUIRE); c; c = c->next) {
        int fd = c->fds[0] >= 0 ? c->fds[0] : c->fds[1];

        if (fd >= 0)
            lp_release_to_kernel(c, fd, why);
    }
    zc_log(ZC_LOG_NOTICE, "local path: off for this process (%s)", why);
}

/* zcsock stat --conns: which path carries the connection, its bytes by
 * path (this process's), and why it is not on the ring. */
static size_t lp_describe(shim_fd_t *f, int fd, char *buf, size_t size)
{
    /* (a client that announces once it pays reads as pending, as before
     * its state of its own) */
    static const char *const states[LP_STATES] = { "?", "pending", "paired", "plain", "offer",
                                                   "pending" };
    lp_conn_t *c = lp_conn(f);
    int st = c->state >= 1 && c->state < LP_STATES ? c->state : 0;
    int ring = st == LP_PAIRED && (lp_tx_ring(c) || lp_rx_ring(c) || !lp_rv(c));
    size_t n;

    (void)fd;
    n = zc_fmt(buf, size, " path=%s state=%s kernel_tx=%llu kernel_rx=%llu",
               ring ? (c->x.lent ? "exchange" : "ring") : "kernel", st == LP_PAIRED && lp_rv(c) ? "handed_back" : states[st],
               (unsigned long long)c->tx_kernel, (unsigned long long)c->rx_kernel);
    if (c->ch.base)
        n += zc_fmt(buf + n, size - n, " ring_tx=%llu ring_rx=%llu",
                    (unsigned long long)c->ch.stats.bytes_in,
                    (unsigned long long)c->ch.stats.bytes_out);
    if (c->x.lent)
        n += zc_fmt(buf + n, size - n, " lent=%llu", (unsigned long long)c->x.lent);
    if (c->x.off && c->ch.base)
        n += zc_fmt(buf + n, size - n, " exchange=unavailable");
    else if (c->x.why)
        n += zc_fmt(buf + n, size - n, " exchange_refused=%s",
                    shim_mem_ops.xu_why_name(c->x.why - 1));
    if (c->why)
        n += zc_fmt(buf + n, size - n, " why=declined.%s", local_pair_reason_name(c->why));
    else if (st == LP_OFFER || st == LP_DEFER)
        n += zc_fmt(buf + n, size - n, " why=not_paid_yet");
    return n;
}

static const shim_path_ops_t lp_ops = {
    .sendmsg = lp_sendmsg,
    .recvmsg = lp_recvmsg,
    .sendfile = path_local_sendfile,
    .splice = path_local_splice,
    .shutdown = path_local_shutdown,
    .ioctl = lp_op_ioctl,
    .getsockopt = lp_op_getsockopt,
    .setsockopt = path_local_setsockopt,
    .flags_changed = lp_op_flags_changed,
    .revents = lp_revents,
    .wake_fd = lp_wake_fd,
    .kernel_events = lp_kernel_events,
    .kernel_quiet = lp_kernel_quiet,
    .change = lp_change,
    .forget = lp_forget,
    .dup = lp_dup,
    .describe = lp_describe,
};

const shim_path_t path_local = {
    .name = "local",
    .order = 10,
    .ops = &lp_ops,
    .init = lp_init,
    .inherit = path_local_inherit,
    .socket_made = lp_socket_made,
    .listened = path_local_listened,
    .connect_before = path_local_connect_prepare,
    .connect_after = path_local_connect_done,
    .accepted = path_local_accepted,
    .left_bulk = lp_short_bulk,
    .fds_passing = path_local_scm_send,
    .fds_received = lp_fds_received,
    .fork_hold = lp_fork_hold,
    .fork_prepare = lp_fork_prepare,
    .fork_parent = lp_fork_parent,
    .fork_child = lp_fork_child,
    .exec_prepare = lp_exec_prepare,
    .exec_failed = path_local_exec_failed,
    .fd_exposed = lp_fd_exposed,
    .process_exposed = lp_process_exposed,
    .process_exit = lp_process_exit,
    .internal_moved = lp_internal_moved,
};

SHIM_PATH_REGISTER(path_local);
