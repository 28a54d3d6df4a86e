/* Blocking send/receive over a local_ring channel with doorbells through a
 * kernel socket, as the local path will do it: copy into/out of the ring, and
 * sleep on the socket only after announcing it (local_ring_*_wait_prepare);
 * send a doorbell byte only when a call returns LOCAL_RING_F_DOORBELL.
 * Shared by the two-process test and the benchmark. */
#ifndef T_RING_H
#define T_RING_H

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "local_ring.h"

#define T_IOV_MAX 64

typedef struct t_ring_end {
    local_ring_t *ch;
    int bell_fd;        /* kernel socket carrying doorbells */
    int spin;           /* polls of the ring before sleeping */
    unsigned long bells_sent, sleeps;
} t_ring_end_t;

static inline int t_ring_bell(t_ring_end_t *e)
{
    char b = 0;

    e->bells_sent++;
    for (int i = 0; i < 1000; i++) {
        ssize_t r = send(e->bell_fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (r == 1)
            return 0;
        if (r < 0 && (errno == EPIPE || errno == ECONNRESET))
            return 0;       /* the peer is gone: its socket tells the rest */
        if (r < 0 && errno != EINTR && errno != EAGAIN)
            return -errno;
        if (r < 0 && errno == EAGAIN)
            usleep(10);
    }
    return -ETIMEDOUT;
}

/* Sleep until a doorbell arrives (or the peer closes: -EPIPE). */
static inline int t_ring_sleep(t_ring_end_t *e)
{
    char buf[64];
    ssize_t r;

    e->sleeps++;
    do
        r = recv(e->bell_fd, buf, sizeof(buf), 0);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return -EPIPE;
    return r < 0 ? -errno : 0;
}

static inline void t_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Send every byte of iov (copied and advanced locally); 0 or -errno. */
static inline int t_ring_sendv(t_ring_end_t *e, int dir, const struct iovec *iov, int iovcnt)
{
    struct iovec v[T_IOV_MAX];
    int cnt = iovcnt < T_IOV_MAX ? iovcnt : T_IOV_MAX, first = 0;
    size_t left = 0;

    for (int i = 0; i < cnt; i++) {
        v[i] = iov[i];
        left += iov[i].iov_len;
    }
    while (left) {
        size_t done;
        int rc = local_ring_write(e->ch, dir, v + first, cnt - first, &done);

        if (rc < 0)
            return rc;
        if ((rc & LOCAL_RING_F_DOORBELL) && (rc = t_ring_bell(e)) < 0)
            return rc;
        left -= done;
        while (done) {
            size_t k = done < v[first].iov_len ? done : v[first].iov_len;

            v[first].iov_base = (char *)v[first].iov_base + k;
            v[first].iov_len -= k;
            done -= k;
            if (!v[first].iov_len)
                first++;
        }
        if (!left)
            break;
        for (int s = 0; s < e->spin && local_ring_writable(e->ch, dir) < 4096; s++)
            t_cpu_relax();
        if (local_ring_writable(e->ch, dir) >= 4096)
            continue;
        rc = local_ring_tx_wait_prepare(e->ch, dir, left < e->ch->ring_size / 4
                                                        ? left : e->ch->ring_size / 4);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            rc = t_ring_sleep(e);
            local_ring_tx_wait_cancel(e->ch, dir);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static inline int t_ring_send(t_ring_end_t *e, int dir, const void *buf, size_t len)
{
    struct iovec v = { (void *)buf, len };

    return t_ring_sendv(e, dir, &v, 1);
}

/* Receive at least one byte (blocking) into iov; returns bytes, 0 at EOF,
 * or -errno. */
static inline ssize_t t_ring_recvv(t_ring_end_t *e, int dir, const struct iovec *iov,
                                   int iovcnt, int flags)
{
    for (;;) {
        size_t done;
        int rc = local_ring_read(e->ch, dir, iov, iovcnt, flags, &done);

        if (rc < 0)
            return rc;
        if ((rc & LOCAL_RING_F_DOORBELL) && t_ring_bell(e) < 0)
            return -EPIPE;
        if (done)
            return (ssize_t)done;
        if (rc & LOCAL_RING_F_EOF)
            return 0;
        if (rc & LOCAL_RING_F_RECORD)
            return -ENOMSG;
        for (int s = 0; s < e->spin && local_ring_readable(e->ch, dir) == 0; s++)
            t_cpu_relax();
        if (local_ring_readable(e->ch, dir) != 0)
            continue;
        rc = local_ring_rx_wait_prepare(e->ch, dir);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            rc = t_ring_sleep(e);
            local_ring_rx_wait_cancel(e->ch, dir);
            if (rc < 0)
                return rc;
        }
    }
}

static inline ssize_t t_ring_recv(t_ring_end_t *e, int dir, void *buf, size_t len)
{
    struct iovec v = { buf, len };

    return t_ring_recvv(e, dir, &v, 1, 0);
}

#endif
