/* Readiness hooks: poll, ppoll, select, pselect and the epoll family.
 * Descriptors no path claimed go straight to the kernel; sets holding
 * claimed ones go through the readiness engine (shim_ready.c). */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include "shim_int.h"
#include "shim_ready.h"

/* A poll or select over one of our epoll sets that may sleep: a sleep
 * that is not the engine's (shim_epoll.c, NESTED SETS). */
#define SHIM_OUTER(cond, call)                                                \
    do {                                                                      \
        if (cond)                                                             \
            shim_ep_outer_sleep();                                            \
        return (call);                                                        \
    } while (0)

SHIM_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    struct timespec ts;
    int claims;

    SHIM_ENTER(poll, -1);
    if (shim_unlikely(shim_ep_priv_some()))
        shim_ep_exposed_poll(fds, nfds);
    claims = shim_poll_claims(fds, nfds);
    if (shim_likely(!(claims & 1)) || !zc_real.ppoll)
        SHIM_OUTER((claims & SHIM_POLL_SETS) && timeout != 0, zc_real.poll(fds, nfds, timeout));
    ts.tv_sec = timeout / 1000;
    ts.tv_nsec = (long)(timeout % 1000) * 1000000;
    SHIM_OUTER((claims & SHIM_POLL_SETS) && timeout != 0,
               shim_ready_poll(fds, nfds, timeout < 0 ? NULL : &ts, NULL));
}

SHIM_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
                      const sigset_t *sigmask)
{
    int claims, outer;

    SHIM_ENTER(ppoll, -1);
    if (shim_unlikely(shim_ep_priv_some()))
        shim_ep_exposed_poll(fds, nfds);
    claims = shim_poll_claims(fds, nfds);
    outer = (claims & SHIM_POLL_SETS) && (!timeout || timeout->tv_sec || timeout->tv_nsec);
    if (shim_likely(!(claims & 1)))
        SHIM_OUTER(outer, zc_real.ppoll(fds, nfds, timeout, sigmask));
    if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
                    timeout->tv_nsec >= 1000000000)) {
        errno = EINVAL;
        return -1;
    }
    SHIM_OUTER(outer, shim_ready_poll(fds, nfds, timeout, sigmask));
}

SHIM_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout)
{
    struct timespec ts;
    int64_t deadline;
    int rc, claims;

    SHIM_ENTER(select, -1);
    if (shim_unlikely(shim_ep_priv_some()))
        shim_ep_exposed_select(nfds, r, w, e);
    claims = shim_select_claims(nfds, r, w, e);
    if (shim_likely(!(claims & 1)) || !zc_real.ppoll)
        SHIM_OUTER((claims & SHIM_POLL_SETS) && (!timeout || timeout->tv_sec || timeout->tv_usec),
                   zc_real.select(nfds, r, w, e, timeout));
    if (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0)) {
        errno = EINVAL;
        return -1;
    }
    if (timeout) {
        ts.tv_sec = timeout->tv_sec + timeout->tv_usec / 1000000;
        ts.tv_nsec = (timeout->tv_usec % 1000000) * 1000;
    }
    deadline = shim_deadline(timeout ? &ts : NULL);
    if ((claims & SHIM_POLL_SETS) && (!timeout || ts.tv_sec || ts.tv_nsec))
        shim_ep_outer_sleep();
    rc = shim_ready_select(nfds, r, w, e, timeout ? &ts : NULL, NULL);
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
    int claims, outer;

    SHIM_ENTER(pselect, -1);
    if (shim_unlikely(shim_ep_priv_some()))
        shim_ep_exposed_select(nfds, r, w, e);
    claims = shim_select_claims(nfds, r, w, e);
    outer = (claims & SHIM_POLL_SETS) && (!timeout || timeout->tv_sec || timeout->tv_nsec);
    if (shim_likely(!(claims & 1)) || !zc_real.ppoll)
        SHIM_OUTER(outer, zc_real.pselect(nfds, r, w, e, timeout, sigmask));
    SHIM_OUTER(outer, shim_ready_select(nfds, r, w, e, timeout, sigmask));
}

SHIM_EXPORT int epoll_create(int size)
{
    int fd;

    SHIM_ENTER(epoll_create, -1);
    fd = zc_real.epoll_create(size);
    shim_ep_created(fd);
    return fd;
}

SHIM_EXPORT int epoll_create1(int flags)
{
    int fd;

    SHIM_ENTER(epoll_create1, -1);
    fd = zc_real.epoll_create1(flags);
    shim_ep_created(fd);
    return fd;
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    shim_pin_t pin;
    int rc;

    SHIM_ENTER(epoll_ctl, -1);
    if (shim_unlikely(shim_fd_pin(fd, &pin))) {
        if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && !ev)
            rc = zc_real.epoll_ctl(epfd, op, fd, ev);
        else
            rc = shim_ep_ctl(epfd, op, fd, ev, &pin.f);
        shim_fd_unpin(&pin);
        return rc;
    }
    if (shim_unlikely(shim_ep_priv_maybe(fd)) && op != EPOLL_CTL_DEL)
        shim_ep_exposed(fd);        /* a set nested in another */
    shim_ep_unclaimed(epfd, fd);
    rc = zc_real.epoll_ctl(epfd, op, fd, ev);
    if (shim_unlikely(rc < 0) && errno == ELOOP && op != EPOLL_CTL_DEL && shim_ep_wake_strip())
        rc = zc_real.epoll_ctl(epfd, op, fd, ev);   /* (shim_epoll.c, WAKE FDS AND NESTING) */
    if (rc == 0) {
        const shim_fd_t *f = shim_fd_get(fd);

        if (shim_unlikely(f && f->kind == SHIM_FD_EPOLL) && op != EPOLL_CTL_DEL)
            shim_ep_nested(fd);     /* a set of ours in another (NESTED SETS) */
        if (shim_unlikely(f && f->unconnected)) {
            int saved = errno;

            shim_ep_plain_ctl(epfd, op, fd, ev);
            errno = saved;
        }
    }
    return rc;
}

/* Straight to the kernel (no claimed registration in the set when the wait
 * began); a tag that reached the set meanwhile is translated before the
 * application sees it (shim_epoll.c, TAGS NEVER LEAK), and a wait whose
 * events were all ours goes on through the engine. */
#define SHIM_EP_PASS(call, epfd, evs, max, ms, mask)                          \
    do {                                                                      \
        int64_t t0_ = (ms) > 0 ? shim_now_ns() : 0;                           \
        int n_, nowait_ = (ms) == 0 && !(mask);                               \
                                                                              \
        if (nowait_ && shim_nowait_skip_plain(SHIM_EP_NOWAIT_SIG(epfd)))      \
            return 0;                   /* (KERNEL SKIP) */                   \
        if ((ms) != 0)                                                        \
            shim_ep_sleep_enter(epfd);  /* (QUIET SETS) */                    \
        n_ = (call);                                                          \
        if ((ms) != 0)                                                        \
            shim_ep_sleep_leave(epfd);                                        \
        if (nowait_ && n_ >= 0)                                               \
            shim_nowait_asked_plain(SHIM_EP_NOWAIT_SIG(epfd), n_ == 0);       \
        if (shim_likely(n_ <= 0)) {                                           \
            if (n_ == 0 && (ms) == 0 && !nowait_)                             \
                shim_nowait_passed();                                         \
            return n_;                                                        \
        }                                                                     \
        n_ = shim_ep_translate(epfd, evs, n_);                                \
        return n_ ? n_ : shim_ep_wait_rest(epfd, evs, max, ms, t0_, mask);    \
    } while (0)

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
    SHIM_ENTER(epoll_wait, -1);
    if (shim_likely(!shim_ep_has(epfd)) || max <= 0 || !zc_real.epoll_pwait)
        SHIM_EP_PASS(zc_real.epoll_wait(epfd, evs, max, timeout), epfd, evs, max, timeout, NULL);
    return shim_ready_epoll_wait(epfd, evs, max, timeout, NULL);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
                            const sigset_t *sigmask)
{
    SHIM_ENTER(epoll_pwait, -1);
    if (shim_likely(!shim_ep_has(epfd)) || max <= 0)
        SHIM_EP_PASS(zc_real.epoll_pwait(epfd, evs, max, timeout, sigmask), epfd, evs, max,
                     timeout, sigmask);
    return shim_ready_epoll_wait(epfd, evs, max, timeout, sigmask);
}

/* epoll_pwait2 (a timespec timeout): through the engine, whose waits count
 * in milliseconds, so a timeout is rounded up to the next millisecond. */
SHIM_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max,
                             const struct timespec *timeout, const sigset_t *sigmask)
{
    int64_t ms;

    SHIM_ENTER(epoll_pwait2, -1);
    if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
                    timeout->tv_nsec >= 1000000000))
        return zc_real.epoll_pwait2 ? zc_real.epoll_pwait2(epfd, evs, max, timeout, sigmask)
                                    : shim_ret(-ENOSYS);
    ms = !timeout ? -1 : timeout->tv_sec * 1000 + (timeout->tv_nsec + 999999) / 1000000;
    if (ms > INT32_MAX)
        ms = INT32_MAX;
    if (shim_likely(!shim_ep_has(epfd)) || max <= 0) {
        if (!zc_real.epoll_pwait2)
            return shim_ret(-ENOSYS);
        SHIM_EP_PASS(zc_real.epoll_pwait2(epfd, evs, max, timeout, sigmask), epfd, evs, max,
                     (int)ms, sigmask);
    }
    return shim_ready_epoll_wait(epfd, evs, max, (int)ms, sigmask);
}

/* --- fortify variants: glibc checks the set's size, then calls its
 * internal poll/ppoll, which our hooks would never see.  An overflowing set
 * goes to the real variant (which reports it and aborts, as without us);
 * any other to the plain hook. ------------------------------------------ */

int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
                const sigset_t *sigmask, size_t fdslen);

SHIM_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
    if (fdslen / sizeof(*fds) < nfds && zc_real.__poll_chk)
        return zc_real.__poll_chk(fds, nfds, timeout, fdslen);
    return poll(fds, nfds, timeout);
}

SHIM_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
                            const sigset_t *sigmask, size_t fdslen)
{
    if (fdslen / sizeof(*fds) < nfds && zc_real.__ppoll_chk)
        return zc_real.__ppoll_chk(fds, nfds, timeout, sigmask, fdslen);
    return ppoll(fds, nfds, timeout, sigmask);
}
