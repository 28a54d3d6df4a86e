/* The local path: small helpers, the role locks in the channel's header page,
 * connection objects, cached socket settings. */
#include "lp_int.h"
#include "zc_live.h"
#include "zc_sys.h"
#include "shim_proc.h"

#include <sys/stat.h>

ZC_FORK_DATA lp_global_t lp = { .enabled = 1 };
__thread int lp_tid;


int lp_gettid(void)
{
    if (!lp_tid)
        lp_tid = (int)zc_syscall(SYS_gettid);
    return lp_tid;
}

/* The connection was handed back to the kernel (by either side). */
int lp_rv(lp_conn_t *c)
{
    if (!c->ch.base)
        return 0;
    return ((__atomic_load_n(&lp_side(c, 0)->rv, __ATOMIC_ACQUIRE) |
             __atomic_load_n(&lp_side(c, 1)->rv, __ATOMIC_ACQUIRE)) & LP_RV_REQ) != 0;
}

void lp_futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
    zc_syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

/* A holder in a lock word of ours that cannot be genuine: this process is
 * the only one holding our side (c->sole), so only its own threads take our
 * side's locks, and the word names no thread of ours (and still does, so it
 * is not a thread of ours that just let go).  Never in a vfork child, whose
 * parent's threads are not its own. */
static int lp_holder_forged(uint32_t *w, uint32_t cur)
{
    pid_t tid = (pid_t)(cur & ~LP_LOCK_WAITERS);

    if (tid > 0 && zc_syscall(SYS_tgkill, zc_getpid(), tid, 0) == 0)
        return 0;
    return __atomic_load_n(w, __ATOMIC_ACQUIRE) == cur;
}

/* A holder in a lock word of ours, held LP_LOCK_CHECK_MS already, whose
 * process does not hold our socket (the first of fds, the connection's
 * descriptors here; and the word still names it):
 * no holder of our side, so not genuine.  Never in a vfork child. */
static int lp_holder_foreign(uint32_t *w, uint32_t cur, const int fds[4])
{
    pid_t tid = (pid_t)(cur & ~LP_LOCK_WAITERS);
    struct stat st;
    int sock = -1;

    for (int i = 0; i < 4 && sock < 0; i++)
        sock = __atomic_load_n(&fds[i], __ATOMIC_RELAXED);
    if (tid <= 0 || sock < 0 || shim_vfork_child() || fstat(sock, &st) || !S_ISSOCK(st.st_mode) ||
        shim_proc_holds_socket(tid, (uint64_t)st.st_ino))
        return 0;
    return __atomic_load_n(w, __ATOMIC_ACQUIRE) == cur;
}

/* Take lock word w, which sits in memory the peer can write.  Waiters sleep
 * at most 20 ms at a time.  A crashed holder's lock is taken over (its
 * thread is gone).  The lock is taken by force and reported (1) when its
 * holder cannot be genuine or held it past LP_LOCK_MAX_MS: no legitimate
 * holder keeps it across a sleep, so only a hostile or broken peer gets
 * that far, and the connection then reads as reset instead of this process
 * hanging (DESIGN.md §3.9).  0 otherwise.
 *
 * Not genuine, with sole (only our threads take our side's locks): a word
 * naming the caller itself, a word naming no thread of ours
 * (lp_holder_forged), and a word held while the caller is the only thread
 * of ours taking or holding that lock (*inside == alone: every thread
 * counts itself in before its first attempt and out after it let go, and
 * alone is 1; or none does, the process having one thread, and alone is
 * 0: ALONE COUNTS NOTHING, below), whatever
 * thread it names: a peer that writes the tid of one of our threads (an
 * event loop's own) is found at once, not after the bound (issue 30,
 * item 5: ten such connections held an event loop 30 s).
 *
 * Not genuine either, whoever else holds our side (a fork's child): a
 * word held past LP_LOCK_CHECK_MS whose thread's process does not hold
 * our socket (one of fds; its inode, through /proc: one readlink when the hint
 * is right), since only holders of our side take its locks.  A peer that
 * writes a thread of its own there costs LP_LOCK_CHECK_MS per connection,
 * not LP_LOCK_MAX_MS (issue 30: at most 100 ms a connection, and no wait
 * that adds up: ten such connections 1.0 s with a 100 ms check, 0.1 s with
 * 5 ms; a genuine holder preempted that long costs one readlink). */
int lp_lock_word(uint32_t *w, int sole, const uint32_t *inside, uint32_t alone,
                 const int fds[4])
{
    uint32_t me = (uint32_t)lp_gettid(), cur = 0;
    /* (sleeps of LP_LOCK_CHECK_MS until the check, 20 ms after it) */
    struct timespec ts = { 0, (fds ? LP_LOCK_CHECK_MS : 20) * 1000 * 1000 };
    int64_t t0 = 0;
    int i, checked = 0, saved = 0;

    for (i = 0;; i++) {
        cur = 0;
        if (__atomic_compare_exchange_n(w, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            if (i > 64)
                errno = saved;  /* (the waits below set it) */
            return 0;
        }
        if (i < 64) {
            __builtin_ia32_pause();
            continue;
        }
        if (i == 64) {
            saved = errno;      /* the fast path leaves it untouched: kept from here */
            t0 = lp_now_ms();
            if (sole && !shim_vfork_child() &&
                ((cur & ~LP_LOCK_WAITERS) == me || lp_holder_forged(w, cur) ||
                 (inside && __atomic_load_n(inside, __ATOMIC_ACQUIRE) == alone &&
                  __atomic_load_n(w, __ATOMIC_ACQUIRE) == cur)))
                break;
        }
        if (!(cur & LP_LOCK_WAITERS) &&
            !__atomic_compare_exchange_n(w, &cur, cur | LP_LOCK_WAITERS, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue;
        cur |= LP_LOCK_WAITERS;
        shim_sig_wait_begin();
        lp_futex(w, FUTEX_WAIT, cur, &ts);
        shim_sig_wait_end();
        if ((i & 7) == 7 && kill((pid_t)(cur & ~LP_LOCK_WAITERS), 0) < 0 && errno == ESRCH)
            __atomic_compare_exchange_n(w, &cur, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        else if ((i & 7) == 7 && lp_now_ms() - t0 > LP_LOCK_MAX_MS)
            break;
        else if (!checked && fds && lp_now_ms() - t0 >= LP_LOCK_CHECK_MS) {
            checked = 1;
            ts.tv_nsec = 20 * 1000 * 1000;
            if (lp_holder_foreign(w, cur, fds))
                break;
        }
    }
    __atomic_store_n(w, me, __ATOMIC_SEQ_CST);
    errno = saved;
    return 1;
}

void lp_unlock_word(uint32_t *w)
{
    if (__atomic_exchange_n(w, 0, __ATOMIC_RELEASE) & LP_LOCK_WAITERS)
        lp_futex(w, FUTEX_WAKE, INT32_MAX, NULL);
}

/* A side's lock word for role (LP_LOCK_OFF). */
uint32_t *lp_side_lock(lp_conn_t *c, int side, int role)
{
    return (uint32_t *)(c->ch.base + LP_LOCK_OFF + 64u * (unsigned)(side & 1)) + (role & 1);
}

/* A broken channel's shared words are the peer's to scribble on: once a
 * violation or a wedged lock was seen, our own threads serialize on the
 * process-private words, so a hostile peer costs one bounded wait per
 * connection, not one per call (DESIGN.md §3.9). */
uint32_t *lp_lockp(lp_conn_t *c, int role)
{
    if (!c->ch.base || __atomic_load_n(&c->ch.broken, __ATOMIC_ACQUIRE))
        return &c->plock[role];
    return lp_side_lock(c, c->ch.side, role);
}

/* The word is chosen before locking and remembered, so a channel that
 * appears while the lock is held (the pickup) does not change what unlock
 * releases.
 *
 * ALONE COUNTS NOTHING: c->inside counts the threads taking or holding a
 * role's lock, for lp_lock_word's and the pickup's "only the caller" tests;
 * a process with one thread counts nothing (two locked instructions a
 * lock and unlock: about a fifth of a small send or receive here), its
 * only thread being the caller, and says so in c->counted for the unlock
 * and for those tests (lp_only_me).  No thread can appear while it holds
 * the lock: the holder is in this code, and no handler of the
 * application's runs meanwhile (SIGDEFER). */
void lp_lock(lp_conn_t *c, int role)
{
    uint32_t *w = lp_lockp(c, role);
    int counted = !__libc_single_threaded;

    shim_crit_enter();          /* SIGDEFER: no handler of ours runs while we hold it */
    if (counted)
        __atomic_add_fetch(&c->inside[role], 1, __ATOMIC_ACQ_REL);
    /* A private word taken while a pickup made the channel appear (the
     * pickup held it: lp_pickup_try) is the wrong one now: the channel's
     * word it is. */
    while (w == &c->plock[role] && (lp_lock_word(w, 0, NULL, 0, NULL), w != lp_lockp(c, role))) {
        lp_unlock_word(w);
        w = lp_lockp(c, role);
    }
    if (w != &c->plock[role] &&
        lp_lock_word(w, c->ch.base && c->sole, &c->inside[role], (uint32_t)counted, c->fds) &&
        c->ch.base) {
        /* a peer that wedges its lock loses the channel */
        int saved = errno;

        __atomic_store_n(&c->ch.broken, 1, __ATOMIC_RELEASE);
        zc_log(ZC_LOG_NOTICE, "local path: a lock word of a channel held by no thread of ours "
               "or past %d ms: channel broken, the connection reads as reset", LP_LOCK_MAX_MS);
        c->kern_err = ECONNRESET;
        zc_stat_add(ZC_STAT_LOCAL_PROTO_ERRORS, 1);
        errno = saved;
    }
    c->held[role] = w;
    c->counted[role] = (uint8_t)counted;
}

void lp_unlock(lp_conn_t *c, int role)
{
    int counted = c->counted[role];

    lp_unlock_word(c->held[role]);
    if (counted)
        __atomic_sub_fetch(&c->inside[role], 1, __ATOMIC_ACQ_REL);
    shim_crit_leave();
}

int lp_only_me(lp_conn_t *c, int role)
{
    return __atomic_load_n(&c->inside[role], __ATOMIC_ACQUIRE) == c->counted[role];
}


int lp_nonblocking(lp_conn_t *c, int fd, int flags)
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

size_t lp_iov_total(const struct iovec *iov, size_t n)
{
    size_t t = 0, i;

    for (i = 0; i < n; i++)
        t += iov[i].iov_len;
    return t;
}

/* What the kernel checks of a msghdr before anything else. */
int lp_msg_check(const struct msghdr *msg)
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
int lp_iov_window(const struct iovec *iov, size_t n, size_t skip, size_t limit,
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

void lp_list_lock(void)
{
    while (__atomic_exchange_n(&lp.list_lock, 1, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
}

ZC_FORK_CODE void lp_list_unlock(void)
{
    __atomic_store_n(&lp.list_lock, 0, __ATOMIC_RELEASE);
}

int64_t lp_now_ms(void)
{
    return zc_now_us() / 1000;
}

/* The peer is gone for good (its last holder closed or it crashed): sends
 * go to the kernel, which answers exactly as it would (EPIPE, SIGPIPE). */
int lp_peer_gone(lp_conn_t *c)
{
    return c->kern_eof || c->kern_err ||
           local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE;
}

/* The channel is unusable (a peer broke the rules): the connection reads as
 * reset, like a TCP connection whose peer misbehaved. */
ssize_t lp_broken(lp_conn_t *c)
{
    zc_stat_add(ZC_STAT_LOCAL_PROTO_ERRORS, 1);
    c->kern_err = ECONNRESET;
    return -ECONNRESET;
}

/* The kernel socket's readiness for ev, asked now. */
int lp_kernel_revents(int fd, short ev)
{
    struct pollfd p = { fd, (short)(ev | POLLIN), 0 };

    return zc_real.poll(&p, 1, 0) < 0 ? -1 : p.revents;
}

/* A copy of descriptor no of process pid (close-on-exec), or -1 (no
 * ptrace permission over it, gone, a seccomp filter's refusal).  pid and
 * no come from words the peer can write: in this very process (a
 * connection to ourselves) only a descriptor of the library's own is
 * fetched, or with sock a socket (a pump's: the caller then checks it is
 * the other end of ours; a socket holds no record lock a close of the copy
 * could drop), never another of the application's, which a check and a
 * close of the copy would have touched (the POSIX record locks on a file
 * go with any close of it), or a write into it changed (issue 30, item 4). */
int lp_fetch_fd(int32_t pid, int32_t no, int sock)
{
    int pfd, fd;
    const shim_fd_t *f;
    struct stat st;

    if (pid == (int32_t)zc_getpid() &&
        (!(f = shim_fd_get(no)) || __atomic_load_n(&f->kind, __ATOMIC_ACQUIRE) != SHIM_FD_INTERNAL) &&
        (!sock || fstat(no, &st) || !S_ISSOCK(st.st_mode)))
        return -1;
    pfd = (int)LP_SYS(SYS_pidfd_open, pid, 0, 0);

    if (pfd < 0)
        return -1;
    fd = (int)LP_SYS(SYS_pidfd_getfd, pfd, no, 0);
    LP_SYS(SYS_close, pfd, 0, 0);
    return fd < 0 ? -1 : fd;
}

/* DEFERRED UNMAPS (issue 31).  Unmapping a channel costs more than its
 * system call: the kernel frees the page tables behind the mapping and
 * shoots the TLB down on the CPUs the process ran on (an inter-processor
 * interrupt each, dear in a virtual machine).  redis-benchmark closing its
 * 1,000 paired connections spent 8-28% of its CPU in those unmaps.  So the
 * mapping of a closed channel waits here, up to LP_GRAVE of them and
 * LP_GRAVE_BYTES of address space, then they go together, neighbours (the
 * kernel places consecutive mappings next to each other) in one call
 * (local.unmaps against local.unmapped).  Nothing reads a waiting mapping
 * again; the peer may still write into it, which harms nobody.  The close
 * of the process's last connection empties the list (lp_conn_final), so a
 * process that closed them all holds none.  Try-lock: a thread that finds
 * the list busy (another thread; a signal handler that interrupted one; a
 * fork child of a process whose other thread held it) unmaps its own at
 * once, so nothing here ever waits. */
#define LP_GRAVE 32
#define LP_GRAVE_BYTES (8u << 20)
typedef struct { void *p; size_t len; } lp_grave_t;
static lp_grave_t lp_grave[LP_GRAVE];
static int lp_grave_n;
static size_t lp_grave_bytes;
static int lp_grave_busy;

static void lp_grave_unmap(lp_grave_t *g, int n)
{
    int i, j, calls = 0;

    for (i = 1; i < n; i++) {           /* by address (n <= LP_GRAVE + 1) */
        lp_grave_t x = g[i];

        for (j = i; j > 0 && (uintptr_t)g[j - 1].p > (uintptr_t)x.p; j--)
            g[j] = g[j - 1];
        g[j] = x;
    }
    for (i = 0; i < n; i = j) {
        size_t len = g[i].len;

        for (j = i + 1; j < n && (char *)g[i].p + len == (char *)g[j].p; j++)
            len += g[j].len;
        zc_real.munmap(g[i].p, len);
        calls++;
    }
    zc_stat_add(ZC_STAT_LOCAL_UNMAPS, (uint64_t)calls);
    zc_stat_add(ZC_STAT_LOCAL_UNMAPPED, (uint64_t)n);
}

/* Take the list (all of it), adding p/len (when p) first unless flush is
 * 0 and it has room; unmap what was taken.  Never waits. */
static void lp_grave_put(void *p, size_t len, int flush)
{
    lp_grave_t out[LP_GRAVE + 1];
    int n = 0;

    if (__atomic_exchange_n(&lp_grave_busy, 1, __ATOMIC_ACQUIRE)) {
        if (p)
            lp_grave_unmap(&(lp_grave_t){ p, len }, 1);
        return;
    }
    if (p && !flush && lp_grave_n < LP_GRAVE && lp_grave_bytes + len <= LP_GRAVE_BYTES) {
        lp_grave[lp_grave_n++] = (lp_grave_t){ p, len };
        lp_grave_bytes += len;
        p = NULL;
    }
    if (p || flush) {
        memcpy(out, lp_grave, (size_t)lp_grave_n * sizeof(out[0]));
        n = lp_grave_n;
        lp_grave_n = 0;
        lp_grave_bytes = 0;
        if (p)
            out[n++] = (lp_grave_t){ p, len };
    }
    __atomic_store_n(&lp_grave_busy, 0, __ATOMIC_RELEASE);
    if (n)
        lp_grave_unmap(out, n);
}

/* Close c's channel, its mapping left to the list. */
static void lp_channel_close(lp_conn_t *c)
{
    void *p = c->ch.owned ? c->ch.base : NULL;
    size_t len = c->ch.map_size;

    c->ch.owned = 0;            /* (local_ring_close leaves the mapping) */
    local_ring_close(&c->ch, 0);
    if (p)
        lp_grave_put(p, len, 0);
}

/* Every part's hook `which' (a member of lp_part_t). */
#define LP_PARTS_EACH(which, ...) SHIM_TABLE_EACH(lp_parts, which, __VA_ARGS__)

/* The last pin of a retired connection went (or none was held): what calls
 * in flight might still use goes now: the channel's mapping, the internal
 * descriptors, the object. */
static void lp_conn_final(shim_obj_t *o)
{
    lp_conn_t *c = (lp_conn_t *)o;
    int last;

    LP_PARTS_EACH(final, c);
    lp_channel_close(c);
    if (c->memfd >= 0) {
        __atomic_sub_fetch(&lp.chans, 1, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&lp.mapped, (uint64_t)c->mapped, __ATOMIC_RELAXED);
    }
    shim_fd_internal_drop(c->memfd);
    zc_pool_free(c, sizeof(*c));
    last = __atomic_sub_fetch(&lp.objects, 1, __ATOMIC_ACQ_REL) == 0;
    if (last) {
        lp_grave_put(NULL, 0, 1);       /* no closed channel stays mapped */
        local_pair_idle();  /* only the sock_diag socket and the mailbox stay */
        LP_PARTS_EACH(idle);
    }
}

lp_conn_t *lp_conn_new(int state)
{
    lp_conn_t *c = zc_pool_alloc(sizeof(*c));

    if (!c)
        return NULL;
    c->obj.free_fn = lp_conn_final;
    __atomic_add_fetch(&lp.objects, 1, __ATOMIC_ACQ_REL);
    c->refs = 1;
    lp_state_set(c, state);     /* (from none: pool memory comes zeroed) */
    c->pair.ann = c->memfd = c->efd.fd = c->efd.peer = -1;
    c->fds[0] = c->fds[1] = c->fds[2] = c->fds[3] = -1;
    c->lowat = 1;
    c->pair.life_after = zc_config.local_pair_after;     /* (lp_life_start) */
    LP_PARTS_EACH(made, c);
    lp_list_lock();
    c->next = lp.head;
    if (lp.head)
        lp.head->prev = c;
    lp.head = c;
    lp_list_unlock();
    return c;
}

/* c is named by no descriptor any more: off the list, and gone once the
 * last call in flight on it returns (lp_conn_final). */
void lp_conn_free(lp_conn_t *c)
{
    c->closed = 1;
    lp_list_lock();
    if (c->prev)
        c->prev->next = c->next;
    else
        lp.head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    lp_list_unlock();
    shim_obj_retire(&c->obj);
    LP_PARTS_EACH(freed);
}

void lp_fds_note(lp_conn_t *c, int fd, int add)
{
    int i;

    for (i = 0; i < 4; i++)
        if (c->fds[i] == (add ? -1 : fd)) {
            c->fds[i] = add ? fd : -1;
            return;
        }
}

static void lp_claim_(int fd, lp_conn_t *c, int fresh)
{
    shim_fd_t *f = shim_fd_get(fd);

    lp_fds_note(c, fd, 1);
    if (!f) {
        lp_conn_free(c);
        return;
    }
    c->is_unix = f->family == AF_UNIX;
    if (fresh) {
        shim_fd_claim_plain(fd, &path_local, c);
    } else {
        lp_cookie_note(c, fd);
        shim_fd_claim(fd, &path_local, c);
    }
}

/* COOKIES.  c->cookie names c's socket to an exec (which of the
 * descriptors that survive it are c's).  A fresh claim (an accepted
 * connection, a client's that waits for its turns) leaves it unknown: a
 * connection that never pays would spend a getsockopt on it, one system
 * call in ten of a short HTTP request.  It is noted once the connection
 * may pair (its offer or announcement, any other claim), and an exec asks
 * for an unknown one then (lp_exec_survives). */
void lp_cookie_note(lp_conn_t *c, int fd)
{
    if (!c->cookie)
        zc_real.getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c->cookie,
                           &(socklen_t){ sizeof(c->cookie) });
}

void lp_claim(int fd, lp_conn_t *c)
{
    lp_claim_(fd, c, 0);
}

/* A connection nobody has announced yet: an accepted one, or a client's
 * whose announcement waits until the connection pays (lp_ann_due).  Until
 * then its readiness is the kernel's (PLAIN UNTIL PAIRED, shim_epoll.c);
 * the server's offer (lp_offer_make) and the client's announcement
 * (lp_ann_make) end that.  (A client's that stayed plain up to its pickup
 * of the offer stalled redis-benchmark: one connection in about three runs
 * of 20 never saw its second reply, which sat in the ring; cause not
 * found.  Ended at the announcement, the connection is the engine's over
 * the same stretch as one that announced at its connect.) */
void lp_claim_fresh(int fd, lp_conn_t *c)
{
    lp_claim_(fd, c, 1);
}

/* Count delta more (or fewer) processes holding our side; the new count. */
uint32_t lp_holders_add(lp_conn_t *c, int delta)
{
    lp_side_t *s = lp_side(c, c->ch.side);
    uint32_t n;

    if (delta > 0) {
        c->sole = 0;            /* another process holds it too, or may */
        LP_PARTS_EACH(shared, c);   /* (the eventfds: without our copy of the peer's) */
    }
    n = __atomic_add_fetch(&s->holders, (uint32_t)delta, __ATOMIC_ACQ_REL);

    __atomic_add_fetch(&s->hgen, 1, __ATOMIC_ACQ_REL);
    return n;
}

/* A cached setting, when still valid (lp_cached_t): 1 and *v, else 0. */
int lp_cached_get(lp_conn_t *c, const lp_cached_t *k, int64_t *v)
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
void lp_cached_begin(lp_conn_t *c, lp_cached_t *k)
{
    k->ok = 0;
    k->lgen = __atomic_load_n(&c->lgen, __ATOMIC_ACQUIRE);
    k->hgen = c->ch.base ? __atomic_load_n(&lp_side(c, c->ch.side)->hgen, __ATOMIC_ACQUIRE) : 0;
}

void lp_cached_set(lp_cached_t *k, int64_t v)
{
    k->v = v;
    k->ok = 1;
}

/* A channel's memfd is c's: kept among the library's descriptors (for exec
 * and hand-over), counted. */
void lp_channel_keep(lp_conn_t *c, int memfd)
{
    c->memfd = shim_fd_internal_keep(memfd, &path_local, c);
    if (c->memfd >= 0) {
        __atomic_add_fetch(&lp.chans, 1, __ATOMIC_RELAXED);
        c->mapped = c->ch.map_size;
        __atomic_add_fetch(&lp.mapped, (uint64_t)c->mapped, __ATOMIC_RELAXED);
    }
}

/* The parts take up c's channel (page exchange; the mailbox, bound before
 * the peer can see us: a peer closing with bytes of ours unread leaves its
 * socket there). */
void lp_parts_adopted(lp_conn_t *c)
{
    LP_PARTS_EACH(adopted, c);
}

/* A channel is ours (socket fd): keep its memfd (for exec) and count this
 * process as a holder of our side.  Our mailbox must exist: a peer closing
 * with data we have not read leaves its socket there (LINGER, handback.c). */
void lp_channel_adopt(lp_conn_t *c, int memfd, int fd)
{
    lp_channel_keep(c, memfd);
    lp_holders_add(c, 1);
    c->sole = 1;                /* pairing attaches only a socket no one else holds */
    lp_parts_adopted(c);
    lp_side_publish(c, fd);
    if (__builtin_expect(__atomic_load_n(&zc_live_waiting, __ATOMIC_RELAXED), 0))
        zc_live_publish();      /* a fork child's first pairing: zcsock stat lists it */
}

/* Descriptor fd of ours closed while others stay: if it was the one our
 * side named (PEER PUMP), name another. */
void lp_side_moved(lp_conn_t *c, int fd)
{
    lp_side_t *me;
    int i;

    if (!c->ch.base || shim_vfork_child())
        return;
    me = lp_side(c, c->ch.side);
    if (__atomic_load_n(&me->sock_no, __ATOMIC_RELAXED) != fd ||
        __atomic_load_n(&me->sock_pid, __ATOMIC_ACQUIRE) != (int32_t)zc_getpid())
        return;
    for (i = 0; i < 4; i++)
        if (c->fds[i] >= 0) {
            lp_side_publish(c, c->fds[i]);
            return;
        }
}

/* Say where a socket of our side is (PEER PUMP, handback.c). */
void lp_side_publish(lp_conn_t *c, int fd)
{
    lp_side_t *me = lp_side(c, c->ch.side);

    __atomic_store_n(&me->sock_no, (int32_t)fd, __ATOMIC_RELAXED);
    __atomic_store_n(&me->sock_pid, (int32_t)zc_getpid(), __ATOMIC_RELEASE);
}

/* Declined, and why, for the connection's own description (lp_describe). */
void lp_decline_conn(lp_conn_t *c, int reason)
{
    c->why = (uint8_t)reason;
    lp_decline(reason);
}

void lp_decline(int reason)
{
    if (reason > 0 && reason < LOCAL_PAIR_R_COUNT)
        __atomic_add_fetch(lp.declined[reason], 1, __ATOMIC_RELAXED);
    zc_stat_add(ZC_STAT_LOCAL_DECLINED, 1);
    zc_log(ZC_LOG_TRACE, "local path declined: %s", local_pair_reason_name(reason));
    if (reason == LOCAL_PAIR_R_MAP_LIMIT) {
        static int told;

        if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
            zc_log(ZC_LOG_NOTICE, "local path: this process's channels hold a quarter of its "
                   "mappings (vm.max_map_count) or address space (RLIMIT_AS), or a channel "
                   "could not be mapped: new connections stay on the kernel "
                   "(local.declined.map_limit; said once)");
    }
}

/* Payload bytes a write may add now: the ring's room, less what an
 * application-set SO_SNDBUF leaves out (a program that shrinks its buffers
 * expects sends to block or fail early, as on the kernel path).  Exact
 * below want; at want or more possibly less than the truth (TAIL SEEN in
 * local_ring.c: no look at the consumer's line then). */
int64_t lp_tx_room(lp_conn_t *c, uint64_t want)
{
    uint64_t keep_free = c->sndcap && c->sndcap < c->ch.ring_size
                             ? c->ch.ring_size - c->sndcap : 0;
    int64_t room = local_ring_writable_min(&c->ch, lp_txdir(c),
                                           want > UINT64_MAX / 2 ? UINT64_MAX : want + keep_free);

    if (room > 0 && keep_free)
        room = room > (int64_t)keep_free ? room - (int64_t)keep_free : 0;
    return room;
}

/* What to wait for (tx_wait_prepare's want) so that lp_tx_room reaches want:
 * the room a cap keeps free and the record headers' share on top. */
size_t lp_tx_want(lp_conn_t *c, size_t want)
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
