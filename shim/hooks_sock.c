/* Descriptor hooks: the calls that make, copy, configure and close sockets.
 * They keep the per-descriptor table in step with the kernel's; the call
 * itself always goes to the kernel unchanged. */
#include <fcntl.h>
#include <linux/close_range.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "shim_int.h"
#include "shim_mem.h"

SHIM_EXPORT int socket(int domain, int type, int protocol)
{
    int fd;

    SHIM_ENTER(socket, -1);
    fd = zc_real.socket(domain, type, protocol);
    if (fd >= 0) {
        shim_fd_socket_track_proto(fd, domain, type, protocol);
        shim_socket_made(fd, domain, type);
        zc_stat_add(ZC_STAT_SOCKETS_CREATED, 1);
    }
    return fd;
}

SHIM_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
    int rc;

    SHIM_ENTER(socketpair, -1);
    rc = zc_real.socketpair(domain, type, protocol, sv);
    if (rc == 0) {
        shim_fd_socket_track_proto(sv[0], domain, type, protocol);
        shim_fd_socket_track_proto(sv[1], domain, type, protocol);
        shim_fd_connected(sv[0]);
        shim_fd_connected(sv[1]);
        shim_socket_made(sv[0], domain, type);
        shim_socket_made(sv[1], domain, type);
        zc_stat_add(ZC_STAT_SOCKETS_CREATED, 2);
    }
    return rc;
}

SHIM_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    int rc, saved;

    SHIM_ENTER(connect, -1);
    saved = errno;
    SHIM_PATHS_EACH(connect_before, fd, addr, len);
    errno = saved;
    rc = zc_real.connect(fd, addr, len);
    saved = errno;
    SHIM_PATHS_EACH(connect_after, fd, rc, saved);
    shim_fd_connected(fd);
    errno = saved;
    return rc;
}

SHIM_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    SHIM_ENTER(bind, -1);
    return zc_real.bind(fd, addr, len);
}

/* A socket the library never saw being made (inherited across exec, as
 * uvicorn's workers inherit their listener): its family and type from the
 * kernel, so that a path can act on it. */
static void shim_fd_learn(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);
    int family = 0, type = 0, saved = errno;

    if (!f || f->kind != SHIM_FD_UNKNOWN)
        return;
    if (!zc_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &(socklen_t){ sizeof(int) }) &&
        !zc_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &(socklen_t){ sizeof(int) }))
        shim_fd_socket_track(fd, family, type);
    errno = saved;
}

SHIM_EXPORT int listen(int fd, int backlog)
{
    int rc, saved;

    SHIM_ENTER(listen, -1);
    rc = zc_real.listen(fd, backlog);
    if (rc == 0) {
        shim_fd_learn(fd);
        shim_fd_connected(fd);
        saved = errno;
        SHIM_PATHS_EACH(listened, fd);
        errno = saved;
    }
    return rc;
}

/* An accepted socket has its listener's family and type; ask the kernel
 * when we never saw the listener being made. */
static void shim_accepted_track(int lfd, int fd)
{
    shim_fd_t *l = shim_fd_get(lfd);
    int family = 0, type = 0, saved;
    socklen_t len = sizeof(int);

    if (l && l->kind == SHIM_FD_SOCKET) {
        family = l->family;
        type = l->stream ? SOCK_STREAM : 0;
    } else {
        saved = errno;
        if (zc_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len) ||
            zc_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &(socklen_t){ sizeof(int) }))
            family = AF_UNSPEC;
        errno = saved;
    }
    shim_fd_socket_track(fd, family, type);
    if (l && l->kind == SHIM_FD_SOCKET && shim_fd_get(fd) && shim_fd_get(fd)->stream)
        shim_fd_get(fd)->stream = l->stream;   /* (its protocol too) */
    shim_fd_connected(fd);
    zc_stat_add(ZC_STAT_SOCKETS_ACCEPTED, 1);
    shim_socket_made(fd, family, type);
    saved = errno;
    SHIM_PATHS_EACH(accepted, lfd, fd);
    errno = saved;
}

SHIM_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    int nfd;

    SHIM_ENTER(accept, -1);
    nfd = zc_real.accept(fd, addr, len);
    if (nfd >= 0)
        shim_accepted_track(fd, nfd);
    return nfd;
}

SHIM_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    int nfd;

    SHIM_ENTER(accept4, -1);
    nfd = zc_real.accept4(fd, addr, len, flags);
    if (nfd >= 0)
        shim_accepted_track(fd, nfd);
    return nfd;
}

SHIM_EXPORT int shutdown(int fd, int how)
{
    shim_pin_t pin;
    int rc;

    SHIM_ENTER(shutdown, -1);
    if (shim_fd_pin(fd, &pin)) {
        rc = pin.f.path->ops->shutdown(&pin.f, fd, how);
        shim_fd_unpin(&pin);
        shim_ep_touch(fd);
        if (rc != SHIM_PATH_PASS)
            return (int)shim_ret(rc);
    }
    return zc_real.shutdown(fd, how);
}

/* The entry goes first: once the kernel has closed fd another thread may get
 * the same number from socket() and must not find our old state.  The path
 * hears the close with the entry as it was, after the table forgot it: a
 * call that pinned the claim before keeps the path's state alive until it
 * returns (PINS, shim_path.h), and none can pin it after. */
static void shim_fd_release(int fd)
{
    shim_fd_t *f = shim_fd_get(fd), was;

    if (shim_unlikely(shim_ep_priv_maybe(fd)))
        shim_ep_priv_gone(fd);      /* (QUIET SETS) */
    if (!f || (f->kind != SHIM_FD_UNKNOWN && shim_vfork_child()))
        return;
    if (f->kind == SHIM_FD_UNKNOWN && !f->path)
        return;
    shim_fd_take(f, &was);
    if (was.path && was.kind == SHIM_FD_SOCKET)
        was.path->ops->forget(&was, fd);      /* claimed or watched */
    if (was.kind == SHIM_FD_EPOLL)
        shim_ep_forget_fd(fd);
    else if (was.kind == SHIM_FD_SOCKET)
        shim_ep_fd_closed(fd);
}

/* close made through syscall() (libuv's uv__close_nocancel does this): the
 * table forgets the application's descriptor before the kernel closes it.
 * The library's own temporary descriptors are not in the table, and its
 * own entries are left alone (it closes some through syscall() too). */
void shim_fd_closing_raw(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (shim_unlikely(shim_ep_priv_maybe(fd)))
        shim_ep_priv_gone(fd);
    if (f && f->kind != SHIM_FD_UNKNOWN && f->kind != SHIM_FD_INTERNAL)
        shim_fd_release(fd);
}

/* newfd is a copy of oldfd now: so is its state (not in a vfork child,
 * whose table is not the one ours describes). */
static void shim_fd_dup(int oldfd, int newfd)
{
    shim_fd_t *f = shim_fd_get(oldfd);

    if (shim_unlikely(shim_ep_priv_some())) {
        /* a set under two numbers, or one number naming another file now
         * (QUIET SETS); a vfork child shares our memory: no arming there */
        shim_ep_priv_gone(newfd);
        if (shim_vfork_child())
            shim_ep_all_public();
        else
            shim_ep_exposed(oldfd);
    }
    if (f && f->kind != SHIM_FD_UNKNOWN && shim_vfork_child())
        return;
    shim_fd_copy(oldfd, newfd);
}

/* The library's own descriptors (arena memfds) are not the application's:
 * to it they are not open, so closing one fails like closing a closed fd. */
static int shim_fd_is_ours(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);

    if (f && shim_unlikely(f->kind == SHIM_FD_INTERNAL))
        return 1;
    return shim_mem_ops.fd_is_internal(fd);
}

/* dup2/dup3 onto one of our descriptors: the number is the application's
 * to take, so ours moves elsewhere first.  If it cannot move (the process
 * is out of descriptors), the call fails with that error rather than
 * silently replacing memory the library still uses.  Returns 0 or -errno. */
static int shim_fd_make_room(int oldfd, int newfd)
{
    shim_fd_t *f = shim_fd_get(newfd);

    if (oldfd == newfd || shim_likely(!shim_fd_is_ours(newfd)))
        return 0;
    if (f && f->kind == SHIM_FD_INTERNAL)
        return shim_fd_internal_move(newfd);
    return shim_mem_ops.fd_move(newfd);
}

SHIM_EXPORT int close(int fd)
{
    SHIM_ENTER(close, -1);
    if (shim_unlikely(shim_fd_is_ours(fd))) {
        errno = EBADF;
        return -1;
    }
    shim_fd_release(fd);
    return zc_real.close(fd);
}

/* close_range over [first, last], leaving the library's own descriptors
 * open: the range is closed in pieces around them.  Only descriptors inside
 * the state table can be ours. */
static int shim_close_range_around_ours(unsigned first, unsigned last, int flags)
{
    unsigned fd, end = shim_fd_table_size, from = first;

    if (last < end)
        end = last + 1;
    for (fd = first; fd < end; fd++) {
        if (!shim_fd_is_ours((int)fd))
            continue;
        if (fd > from && zc_real.close_range(from, fd - 1, flags))
            return -1;
        from = fd + 1;
    }
    if (from > last)
        return 0;
    return zc_real.close_range(from, last, flags);
}

/* close_range's work past its entry (closefrom and syscall(SYS_close_range)
 * come here without entering the exported hook). */
int shim_close_range_do(unsigned first, unsigned last, int flags)
{
    if (first > last) {
        errno = EINVAL;
        return -1;
    }
    if (!(flags & CLOSE_RANGE_CLOEXEC)) {
        unsigned fd, end = shim_fd_table_size;

        if (shim_unlikely(shim_ep_priv_some()))
            shim_ep_all_public();   /* (QUIET SETS: simpler than a range) */
        if (last < end)
            end = last + 1;
        for (fd = first; fd < end; fd++)
            if (shim_fd_table[fd].kind != SHIM_FD_UNKNOWN && !shim_fd_is_ours((int)fd))
                shim_fd_release((int)fd);
    }
    return shim_close_range_around_ours(first, last, flags);
}

SHIM_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    SHIM_ENTER(close_range, -1);
    return shim_close_range_do(first, last, flags);
}

/* glibc's closefrom calls its internal close_range, which no hook sees: it
 * would close the library's own descriptors and leave the table describing
 * closed numbers.  The hooked close_range instead; the real closefrom only
 * where close_range is missing (kernels before 5.9), as glibc would. */
SHIM_EXPORT void closefrom(int lowfd)
{
    if (shim_unlikely(!__atomic_load_n(&shim_ready, __ATOMIC_ACQUIRE)))
        shim_init_slow();
    if (!zc_real.closefrom)
        return;
    zc_stat_add(ZC_STAT_CALLS_closefrom, 1);
    if (lowfd < 0)
        lowfd = 0;
    if (zc_real.close_range && shim_close_range_do((unsigned)lowfd, ~0U, 0) == 0)
        return;
    zc_real.closefrom(lowfd);
}

/* A claimed socket on stdin, stdout or stderr meets glibc's stdio, which
 * reads and writes through internal calls no hook sees (and so does every
 * program an exec starts with it there). */
static void shim_fd_stdio_check(int fd)
{
    if (fd <= 2 && shim_fd_claimed(shim_fd_get(fd)))
        shim_fd_exposed(fd, "a descriptor on stdin/stdout/stderr (stdio)");
}

SHIM_EXPORT int dup(int oldfd)
{
    int fd;

    SHIM_ENTER(dup, -1);
    fd = zc_real.dup(oldfd);
    if (fd >= 0)
        shim_fd_dup(oldfd, fd);
    return fd;
}

SHIM_EXPORT int dup2(int oldfd, int newfd)
{
    int fd, rc;

    SHIM_ENTER(dup2, -1);
    rc = shim_fd_make_room(oldfd, newfd);
    if (rc)
        return (int)shim_ret(rc);
    fd = zc_real.dup2(oldfd, newfd);
    if (fd >= 0 && oldfd != newfd) {
        shim_fd_release(newfd);
        shim_fd_dup(oldfd, newfd);
        shim_fd_stdio_check(newfd);
    }
    return fd;
}

SHIM_EXPORT int dup3(int oldfd, int newfd, int flags)
{
    int fd, rc;

    SHIM_ENTER(dup3, -1);
    rc = shim_fd_make_room(oldfd, newfd);
    if (rc)
        return (int)shim_ret(rc);
    fd = zc_real.dup3(oldfd, newfd, flags);
    if (fd >= 0) {
        shim_fd_release(newfd);
        shim_fd_dup(oldfd, newfd);
        shim_fd_stdio_check(newfd);
    }
    return fd;
}

/* fcntl's third argument is an int, a long or a pointer depending on cmd;
 * like glibc itself we read it as a pointer-sized word and pass it on. */
static int shim_fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
    int rc = real(fd, cmd, arg);

    shim_pin_t pin;

    if (rc >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) {
        shim_fd_dup(fd, rc);
    } else if (cmd == F_SETFL && shim_fd_pin(fd, &pin)) {
        int saved = errno;

        pin.f.path->ops->flags_changed(&pin.f, fd);
        shim_fd_unpin(&pin);
        errno = saved;
    }
    return rc;
}

/* The optional third argument, as one pointer-sized word. */
#define SHIM_VA_WORD(last, word)      \
    do {                              \
        va_list ap_;                  \
                                      \
        va_start(ap_, last);          \
        word = va_arg(ap_, void *);   \
        va_end(ap_);                  \
    } while (0)

SHIM_EXPORT int fcntl(int fd, int cmd, ...)
{
    void *arg;

    SHIM_VA_WORD(cmd, arg);
    SHIM_ENTER(fcntl, -1);
    return shim_fcntl_common(zc_real.fcntl, fd, cmd, arg);
}

SHIM_EXPORT int fcntl64(int fd, int cmd, ...)
{
    void *arg;

    SHIM_VA_WORD(cmd, arg);
    SHIM_ENTER(fcntl64, -1);
    return shim_fcntl_common(zc_real.fcntl64, fd, cmd, arg);
}

SHIM_EXPORT int ioctl(int fd, unsigned long req, ...)
{
    shim_pin_t pin;
    void *arg;
    int rc;

    SHIM_VA_WORD(req, arg);
    SHIM_ENTER(ioctl, -1);
    if (!shim_fd_pin(fd, &pin))
        return zc_real.ioctl(fd, req, arg);
    if (!pin.f.path->ops->ioctl ||
        pin.f.path->ops->ioctl(&pin.f, fd, req, arg, &rc) == SHIM_PATH_PASS) {
        rc = zc_real.ioctl(fd, req, arg);
        if (req == FIONBIO) {
            int saved = errno;

            pin.f.path->ops->flags_changed(&pin.f, fd);
            errno = saved;
        }
    }
    shim_fd_unpin(&pin);
    return rc;
}

SHIM_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    shim_pin_t pin;
    int rc = SHIM_PATH_PASS;

    SHIM_ENTER(getsockopt, -1);
    if (shim_fd_pin(fd, &pin)) {
        if (pin.f.path->ops->getsockopt)
            rc = pin.f.path->ops->getsockopt(&pin.f, fd, level, name, val, len);
        shim_fd_unpin(&pin);
        if (rc == 0)
            return 0;
    }
    return zc_real.getsockopt(fd, level, name, val, len);
}

SHIM_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    shim_pin_t pin;
    int rc, saved;

    SHIM_ENTER(setsockopt, -1);
    rc = zc_real.setsockopt(fd, level, name, val, len);
    if (rc == 0 && shim_fd_pin(fd, &pin)) {
        saved = errno;
        pin.f.path->ops->setsockopt(&pin.f, fd, level, name, val, len);
        shim_fd_unpin(&pin);
        errno = saved;
    }
    return rc;
}
