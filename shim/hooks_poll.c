/* Readiness hooks: poll, select and epoll (DESIGN.md §3.4).
 *
 * Descriptors no path claimed go straight to the kernel.  For descriptors the
 * local path claimed, the bytes may be in the ring rather than the kernel
 * socket, and the kernel socket may hold doorbell bytes that are no data, so
 * readiness comes from path_local_revents(): the ring first (nothing to wait
 * for when it is ready), then, before sleeping, an announcement so the peer
 * rings the kernel socket, then the kernel's answer filtered through the ring
 * (a doorbell alone is not "readable").  A wake-up that turns out to be only
 * doorbells goes back to sleep for the rest of the timeout.
 *
 * epoll: registrations of claimed descriptors are kept in a table (slot per
 * registration) and registered with the kernel under a tag naming the slot;
 * events carrying a tag are translated back to the application's data, the
 * others pass through untouched.  Edge-triggered registrations report when
 * the ring's positions moved since the last report; EPOLLONESHOT ones once
 * until the application re-arms them. */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include "shim_int.h"
#include "zc_pool.h"

#define SHIM_POLL_STACK 64

/* --- time ----------------------------------------------------------------- */

static int64_t shim_now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Deadline from a timeout (NULL / negative: none, -1). */
static int64_t shim_deadline(const struct timespec *ts)
{
    if (!ts)
        return -1;
    return shim_now_ns() + (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* Time left until deadline into *ts; NULL when there is no deadline. */
static const struct timespec *shim_left(int64_t deadline, struct timespec *ts)
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

static int shim_expired(int64_t deadline)
{
    return deadline >= 0 && shim_now_ns() >= deadline;
}

/* --- poll ----------------------------------------------------------------- */

static int shim_poll_claims(const struct pollfd *fds, nfds_t n)
{
    nfds_t i;

    for (i = 0; i < n; i++)
        if (shim_fd_claimed(shim_fd_get(fds[i].fd)))
            return 1;
    return 0;
}

/* poll over a set holding claimed descriptors. */
static int shim_poll_local(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
                           const sigset_t *mask)
{
    struct pollfd stack[SHIM_POLL_STACK], *k = stack;
    int64_t deadline = shim_deadline(timeout);
    int rc = 0;
    nfds_t i;

    if (n > SHIM_POLL_STACK) {
        k = zc_pool_alloc(n * sizeof(*k));
        if (!k)
            return zc_real.ppoll(fds, n, timeout, mask);
    }
    for (;;) {
        struct timespec left, zero = { 0, 0 };
        const struct timespec *tmo;
        shim_ready_ask_t ask = { 0 };
        int ready = 0, pass, r;

        for (pass = 0; pass < 2 && !ready; pass++) {    /* look, then look and arm */
            for (i = 0; i < n; i++) {
                shim_fd_t *f = shim_fd_get(fds[i].fd);

                if (shim_fd_claimed(f) && fds[i].fd >= 0 &&
                    f->path->ops->revents(f, fds[i].fd, fds[i].events, -1, pass, &ask))
                    ready++;
            }
        }
        for (i = 0; i < n; i++) {
            shim_fd_t *f = shim_fd_get(fds[i].fd);

            k[i] = fds[i];
            if (shim_fd_claimed(f))
                k[i].events = f->path->ops->kernel_events(f, fds[i].events);
        }
        tmo = ready ? &zero : shim_left(deadline, &left);
        if (!ready && ask.recheck_ms) {
            struct timespec slice = { ask.recheck_ms / 1000, (ask.recheck_ms % 1000) * 1000000L };

            if (!tmo || tmo->tv_sec > slice.tv_sec ||
                (tmo->tv_sec == slice.tv_sec && tmo->tv_nsec > slice.tv_nsec))
                left = slice, tmo = &left;
        }
        r = zc_real.ppoll(k, n, tmo, mask);
        if (r < 0) {
            rc = -1;
            break;
        }
        rc = 0;
        for (i = 0; i < n; i++) {
            shim_fd_t *f = shim_fd_get(fds[i].fd);
            short rev = k[i].revents;

            if (shim_fd_claimed(f) && !(rev & POLLNVAL))
                rev = f->path->ops->revents(f, fds[i].fd, fds[i].events, rev, 0, NULL);
            fds[i].revents = rev;
            rc += rev != 0;
        }
        if (rc || ready || shim_expired(deadline) || (timeout && !timeout->tv_sec &&
                                                      !timeout->tv_nsec))
            break;
    }
    if (k != stack) {
        int saved = errno;

        zc_pool_free(k, n * sizeof(*k));
        errno = saved;
    }
    return rc;
}

SHIM_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    struct timespec ts;

    SHIM_ENTER(poll, -1);
    if (shim_likely(!shim_poll_claims(fds, nfds)) || !zc_real.ppoll)
        return zc_real.poll(fds, nfds, timeout);
    ts.tv_sec = timeout / 1000;
    ts.tv_nsec = (long)(timeout % 1000) * 1000000;
    return shim_poll_local(fds, nfds, timeout < 0 ? NULL : &ts, NULL);
}

SHIM_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
                      const sigset_t *sigmask)
{
    SHIM_ENTER(ppoll, -1);
    if (shim_likely(!shim_poll_claims(fds, nfds)))
        return zc_real.ppoll(fds, nfds, timeout, sigmask);
    if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
                    timeout->tv_nsec >= 1000000000)) {
        errno = EINVAL;
        return -1;
    }
    return shim_poll_local(fds, nfds, timeout, sigmask);
}

/* --- select: through the poll logic when a claimed descriptor is in a set --- */

static int shim_select_claims(int nfds, fd_set *r, fd_set *w, fd_set *e)
{
    int fd;

    if (nfds > FD_SETSIZE)
        nfds = FD_SETSIZE;
    for (fd = 0; fd < nfds; fd++)
        if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))) &&
            shim_fd_claimed(shim_fd_get(fd)))
            return 1;
    return 0;
}

static int shim_select_local(int nfds, fd_set *r, fd_set *w, fd_set *e,
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
    rc = shim_poll_local(p, (nfds_t)n, timeout, mask);
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

SHIM_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout)
{
    struct timespec ts;
    int64_t deadline;
    int rc;

    SHIM_ENTER(select, -1);
    if (shim_likely(!shim_select_claims(nfds, r, w, e)) || !zc_real.ppoll)
        return zc_real.select(nfds, r, w, e, timeout);
    if (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0)) {
        errno = EINVAL;
        return -1;
    }
    if (timeout) {
        ts.tv_sec = timeout->tv_sec + timeout->tv_usec / 1000000;
        ts.tv_nsec = (timeout->tv_usec % 1000000) * 1000;
    }
    deadline = shim_deadline(timeout ? &ts : NULL);
    rc = shim_select_local(nfds, r, w, e, timeout ? &ts : NULL, NULL);
    if (timeout) {          /* Linux reports the time left */
        shim_left(deadline, &ts);
        timeout->tv_sec = ts.tv_sec;
        timeout->tv_usec = ts.tv_nsec / 1000;
    }
    return rc;
}

SHIM_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
                        const struct timespec *timeout, const sigset_t *sigmask)
{
    SHIM_ENTER(pselect, -1);
    if (shim_likely(!shim_select_claims(nfds, r, w, e)) || !zc_real.ppoll)
        return zc_real.pselect(nfds, r, w, e, timeout, sigmask);
    return shim_select_local(nfds, r, w, e, timeout, sigmask);
}

/* --- epoll ------------------------------------------------------------------ */

#define SHIM_EP_SLOTS   (1u << 16)
#define SHIM_EP_TAG     0x5a43000000000000ULL   /* "ZC" in the top bits */
#define SHIM_EP_TAGMASK 0xffff000000000000ULL
#define SHIM_EP_KERNEL_KEEP (EPOLLET | EPOLLONESHOT | EPOLLRDHUP | EPOLLWAKEUP | EPOLLEXCLUSIVE)

typedef struct shim_ep_reg {
    struct shim_ep_reg *next;
    int epfd, fd;
    uint32_t events;            /* the application's */
    uint32_t slot;
    uint64_t data;              /* the application's */
    uint64_t tag;               /* what the kernel holds instead */
    uint64_t change;            /* edge-triggered: the path's change counter at the
                                 * last report */
    uint32_t kevents;           /* what the kernel registration asks for */
    int disabled;               /* EPOLLONESHOT fired */
    int seen;                   /* reported in the current epoll_wait */
} shim_ep_reg_t;

static struct {
    int lock;
    uint32_t next_slot;
    uint64_t gen;
    shim_ep_reg_t *head;
    shim_ep_reg_t **slots;      /* SHIM_EP_SLOTS entries, from zc_pool */
} shim_ep;

static void shim_ep_lock(void)
{
    while (__atomic_exchange_n(&shim_ep.lock, 1, __ATOMIC_ACQUIRE))
        __builtin_ia32_pause();
}

static void shim_ep_unlock(void)
{
    __atomic_store_n(&shim_ep.lock, 0, __ATOMIC_RELEASE);
}

/* Lock held. */
static shim_ep_reg_t *shim_ep_find(int epfd, int fd)
{
    shim_ep_reg_t *g;

    for (g = shim_ep.head; g; g = g->next)
        if (g->epfd == epfd && g->fd == fd)
            return g;
    return NULL;
}

/* Lock held. */
static shim_ep_reg_t *shim_ep_new(int epfd, int fd)
{
    shim_ep_reg_t *g;
    uint32_t i, s;

    if (!shim_ep.slots) {
        shim_ep.slots = zc_pool_alloc(SHIM_EP_SLOTS * sizeof(*shim_ep.slots));
        if (!shim_ep.slots)
            return NULL;
    }
    for (i = 0; i < SHIM_EP_SLOTS; i++) {
        s = (shim_ep.next_slot + i) % SHIM_EP_SLOTS;
        if (!shim_ep.slots[s])
            break;
    }
    if (i == SHIM_EP_SLOTS)
        return NULL;
    g = zc_pool_alloc(sizeof(*g));
    if (!g)
        return NULL;
    shim_ep.next_slot = s + 1;
    g->epfd = epfd;
    g->fd = fd;
    g->slot = s;
    g->tag = SHIM_EP_TAG | ((++shim_ep.gen & 0xffffffULL) << 24) | s;
    g->next = shim_ep.head;
    shim_ep.head = g;
    shim_ep.slots[s] = g;
    return g;
}

/* Lock held. */
static void shim_ep_drop(shim_ep_reg_t *g)
{
    shim_ep_reg_t **pp;

    for (pp = &shim_ep.head; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    shim_ep.slots[g->slot] = NULL;
    zc_pool_free(g, sizeof(*g));
}

/* Lock held. */
static shim_ep_reg_t *shim_ep_by_tag(int epfd, uint64_t tag)
{
    shim_ep_reg_t *g;

    if ((tag & SHIM_EP_TAGMASK) != SHIM_EP_TAG || !shim_ep.slots)
        return NULL;
    g = shim_ep.slots[tag & 0xffffff & (SHIM_EP_SLOTS - 1)];
    return g && g->tag == tag && g->epfd == epfd ? g : NULL;
}

/* An epoll descriptor or one of its registered descriptors is closing:
 * forget what the kernel forgets. */
void shim_ep_forget_fd(int fd)
{
    shim_ep_reg_t *g, *next;

    if (!__atomic_load_n(&shim_ep.head, __ATOMIC_RELAXED))
        return;
    shim_ep_lock();
    for (g = shim_ep.head; g; g = next) {
        next = g->next;
        if (g->epfd == fd)
            shim_ep_drop(g);
    }
    shim_ep_unlock();
}

SHIM_EXPORT int epoll_create(int size)
{
    SHIM_ENTER(epoll_create, -1);
    return zc_real.epoll_create(size);
}

SHIM_EXPORT int epoll_create1(int flags)
{
    SHIM_ENTER(epoll_create1, -1);
    return zc_real.epoll_create1(flags);
}

/* What the kernel registration of claimed descriptor f asks for, for the
 * application's events. */
static uint32_t shim_ep_kernel_events(shim_fd_t *f, uint32_t events)
{
    return (uint32_t)(unsigned short)f->path->ops->kernel_events(f, (short)events) |
           (events & SHIM_EP_KERNEL_KEEP);
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    shim_fd_t *f;
    shim_ep_reg_t *g;
    struct epoll_event kev;
    int rc, created = 0;

    SHIM_ENTER(epoll_ctl, -1);
    f = shim_fd_get(fd);
    if (shim_likely(!shim_fd_claimed(f)) ||
        ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && !ev))
        return zc_real.epoll_ctl(epfd, op, fd, ev);
    shim_ep_lock();
    g = shim_ep_find(epfd, fd);
    if (op == EPOLL_CTL_DEL) {
        rc = zc_real.epoll_ctl(epfd, op, fd, ev);
        if (rc == 0 && g)
            shim_ep_drop(g);
        shim_ep_unlock();
        return rc;
    }
    if (op == EPOLL_CTL_ADD && g) {     /* stale: the kernel forgot it with the fd */
        shim_ep_drop(g);
        g = NULL;
    }
    if (!g && op == EPOLL_CTL_ADD) {
        g = shim_ep_new(epfd, fd);
        created = 1;
    }
    if (!g) {
        shim_ep_unlock();
        return zc_real.epoll_ctl(epfd, op, fd, ev);     /* MOD of an unknown one */
    }
    kev.events = shim_ep_kernel_events(f, ev->events);
    kev.data.u64 = g->tag;
    rc = zc_real.epoll_ctl(epfd, op, fd, &kev);
    if (rc == 0) {
        shim_fd_t *e = shim_fd_get(epfd);

        if (e && e->kind == SHIM_FD_UNKNOWN)
            e->kind = SHIM_FD_EPOLL;
        g->events = ev->events;
        g->kevents = kev.events;
        g->data = ev->data.u64;
        g->disabled = 0;
        g->change = UINT64_MAX;
    } else if (created) {
        int saved = errno;

        shim_ep_drop(g);
        errno = saved;
    }
    shim_ep_unlock();
    return rc;
}

/* Register g with the kernel again for what the connection needs now:
 * always (a one-shot that fired), or only when that changed (a connection
 * handed back to the kernel).  Lock held. */
static void shim_ep_rearm(shim_ep_reg_t *g, shim_fd_t *f, int always)
{
    struct epoll_event re = { shim_ep_kernel_events(f, g->events), { .u64 = g->tag } };

    if ((always || re.events != g->kevents) &&
        !zc_real.epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->fd, &re))
        g->kevents = re.events;
}

/* The events registration g reports now (kev: the kernel's events for it, or
 * -1), 0 when none; updates its edge-triggered and one-shot state when it
 * reports.  Lock held. */
static uint32_t shim_ep_ready(shim_ep_reg_t *g, int kev, int arm, shim_ready_ask_t *ask)
{
    shim_fd_t *f = shim_fd_get(g->fd);
    uint32_t want = g->events & ~(uint32_t)SHIM_EP_KERNEL_KEEP, rev;
    uint64_t ch;

    if (g->disabled || g->seen || !shim_fd_claimed(f))
        return 0;
    rev = (uint16_t)f->path->ops->revents(f, g->fd, (short)(want | EPOLLRDHUP), kev, arm, ask);
    shim_ep_rearm(g, f, 0);
    rev &= want | EPOLLERR | EPOLLHUP;
    if (!rev)
        return 0;
    if (g->events & EPOLLET) {
        ch = f->path->ops->change(f);
        if (kev <= 0 && ch == g->change)
            return 0;       /* nothing new since the last report */
        g->change = ch;
    }
    if (g->events & EPOLLONESHOT)
        g->disabled = 1;
    g->seen = 1;
    return rev;
}

static int shim_epoll_local(int epfd, struct epoll_event *evs, int max, int timeout,
                            const sigset_t *mask)
{
    int64_t deadline = timeout < 0 ? -1 : shim_now_ns() + (int64_t)timeout * 1000000;

    for (;;) {
        shim_ep_reg_t *g;
        struct timespec left;
        shim_ready_ask_t ask = { 0 };
        int out = 0, pass, r, i, kept, tmo;

        shim_ep_lock();
        for (g = shim_ep.head; g; g = g->next)
            g->seen = 0;
        for (pass = 0; pass < 2 && !out; pass++)    /* look, then look and arm */
            for (g = shim_ep.head; g && out < max; g = g->next) {
                uint32_t rev;

                if (g->epfd != epfd)
                    continue;
                rev = shim_ep_ready(g, -1, pass, &ask);
                if (rev) {
                    evs[out].events = rev;
                    evs[out].data.u64 = g->data;
                    out++;
                }
            }
        shim_ep_unlock();
        if (out == max)
            return out;
        if (out)
            tmo = 0;
        else if (deadline < 0)
            tmo = -1;
        else {
            shim_left(deadline, &left);
            tmo = (int)(left.tv_sec * 1000 + (left.tv_nsec + 999999) / 1000000);
        }
        if (!out && ask.recheck_ms && (tmo < 0 || tmo > ask.recheck_ms))
            tmo = ask.recheck_ms;
        r = zc_real.epoll_pwait(epfd, evs + out, max - out, tmo, mask);
        if (r < 0)
            return out ? out : -1;
        shim_ep_lock();
        for (i = 0, kept = 0; i < r; i++) {
            struct epoll_event *e = &evs[out + i];

            g = shim_ep_by_tag(epfd, e->data.u64);
            if (g) {
                uint32_t rev = shim_ep_ready(g, (int)(e->events & 0xffff), 0, NULL);

                if (!rev) {
                    if ((g->events & EPOLLONESHOT) && !g->disabled)
                        shim_ep_rearm(g, shim_fd_get(g->fd), 1);
                    continue;
                }
                e->events = rev;
                e->data.u64 = g->data;
            }
            evs[out + kept++] = *e;
        }
        shim_ep_unlock();
        if (out + kept || timeout == 0 || (deadline >= 0 && shim_expired(deadline)))
            return out + kept;
    }
}

static int shim_ep_has(int epfd)
{
    shim_fd_t *e = shim_fd_get(epfd);

    return e && e->kind == SHIM_FD_EPOLL;
}

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
    SHIM_ENTER(epoll_wait, -1);
    if (shim_likely(!shim_ep_has(epfd)) || max <= 0 || !zc_real.epoll_pwait)
        return zc_real.epoll_wait(epfd, evs, max, timeout);
    return shim_epoll_local(epfd, evs, max, timeout, NULL);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
                            const sigset_t *sigmask)
{
    SHIM_ENTER(epoll_pwait, -1);
    if (shim_likely(!shim_ep_has(epfd)) || max <= 0)
        return zc_real.epoll_pwait(epfd, evs, max, timeout, sigmask);
    return shim_epoll_local(epfd, evs, max, timeout, sigmask);
}
