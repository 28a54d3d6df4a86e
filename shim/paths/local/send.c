/* The local path: sending, and sendfile/splice through a bounce buffer. */
#include "lp_int.h"

/* Pending client: look for the server's offer without waiting. */
void lp_pickup(lp_conn_t *c, int fd)
{
    if (c->state != LP_PENDING || c->ann < 0)
        return;
    /* Look at the 1st, 2nd, 4th, 8th ... send: a client that streams
     * before the server accepted finds the offer soon, one that never gets
     * one pays a logarithmic number of lookups. */
    c->pickups++;
    if (c->pickups & (c->pickups - 1))
        return;
    lp_pickup_try(c, fd, 0);
}

/* The peer is gone for good (its last holder closed or it crashed): sends
 * go to the kernel, which answers exactly as it would (EPIPE, SIGPIPE). */
int lp_peer_gone(lp_conn_t *c)
{
    return c->kern_eof || c->kern_err ||
           local_ring_peer_state(&c->ch) == LOCAL_RING_PEER_GONE;
}

/* A send after shutdown(SHUT_WR): what the kernel answers. */
ssize_t lp_epipe(int flags)
{
    if (!(flags & MSG_NOSIGNAL))
        syscall(SYS_tgkill, getpid(), lp_gettid(), SIGPIPE);
    return -EPIPE;
}

ssize_t lp_send_kernel(shim_fd_t *f, int fd, const struct msghdr *msg, int flags,
                              lp_conn_t *c)
{
    ssize_t n = zc_real.sendmsg(fd, msg, flags);

    shim_copy_account(f, 1, n, 1);
    if (n > 0 && c)
        c->tx_kernel += (uint64_t)n;
    return n < 0 ? -errno : n;
}

ssize_t lp_sendmsg(shim_fd_t *f, int fd, const struct msghdr *msg, int flags)
{
    lp_conn_t *c = lp_conn(f);
    size_t total, sent = 0;
    ssize_t n = lp_msg_check(msg);
    lp_wait_t w = LP_WAIT_INIT;

    if (n)
        return n;
    total = lp_iov_total(msg->msg_iov, msg->msg_iovlen);

    if (c->state == LP_PLAIN || (flags & MSG_OOB))     /* urgent data: the kernel's */
        return lp_send_kernel(f, fd, msg, flags, NULL);
    lp_lock(c, LP_TX);
    if (c->state == LP_PENDING)
        lp_pickup(c, fd);
    if (c->state == LP_PAIRED && lp_rv(c)) {
        /* Handed back: what the ring still holds goes to the kernel first. */
        n = lp_rv_tx(c, fd, lp_nonblocking(c, fd, flags) ? 0 : -1);
        if (n < 0) {
            lp_unlock(c, LP_TX);
            return n == -EPIPE ? lp_epipe(flags) : n;
        }
    }
    if (c->wr_shut && c->tx_ring) {
        lp_unlock(c, LP_TX);
        return lp_epipe(flags);
    }
    if (!lp_tx_switch(c)) {
        n = lp_send_kernel(f, fd, msg, flags, c);
        lp_unlock(c, LP_TX);
        return n;
    }
    if (msg->msg_controllen && f->family == AF_UNIX) {
        /* Descriptors and credentials travel with kernel bytes only. */
        lp_unlock(c, LP_TX);
        lp_revert(c, fd, "ancillary data");
        return lp_sendmsg(f, fd, msg, flags);
    }
    zc_stat_add(ZC_STAT_LOCAL_SEND_CALLS, 1);
    for (;;) {
        struct iovec win[LP_IOV_WIN];
        int64_t room;
        size_t done = 0;
        int k, rc, nonblock;

        if (lp_rv(c)) {         /* handed back meanwhile: start again on the kernel */
            lp_unlock(c, LP_TX);
            if (sent)
                return (ssize_t)sent;
            return lp_sendmsg(f, fd, msg, flags);
        }
        if (lp_peer_gone(c)) {
            lp_unlock(c, LP_TX);
            if (sent)
                return (ssize_t)sent;
            return lp_send_kernel(f, fd, msg, flags, NULL);
        }
        room = lp_tx_room(c);
        if (room < 0) {
            lp_unlock(c, LP_TX);
            return sent ? (ssize_t)sent : lp_broken(c);
        }
        if (room > LP_ROOM_KEEP) {
            k = lp_iov_window(msg->msg_iov, msg->msg_iovlen, sent,
                              (size_t)(room - LP_ROOM_KEEP), win);
            rc = local_ring_write(&c->ch, lp_txdir(c), win, k, &done);
            if (rc < 0) {
                lp_unlock(c, LP_TX);
                return sent ? (ssize_t)sent : lp_broken(c);
            }
            lp_wake(c, fd, rc, local_ring_wait_word(&c->ch, lp_txdir(c), LOCAL_RING_ROLE_CONS));
            sent += done;
            zc_stat_add(ZC_STAT_LOCAL_SEND_BYTES, done);
            if (sent == total)
                break;
            if (done)
                continue;
        }
        /* Full. */
        if (sent && lp_nonblocking(c, fd, flags))
            break;
        nonblock = lp_nonblocking(c, fd, flags);
        rc = local_ring_tx_wait_prepare_kind(&c->ch, lp_txdir(c),
                                             lp_tx_want(c, total - sent < LOCAL_RING_CHUNK
                                                               ? total - sent + LP_ROOM_KEEP
                                                               : LOCAL_RING_CHUNK),
                                             nonblock ? LOCAL_RING_WAIT_SOCKET
                                                      : LOCAL_RING_WAIT_FUTEX);
        if (rc == 1 && lp_rv(c)) {      /* re-checked after announcing (HAND-BACK 4) */
            local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
            continue;
        }
        if (rc == 0)
            continue;
        lp_unlock(c, LP_TX);
        if (rc < 0)
            return sent ? (ssize_t)sent : lp_broken(c);
        if (nonblock)
            return sent ? (ssize_t)sent : -EAGAIN;     /* armed: poll will see the space */
        rc = lp_sleep(c, fd, LP_TX, &w);
        local_ring_tx_wait_cancel(&c->ch, lp_txdir(c));
        if (rc < 0)
            return sent ? (ssize_t)sent : (rc == -EAGAIN ? -EAGAIN : rc);
        lp_lock(c, LP_TX);
    }
    lp_unlock(c, LP_TX);
    return (ssize_t)sent;
}

/* --- sendfile and splice: through a bounce buffer and the ring ------------------ */

#define LP_BOUNCE (64u << 10)

/* Room a send can take without waiting (or everything for a blocking one). */
size_t lp_send_room(lp_conn_t *c, int fd, int flags, size_t want)
{
    int64_t room;

    if (!c->tx_ring || !lp_nonblocking(c, fd, flags))
        return want;
    room = lp_tx_room(c) - LP_ROOM_KEEP;
    if (room <= 0)
        return 1;       /* the send reports EAGAIN before anything is read */
    return (size_t)room < want ? (size_t)room : want;
}

ssize_t path_local_sendfile(shim_fd_t *f, int out_fd, int in_fd, off_t *offset, size_t count)
{
    lp_conn_t *c = lp_conn(f);
    char *buf = zc_pool_alloc(LP_BOUNCE);
    size_t total = 0;
    ssize_t rc = 0;

    if (!buf)
        return -ENOMEM;
    while (total < count) {
        size_t want = lp_send_room(c, out_fd, 0, count - total < LP_BOUNCE ? count - total
                                                                         : LP_BOUNCE);
        ssize_t r = offset ? pread(in_fd, buf, want, *offset) : zc_real.read(in_fd, buf, want);
        ssize_t s;

        if (r <= 0) {
            rc = r < 0 ? -errno : 0;
            break;
        }
        s = lp_sendmsg(f, out_fd, &(struct msghdr){ .msg_iov = &(struct iovec){ buf, (size_t)r },
                                                   .msg_iovlen = 1 }, 0);
        if (s < (ssize_t)r && !offset)      /* give back what did not go */
            lseek(in_fd, (off_t)(s < 0 ? 0 : s) - r, SEEK_CUR);
        if (s < 0) {
            rc = s;
            break;
        }
        total += (size_t)s;
        if (offset)
            *offset += s;
        if (s < r)
            break;
    }
    zc_pool_free(buf, LP_BOUNCE);
    return total ? (ssize_t)total : rc;
}

ssize_t path_local_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                          unsigned flags)
{
    shim_fd_t *fi = shim_fd_get(fd_in), *fo = shim_fd_get(fd_out);
    int sflags = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
    char *buf;
    ssize_t r, w;

    if (off_out && lp_claimed(fo))
        return -ESPIPE;
    if (off_in && lp_claimed(fi))
        return -ESPIPE;
    if (len > LP_BOUNCE)
        len = LP_BOUNCE;
    if (lp_claimed(fi)) {
        /* Socket to pipe (or file): never take more than the other end holds. */
        int cap = zc_real.fcntl(fd_out, F_GETPIPE_SZ, 0), used = 0;

        if (cap > 0 && zc_real.ioctl(fd_out, FIONREAD, &used) == 0)
            len = (size_t)(cap - used) < len ? (size_t)(cap - used) : len;
        if (!len)
            return -EAGAIN;
    } else {
        len = lp_send_room(lp_conn(fo), fd_out, sflags, len);
    }
    buf = zc_pool_alloc(LP_BOUNCE);
    if (!buf)
        return -ENOMEM;
    if (lp_claimed(fi))
        r = lp_recvmsg(fi, fd_in, &(struct msghdr){ .msg_iov = &(struct iovec){ buf, len },
                                                   .msg_iovlen = 1 }, sflags);
    else
        r = off_in ? pread(fd_in, buf, len, *off_in) : zc_real.read(fd_in, buf, len);
    if (r < 0 && !lp_claimed(fi))
        r = -errno;
    w = r;
    if (r > 0) {
        if (off_in)
            *off_in += r;
        if (lp_claimed(fo))
            w = lp_sendmsg(fo, fd_out, &(struct msghdr){ .msg_iov = &(struct iovec){ buf, (size_t)r },
                                                       .msg_iovlen = 1 }, sflags);
        else {
            w = off_out ? pwrite(fd_out, buf, (size_t)r, *off_out) : zc_real.write(fd_out, buf, (size_t)r);
            if (w < 0)
                w = -errno;
            else if (off_out)
                *off_out += w;
        }
    }
    zc_pool_free(buf, LP_BOUNCE);
    return w;
}

