/* The readiness engine: poll, select and epoll over descriptors that paths
 * claimed (DESIGN.md §3.4).  It knows no path: it asks each descriptor's
 * path through shim_path_ops_t (revents, kernel_events, change).
 *
 * For a claimed descriptor the bytes may be somewhere the kernel socket does
 * not show (a shared ring), and the kernel socket may carry things that are
 * no data (doorbells), so readiness comes from the path's revents(): what
 * the path holds first (nothing to wait for when it is ready), then, before
 * sleeping, a second look that arms the path's wake-up (it then makes the
 * kernel events it asked for fire), then the kernel's answer filtered
 * through the path.  A wake-up that turns out to be nothing for the
 * application goes back to sleep for the rest of the timeout; a path that
 * cannot arm a wake-up says how soon to look again (shim_ready_ask_t).
 *
 * Before that arming look, a wait that may sleep first spins (the policy
 * of common/zc_spin.h, per thread): it looks again without arming and asks
 * the kernel with a zero timeout, until an event or the spin's end.  Not
 * armed, a path's peer sends no wake-up signal, so a request/response
 * answered within the spin costs neither side a wake-up.
 *
 * poll and select (this file) rebuild the set with the kernel events each
 * path asks for; epoll (shim_epoll.c) keeps a table of registrations. */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "zc_config.h"
#include "shim_int.h"
#include "shim_ready.h"
#include "zc_pool.h"

/* A path's wake-up descriptor is an epoll instance that peers' eventfds
 * sit in, edge-triggered (efd.c): taking their events empties it.  A raw
 * system call: no hook of ours runs. */
void shim_wake_drain(int fd)
{
    struct epoll_event ev[8];
    int saved = errno;

    zc_real.syscall(SYS_epoll_pwait, (long)fd, (long)ev, 8L, 0L, 0L, 8L);
    errno = saved;
}
#include "zc_spin.h"
#include "zc_stats.h"

#define SHIM_POLL_STACK 64
#define SHIM_READY_NET_MS 100  /* the longest sleep over claimed descriptors (safety net) */
#define SHIM_POLL_AUX_IDX 256   /* wake fds whose descriptor is remembered */

/* --- time ----------------------------------------------------------------- */

int64_t shim_now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Deadline from a timeout (NULL / negative: none, -1). */
int64_t shim_deadline(const struct timespec *ts)
{
    if (!ts)
        return -1;
    return shim_now_ns() + (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* Time left until deadline into *ts; NULL when there is no deadline. */
const struct timespec *shim_left(int64_t deadline, struct timespec *ts)
{
    int64_t left;

    if (deadline < 0)
        return NULL;
    left = deadline - shim_now_ns();
    if (left < 0)
        left = 0;
    ts->tv_sec = left / 1000000000;
    ts->tv_nsec = left % 1000000000;
    return ts;
}

int shim_expired(int64_t deadline)
{
    return deadline >= 0 && shim_now_ns() >= deadline;
}

/* --- spinning before the arming look ---------------------------------------- */

static __thread zc_spin_t shim_ready_spin;     /* this thread's waits */
/* Whether this thread's last look met a descriptor that can become ready
 * without the kernel (a wait begins from it): a wait over kernel-followed
 * descriptors only (connections that never paired: nginx serving one
 * request per connection) never spins, the kernel wakes it as fast (its
 * spinning cost nginx a third of its requests per second). */
static __thread int shim_ready_ring = 1;

void shim_wait_begin(shim_wait_t *w, int may_sleep)
{
    unsigned us = may_sleep ? zc_spin_for(&shim_ready_spin) : 0;

    w->t0 = may_sleep ? zc_now_us() : 0;   /* (a zero timeout reads no clock) */
    w->end = us ? w->t0 + us : 0;
    w->kernel_next = 0;
    w->may_sleep = may_sleep;
    w->waited = 0;
    w->spun = 0;
    w->nwithdrew = 0;
    w->ring = shim_ready_ring;
    w->sig0 = shim_sig_ran;
}

void shim_wait_looked(shim_wait_t *w, int ring)
{
    if (ring)           /* (looks that asked nothing change nothing) */
        w->ring = shim_ready_ring = ring & 1;
}

int shim_wait_spinning(shim_wait_t *w)
{
    if (!w->end || !w->ring)
        return 0;
    if (zc_now_us() < w->end) {
        w->spun = 1;
        return 1;
    }
    zc_stat_add(ZC_STAT_READY_SPINS_SLEPT, 1);
    w->end = 0;
    return 0;
}

int shim_wait_kernel_skip(shim_wait_t *w)
{
    int64_t now = zc_now_us();

    if (now < w->kernel_next) {
        __builtin_ia32_pause();
        return 1;
    }
    w->kernel_next = now + SHIM_SPIN_KERNEL_US;
    return 0;
}

void shim_wait_idle(shim_wait_t *w)
{
    if (w->may_sleep)
        w->waited = 1;
}

void shim_wait_end(shim_wait_t *w, int events)
{
    if (!w->waited)
        return;
    if (events && w->end)
        zc_stat_add(ZC_STAT_READY_SPINS_PAID, 1);
    zc_spin_learn(&shim_ready_spin, w->t0);
}

/* --- KERNEL SKIP: zero-timeout waits repeated in a tight loop ------------------
 * An MPI progress loop (libevent's poll or epoll backend, MPICH's netmod)
 * asks "anything ready?" with a zero timeout, over and over, while it waits
 * for a message that arrives on a ring: each time the kernel is asked about
 * the set's other descriptors, a system call (~0.5 us here) that mostly says
 * nothing and delays the answer the ring already has.  Such a wait asks the
 * paths' memory only when all of this holds:
 *   - the kernel's last answer about the same set (poll: the same
 *     descriptors and events; epoll: the same epoll descriptor; up to
 *     SHIM_NOWAIT_SETS sets polled in turn) was nothing ready (a descriptor
 *     the kernel calls ready is asked about again every time: level-
 *     triggered answers and POLLNVAL stay exact), less than
 *     ZCSOCK_POLL_KERNEL_US ago;
 *   - since then the thread has made only zero-timeout waits and sends and
 *     receives that a path served (shim_entries - shim_path_calls moved by
 *     one per wait): anything else it did that could make a kernel
 *     descriptor ready (a write to a pipe, an epoll_ctl, a signal handler's
 *     call) makes the next wait ask the kernel;
 * A wait with a signal mask (ppoll, pselect, epoll_pwait) always asks: the
 * kernel applies the mask, and a signal it unblocks is delivered then.
 * What it may change: a kernel descriptor that became ready through another
 * thread or process, learned of by memory the library does not see, shows
 * up in a zero-timeout wait up to ZCSOCK_POLL_KERNEL_US late, as if it had
 * become ready that much later (docs/semantics.md). */

__thread uint64_t shim_entries __attribute__((tls_model("initial-exec")));
__thread uint64_t shim_path_calls __attribute__((tls_model("initial-exec")));

#define SHIM_NOWAIT_SETS 4      /* sets a loop may poll in turn (UCX: 2) */

static __thread struct {
    uint64_t entries;           /* of the thread's last zero-timeout wait */
    int claimed;                /* the chain waited over claimed connections */
    unsigned next;              /* the slot the next new set takes */
    struct {
        uint64_t sig;
        int64_t asked_us;       /* the kernel's quiet answer; 0: none to trust */
    } set[SHIM_NOWAIT_SETS];
} shim_nowait;

/* This zero-timeout wait's entry: 0 when the thread called something else
 * since its last one, and then no earlier kernel answer holds any more. */
static int shim_nowait_chain(void)
{
    uint64_t e = shim_entries - shim_path_calls;
    int held = e == shim_nowait.entries + 1;

    shim_nowait.entries = e;
    if (!held) {
        shim_nowait.claimed = 0;
        for (int i = 0; i < SHIM_NOWAIT_SETS; i++)
            shim_nowait.set[i].asked_us = 0;
    }
    return held;
}

static int shim_nowait_slot(uint64_t sig)
{
    for (int i = 0; i < SHIM_NOWAIT_SETS; i++)
        if (shim_nowait.set[i].sig == sig)
            return i;
    return -1;
}

static int shim_nowait_skip_(uint64_t sig, int plain)
{
    unsigned us = zc_config.poll_kernel_us;
    int held = shim_nowait_chain(), i;

    if (!plain)
        shim_nowait.claimed = 1;
    if (!us || !held || (plain && !shim_nowait.claimed) || (i = shim_nowait_slot(sig)) < 0 ||
        !shim_nowait.set[i].asked_us || zc_now_us() - shim_nowait.set[i].asked_us >= us)
        return 0;
    zc_stat_add(plain ? ZC_STAT_READY_KERNEL_SKIPS_PLAIN : ZC_STAT_READY_KERNEL_SKIPS, 1);
    return 1;
}

int shim_nowait_skip(uint64_t sig)
{
    return shim_nowait_skip_(sig, 0);
}

int shim_nowait_skip_plain(uint64_t sig)
{
    return shim_nowait_skip_(sig, 1);
}

void shim_nowait_asked_plain(uint64_t sig, int quiet)
{
    if (!shim_nowait.claimed) {     /* nothing to remember: the chain goes on */
        shim_nowait.entries = shim_entries - shim_path_calls;
        return;
    }
    shim_nowait_asked(sig, quiet);
}

void shim_nowait_asked(uint64_t sig, int quiet)
{
    int i = shim_nowait_slot(sig);

    shim_nowait.entries = shim_entries - shim_path_calls;
    if (!zc_config.poll_kernel_us || (i < 0 && !quiet))
        return;
    if (i < 0) {
        i = (int)(shim_nowait.next++ % SHIM_NOWAIT_SETS);
        shim_nowait.set[i].sig = sig;
    }
    shim_nowait.set[i].asked_us = quiet ? zc_now_us() : 0;
}

void shim_nowait_passed(void)
{
    shim_nowait_chain();
}

/* The set of a poll, for shim_nowait_skip: its descriptors and events. */
static uint64_t shim_poll_sig(const struct pollfd *fds, nfds_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    nfds_t i;

    for (i = 0; i < n; i++)
        h = (h ^ ((uint64_t)(uint32_t)fds[i].fd << 16 | (uint16_t)fds[i].events)) *
            0x100000001b3ull;
    return h & ~(1ull << 63);   /* (epoll sets have the top bit) */
}

/* --- poll ----------------------------------------------------------------- */

/* An epoll set of ours in a poll or select: waited on by the kernel
 * (shim_epoll.c, NESTED SETS).  SHIM_POLL_SETS when it is one. */
static inline int shim_poll_nested(const shim_fd_t *f, int fd)
{
    if (!f || shim_likely(__atomic_load_n(&f->kind, __ATOMIC_RELAXED) != SHIM_FD_EPOLL))
        return 0;
    shim_ep_nested(fd);
    return SHIM_POLL_SETS;
}

int shim_poll_claims(const struct pollfd *fds, nfds_t n)
{
    int sets = __atomic_load_n(&shim_ep_marked_any, __ATOMIC_RELAXED), claims = 0;
    nfds_t i;

    for (i = 0; i < n; i++) {
        const shim_fd_t *f = shim_fd_get(fds[i].fd);

        if (shim_fd_claimed(f)) {
            if (!sets)
                return 1;   /* (no set of ours to find: an MPI progress loop) */
            claims |= 1;
        }
        if (sets)
            claims |= shim_poll_nested(f, fds[i].fd);
    }
    return claims;
}

/* poll over a set holding claimed descriptors.  Each round pins each
 * claimed descriptor once for its look (what the path sees, and what the
 * kernel is to be asked about it); a round that does not sleep keeps that
 * look's answer for each descriptor the kernel then had nothing to say
 * about, rather than asking the path again. */
int shim_ready_poll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
                           const sigset_t *mask)
{
    struct pollfd stack[SHIM_POLL_STACK], *k = stack;
    short lrev_stack[SHIM_POLL_STACK / 2], *lrev = lrev_stack;
    int nowait = timeout && !timeout->tv_sec && !timeout->tv_nsec;
    int64_t deadline = nowait ? 0 : shim_deadline(timeout);
    shim_wait_t ws;
    int rc = 0;
    nfds_t i, kn = 2 * n;      /* the set, then the paths' wake fds */
    nfds_t aux_of[SHIM_POLL_AUX_IDX];  /* the entry each wake fd wakes */
    size_t heap = 0;

    if (kn > SHIM_POLL_STACK) {
        heap = kn * sizeof(*k) + n * sizeof(*lrev);
        k = zc_pool_alloc(heap);
        if (!k)
            return zc_real.ppoll(fds, n, timeout, mask);
        lrev = (short *)(k + kn);
    }
    shim_wait_begin(&ws, !nowait);
    for (int netted = 0, capped = 0;; netted = capped) {
        struct timespec left, zero = { 0, 0 };
        const struct timespec *tmo;
        shim_ready_ask_t ask = { 0 };
        int ready = 0, pass, r, skip, spin = shim_wait_spinning(&ws);
        uint64_t sig = nowait ? shim_poll_sig(fds, n) : 0;   /* (KERNEL SKIP) */
        nfds_t naux = 0;

        /* look, then look and arm; spinning: one look that may withdraw;
         * a call that cannot sleep (zero timeout) only looks: an arming
         * would only make the peer signal a wake-up nobody waits for */
        for (pass = 0; pass < (ws.may_sleep ? 2 - spin : 1) && !ready; pass++) {
            naux = 0;
            for (i = 0; i < n; i++) {
                shim_pin_t pin;
                shim_fd_t *f;
                int w = -1;

                k[i] = fds[i];
                lrev[i] = -1;           /* (not claimed) */
                if (fds[i].fd < 0 || !shim_fd_pin(fds[i].fd, &pin))
                    continue;
                f = &pin.f;
                /* The wake fd rings for input: a wait for output only does
                 * not listen to it (it would drain it under the feet of
                 * another thread's wait for input: the echo of a client
                 * sending in one thread and receiving in another stopped) */
                if (pass == 1 && !spin && (fds[i].events & (POLLIN | POLLRDNORM)) &&
                    f->path->ops->wake_fd &&
                    (w = f->path->ops->wake_fd(f, fds[i].fd, 0)) >= 0) {
                    if (naux < SHIM_POLL_AUX_IDX)
                        aux_of[naux] = i;
                    k[n + naux++] = (struct pollfd){ w, POLLIN, 0 };
                }
                ask.wake_listening = w >= 0;
                lrev[i] = f->path->ops->revents(f, fds[i].fd, fds[i].events, -1,
                                                spin ? SHIM_READY_SPIN : pass, &ask);
                ready += lrev[i] != 0;
                ask.wake_listening = 0;
                k[i].events = f->path->ops->kernel_events(f, fds[i].events);
                shim_fd_unpin(&pin);
            }
        }
        shim_wait_looked(&ws, ask.ring);
        if (netted && ready)
            zc_stat_add(ZC_STAT_READY_NET_RESCUES, 1);     /* a wake-up that never came */
        capped = 0;
        if (!ready)
            shim_wait_idle(&ws);
        if (spin && !ready && shim_wait_kernel_skip(&ws))
            continue;       /* the paths' memory only, this time */
        /* (a signal mask to apply is the kernel's to apply: never skipped) */
        skip = nowait && !mask && shim_nowait_skip(sig);
        tmo = ready || spin || nowait ? &zero : shim_left(deadline, &left);
        /* the safety net (shim_epoll.c): a path's wake-up that never came
         * costs SHIM_READY_NET_MS, not the whole timeout */
        if (!ready && (!ask.recheck_ms || ask.recheck_ms > SHIM_READY_NET_MS))
            ask.recheck_ms = SHIM_READY_NET_MS;
        if (!ready && ask.recheck_ms) {
            struct timespec slice = { ask.recheck_ms / 1000, (ask.recheck_ms % 1000) * 1000000L };

            if (!tmo || tmo->tv_sec > slice.tv_sec ||
                (tmo->tv_sec == slice.tv_sec && tmo->tv_nsec > slice.tv_nsec)) {
                left = slice, tmo = &left;
                capped = 1;
            }
        }
        if (!ready && shim_wait_signalled(&ws)) {
            errno = EINTR;
            rc = -1;
            break;
        }
        if (skip) {             /* as if the kernel had said nothing */
            for (i = 0; i < n; i++)
                k[i].revents = 0;
            r = 0;
        } else {
            r = zc_real.ppoll(k, n + naux, tmo, mask);
            if (nowait && r >= 0)
                shim_nowait_asked(sig, r == 0);
        }
        if (r < 0) {
            rc = -1;
            break;
        }
        capped = capped && r == 0;      /* the net ended it with nothing */
        rc = 0;
        for (i = 0; i < n; i++) {
            shim_pin_t pin;
            short rev = k[i].revents;

            if (tmo == &zero && !spin && lrev[i] >= 0 && !rev)
                rev = lrev[i];  /* no sleep, nothing from the kernel: the look holds */
            else if (!(rev & POLLNVAL) && shim_fd_pin(fds[i].fd, &pin)) {
                rev = pin.f.path->ops->revents(&pin.f, fds[i].fd, fds[i].events, rev, 0, NULL);
                shim_fd_unpin(&pin);
            }
            fds[i].revents = rev;
            rc += rev != 0;
        }
        /* A wake fd that fired is reset (it would keep poll from sleeping),
         * unless its descriptor is readable now: then it stays set while
         * the data waits, so that other waiters woken by it (another
         * thread's poll, an epoll set, which re-check it) see it too; a
         * later wait with nothing to read resets it. */
        for (i = n; i < n + naux; i++) {
            nfds_t of = i - n < SHIM_POLL_AUX_IDX ? aux_of[i - n] : n;

            if ((k[i].revents & POLLIN) && !(of < n && (fds[of].revents & POLLIN)))
                shim_wake_drain(k[i].fd);
        }
        if (rc || ready || nowait || shim_expired(deadline))
            break;
    }
    if (ws.spun) {      /* the spin is over: wake-ups it withdrew come back */
        int saved = errno;

        for (i = 0; i < n; i++) {
            shim_pin_t pin;

            if (fds[i].fd >= 0 && shim_fd_pin(fds[i].fd, &pin)) {
                pin.f.path->ops->revents(&pin.f, fds[i].fd, fds[i].events, -1, SHIM_READY_SPUN,
                                         NULL);
                shim_fd_unpin(&pin);
            }
        }
        errno = saved;
    }
    if (rc >= 0)
        shim_wait_end(&ws, rc);
    if (heap) {
        int saved = errno;

        zc_pool_free(k, heap);
        errno = saved;
    }
    return rc;
}

/* --- select: through the poll logic when a claimed descriptor is in a set --- */

int shim_select_claims(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
    int fd;

    if (nfds > FD_SETSIZE)
        nfds = FD_SETSIZE;
    int sets = __atomic_load_n(&shim_ep_marked_any, __ATOMIC_RELAXED), claims = 0;

    for (fd = 0; fd < nfds; fd++)
        if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))) {
            const shim_fd_t *f = shim_fd_get(fd);

            if (shim_fd_claimed(f)) {
                if (!sets)
                    return 1;
                claims |= 1;
            }
            if (sets)
                claims |= shim_poll_nested(f, fd);
        }
    return claims;
}

int shim_ready_select(int nfds, fd_set *r, fd_set *w, fd_set *e,
                             const struct timespec *timeout, const sigset_t *mask)
{
    struct pollfd *p;
    size_t size;
    int fd, n = 0, rc, i;

    if (nfds > FD_SETSIZE)
        nfds = FD_SETSIZE;
    size = (size_t)nfds * sizeof(*p);
    p = zc_pool_alloc(size ? size : 1);
    if (!p) {
        errno = ENOMEM;
        return -1;
    }
    for (fd = 0; fd < nfds; fd++) {
        short ev = (short)((r && FD_ISSET(fd, r) ? POLLIN : 0) |
                           (w && FD_ISSET(fd, w) ? POLLOUT : 0) |
                           (e && FD_ISSET(fd, e) ? POLLPRI : 0));

        if (ev)
            p[n++] = (struct pollfd){ fd, ev, 0 };
    }
    rc = shim_ready_poll(p, (nfds_t)n, timeout, mask);
    if (rc >= 0) {
        for (i = 0; i < n; i++)
            if (p[i].revents & POLLNVAL) {
                rc = -1;
                errno = EBADF;
                break;
            }
    }
    if (rc >= 0) {
        rc = 0;
        if (r)
            FD_ZERO(r);
        if (w)
            FD_ZERO(w);
        if (e)
            FD_ZERO(e);
        for (i = 0; i < n; i++) {
            short rev = p[i].revents;

            if (r && (p[i].events & POLLIN) && (rev & (POLLIN | POLLHUP | POLLERR)))
                FD_SET(p[i].fd, r), rc++;
            if (w && (p[i].events & POLLOUT) && (rev & (POLLOUT | POLLERR)))
                FD_SET(p[i].fd, w), rc++;
            if (e && (p[i].events & POLLPRI) && (rev & POLLPRI))
                FD_SET(p[i].fd, e), rc++;
        }
    }
    i = errno;
    zc_pool_free(p, size ? size : 1);
    errno = i;
    return rc;
}

