/* The local path: pairing decisions from the descriptor hooks (listen,
 * connect, accept) and a pending client's pickup of the server's offer. */
#include <sys/mman.h>

#include "lp_int.h"
#include "pairing.h"
#include "handback.h"
#include "scm.h"
#include "zc_fd.h"

#include <stddef.h>
#include <string.h>

static int lp_held_elsewhere(lp_conn_t *c, int fd);

/* The announcement of c is held (ann, raised) / let go: counted for
 * lp_fd_limited. */
void lp_ann_keep(lp_conn_t *c, int ann)
{
    c->pair.ann = shim_fd_internal_raise(ann);
    if (c->pair.ann >= 0)
        __atomic_add_fetch(&lp.anns, 1, __ATOMIC_RELAXED);
}

void lp_ann_drop(lp_conn_t *c)
{
    if (c->pair.ann < 0)
        return;
    local_pair_fd_close(c->pair.ann);
    c->pair.ann = -1;
    __atomic_sub_fetch(&lp.anns, 1, __ATOMIC_RELAXED);
}

void lp_pickup_done(lp_conn_t *c, int rc, int memfd, int fd)
{
    lp_ann_drop(c);
    if (rc == 0) {
        lp_state_set(c, LP_PAIRED);
        lp_channel_adopt(c, memfd, fd);     /* (plain no more since lp_ann_make) */
        zc_stat_add(ZC_STAT_LOCAL_PAIRED_CLIENT, 1);
    } else {
        /* no offer (a server without the library, or one that declined);
         * an offer whose sender could not be proven to hold the other end
         * (also the honest one of a server that answered and closed before
         * we looked: a connection over before it could pair) */
        lp_state_set(c, LP_PLAIN);
        lp_decline_conn(c, rc == -EPERM ? LOCAL_PAIR_R_UNVERIFIED
                        : rc == -ECONNABORTED ? LOCAL_PAIR_R_CLOSED
                        : rc == -ENOMEM ? LOCAL_PAIR_R_MAP_LIMIT : LOCAL_PAIR_R_NOT_ZCSOCK);
    }
}

/* A pending client looks for the server's offer.  The send path (under the
 * TX lock) and rule R3 of the receive path (under the RX lock) may do so at
 * once from two threads: one at a time, or the one that finds the offer
 * already taken would decline a connection the other just attached.  r3:
 * server bytes arrived, so the offer is there or never comes (waits for a
 * pickup in progress, and a missing offer means plain TCP); otherwise a
 * busy or empty look changes nothing. */
void lp_pickup_try(lp_conn_t *c, int fd, int r3)
{
    int memfd = -1, rc, other = r3 ? LP_TX : LP_RX, mine = 0;
    uint32_t zero = 0;      /* (mine: this thread holds the other role too) */

    /* A pending connection forked: a holder attaches only while it is the
     * only one (every holder must follow the switch-over, and one that looks
     * while another is taking the offer would find none and call the
     * connection plain).  Until then it stays pending, on the kernel
     * stream, and the offer waits. */
    if (c->fork_shared && lp_held_elsewhere(c, fd))
        return;
    while (__atomic_exchange_n(&c->pair.pickup_busy, 1, __ATOMIC_ACQUIRE)) {
        if (!r3)
            return;
        sched_yield();
    }
    /* The caller holds one role's lock (a receive: RX, a send: TX), on its
     * process-private word (no channel yet).  Once the channel exists, the
     * lock words are the channel's, and a thread of ours that took the
     * other role's private word before (a blocking send in the kernel while
     * this thread receives) would hold that role beside one taking the
     * channel's word: a switch point published meanwhile missed the bytes
     * of that send (32 MiB sent, 13 MiB of it taken for doorbells, case
     * defer/both/threaded-client).  So the channel appears only while this
     * thread holds both private words; with the other held, the pickup
     * waits for a later call (the server keeps to the kernel until we
     * attach, rule S1), and lp_lock takes its word again once it sees the
     * channel.  And only while this thread is the only one in its own
     * role: a private word taken by force (LP_LOCK_MAX_MS) may have a
     * second holder. */
    if (c->state == LP_PENDING && c->pair.ann >= 0 &&
        lp_only_me(c, other ^ 1) &&
        ((mine = (__atomic_load_n(&c->plock[other], __ATOMIC_RELAXED) & ~LP_LOCK_WAITERS) ==
                 (uint32_t)lp_gettid()) ||
         __atomic_compare_exchange_n(&c->plock[other], &zero, (uint32_t)lp_gettid(), 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
        rc = local_pair_channel_recv(fd, c->pair.ann, c->pair.forked ? LOCAL_PAIR_F_REQUEUE : 0,
                                     &c->cookie, &c->ch, &memfd);
        /* (a server that defers its offer may still make it: R3 waits
         * for it up to LP_R3_PATIENCE receives, lp_r3_due) */
        if (rc != -EAGAIN ||
            (r3 && (!zc_config.local_pair_after || c->pair.r3_looks >= LP_R3_PATIENCE)))
            lp_pickup_done(c, rc, memfd, fd);
        __atomic_store_n(&c->pair.pickup_owed, 0, __ATOMIC_RELAXED);
        if (!mine)
            lp_unlock_word(&c->plock[other]);
    } else if (c->state == LP_PENDING && c->pair.ann >= 0) {
        zc_stat_add(ZC_STAT_LOCAL_PICKUP_DEFERRED, 1);
        __atomic_store_n(&c->pair.pickup_owed, 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&c->pair.pickup_busy, 0, __ATOMIC_RELEASE);
}

/* A pending client gives up the offer for good (shutdown, hand-back): plain
 * TCP, after any pickup in progress in another thread. */
void lp_pending_end(lp_conn_t *c)
{
    while (__atomic_exchange_n(&c->pair.pickup_busy, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    if (c->state == LP_PENDING)
        lp_pickup_done(c, -ECANCELED, -1, -1);
    else if (c->state == LP_DEFER) {   /* (not announced: nothing to give up but that) */
        lp_state_set(c, LP_PLAIN);
        lp_decline_conn(c, LOCAL_PAIR_R_SHORT);
    }
    __atomic_store_n(&c->pair.pickup_busy, 0, __ATOMIC_RELEASE);
}


/* --- pairing from the descriptor hooks ------------------------------------------ */

int path_local_enabled(void)
{
    return lp.enabled;
}

/* SO_PASSCRED / SO_PASSSEC on an AF_UNIX socket: every read returns the
 * sender's credentials, which only kernel bytes carry. */
int lp_wants_creds(int fd)
{
    int on = 0, sec = 0;

    zc_real.getsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, &(socklen_t){ sizeof(on) });
    zc_real.getsockopt(fd, SOL_SOCKET, SO_PASSSEC, &sec, &(socklen_t){ sizeof(sec) });
    return on || sec;
}

/* liburing makes its system calls inline (no libc function, so no hook
 * sees a read, write or close it does on a socket): a process with a
 * program or library that links it never pairs, and the first look that
 * finds one hands back what paired before (a library dlopen'ed after
 * pairing).  The loaded objects are looked at again only when the loader
 * added one since (shim_objs.c). */
static int lp_uring_loaded(void)
{
    if (__atomic_load_n(&lp.uring, __ATOMIC_RELAXED))
        return 1;
    if (!(shim_objects() & SHIM_OBJ_URING))
        return 0;
    if (!__atomic_exchange_n(&lp.uring, 1, __ATOMIC_ACQ_REL)) {
        zc_log(ZC_LOG_NOTICE, "local path off: liburing is loaded (its system calls pass no hook)");
        shim_process_exposed("io_uring");
    }
    return 1;
}

/* Each paired connection holds a descriptor of the library's or two (its
 * ring's memfd, its wake-up eventfd), and a client's connection one while
 * its announcement is out: once the connections of the process that hold
 * one (lp.chans, lp.anns: not the ones that never paired, which hold none:
 * with pair when it pays, 10,000 idle connections kept the one busy beside
 * them off the ring) hold a quarter of its soft RLIMIT_NOFILE, new ones
 * stay on the kernel, so that the application never meets EMFILE where the
 * kernel alone would have let it open the descriptor (10,000 paired
 * connections under a limit of 20,000 did).  Asked where a descriptor is
 * about to be taken: a connection's claim, its announcement, its offer
 * (10,000 connections opened first and paired by their traffic after
 * passed the claim's test all together, and took 9,990 descriptors under a
 * limit of 20,000: case scale/both).  Said once. */
static int lp_fd_limited(void)
{
    static int told;
    long limit = zc_fd_limit();
    long held = (long)__atomic_load_n(&lp.chans, __ATOMIC_RELAXED) +
                (long)__atomic_load_n(&lp.anns, __ATOMIC_RELAXED);

    if (limit <= 0 || held < limit / 4)
        return 0;
    if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        zc_log(ZC_LOG_NOTICE, "local path: this process's paired connections hold a quarter "
               "of its descriptor limit (RLIMIT_NOFILE %ld): new connections stay on the "
               "kernel (local.declined.fd_limit; said once)", limit);
    return 1;
}

/* MAPPINGS (issue 31): each channel is one mapping of its header and two
 * rings (8 MiB of address space at the default ring size) in each process
 * that holds it.  Once this process's channels hold a quarter of
 * vm.max_map_count in mappings, or a quarter of RLIMIT_AS in address space
 * with the next one, new connections stay on the kernel, so that the
 * application's own mmap and malloc never fail where the kernel alone would
 * have let them succeed (10,000 paired connections mapped 80 GiB: under a
 * job scheduler's address-space limit of a few GiB, its allocations would
 * have).  max_map_count is read once, RLIMIT_AS once and every 256th
 * look; a mapping that fails anyway declines the connection the same way
 * (local_pair_accepted, lp_pickup_done).  Said once (lp_decline). */
static long lp_max_maps(void)
{
    static long v;
    long x = __atomic_load_n(&v, __ATOMIC_RELAXED);

    if (!x) {
        char buf[32];
        int fd = (int)zc_syscall(SYS_openat, AT_FDCWD, "/proc/sys/vm/max_map_count",
                                 O_RDONLY | O_CLOEXEC, 0);
        long n = fd >= 0 ? zc_syscall(SYS_read, fd, buf, sizeof(buf) - 1) : -1;

        if (fd >= 0)
            zc_syscall(SYS_close, fd);
        buf[n > 0 ? n : 0] = '\0';
        x = n > 0 ? strtol(buf, NULL, 10) : 0;
        if (x <= 0)
            x = 65530;      /* the kernel's default */
        __atomic_store_n(&v, x, __ATOMIC_RELAXED);
    }
    return x;
}

static uint64_t lp_as_limit(void)
{
    static uint64_t v;
    static unsigned uses;
    uint64_t x = __atomic_load_n(&v, __ATOMIC_RELAXED);

    if (!x || (__atomic_add_fetch(&uses, 1, __ATOMIC_RELAXED) & 255) == 0) {
        struct rlimit rl;

        x = zc_syscall(SYS_prlimit64, 0, RLIMIT_AS, NULL, &rl) == 0 &&
            rl.rlim_cur != RLIM_INFINITY ? (uint64_t)rl.rlim_cur : UINT64_MAX;
        __atomic_store_n(&v, x, __ATOMIC_RELAXED);
    }
    return x;
}

static int lp_map_limited(void)
{
    uint64_t as = lp_as_limit(), next = LOCAL_RING_HDR_SIZE +
                  2ull * (lp.ring_size ? lp.ring_size : LOCAL_RING_SIZE_DEFAULT);

    return __atomic_load_n(&lp.chans, __ATOMIC_RELAXED) >= lp_max_maps() / 4 ||
           (as != UINT64_MAX && __atomic_load_n(&lp.mapped, __ATOMIC_RELAXED) + next > as / 4);
}

/* The room a new pairing needs (descriptors, mappings): 0, or the reason
 * it stays on the kernel. */
static int lp_limited(void)
{
    return lp_fd_limited() ? LOCAL_PAIR_R_FD_LIMIT
           : lp_map_limited() ? LOCAL_PAIR_R_MAP_LIMIT : 0;
}

int lp_candidate(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);
    int r;

    /* fds 0-2 meet stdio, which no hook sees (DESIGN.md §3.10) */
    if (!lp.enabled || fd <= 2 || !f || f->kind != SHIM_FD_SOCKET || !f->stream || f->claim ||
        !(f->family == AF_INET || f->family == AF_INET6 ||
          (f->family == AF_UNIX && zc_config.local_unix)))
        return 0;
    if (f->family == AF_UNIX && lp_wants_creds(fd)) {
        lp_decline(LOCAL_PAIR_R_UNSUPPORTED);
        return 0;
    }
    if (lp_uring_loaded()) {
        lp_decline(LOCAL_PAIR_R_IO_URING);
        return 0;
    }
    if ((r = lp_limited())) {
        lp_decline(r);
        return 0;
    }
    return 1;
}

static int lp_short_skip(uint32_t key);

/* LEARNED SHORT: a TCP connection (fd, its slot key) that the run of short
 * ones before it leaves untracked: 1, counted, and nothing of ours is made
 * for it (asked before lp_candidate's own checks, the loaded objects among
 * them: a connection left alone costs what the hooks cost). */
static int lp_short_left(int fd, uint32_t key)
{
    const shim_fd_t *f = shim_fd_get(fd);

    if (!lp.enabled || fd <= 2 || !f || f->kind != SHIM_FD_SOCKET || !f->stream || f->claim ||
        !(f->family == AF_INET || f->family == AF_INET6) || !zc_config.local_short_sample)
        return 0;
    lp_life_table();
    if (!lp_short_skip(key))
        return 0;
    lp_decline(LOCAL_PAIR_R_LEARNED_SHORT);
    __atomic_store_n(&shim_fd_get(fd)->left_key, key, __ATOMIC_RELAXED);  /* (lp_short_bulk) */
    return 1;
}

void path_local_listened(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);
    int beacon = -1;

    if (!lp_candidate(fd) || f->family == AF_UNIX)
        return;
    lp_life_table();    /* before a forking server's first child: one for all */
    if (local_pair_listen(fd, &beacon) != 0)
        beacon = -1;        /* tried: another process holds the name */
    beacon = shim_fd_internal_raise(beacon);  /* held while it listens */
    /* Watched, so the beacon goes with the listener (ctx: beacon + 1). */
    shim_fd_watch(fd, &path_local, (void *)(intptr_t)(beacon + 1));
}

/* A destination a connection of ours found not worth announcing to within
 * LOCAL_PAIR_DEST_MS (*reason_p: why), counted. */
static int lp_dest_known(const struct sockaddr *addr, socklen_t len, int *reason_p)
{
    if (!local_pair_dest_known(addr, len, reason_p))
        return 0;
    zc_stat_add(ZC_STAT_LOCAL_DEST_KNOWN, 1);
    return 1;
}

void path_local_connect_prepare(int fd, const struct sockaddr *addr, socklen_t len)
{
    uint64_t cookie = 0;
    int ann = -1, reason = LOCAL_PAIR_R_NONE, dec;
    shim_fd_t *f = shim_fd_get(fd);
    uint32_t key;
    lp_conn_t *c;

    /* a socket's first connect only: after it, one not claimed is never
     * claimed (shim_fd_connected forgets its epoll records), and a second
     * call (a non-blocking connect asked again) must not decide again */
    if (!f || !f->unconnected)
        return;
    key = zc_config.local_pair_after ? lp_life_key(addr, len, -1) : 0;
    if (key && lp_short_left(fd, key))
        return;
    if (!lp_candidate(fd))
        return;
    if (zc_config.local_pair_after && (f->family == AF_INET || f->family == AF_INET6)) {
        if (lp_dest_known(addr, len, &reason)) {
            /* plain from the start: a connection of ours found this
             * destination not worth announcing to a moment ago */
            lp_decline(reason);
            return;
        }
        /* pair when it pays: announce once the connection does (lp_ann_due) */
        c = lp_conn_new(LP_DEFER);
        if (!c) {
            lp_decline(LOCAL_PAIR_R_ERROR);
            return;
        }
        lp_life_table();
        lp_life_start(c, key);
        lp_claim_fresh(fd, c);  /* plain until it announces (lp_ann_make) */
        return;
    }
    dec = local_pair_connect_prepare(fd, addr, len, &cookie, &ann, &reason);
    if (dec == LOCAL_PAIR_PENDING && !path_local_mbox_usable()) {
        local_pair_fd_close(ann);
        dec = LOCAL_PAIR_DECLINED;
        reason = LOCAL_PAIR_R_MAILBOX;
    }
    if (dec != LOCAL_PAIR_PENDING) {
        static int squat_told;

        if (reason == LOCAL_PAIR_R_SQUATTED && !__atomic_exchange_n(&squat_told, 1, __ATOMIC_RELAXED))
            zc_log(ZC_LOG_NOTICE, "local path: another process holds the announcement name "
                   "of a connection of ours: it is not paired (local.declined.squatted; "
                   "said once)");
        lp_decline(reason);
        return;
    }
    c = lp_conn_new(LP_PENDING);
    if (!c) {
        local_pair_fd_close(ann);
        lp_decline(LOCAL_PAIR_R_ERROR);
        return;
    }
    c->cookie = cookie;                     /* (lp_claim would ask again) */
    lp_ann_keep(c, ann);                    /* held until the pickup */
    lp_claim(fd, c);
}

void path_local_connect_done(int fd, int rc, int err)
{
    shim_fd_t *f = shim_fd_get(fd);
    lp_conn_t *c;
    int reason = LOCAL_PAIR_R_NONE;

    if (!lp_claimed(f))
        return;
    c = lp_conn(f);
    if (c->state == LP_DEFER) {
        /* it announces later (lp_ann_due); a connect that failed never */
        if (rc < 0 && err != EINPROGRESS && err != EALREADY && err != EINTR) {
            lp_state_set(c, LP_PLAIN);
            lp_decline_conn(c, LOCAL_PAIR_R_CONNECT_FAILED);
        }
        return;
    }
    if (c->state != LP_PENDING || c->pair.ann < 0)
        return;
    if (rc < 0 && (err == EINPROGRESS || err == EALREADY || err == EINTR)) {
        c->pair.connect_check = 1;   /* checked at the first data call once connected */
        return;
    }
    if (rc < 0 || local_pair_connected(fd, c->pair.ann, NULL, 0, &reason) != LOCAL_PAIR_PENDING) {
        lp_ann_drop(c);
        lp_state_set(c, LP_PLAIN);
        lp_decline_conn(c, rc < 0 ? LOCAL_PAIR_R_CONNECT_FAILED : reason);
    }
}

/* A non-blocking connect completed since (or failed): the post-connect
 * check path_local_connect_done could not make then (the server end must
 * be in this namespace: a remote or NAT'd destination never pairs, and its
 * announcement goes away).  Still connecting: look again next time. */
void lp_connect_check_(lp_conn_t *c, int fd)
{
    struct sockaddr_storage a;
    struct tcp_info ti;
    socklen_t al = sizeof(a), tl = sizeof(ti);
    int saved = errno;

    if (!c->pair.connect_check || c->state != LP_PENDING || c->pair.ann < 0)
        return;
    /* Not SO_ERROR: reading it would take a failed connect's error from
     * the application.  Connected, still connecting (SYN_SENT), or not. */
    if (getpeername(fd, (struct sockaddr *)&a, &al) < 0) {
        if (!c->is_unix && zc_real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0 &&
            ti.tcpi_state == TCP_SYN_SENT) {
            errno = saved;
            return;
        }
        c->pair.connect_check = 0;
        path_local_connect_done(fd, -1, ECONNREFUSED);
    } else {
        c->pair.connect_check = 0;
        path_local_connect_done(fd, 0, 0);
    }
    errno = saved;
}

/* accept: the connection is claimed with its offer due (LP_OFFER).  The
 * server offers at its first data call on it (lp_offer_due), so a
 * connection that goes to another program before this one touches it (a
 * forked and exec'd handler, a worker over SCM_RIGHTS) is never paired. */
void path_local_accepted(int lfd, int fd)
{
    shim_fd_t *l = shim_fd_get(lfd);
    uint32_t key = zc_config.local_pair_after ? lp_life_key(NULL, 0, lfd) : 0;
    lp_conn_t *c;

    if (key && lp_short_left(fd, key))
        return;
    if (!lp_candidate(fd))
        return;
    if (l && l->kind == SHIM_FD_SOCKET && l->claim == SHIM_CLAIM_NONE && l->family != AF_UNIX)
        path_local_listened(lfd);   /* inherited listener: our beacon too */
    c = lp_conn_new(LP_OFFER);
    if (!c) {
        lp_decline(LOCAL_PAIR_R_ERROR);
        return;
    }
    lp_life_table();    /* (made at listen; not when the listener came with exec) */
    lp_life_start(c, key ? key : lp_life_key(NULL, 0, lfd));
    lp_claim_fresh(fd, c);
}

/* A connection that never had a channel is plain for good: when fd is its
 * only descriptor it goes back to the copy path altogether (a descriptor
 * later closed behind our back, by fclose or an exec'd image, then leaves
 * no claim for the number's next owner; its epoll registrations go back to
 * the kernel with the application's data at their next look).  Another
 * thread may be inside a call on c right now (a send beside this receive):
 * c outlives it (PINS, shim_path.h).  1 when c is gone from fd. */
int lp_unclaim_plain(lp_conn_t *c, int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    lp_state_set(c, LP_PLAIN);
    if (c->refs != 1 || !f || !lp_claimed(f) || f->path_ctx != c || c->ch.base ||
        c->pair.ann >= 0 || c->hb.pb_off < c->hb.pb_len)
        return 0;
    if (c->why)
        f->copy_why = ZC_STAT_WHY_DECLINED;     /* its copied calls say so */
    shim_fd_claim_clear(f);
    c->refs = 0;
    lp_conn_free(c);
    return 1;
}

/* Does a process related by a fork (our parent, one of our children) hold
 * socket fd too?  (Unreadable: assume so.)  A "no" is kept until our
 * descriptors may next reach another process (lp.share_gen): a forking
 * server's child asked at every receive before, a walk of its parent's
 * descriptor table each time (pgbench -C against PostgreSQL: five walks a
 * connection); only a fork, an exec or spawn, SCM_RIGHTS or an exposure
 * can give the socket to a parent or child again. */
static int lp_held_elsewhere(lp_conn_t *c, int fd)
{
    unsigned gen = __atomic_load_n(&lp.share_gen, __ATOMIC_ACQUIRE);
    int kids[64], n, i;
    struct stat st;

    if (__atomic_load_n(&c->pair.alone_gen, __ATOMIC_RELAXED) == gen + 1)
        return 0;
    if (fstat(fd, &st))
        return 1;
    if (shim_proc_holds_socket((int)getppid(), (uint64_t)st.st_ino))
        return 1;
    n = shim_proc_children(kids, 64);
    for (i = 0; i < n; i++)
        if (shim_proc_holds_socket(kids[i], (uint64_t)st.st_ino))
            return 1;
    /* (a fork since gen was read bumped it: this answer then never counts) */
    __atomic_store_n(&c->pair.alone_gen, gen + 1, __ATOMIC_RELAXED);
    return 0;
}

void lp_shared_again(void)
{
    __atomic_add_fetch(&lp.share_gen, 1, __ATOMIC_RELEASE);
}

/* A server that shares the connection with the process it forked from
 * offers only when that process no longer holds it (it closed its copy):
 * two processes reading one stream cannot both follow the switch-over. */
static int lp_offer_shared(lp_conn_t *c, int fd)
{
    return c->pair.forked && lp_held_elsewhere(c, fd);
}

/* A receive on a connection whose offer is due, shared with the process it
 * forked from or forked (a test harness that connects, forks and splits
 * the two ends; a forking server whose parent has not closed its copy
 * yet): the offer may wait, since the server has sent nothing yet and the
 * client's kernel bytes read meanwhile count towards its switch point like
 * any others.  At most LP_OFFER_DEFER_MAX receives: then the first data
 * call decides.  1: read the kernel stream, the offer still due. */
#define LP_OFFER_DEFER_MAX 64
int lp_offer_defer(lp_conn_t *c, int fd)
{
    if (!c->pair.forked || c->pair.offer_defers >= LP_OFFER_DEFER_MAX)
        return 0;
    /* pair when it pays: no offer before the connection pays, so no look
     * at who else holds it either (lp_offer_wait reads the kernel stream
     * meanwhile): a PostgreSQL backend whose connections live too short to
     * pair (learned lifetimes) walked its parent's descriptors for nothing */
    if (zc_config.local_pair_after && c->pair.turns < c->pair.life_after + 1 && !lp_pays_bytes(c, 0))
        return 0;
    if (!lp_held_elsewhere(c, fd))
        return 0;
    c->pair.offer_defers++;
    return 1;
}

/* PAIR WHEN IT PAYS (issue 31).  With ZCSOCK_LOCAL_PAIR_AFTER = N > 0 the
 * server does not offer at its first data call but once the connection
 * showed it will pay back what pairing costs: N + 1 requests answered (a
 * send after a receive; the client announces at its Nth, lp_pays), or
 * N x LP_PAIR_BYTES moved either way (counting the
 * send about to be made), so a connection that carries one request never
 * pays for a channel.  Until then its bytes go through the kernel, counted
 * (tx_kernel, rx_kernel: the switch points of local_pair.h are stream
 * positions, so an offer after server bytes is as sound as one before);
 * the client, for its part, looks for an offer after server bytes at its
 * 1st, 2nd, 4th ... receive for up to LP_R3_PATIENCE receives instead of
 * giving up at the first (lp_r3_due).  A connection inherited across a
 * fork counts the same way (a server that forks per connection, rsync's
 * daemon, offers from the child) and still offers only while no other
 * process holds it (lp_offer_shared).  With more than one thread, the
 * kernel calls made while the offer waits are counted in flight (c->pair.kio,
 * lp_kio_enter) and an offer is made only while none is (lp_offer_make):
 * the stream positions it records then add up; one that finds a call in
 * flight (another thread in a blocking receive) tries again at the next
 * call.  1: this call goes to the kernel, the offer still due. */
#define LP_OFFER_TRIES 12       /* offers that may find no announcement yet */
#define LP_R_BUSY (-1)          /* (lp_offer_make: a kernel call in flight) */

/* A kernel data call on a connection whose offer waits (or, a client's
 * receive, whose announcement waits): 1, counted in flight until
 * lp_kio_exit; 0 when an offer (announcement) is being made or was made
 * (it waited for the offer to end: look at the state again).  With
 * lp_offer_make's check, a Dekker handshake: either the offer sees this
 * call in flight, or this call sees the offer. */
int lp_kio_enter(lp_conn_t *c)
{
    __atomic_add_fetch(&c->pair.kio, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&c->pair.offering, __ATOMIC_SEQ_CST) &&
        (__atomic_load_n(&c->state, __ATOMIC_SEQ_CST) == LP_OFFER ||
         __atomic_load_n(&c->state, __ATOMIC_SEQ_CST) == LP_DEFER))
        return 1;
    __atomic_sub_fetch(&c->pair.kio, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&c->pair.offering, __ATOMIC_ACQUIRE))
        sched_yield();
    return 0;
}

void lp_kio_exit(lp_conn_t *c)
{
    __atomic_sub_fetch(&c->pair.kio, 1, __ATOMIC_RELEASE);
}

/* Does the connection pay yet (N requests answered, N x LP_PAIR_BYTES
 * moved counting len about to be sent, or N x LP_PAIR_CALLS data calls
 * made, lp_pays_calls)?  Counts this data call.  The
 * server (offer: 1) waits for one turn more than the client: a client
 * announces at its Nth turn, a send that follows the server's Nth reply,
 * so an offer at that reply found no announcement yet, every time (a
 * sock_diag query, a socket and a refused connect for nothing, and for
 * each connection that ended there), and the offer after it paired;
 * where the server speaks first it pairs one reply later. */
static void lp_life_begin(lp_conn_t *c);

static int lp_pays(lp_conn_t *c, int is_send, size_t len, int offer)
{
    if (!c->pair.calls++)
        lp_life_begin(c);
    lp_turn(c, is_send);
    c->pair.paid_bytes = (uint8_t)lp_pays_bytes(c, is_send ? len : 0);
    return c->pair.turns >= c->pair.life_after + (unsigned)offer || c->pair.paid_bytes ||
           lp_pays_calls(c, offer);
}

/* The ring size of c's channel: ZCSOCK_LOCAL_RING, or for a connection
 * that waited for its turns and paired for them (ZCSOCK_LOCAL_PAIR_AFTER,
 * not its bytes) at most LP_RING_CHATTY: a request/response connection
 * rarely has a ring's worth in flight, and a bulk transfer pays by bytes. */
static size_t lp_ring_for(const lp_conn_t *c)
{
    size_t size = lp.ring_size ? lp.ring_size : LOCAL_RING_SIZE_DEFAULT;

    if (zc_config.local_pair_after && c->pair.calls && !c->pair.paid_bytes && size > LP_RING_CHATTY)
        size = LP_RING_CHATTY;
    return size;
}

/* LEARNED LIFETIMES (issue 31).  Turns alone do not say whether a
 * connection will pay: PostgreSQL's under pgbench -C answer four requests
 * and close, so with ZCSOCK_LOCAL_PAIR_AFTER=2 every one of them paired at
 * its third and closed at its fourth, paying for a channel it never used.
 * So each process learns, per destination (a client: the address it
 * connected to) and per listener (a server), how long its connections live
 * and waits past that before it pairs the next ones:
 *   - a connection that closes within LP_LIFE_PAYBACK turns of the point
 *     it paired at (or would have, had the peer been ready), did not pay:
 *     later ones wait until LP_LIFE_PAYBACK turns past its lifetime (at
 *     most LP_LIFE_MAX turns); one that closed before that point cost
 *     nothing and teaches nothing (redis-benchmark's first connection,
 *     a CONFIG GET, made its thousand connections wait 6 turns);
 *   - one that lives LP_LIFE_LONG turns past that point paid: the wait
 *     shrinks by a quarter, down to ZCSOCK_LOCAL_PAIR_AFTER.
 * A long-lived connection among short ones still pairs, a few turns later
 * than it would have; the bytes rule (lp_pays_bytes) is untouched, so a
 * bulk transfer pairs at once.  The table lives in a shared anonymous
 * mapping made before the first connection is accepted or made, so a
 * server that forks per connection (PostgreSQL, sshd, inetd) learns from
 * what its children saw: one 64-bit word a slot (key, turns), read and
 * written whole; a lost update only delays the learning.  Off with
 * ZCSOCK_LOCAL_PAIR_LEARN=0. */
#define LP_LIFE_SLOTS 256
#define LP_LIFE_PAYBACK 4u      /* turns on the ring that pay back a pairing */
#define LP_LIFE_LONG 16u        /* turns past the pairing point that show it paid */
#define LP_LIFE_MAX 64u         /* the longest wait learned */

#define LP_LIFE_WORDS (3 * LP_LIFE_SLOTS)  /* lifetimes, unanswered offers, short runs */

static uint64_t *lp_life_tab;   /* LP_LIFE_WORDS words, shared with fork children */

void lp_life_table(void)
{
    void *m;

    if (!zc_config.local_pair_learn || !zc_config.local_pair_after ||
        __atomic_load_n(&lp_life_tab, __ATOMIC_ACQUIRE))
        return;
    m = zc_real.mmap(NULL, LP_LIFE_WORDS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return;         /* no learning: ZCSOCK_LOCAL_PAIR_AFTER as set */
    if (!__atomic_compare_exchange_n(&lp_life_tab, &(uint64_t *){ NULL }, m, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        zc_real.munmap(m, LP_LIFE_WORDS * sizeof(uint64_t));
}

/* The slot key of a client's destination (addr), or of a server's listener
 * (lfd >= 0); never 0. */
uint32_t lp_life_key(const struct sockaddr *addr, socklen_t len, int lfd)
{
    uint32_t h = 2166136261u;
    const unsigned char *p = (const unsigned char *)addr;
    socklen_t i, n = 0;

    if (lfd >= 0) {
        h = (h ^ 'S') * 16777619u;
        h = (h ^ (uint32_t)lfd) * 16777619u;
    } else if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        p = (const unsigned char *)&((const struct sockaddr_in *)addr)->sin_port;
        n = 6;          /* port and address, adjacent */
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)addr;

        h = (h ^ s6->sin6_port) * 16777619u;
        p = (const unsigned char *)&s6->sin6_addr;
        n = 16;
    }
    for (i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h ? h : 1;
}

/* The word of key in half 0 (lifetimes) or 1 (unanswered offers) of the
 * table; NULL without a table (ZCSOCK_LOCAL_PAIR_LEARN=0) or a key. */
static uint64_t *lp_tab_slot(uint32_t key, unsigned half)
{
    uint64_t *t = __atomic_load_n(&lp_life_tab, __ATOMIC_ACQUIRE);

    return t && key ? &t[half * LP_LIFE_SLOTS + key % LP_LIFE_SLOTS] : NULL;
}

static uint64_t *lp_life_slot(uint32_t key)
{
    return lp_tab_slot(key, 0);
}

/* UNANSWERED OFFERS.  A server whose clients are local but run without
 * the library (redis-benchmark beside a redis-server under it) offered
 * each connection up to LP_OFFER_TRIES + 1 times before it gave up, each
 * offer a sock_diag query and a refused connect: 9 offers, about 90
 * system calls, for a connection of 2,000 requests, 11 % more calls than
 * the kernel's, and the connection kept the local path's bookkeeping on
 * every call meanwhile.  So each listener (slot key: its life_key) counts
 * the connections in a row whose first offer found no announcement and
 * the pairings since: once LP_UNANSWERED connections in a row went
 * unanswered, a new connection offers once, and one unanswered offer makes
 * it plain for good (the copy path, lp_offer_due); a pairing through the
 * listener ends the run.  A client with the library that announces later
 * than the server's first offer (it learned a longer wait) then misses its
 * pairing: a pairing missed, never a wrong one.  With
 * ZCSOCK_LOCAL_PAIR_LEARN=0 every connection keeps LP_OFFER_TRIES. */
#define LP_UNANSWERED 8u
#define LP_UNANSWERED_MAX 0xffffu

/* Connections in a row through listener key whose first offer found no
 * announcement (0: none, or no table). */
static unsigned lp_unans_read(uint32_t key)
{
    uint64_t *s = lp_tab_slot(key, 1), w;

    if (!s)
        return 0;
    w = __atomic_load_n(s, __ATOMIC_RELAXED);
    return (uint32_t)(w >> 32) == key ? (unsigned)w & LP_UNANSWERED_MAX : 0;
}

/* c's offer paired (answered: 1), or its first one found no announcement. */
static void lp_unans_note(const lp_conn_t *c, int answered)
{
    uint64_t *s = lp_tab_slot(c->pair.life_key, 1);
    unsigned n;

    if (!s)
        return;
    n = answered ? 0 : lp_unans_read(c->pair.life_key) + 1;
    if (n > LP_UNANSWERED_MAX)
        n = LP_UNANSWERED_MAX;
    __atomic_store_n(s, (uint64_t)c->pair.life_key << 32 | n, __ATOMIC_RELAXED);
}

/* The offers c may make that find no announcement before the one that
 * decides (lp_offer_due). */
static unsigned lp_offer_tries_max(const lp_conn_t *c)
{
    return lp_unans_read(c->pair.life_key) >= LP_UNANSWERED ? 0 : LP_OFFER_TRIES;
}

/* LEARNED SHORT.  Learned lifetimes keep a connection that closes after a
 * request or two from pairing, but not from what tracking it costs: a
 * connection object, its claim, the engine's record of each epoll_ctl, the
 * path's bookkeeping on each call (ApacheBench without -k against nginx,
 * both under the library: 5,000 instructions of the library's a request
 * where the hooks alone take 1,700; 0.88-0.95x the kernel's rate).  So each
 * destination, and each listener (slot key: its life_key), also counts its
 * connections in a row that closed before they paid for pairing (still
 * waiting for their offer or announcement: local.declined.short); once
 * LP_SHORT_RUN did, only every ZCSOCK_LOCAL_SHORT_SAMPLE-th new connection
 * is tracked, and the others are left alone from their accept or connect:
 * the application's own kernel sockets, which the hooks pass straight
 * through (local.declined.learned_short), exactly what a peer without the
 * library sees of them.  A tracked connection that pays (it announced or
 * paired, went_far) ends the run, so a listener whose connections turn
 * long is tracked again within a few connections; a long-lived one that
 * came meanwhile stays on the kernel for its life (never slower than the
 * kernel, not faster either).  One word a slot: key, a count of the
 * connections seen past the run (which one is tracked), the run; a lost
 * update only moves which connection is tracked. */
#define LP_SHORT_RUN 32u

static uint64_t *lp_short_slot(uint32_t key)
{
    return lp_tab_slot(key, 2);
}

static int lp_short_skip(uint32_t key)
{
    unsigned n = zc_config.local_short_sample, run, seq;
    uint64_t *s, w;

    if (n <= 1 || !zc_config.local_pair_learn || !zc_config.local_pair_after ||
        !(s = lp_short_slot(key)))
        return 0;
    w = __atomic_load_n(s, __ATOMIC_RELAXED);
    run = (unsigned)w & 0xffffu;
    if ((uint32_t)(w >> 32) != key || run < LP_SHORT_RUN)
        return 0;
    seq = (((unsigned)w >> 16) + 1) & 0xffffu;
    __atomic_store_n(s, (uint64_t)key << 32 | (uint64_t)seq << 16 | run, __ATOMIC_RELAXED);
    return seq % n != 0;
}

/* A connection left alone during key's run moved 64 KiB in one call
 * (SHIM_BULK_CALL: the hooks see its copied calls): bulk traffic, which a
 * tracked connection would have paired for by its bytes.  It stays on the
 * kernel, but the run ends, so the next connections are tracked (a server
 * whose clients download after a burst of short requests pairs the
 * downloads that follow; case short). */
void lp_short_bulk(uint32_t key)
{
    uint64_t *s = lp_short_slot(key), w;

    if (!s)
        return;
    w = __atomic_load_n(s, __ATOMIC_RELAXED);
    if ((uint32_t)(w >> 32) == key)
        __atomic_store_n(s, w & ~(uint64_t)0xffffu, __ATOMIC_RELAXED);
    zc_stat_add(ZC_STAT_LOCAL_SHORT_BULK, 1);
}

/* c ends in this process: a connection that carried bytes and was still
 * waiting to pay lengthens its key's run; one that paid ends it. */
static void lp_short_learn(const lp_conn_t *c)
{
    uint64_t *s = lp_short_slot(c->pair.life_key), w;
    unsigned run;

    if (!s || !c->pair.last)
        return;     /* no data call: it teaches nothing */
    w = __atomic_load_n(s, __ATOMIC_RELAXED);
    run = (uint32_t)(w >> 32) == c->pair.life_key ? (unsigned)w & 0xffffu : 0;
    if (c->went_far || c->ch.base)
        run = 0;    /* (paired or announced once: a hand-back may have made it plain) */
    else if (c->state == LP_OFFER || c->state == LP_DEFER)
        run += run < 0xffffu;
    else
        return;     /* plain for another reason (a peer without the library) */
    if ((uint32_t)(w >> 32) != c->pair.life_key || run != ((unsigned)w & 0xffffu))
        __atomic_store_n(s, (uint64_t)c->pair.life_key << 32 |
                                ((uint32_t)(w >> 32) == c->pair.life_key ? w & 0xffff0000u : 0) | run,
                         __ATOMIC_RELAXED);
}

/* The turns the slot of key says to wait (after: the setting). */
static unsigned lp_life_read(uint32_t key, unsigned after)
{
    uint64_t *s = lp_life_slot(key), w;

    if (!s)
        return after;
    w = __atomic_load_n(s, __ATOMIC_RELAXED);
    if ((uint32_t)(w >> 32) != key)
        return after;
    /* garbage is clamped: the word is ours and our children's only, but
     * nothing read from shared memory is trusted */
    return (unsigned)w < after ? after : (unsigned)w > LP_LIFE_MAX ? LP_LIFE_MAX : (unsigned)w;
}

/* A new connection of key (its slot; the turns it waits are read at its
 * first data call, lp_life_begin). */
void lp_life_start(lp_conn_t *c, uint32_t key)
{
    c->pair.life_key = key;
}

/* c's first data call: the turns it waits (c->pair.life_after), read now rather
 * than at its accept, so that a forking server's child sees what the child
 * before it learned at its close, which comes after the client's. */
static void lp_life_begin(lp_conn_t *c)
{
    unsigned after = zc_config.local_pair_after;

    if (!c->pair.life_key || !zc_config.local_pair_learn)
        return;
    c->pair.life_after = lp_life_read(c->pair.life_key, after);
    if (c->pair.life_after > after)
        zc_stat_add(ZC_STAT_LOCAL_PAIR_LEARNED, 1);
}

/* c closes for good in this process after pair_turns turns: learn from it. */
void lp_life_learn(lp_conn_t *c)
{
    unsigned after = zc_config.local_pair_after, at, t = c->pair.turns, n;
    uint64_t *s;

    if (c->pair.life_key)
        lp_short_learn(c);
    if (!c->pair.life_key || !c->pair.last || !(s = lp_life_slot(c->pair.life_key)))
        return;
    n = at = lp_life_read(c->pair.life_key, after);
    if (t < at)
        return;     /* ended before its pairing point: it cost nothing */
    if (t < at + LP_LIFE_PAYBACK)
        n = t + LP_LIFE_PAYBACK + 1;
    else if (t >= at + LP_LIFE_LONG)
        n = at - (at + 3) / 4 > after ? at - (at + 3) / 4 : after;
    if (n > LP_LIFE_MAX)
        n = LP_LIFE_MAX;
    if (n != at || (uint32_t)(__atomic_load_n(s, __ATOMIC_RELAXED) >> 32) != c->pair.life_key)
        __atomic_store_n(s, (uint64_t)c->pair.life_key << 32 | n, __ATOMIC_RELAXED);
}

static int lp_offer_try(lp_conn_t *c, int fd, int *reason_p);

int lp_offer_wait(lp_conn_t *c, int fd, int is_send, size_t len)
{
    int reason = LOCAL_PAIR_R_NONE;

    if (!zc_config.local_pair_after)
        return 0;
    if (!lp_pays(c, is_send, len, 1))
        return 1;
    /* it pays: offer now, or (a client that announces late has not yet)
     * again at the 2nd, 4th, 8th ... call from here, LP_OFFER_TRIES times */
    if (c->pair.offer_tries && c->pair.calls < c->pair.offer_retry_at)
        return 1;
    if (c->pair.offer_tries >= lp_offer_tries_max(c)) {
        if (!c->pair.offer_tries)
            zc_stat_add(ZC_STAT_LOCAL_OFFER_ONCE, 1);
        return 0;
    }
    if (lp_offer_try(c, fd, &reason) == LOCAL_PAIR_PAIRED)
        return 0;
    if (reason == LP_R_BUSY)
        return 1;       /* another thread's kernel call in flight: next call */
    if (reason != LOCAL_PAIR_R_NOT_ZCSOCK)
        return 0;       /* lp_offer_due decides */
    c->pair.offer_tries++;
    c->pair.offer_retry_at = c->pair.calls + (1u << c->pair.offer_tries);
    return 1;
}

/* A pending client that has not announced (ZCSOCK_LOCAL_PAIR_AFTER > 0, a
 * TCP connection): once the connection pays on its side too, announce, as
 * local_pair_connect_prepare would have done before the connect (the
 * listener found again through the peer's address, its beacon, our owner;
 * then the connected check; a destination found not worth it within the
 * last LOCAL_PAIR_DEST_MS is not asked about again: a client of a remote
 * server or of one without the library asks once a second, not once per
 * connection).  Until then a short connection costs nothing
 * but the hooks: no sock_diag query, no announcement.  A server that found
 * no announcement offers again later (lp_offer_wait).  With more than one
 * thread, the announcement waits for a moment when no receive of ours is
 * in the kernel (c->pair.kio, the server's handshake with "offering" standing
 * for "announcing"): a thread parked in a kernel receive would stay there
 * once the server's bytes went to the ring.  Declined: plain for good. */
static void lp_ann_make(lp_conn_t *c, int fd)
{
    struct sockaddr_storage peer;
    socklen_t pl = sizeof(peer);
    int ann = -1, reason = LOCAL_PAIR_R_NONE, dec;

    lp_cookie_note(c, fd);
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0) {
        /* not connected (yet, or any more): a connect still under way is
         * looked at again next time; a failed one stays plain */
        if (errno != ENOTCONN || c->pair.calls > 64) {
            lp_state_set(c, LP_PLAIN);
            lp_decline_conn(c, LOCAL_PAIR_R_CONNECT_FAILED);
        }
        return;
    }
    if ((reason = lp_limited())) {
        dec = LOCAL_PAIR_DECLINED;
    } else if (lp_dest_known((struct sockaddr *)&peer, pl, &reason)) {
        dec = LOCAL_PAIR_DECLINED;      /* asked within LOCAL_PAIR_DEST_MS */
    } else {
        dec = local_pair_connect_prepare(fd, (struct sockaddr *)&peer, pl, &c->cookie, &ann,
                                         &reason);
        if (dec == LOCAL_PAIR_DECLINED)
            local_pair_dest_note((struct sockaddr *)&peer, pl, reason);
    }
    if (dec == LOCAL_PAIR_PENDING && !path_local_mbox_usable()) {
        local_pair_fd_close(ann);
        dec = LOCAL_PAIR_DECLINED;
        reason = LOCAL_PAIR_R_MAILBOX;
    }
    if (dec == LOCAL_PAIR_PENDING &&
        local_pair_connected(fd, ann, (struct sockaddr *)&peer, pl, &reason) != LOCAL_PAIR_PENDING) {
        local_pair_fd_close(ann);
        dec = LOCAL_PAIR_DECLINED;
    }
    if (dec != LOCAL_PAIR_PENDING) {
        lp_state_set(c, LP_PLAIN);
        lp_decline_conn(c, reason);
    } else {
        lp_ann_keep(c, ann);
        /* the engine's from here to the pickup, as a connection that
         * announced at its connect is from its claim on (PLAIN UNTIL
         * PAIRED; ending it at the pickup instead stalled redis-benchmark) */
        shim_ep_plain_end(fd);
        lp_state_set(c, LP_PENDING);    /* (its announcement held first) */
    }
}

void lp_ann_due(lp_conn_t *c, int fd, int is_send, size_t len)
{
    if (c->state != LP_DEFER)
        return;
    if (!lp_pays(c, is_send, len, 0))
        return;
    if (__atomic_exchange_n(&c->pair.pickup_busy, 1, __ATOMIC_ACQUIRE))
        return;         /* another thread announces */
    if (c->state == LP_DEFER) {
        __atomic_store_n(&c->pair.offering, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&c->pair.kio, __ATOMIC_SEQ_CST))
            lp_ann_make(c, fd);     /* (else a receive in the kernel: next call) */
        __atomic_store_n(&c->pair.offering, 0, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&c->pair.pickup_busy, 0, __ATOMIC_RELEASE);
}

/* Rule R3 for a pending client that received server bytes: look for the
 * offer now?  Without deferred offers (ZCSOCK_LOCAL_PAIR_AFTER 0 here) at
 * once, and a missing offer ends the pairing; with them at the 1st, 2nd,
 * 4th ... receive, and the pairing ends only after LP_R3_PATIENCE (a
 * server that defers offers within its first few requests). */
int lp_r3_due(lp_conn_t *c)
{
    unsigned k;

    if (!zc_config.local_pair_after || __atomic_load_n(&c->pair.pickup_owed, __ATOMIC_RELAXED))
        return 1;
    k = ++c->pair.r3_looks;
    return (k & (k - 1)) == 0 || k >= LP_R3_PATIENCE;
}

/* The server's first data call on an accepted connection: offer the channel
 * now (before its first byte, as local_pair.h requires), or make the
 * connection plain for good.  Threads race here: one offers, the others
 * wait for its answer.  Returns 1 when c is gone and fd is on the copy
 * path (the caller makes the application's call itself), else 0. */
/* Offer now (pickup_busy held by the caller, c in LP_OFFER): PAIRED (c is
 * now), or DECLINED with *reason_p and c untouched. */
static int lp_offer_make(lp_conn_t *c, int fd, int *reason_p)
{
    int memfd = -1, dec;

    lp_cookie_note(c, fd);
    __atomic_store_n(&c->pair.offering, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&c->pair.kio, __ATOMIC_SEQ_CST)) {
        dec = LOCAL_PAIR_DECLINED;      /* (lp_kio_enter) */
        *reason_p = LP_R_BUSY;
    } else if (lp_offer_shared(c, fd)) {
        dec = LOCAL_PAIR_DECLINED;
        *reason_p = LOCAL_PAIR_R_UNSUPPORTED;
    } else if ((*reason_p = lp_limited())) {
        dec = LOCAL_PAIR_DECLINED;
    } else if (!path_local_mbox_usable()) {
        dec = LOCAL_PAIR_DECLINED;
        *reason_p = LOCAL_PAIR_R_MAILBOX;
    } else {
        dec = local_pair_accepted(-1, fd, &c->cookie, lp_ring_for(c), &c->ch, &memfd, reason_p);
    }
    if (dec == LOCAL_PAIR_PAIRED || (*reason_p == LOCAL_PAIR_R_NOT_ZCSOCK && !c->pair.offer_tries))
        lp_unans_note(c, dec == LOCAL_PAIR_PAIRED);
    if (dec == LOCAL_PAIR_PAIRED) {
        lp_channel_adopt(c, memfd, fd);
        lp_state_set(c, LP_PAIRED);
        shim_ep_plain_end(fd);          /* ready through the ring from now on */
        zc_stat_add(ZC_STAT_LOCAL_PAIRED_SERVER, 1);
    }
    __atomic_store_n(&c->pair.offering, 0, __ATOMIC_RELEASE);
    return dec;
}

/* lp_offer_make for lp_offer_wait (one thread: no wait for the guard). */
static int lp_offer_try(lp_conn_t *c, int fd, int *reason_p)
{
    int dec = LOCAL_PAIR_DECLINED;

    *reason_p = LP_R_BUSY;      /* another thread offers: look again next call */
    if (__atomic_exchange_n(&c->pair.pickup_busy, 1, __ATOMIC_ACQUIRE))
        return dec;
    *reason_p = LOCAL_PAIR_R_ERROR;
    if (c->state == LP_OFFER)
        dec = lp_offer_make(c, fd, reason_p);
    __atomic_store_n(&c->pair.pickup_busy, 0, __ATOMIC_RELEASE);
    return dec;
}

int lp_offer_due(lp_conn_t *c, int fd)
{
    int reason = LOCAL_PAIR_R_NONE;

    while (__atomic_exchange_n(&c->pair.pickup_busy, 1, __ATOMIC_ACQUIRE))
        sched_yield();
    if (c->state != LP_OFFER) {
        __atomic_store_n(&c->pair.pickup_busy, 0, __ATOMIC_RELEASE);
        return 0;
    }
    if (lp_offer_make(c, fd, &reason) == LOCAL_PAIR_PAIRED) {
        __atomic_store_n(&c->pair.pickup_busy, 0, __ATOMIC_RELEASE);
        return 0;
    }
    lp_decline(reason == LP_R_BUSY ? LOCAL_PAIR_R_SHORT : reason);
    lp_state_set(c, LP_PLAIN);    /* before a thread waiting above looks */
    __atomic_store_n(&c->pair.pickup_busy, 0, __ATOMIC_RELEASE);
    return lp_unclaim_plain(c, fd);
}

/* The connection leaves before the server offered (exec, SCM_RIGHTS,
 * shutdown): it is never paired.  Likewise a client that had not announced
 * yet (a fork, exec or SCM_RIGHTS would leave two readers of one stream
 * when one of them paired later). */
void lp_offer_cancel(lp_conn_t *c, const char *why)
{
    if (c->state == LP_DEFER) {
        lp_state_set(c, LP_PLAIN);
        lp_decline(LOCAL_PAIR_R_SHORT);
        return;
    }
    if (c->state == LP_OFFER) {
        lp_state_set(c, LP_PLAIN);
        if (c->pair.last)       /* it carried bytes, not yet enough to pay */
            lp_decline(LOCAL_PAIR_R_SHORT);
        else
            __atomic_add_fetch(lp.never_paired[lp_handback_reason(why)], 1, __ATOMIC_RELAXED);
    }
}


/* PARTS (lp_int.h): an announcement not withdrawn yet goes with the object. */
const lp_part_t lp_part_pairing = { .final = lp_ann_drop };
