/* Data hooks: the send, receive, read and write families, their fortify
 * variants, sendfile and splice.  Each one: prologue, then either the
 * descriptor's path or the very call the application made. */
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <fcntl.h>

#include "shim_int.h"

void shim_copy_account(shim_fd_t *f, int is_send, ssize_t n, int must_be_socket)
{
    unsigned why;

    if (f && f->kind == SHIM_FD_SOCKET)
        why = f->copy_why;
    else if (!must_be_socket)
        return;     /* read/write on something that is not a socket we know */
    else
        why = ZC_STAT_WHY_UNTRACKED;
    if (!f)
        zc_stat_add(ZC_STAT_FD_BEYOND_TABLE, 1);
    zc_stat_add(why, 1);
    zc_stat_add(is_send ? ZC_STAT_COPY_SEND_CALLS : ZC_STAT_COPY_RECV_CALLS, 1);
    if (n > 0)
        zc_stat_add(is_send ? ZC_STAT_COPY_SEND_BYTES : ZC_STAT_COPY_RECV_BYTES, (uint64_t)n);
    if (shim_unlikely(f && f->left_key) && n >= SHIM_BULK_CALL) {
        uint32_t key = __atomic_exchange_n(&f->left_key, 0, __ATOMIC_RELAXED);

        if (key)
            SHIM_PATHS_EACH(left_bulk, key);
    }
}

static ssize_t shim_path_send(shim_fd_t *f, int fd, const struct iovec *iov, size_t iovcnt,
                              int flags, const struct sockaddr *to, socklen_t tolen)
{
    struct msghdr m = {
        .msg_name = (void *)to, .msg_namelen = tolen,
        .msg_iov = (struct iovec *)iov, .msg_iovlen = iovcnt,
    };

    return shim_ret(f->path->ops->sendmsg(f, fd, &m, flags));
}

static ssize_t shim_path_recv(shim_fd_t *f, int fd, const struct iovec *iov, size_t iovcnt,
                              int flags, struct sockaddr *from, socklen_t *fromlen)
{
    struct msghdr m = {
        .msg_name = from, .msg_namelen = fromlen ? *fromlen : 0,
        .msg_iov = (struct iovec *)iov, .msg_iovlen = iovcnt,
        .msg_flags = SHIM_MSG_UNSEEN,
    };
    ssize_t n = f->path->ops->recvmsg(f, fd, &m, flags);

    if (n >= 0 && fromlen)
        *fromlen = m.msg_namelen;
    return shim_ret(n);
}

ssize_t shim_kernel_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    if (msg->msg_iovlen == 1 && !msg->msg_controllen)
        return zc_real.sendto(fd, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len, flags,
                              (const struct sockaddr *)msg->msg_name, msg->msg_namelen);
    return zc_real.sendmsg(fd, msg, flags);
}

ssize_t shim_kernel_recvmsg(int fd, struct msghdr *msg, int flags)
{
    socklen_t nl;
    ssize_t n;

    if (msg->msg_flags != SHIM_MSG_UNSEEN || msg->msg_iovlen != 1 || msg->msg_controllen)
        return zc_real.recvmsg(fd, msg, flags);
    nl = msg->msg_namelen;
    n = zc_real.recvfrom(fd, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len, flags,
                         (struct sockaddr *)msg->msg_name, msg->msg_name ? &nl : NULL);
    if (n >= 0) {
        msg->msg_namelen = msg->msg_name ? nl : 0;
        msg->msg_flags = 0;
    }
    return n;
}

/* The body every plain data hook shares: prologue, the descriptor's path if
 * one claimed it (path_call), else the very call the application made,
 * charged to the copy path. */
#define SHIM_DATA_HOOK(name, is_send, must_be_socket, path_call, ...) \
    shim_fd_t *f;                                                     \
    shim_pin_t pin;                                                   \
    ssize_t n;                                                        \
                                                                      \
    SHIM_ENTER(name, -1);                                             \
    if (shim_fd_pin(fd, &pin)) {                                      \
        f = &pin.f;                                                   \
        if (is_send)                                                  \
            shim_send_site = (uintptr_t)__builtin_return_address(0);  \
        n = path_call;                                                \
        shim_fd_unpin(&pin);                                          \
        shim_path_calls++;                                            \
        shim_ep_touch(fd);                                            \
        return n;                                                     \
    }                                                                 \
    f = shim_fd_get(fd);                                              \
    n = zc_real.name(__VA_ARGS__);                                    \
    shim_copy_account(f, is_send, n, must_be_socket);                 \
    return n

#define SHIM_IOV1(buf, len) (&(struct iovec){ (void *)(buf), (len) })

__thread uintptr_t shim_send_site __attribute__((tls_model("initial-exec")));

/* --- send family --------------------------------------------------------- */

SHIM_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
    SHIM_DATA_HOOK(send, 1, 1,
                   shim_path_send(f, fd, SHIM_IOV1(buf, len), 1, flags, NULL, 0),
                   fd, buf, len, flags);
}

SHIM_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
                           const struct sockaddr *to, socklen_t tolen)
{
    SHIM_DATA_HOOK(sendto, 1, 1,
                   shim_path_send(f, fd, SHIM_IOV1(buf, len), 1, flags, to, tolen),
                   fd, buf, len, flags, to, tolen);
}

SHIM_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    if (shim_unlikely(msg && msg->msg_control && msg->msg_controllen >= sizeof(struct cmsghdr)))
        shim_fds_passing(fd, msg);        /* claimed sockets may travel in it */
    SHIM_DATA_HOOK(sendmsg, 1, 1, shim_ret(f->path->ops->sendmsg(f, fd, msg, flags)),
                   fd, msg, flags);
}

SHIM_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned vlen, int flags)
{
    shim_fd_t *f;
    shim_pin_t pin;
    unsigned i;
    int n;

    SHIM_ENTER(sendmmsg, -1);
    if (shim_fd_pin(fd, &pin)) {
        shim_send_site = (uintptr_t)__builtin_return_address(0);
        for (i = 0, n = 0; i < vlen; i++) {
            ssize_t r = pin.f.path->ops->sendmsg(&pin.f, fd, &vec[i].msg_hdr, flags);

            if (r < 0) {
                n = i ? (int)i : (int)shim_ret(r);
                break;
            }
            vec[i].msg_len = (unsigned)r;
        }
        shim_fd_unpin(&pin);
        shim_ep_touch(fd);
        return i == vlen ? (int)vlen : n;
    }
    f = shim_fd_get(fd);
    n = zc_real.sendmmsg(fd, vec, vlen, flags);
    for (i = 0; n > 0 && i < (unsigned)n; i++)
        shim_copy_account(f, 1, vec[i].msg_len, 1);
    if (n <= 0)
        shim_copy_account(f, 1, n, 1);
    return n;
}

SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
    SHIM_DATA_HOOK(write, 1, 0, shim_path_send(f, fd, SHIM_IOV1(buf, len), 1, 0, NULL, 0),
                   fd, buf, len);
}

SHIM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    SHIM_DATA_HOOK(writev, 1, 0,
                   iovcnt < 0 ? shim_ret(-EINVAL)
                              : shim_path_send(f, fd, iov, (size_t)iovcnt, 0, NULL, 0),
                   fd, iov, iovcnt);
}

/* --- receive family ------------------------------------------------------ */

SHIM_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    SHIM_DATA_HOOK(recv, 0, 1,
                   shim_path_recv(f, fd, SHIM_IOV1(buf, len), 1, flags, NULL, NULL),
                   fd, buf, len, flags);
}

SHIM_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
                             struct sockaddr *from, socklen_t *fromlen)
{
    SHIM_DATA_HOOK(recvfrom, 0, 1,
                   shim_path_recv(f, fd, SHIM_IOV1(buf, len), 1, flags, from, fromlen),
                   fd, buf, len, flags, from, fromlen);
}

SHIM_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    shim_fd_t *f;
    shim_pin_t pin;
    ssize_t n;

    SHIM_ENTER(recvmsg, -1);
    if (shim_fd_pin(fd, &pin)) {
        n = shim_ret(pin.f.path->ops->recvmsg(&pin.f, fd, msg, flags));
        shim_fd_unpin(&pin);
        shim_ep_touch(fd);
        return n;
    }
    f = shim_fd_get(fd);
    n = zc_real.recvmsg(fd, msg, flags);
    shim_copy_account(f, 0, n, 1);
    if (n >= 0 && shim_unlikely(msg->msg_controllen >= sizeof(struct cmsghdr)))
        shim_fds_received(fd, msg);       /* claimed sockets may have come */
    return n;
}

SHIM_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned vlen, int flags,
                         struct timespec *timeout)
{
    shim_fd_t *f;
    shim_pin_t pin;
    unsigned i;
    int n;

    SHIM_ENTER(recvmmsg, -1);
    if (shim_fd_pin(fd, &pin)) {
        for (i = 0, n = (int)vlen; i < vlen; i++) {
            ssize_t r = pin.f.path->ops->recvmsg(&pin.f, fd, &vec[i].msg_hdr,
                                                 i ? flags | MSG_DONTWAIT : flags);

            if (r < 0) {
                n = i ? (int)i : (int)shim_ret(r);
                break;
            }
            vec[i].msg_len = (unsigned)r;
            if (r == 0) {
                n = (int)i + 1;
                break;
            }
        }
        shim_fd_unpin(&pin);
        shim_ep_touch(fd);
        return n;
    }
    f = shim_fd_get(fd);
    n = zc_real.recvmmsg(fd, vec, vlen, flags, timeout);
    for (i = 0; n > 0 && i < (unsigned)n; i++)
        shim_copy_account(f, 0, vec[i].msg_len, 1);
    if (n <= 0)
        shim_copy_account(f, 0, n, 1);
    return n;
}

SHIM_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
    SHIM_DATA_HOOK(read, 0, 0, shim_path_recv(f, fd, SHIM_IOV1(buf, len), 1, 0, NULL, NULL),
                   fd, buf, len);
}

SHIM_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
    SHIM_DATA_HOOK(readv, 0, 0,
                   iovcnt < 0 ? shim_ret(-EINVAL)
                              : shim_path_recv(f, fd, iov, (size_t)iovcnt, 0, NULL, NULL),
                   fd, iov, iovcnt);
}

/* --- preadv2/pwritev2: at offset -1 (the file position) they read and write
 * a socket like readv/writev, with RWF_* flags.  Any other offset on a
 * socket fails in the kernel (ESPIPE) without moving data, so it goes there.
 * RWF_NOWAIT is MSG_DONTWAIT; the other flags a socket accepts do nothing
 * on one; any other flag is the kernel's EOPNOTSUPP (RWF_ATOMIC and
 * RWF_DONTCACHE too: a socket supports neither). ----------------------- */

#define SHIM_RWF_SOCKET 0x3f    /* HIPRI DSYNC SYNC NOWAIT APPEND NOAPPEND */

static ssize_t shim_rwv2(shim_fd_t *f, int fd, const struct iovec *iov, int iovcnt, int flags,
                         int is_send)
{
    int mflags = (flags & RWF_NOWAIT) ? MSG_DONTWAIT : 0;

    if (iovcnt < 0)
        return shim_ret(-EINVAL);
    if (flags & ~SHIM_RWF_SOCKET)
        return shim_ret(-EOPNOTSUPP);
    return is_send ? shim_path_send(f, fd, iov, (size_t)iovcnt, mflags, NULL, 0)
                   : shim_path_recv(f, fd, iov, (size_t)iovcnt, mflags, NULL, NULL);
}

#define SHIM_RWV2_HOOK(name, is_send)                                            \
    shim_fd_t *f;                                                               \
    shim_pin_t pin;                                                             \
    ssize_t n;                                                                  \
                                                                                \
    SHIM_ENTER(name, -1);                                                       \
    if (off == -1 && shim_fd_pin(fd, &pin)) {                                   \
        n = shim_rwv2(&pin.f, fd, iov, iovcnt, flags, is_send);                 \
        shim_fd_unpin(&pin);                                                    \
        shim_ep_touch(fd);                                                      \
        return n;                                                               \
    }                                                                           \
    f = shim_fd_get(fd);                                                        \
    if (!zc_real.name)                                                          \
        return shim_ret(-ENOSYS);                                               \
    n = zc_real.name(fd, iov, iovcnt, off, flags);                              \
    if (off == -1)                                                              \
        shim_copy_account(f, is_send, n, 0);                                    \
    return n

SHIM_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt, off_t off, int flags)
{
    SHIM_RWV2_HOOK(preadv2, 0);
}

SHIM_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t off, int flags)
{
    SHIM_RWV2_HOOK(pwritev2, 1);
}

SHIM_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int iovcnt, off64_t off,
                               int flags)
{
    SHIM_RWV2_HOOK(preadv64v2, 0);
}

SHIM_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt, off64_t off,
                                int flags)
{
    SHIM_RWV2_HOOK(pwritev64v2, 1);
}

ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                       struct sockaddr *from, socklen_t *fromlen);
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);

/* --- fortify variants: glibc checks the length, then calls its internal
 * copy of the plain function, which our hook would never see.  We let the
 * real variant do the check and the call on the copy path. ------------ */

SHIM_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
    SHIM_DATA_HOOK(__recv_chk, 0, 1,
                   len > buflen ? zc_real.__recv_chk(fd, buf, len, buflen, flags)
                                : shim_path_recv(f, fd, SHIM_IOV1(buf, len), 1, flags, NULL, NULL),
                   fd, buf, len, buflen, flags);
}

SHIM_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                                   struct sockaddr *from, socklen_t *fromlen)
{
    SHIM_DATA_HOOK(__recvfrom_chk, 0, 1,
                   len > buflen
                       ? zc_real.__recvfrom_chk(fd, buf, len, buflen, flags, from, fromlen)
                       : shim_path_recv(f, fd, SHIM_IOV1(buf, len), 1, flags, from, fromlen),
                   fd, buf, len, buflen, flags, from, fromlen);
}

SHIM_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
    SHIM_DATA_HOOK(__read_chk, 0, 0,
                   len > buflen ? zc_real.__read_chk(fd, buf, len, buflen)
                                : shim_path_recv(f, fd, SHIM_IOV1(buf, len), 1, 0, NULL, NULL),
                   fd, buf, len, buflen);
}

/* --- sendfile and splice: the claiming path's, else the kernel's, charged
 * to the socket end. */

SHIM_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
    shim_pin_t pin;
    ssize_t n;

    SHIM_ENTER(sendfile, -1);
    if (shim_fd_pin(out_fd, &pin)) {
        n = shim_ret(pin.f.path->ops->sendfile(&pin.f, out_fd, in_fd, offset, count));
        shim_fd_unpin(&pin);
        shim_ep_touch(out_fd);
        return n;
    }
    n = zc_real.sendfile(out_fd, in_fd, offset, count);
    shim_copy_account(shim_fd_get(out_fd), 1, n, 0);
    return n;
}

SHIM_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *offset, size_t count)
{
    shim_pin_t pin;
    ssize_t n;

    SHIM_ENTER(sendfile64, -1);
    if (shim_fd_pin(out_fd, &pin)) {
        n = shim_ret(pin.f.path->ops->sendfile(&pin.f, out_fd, in_fd, offset, count));
        shim_fd_unpin(&pin);
        shim_ep_touch(out_fd);
        return n;
    }
    n = zc_real.sendfile64(out_fd, in_fd, offset, count);
    shim_copy_account(shim_fd_get(out_fd), 1, n, 0);
    return n;
}

SHIM_EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out,
                           size_t len, unsigned flags)
{
    shim_pin_t pi, po;
    int in = 0, out = 0;
    ssize_t n;

    SHIM_ENTER(splice, -1);
    in = shim_fd_pin(fd_in, &pi);
    out = shim_fd_pin(fd_out, &po);
    if (in || out) {
        n = shim_ret((in ? &pi.f : &po.f)->path->ops->splice(fd_in, off_in, fd_out, off_out,
                                                             len, flags));
        if (in)
            shim_fd_unpin(&pi);
        if (out)
            shim_fd_unpin(&po);
        shim_ep_touch(fd_in);
        shim_ep_touch(fd_out);
        return n;
    }
    n = zc_real.splice(fd_in, off_in, fd_out, off_out, len, flags);
    shim_copy_account(shim_fd_get(fd_in), 0, n, 0);
    shim_copy_account(shim_fd_get(fd_out), 1, n, 0);
    return n;
}
