/* The readiness engine's epoll (shim_ready.c has the principles): a table
 * of registrations of claimed descriptors, each registered with the kernel
 * under a tag naming its slot, so events carrying a tag are translated back
 * to the application's data and the others pass through untouched.
 * Edge-triggered registrations report when the path's change counter moved
 * since the last report; EPOLLONESHOT ones once until the application
 * re-arms them.  One spinlock guards the table; the kernel's epoll_wait runs
 * without it. */
#include <poll.h>
#include <sys/epoll.h>
#include <time.h>

#include "shim_int.h"
#include "shim_ready.h"
#include "zc_pool.h"

/* --- epoll ------------------------------------------------------------------ */

#define SHIM_EP_SLOTS   (1u << 16)
#define SHIM_EP_TAG     0x5a43000000000000ULL   /* "ZC" in the top bits */
#define SHIM_EP_TAGMASK 0xffff000000000000ULL
#define SHIM_EP_AUXTAG  0x5a44000000000000ULL   /* a path's wake fd ("ZD"): never reported */
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
    int released;               /* the path let the descriptor go: the kernel
                                 * holds the application's data again */
    int seen;                   /* reported in the current epoll_wait */
    int aux;                    /* the path's wake fd registered beside it, -1 */
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
    g->aux = -1;
    g->slot = s;
    g->tag = SHIM_EP_TAG | ((++shim_ep.gen & 0xffffffULL) << 24) | s;
    g->next = shim_ep.head;
    shim_ep.head = g;
    shim_ep.slots[s] = g;
    return g;
}

/* Take g's wake fd out of its set, unless another registration of the set
 * (a duplicate of the same connection) listens to it too.  Lock held. */
static void shim_ep_aux_del(shim_ep_reg_t *g)
{
    shim_ep_reg_t *o;
    int saved = errno;

    if (g->aux < 0)
        return;
    for (o = shim_ep.head; o; o = o->next)
        if (o != g && o->epfd == g->epfd && o->aux == g->aux)
            break;
    if (!o)
        zc_real.epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->aux, NULL);
    g->aux = -1;
    errno = saved;
}

/* Before an arming look: put the wake fd g's path wants heard in g's set
 * (edge-triggered, under the wake tag).  Returns 1 when the set listens to
 * it.  Lock held. */
static int shim_ep_aux(shim_ep_reg_t *g)
{
    shim_fd_t *f = shim_fd_get(g->fd);
    struct epoll_event e = { EPOLLIN | EPOLLET, { .u64 = 0 } };
    shim_ep_reg_t *o;
    int w, saved = errno;

    if (!shim_fd_claimed(f) || !f->path->ops->wake_fd)
        return 0;
    w = f->path->ops->wake_fd(f, g->fd, 0);
    if (w < 0)
        return 0;
    if (g->aux == w)
        return 1;
    /* every set holding the descriptor listens from now on (a nested set
     * too, which the application may wait on only through another) */
    for (o = shim_ep.head; o; o = o->next) {
        if (o->fd != g->fd || o->aux == w || o->released)
            continue;
        shim_ep_aux_del(o);
        e.data.u64 = SHIM_EP_AUXTAG | o->slot;
        if (!zc_real.epoll_ctl(o->epfd, EPOLL_CTL_ADD, w, &e) || errno == EEXIST) {
            o->aux = w;
        } else {
            f->path->ops->wake_fd(f, g->fd, 1);
            errno = saved;
            return 0;
        }
    }
    errno = saved;
    return g->aux == w;
}

/* Lock held. */
static void shim_ep_drop(shim_ep_reg_t *g)
{
    shim_ep_reg_t **pp;

    shim_ep_aux_del(g);
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

/* What the kernel registration of claimed descriptor f asks for, for the
 * application's events. */
static uint32_t shim_ep_kernel_events(shim_fd_t *f, uint32_t events)
{
    return (uint32_t)(unsigned short)f->path->ops->kernel_events(f, (short)events) |
           (events & SHIM_EP_KERNEL_KEEP);
}

/* Register g with the kernel again for what the connection needs now:
 * always (a one-shot that fired), or only when that changed (a connection
 * handed back to the kernel).  Lock held. */
static void shim_ep_rearm(shim_ep_reg_t *g, shim_fd_t *f, int always)
{
    struct epoll_event re = { shim_ep_kernel_events(f, g->events), { .u64 = g->tag } };
    int saved = errno;

    if (!always && re.events == g->kevents)
        return;
    if (g->events & EPOLLEXCLUSIVE) {
        /* the kernel refuses EPOLL_CTL_MOD of an exclusive registration:
         * register it again */
        zc_real.epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->fd, NULL);
        if (!zc_real.epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->fd, &re))
            g->kevents = re.events;
    } else if (!zc_real.epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->fd, &re)) {
        g->kevents = re.events;
    }
    errno = saved;
}

/* The path let g's descriptor go (it is on the copy path now): the kernel
 * registration gets the application's own events and data back, so what
 * the kernel reports from now on passes through untouched, and the event in
 * flight (kev) is reported as the kernel said it.  Lock held. */
static uint32_t shim_ep_released(shim_ep_reg_t *g, int kev)
{
    struct epoll_event e = { g->events, { .u64 = g->data } };
    int saved = errno;

    if (!g->released) {
        g->released = 1;
        shim_ep_aux_del(g);
        if (g->events & EPOLLEXCLUSIVE) {
            zc_real.epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->fd, NULL);
            zc_real.epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->fd, &e);
        } else {
            zc_real.epoll_ctl(g->epfd, EPOLL_CTL_MOD, g->fd, &e);
        }
        errno = saved;
    }
    if (kev <= 0)
        return 0;
    if (g->events & EPOLLONESHOT)
        g->disabled = 1;
    g->seen = 1;
    return (uint32_t)kev & (g->events | EPOLLERR | EPOLLHUP);
}

/* The events registration g reports now (kev: the kernel's events for it, or
 * -1), 0 when none; updates its edge-triggered and one-shot state when it
 * reports.  Lock held. */
static uint32_t shim_ep_ready(shim_ep_reg_t *g, int kev, int arm, shim_ready_ask_t *ask)
{
    shim_fd_t *f = shim_fd_get(g->fd);
    uint32_t want = g->events & ~(uint32_t)SHIM_EP_KERNEL_KEEP, rev;
    uint64_t ch;

    if (g->disabled || g->seen)
        return 0;
    if (!shim_fd_claimed(f))
        return shim_ep_released(g, kev);
    rev = (uint16_t)f->path->ops->revents(f, g->fd, (short)(want | EPOLLRDHUP), kev, arm, ask);
    shim_ep_rearm(g, f, 0);
    rev &= want | EPOLLERR | EPOLLHUP;
    if (!rev)
        return 0;
    if (g->events & EPOLLET) {
        ch = f->path->ops->change(f, g->fd);
        if (kev <= 0 && ch == g->change)
            return 0;       /* nothing new since the last report */
        g->change = ch;
    }
    if (g->events & EPOLLONESHOT)
        g->disabled = 1;
    g->seen = 1;
    return rev;
}

/* The spin of this wait is over: every claimed registration of epfd gets
 * back a wake-up the spin withdrew (SHIM_READY_SPUN). */
static void shim_ep_spun(int epfd)
{
    shim_ep_reg_t *g;

    shim_ep_lock();
    for (g = shim_ep.head; g; g = g->next) {
        shim_fd_t *f = shim_fd_get(g->fd);

        if (g->epfd == epfd && shim_fd_claimed(f))
            f->path->ops->revents(f, g->fd, (short)(g->events & 0xffff), -1, SHIM_READY_SPUN,
                                  NULL);
    }
    shim_ep_unlock();
}

static int shim_ep_wait(int epfd, struct epoll_event *evs, int max, int timeout,
                        const sigset_t *mask, shim_wait_t *ws)
{
    int64_t deadline = timeout < 0 ? -1 : timeout == 0 ? 0 :
                       shim_now_ns() + (int64_t)timeout * 1000000;

    for (;;) {
        shim_ep_reg_t *g;
        struct timespec left;
        shim_ready_ask_t ask = { 0 };
        int out = 0, pass, r, i, kept, tmo, spin = shim_wait_spinning(ws);

        shim_ep_lock();
        for (g = shim_ep.head; g; g = g->next)
            g->seen = 0;
        /* look, then look and arm; spinning: one look that may withdraw;
         * a zero timeout only looks (nobody would wait for the wake-up) */
        for (pass = 0; pass < (ws->may_sleep ? 2 - spin : 1) && !out; pass++)
            for (g = shim_ep.head; g && out < max; g = g->next) {
                uint32_t rev;

                if (g->epfd != epfd)
                    continue;
                ask.wake_listening = pass == 1 && !spin && shim_ep_aux(g);
                rev = shim_ep_ready(g, -1, spin ? SHIM_READY_SPIN : pass, &ask);
                ask.wake_listening = 0;
                if (rev) {
                    evs[out].events = rev;
                    evs[out].data.u64 = g->data;
                    out++;
                }
            }
        shim_ep_unlock();
        if (out == max)
            return out;
        if (!out)
            shim_wait_idle(ws);
        if (spin && !out && shim_wait_kernel_skip(ws))
            continue;       /* the paths' memory only, this time */
        if (out || spin || timeout == 0)
            tmo = 0;
        else if (deadline < 0)
            tmo = -1;
        else {
            shim_left(deadline, &left);
            tmo = (int)(left.tv_sec * 1000 + (left.tv_nsec + 999999) / 1000000);
        }
        if (!out && ask.recheck_ms && (tmo < 0 || tmo > ask.recheck_ms))
            tmo = ask.recheck_ms;
        if (!out && shim_wait_signalled(ws)) {
            errno = EINTR;
            return -1;
        }
        r = zc_real.epoll_pwait(epfd, evs + out, max - out, tmo, mask);
        if (r < 0)
            return out ? out : -1;
        shim_ep_lock();
        for (i = 0, kept = 0; i < r; i++) {
            struct epoll_event *e = &evs[out + i];

            if ((e->data.u64 & SHIM_EP_TAGMASK) == SHIM_EP_AUXTAG)
                continue;   /* a path's wake fd: the next round looks again */
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

int shim_ready_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout,
                            const sigset_t *mask)
{
    shim_wait_t ws;
    int n, saved;

    shim_wait_begin(&ws, timeout != 0);
    n = shim_ep_wait(epfd, evs, max, timeout, mask, &ws);
    saved = errno;
    if (ws.spun)
        shim_ep_spun(epfd);
    if (n >= 0)
        shim_wait_end(&ws, n);
    errno = saved;
    return n;
}

int shim_ep_has(int epfd)
{
    shim_fd_t *e = shim_fd_get(epfd);

    return e && e->kind == SHIM_FD_EPOLL;
}

/* epoll_ctl on a claimed descriptor: the registration is kept in the table
 * and registered with the kernel under its tag.  Returns what epoll_ctl
 * returns (-1 and errno on failure). */
/* epoll_ctl on a descriptor no path claims (any more): a registration made
 * while it was claimed first gets the application's events and data back in
 * the kernel (as the wait would do), then leaves the table, so the
 * application's call meets exactly the registration it made and the kernel
 * answers it.  Without this, a MOD made after the release went to the
 * kernel alone and the wait later restored the events of the first
 * registration (PostgreSQL's backend then spun on EPOLLOUT). */
void shim_ep_unclaimed(int epfd, int fd)
{
    shim_ep_reg_t *g;

    if (!__atomic_load_n(&shim_ep.head, __ATOMIC_RELAXED))
        return;
    shim_ep_lock();
    g = shim_ep_find(epfd, fd);
    if (g) {
        shim_ep_released(g, -1);
        shim_ep_drop(g);
    }
    shim_ep_unlock();
}

int shim_ep_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    shim_fd_t *f;
    shim_ep_reg_t *g;
    struct epoll_event kev;
    int rc, created = 0;

    f = shim_fd_get(fd);
    shim_ep_lock();
    g = shim_ep_find(epfd, fd);
    if (op == EPOLL_CTL_DEL) {
        rc = zc_real.epoll_ctl(epfd, op, fd, ev);
        if (rc == 0 && g)
            shim_ep_drop(g);
        shim_ep_unlock();
        return rc;
    }
    /* ADD of a known registration: the kernel's answer decides (EEXIST: it
     * is live and stays as it is; success: the kernel had forgotten it
     * with a closed descriptor of the same number).  MOD of an unknown one
     * (registered before the descriptor was claimed): it gets a slot and
     * our tag too.  Either way the kernel never holds the application's
     * data for a claimed descriptor. */
    if (!g) {
        g = shim_ep_new(epfd, fd);
        created = 1;
    }
    if (!g) {
        shim_ep_unlock();
        errno = ENOMEM;
        return -1;
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
        g->released = 0;
        g->change = UINT64_MAX;
        if (shim_fd_claimed(f))
            shim_ep_aux(g);     /* a wake fd the path has already: heard here too */
    } else if (created) {
        int saved = errno;

        shim_ep_drop(g);
        errno = saved;
    }
    shim_ep_unlock();
    return rc;
}
