/* Readiness hooks: poll, select and epoll.  Pass-through today; a path that
 * holds bytes outside the kernel socket will answer for its descriptors here
 * (DESIGN.md §3.4). */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "shim_int.h"

SHIM_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    SHIM_ENTER(poll, -1);
    return zc_real.poll(fds, nfds, timeout);
}

SHIM_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
                      const sigset_t *sigmask)
{
    SHIM_ENTER(ppoll, -1);
    return zc_real.ppoll(fds, nfds, timeout, sigmask);
}

SHIM_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout)
{
    SHIM_ENTER(select, -1);
    return zc_real.select(nfds, r, w, e, timeout);
}

SHIM_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
                        const struct timespec *timeout, const sigset_t *sigmask)
{
    SHIM_ENTER(pselect, -1);
    return zc_real.pselect(nfds, r, w, e, timeout, sigmask);
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

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    SHIM_ENTER(epoll_ctl, -1);
    return zc_real.epoll_ctl(epfd, op, fd, ev);
}

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
    SHIM_ENTER(epoll_wait, -1);
    return zc_real.epoll_wait(epfd, evs, max, timeout);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
                            const sigset_t *sigmask)
{
    SHIM_ENTER(epoll_pwait, -1);
    return zc_real.epoll_pwait(epfd, evs, max, timeout, sigmask);
}
