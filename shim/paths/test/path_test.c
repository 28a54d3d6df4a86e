/* A test-only data path: proof that a path is a plug-in (shim_path.h).
 *
 * Linked only into the test variant of the library (build/libzcsock-test.so)
 * and active only with ZCTEST_PATH=1 in the environment.  It claims every
 * TCP connection this process connects or accepts and reads ahead: a
 * receive pulls up to 64 KiB from the kernel socket into a buffer of the
 * connection's and serves the application from it, so the bytes a read
 * returns, FIONREAD and readiness all depend on the path's buffer rather than
 * on the kernel socket, which is what the readiness engine must get right
 * (a read of 10 bytes out of 1000 leaves the kernel socket empty and the
 * descriptor readable).  Sends go to the kernel unchanged, counted.
 *
 * The buffer lives in a shared anonymous mapping so a forked child that
 * holds the socket reads from the same buffer (one spinlock in it
 * serialises every holder).  Per-process state (descriptor count) is
 * private.  Nothing here is hook-unsafe: zc_pool, zc_real, no stdio.
 * Counters: path.test.claimed, path.test.send_bytes, path.test.recv_bytes,
 * path.test.kernel_reads (reads that refilled the buffer). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim_int.h"
#include "zc_pool.h"

#define TP_BUF (64u << 10)
#define TP_BOUNCE (16u << 10)

typedef struct tp_shared {
    int lock;
    int eof;                /* the kernel stream ended */
    uint32_t off, len;      /* buffered bytes: buf[off, len) */
    uint64_t pulled;        /* bytes ever pulled from the kernel */
    char buf[TP_BUF];
} tp_shared_t;

typedef struct tp_conn {
    shim_obj_t obj;         /* first: pinned by the shim (PINS, shim_path.h) */
    int refs;               /* descriptors of this process */
    tp_shared_t *sh;
} tp_conn_t;

static void tp_conn_final(shim_obj_t *o)
{
    tp_conn_t *c = (tp_conn_t *)o;

    zc_real.munmap(c->sh, sizeof(tp_shared_t));
    zc_pool_free(c, sizeof(*c));
}

static struct {
    int enabled;
    uint64_t claimed, send_bytes, recv_bytes, kernel_reads;
} tp;

extern const shim_path_t path_test;

static void tp_lock(tp_shared_t *s)
{
    while (__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void tp_unlock(tp_shared_t *s)
{
    __atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
}

static tp_shared_t *tp_sh(shim_fd_t *f)
{
    return ((tp_conn_t *)f->path_ctx)->sh;
}

static void tp_count(uint64_t *c, uint64_t n)
{
    __atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}

static int tp_nonblocking(int fd, int flags)
{
    int fl;

    if (flags & MSG_DONTWAIT)
        return 1;
    fl = zc_real.fcntl(fd, F_GETFL, 0);
    return fl >= 0 && (fl & O_NONBLOCK);
}

/* --- claiming --------------------------------------------------------------- */

static void tp_claim(int fd)
{
    shim_fd_t *f = shim_fd_get(fd);
    tp_conn_t *c;
    void *m;

    if (!tp.enabled || !f || f->kind != SHIM_FD_SOCKET || !f->stream || f->claim ||
        (f->family != AF_INET && f->family != AF_INET6))
        return;
    m = zc_real.mmap(NULL, sizeof(tp_shared_t), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return;
    c = zc_pool_alloc(sizeof(*c));
    if (!c) {
        zc_real.munmap(m, sizeof(tp_shared_t));
        return;
    }
    c->obj.pins = 0;
    c->obj.free_fn = tp_conn_final;
    c->refs = 1;
    c->sh = m;
    tp_count(&tp.claimed, 1);
    shim_fd_claim(fd, &path_test, c);
}

static void tp_connect_after(int fd, int rc, int err)
{
    if (rc == 0 || err == EINPROGRESS)
        tp_claim(fd);
}

static void tp_accepted(int lfd, int fd)
{
    (void)lfd;
    tp_claim(fd);
}

/* --- receive ---------------------------------------------------------------- */

/* Copy buffered bytes into msg's iovecs from byte skip on; consume unless
 * peek.  Lock held.  Returns bytes copied. */
static size_t tp_take(tp_shared_t *s, struct msghdr *msg, size_t skip, int peek)
{
    size_t done = shim_msg_fill(msg, skip, s->buf + s->off, s->len - s->off);

    if (!peek)
        s->off += (uint32_t)done;
    return done;
}

/* Refill the empty buffer from the kernel without waiting.  Lock held.
 * Returns bytes pulled, 0 at EOF, -errno (-EAGAIN: nothing there). */
static ssize_t tp_refill(tp_shared_t *s, int fd)
{
    ssize_t n = zc_real.recv(fd, s->buf, TP_BUF, MSG_DONTWAIT);

    if (n < 0)
        return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    s->off = 0;
    s->len = (uint32_t)n;
    if (n == 0)
        s->eof = 1;
    s->pulled += (uint64_t)n;
    tp_count(&tp.kernel_reads, 1);
    return n;
}

static size_t tp_iov_total(const struct msghdr *msg)
{
    size_t t = 0, i;

    for (i = 0; i < msg->msg_iovlen; i++)
        t += msg->msg_iov[i].iov_len;
    return t;
}

static ssize_t tp_recvmsg(shim_fd_t *f, int fd, struct msghdr *msg, int flags)
{
    tp_shared_t *s = tp_sh(f);
    size_t total = tp_iov_total(msg), got = 0;
    int waitall = (flags & MSG_WAITALL) && !(flags & MSG_PEEK);

    if (flags & MSG_OOB) {
        ssize_t n = zc_real.recvmsg(fd, msg, flags);

        return n < 0 ? -errno : n;
    }
    msg->msg_flags = 0;
    msg->msg_controllen = 0;
    msg->msg_namelen = 0;
    if (!total)
        return 0;
    for (;;) {
        ssize_t n = 0;

        tp_lock(s);
        if (s->off == s->len && !s->eof)
            n = tp_refill(s, fd);
        if (n >= 0)
            got += tp_take(s, msg, got, flags & MSG_PEEK);
        tp_unlock(s);
        if (n < 0 && n != -EAGAIN)
            return got ? (ssize_t)got : n;
        if ((got && (!waitall || got == total)) || (n == 0 && s->eof && s->off == s->len))
            break;
        if (n == -EAGAIN) {
            if (tp_nonblocking(fd, flags))
                return got ? (ssize_t)got : -EAGAIN;
            if (zc_real.poll(&(struct pollfd){ fd, POLLIN, 0 }, 1, -1) < 0 && errno == EINTR)
                return got ? (ssize_t)got : -EINTR;
        }
    }
    tp_count(&tp.recv_bytes, got);
    return (ssize_t)got;
}

/* --- send ------------------------------------------------------------------- */

static ssize_t tp_sendmsg(shim_fd_t *f, int fd, const struct msghdr *msg, int flags)
{
    ssize_t n = zc_real.sendmsg(fd, msg, flags);

    (void)f;
    if (n < 0)
        return -errno;
    tp_count(&tp.send_bytes, (uint64_t)n);
    return n;
}

static ssize_t tp_sendfile(shim_fd_t *f, int out_fd, int in_fd, off_t *offset, size_t count)
{
    char buf[TP_BOUNCE];
    size_t want = count < sizeof(buf) ? count : sizeof(buf);
    ssize_t r = offset ? pread(in_fd, buf, want, *offset) : zc_real.read(in_fd, buf, want), s;

    if (r <= 0)
        return r < 0 ? -errno : 0;
    s = tp_sendmsg(f, out_fd, &(struct msghdr){ .msg_iov = &(struct iovec){ buf, (size_t)r },
                                               .msg_iovlen = 1 }, 0);
    if (s < r && !offset)       /* give back what did not go */
        lseek(in_fd, (off_t)(s < 0 ? 0 : s) - r, SEEK_CUR);
    if (s > 0 && offset)
        *offset += s;
    return s;
}

/* splice through a bounce buffer: socket to pipe or pipe to socket. */
static ssize_t tp_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                         unsigned flags)
{
    shim_fd_t *fi = shim_fd_get(fd_in), *fo = shim_fd_get(fd_out);
    int sflags = (flags & SPLICE_F_NONBLOCK) ? MSG_DONTWAIT : 0;
    char buf[TP_BOUNCE];
    struct msghdr m = { .msg_iov = &(struct iovec){ buf, 0 }, .msg_iovlen = 1 };
    ssize_t r, w;

    if ((off_in && shim_fd_claimed(fi)) || (off_out && shim_fd_claimed(fo)))
        return -ESPIPE;
    len = len < sizeof(buf) ? len : sizeof(buf);
    m.msg_iov->iov_len = len;
    if (shim_fd_claimed(fi))
        r = fi->path->ops->recvmsg(fi, fd_in, &m, sflags);
    else
        r = off_in ? pread(fd_in, buf, len, *off_in) : zc_real.read(fd_in, buf, len);
    if (r < 0 && !shim_fd_claimed(fi))
        r = -errno;
    if (r <= 0)
        return r;
    if (off_in)
        *off_in += r;
    m.msg_iov->iov_len = (size_t)r;
    if (shim_fd_claimed(fo))
        return fo->path->ops->sendmsg(fo, fd_out, &m, sflags);
    w = off_out ? pwrite(fd_out, buf, (size_t)r, *off_out) : zc_real.write(fd_out, buf, (size_t)r);
    if (w < 0)
        return -errno;
    if (off_out)
        *off_out += w;
    return w;
}

/* --- options, readiness ------------------------------------------------------ */

static int tp_shutdown(shim_fd_t *f, int fd, int how)
{
    (void)f;
    (void)fd;
    (void)how;
    return SHIM_PATH_PASS;
}

static int tp_ioctl(shim_fd_t *f, int fd, unsigned long req, void *arg, int *rc_p)
{
    tp_shared_t *s = tp_sh(f);
    int k = 0;

    if (req != FIONREAD || !arg || zc_real.ioctl(fd, FIONREAD, &k) < 0)
        return SHIM_PATH_PASS;
    *(int *)arg = k + (int)(s->len - s->off);
    *rc_p = 0;
    return 0;
}

static void tp_setsockopt(shim_fd_t *f, int fd, int level, int name, const void *val,
                          socklen_t len)
{
    (void)f, (void)fd, (void)level, (void)name, (void)val, (void)len;
}

static void tp_flags_changed(shim_fd_t *f, int fd)
{
    (void)f;
    (void)fd;
}

static short tp_revents(shim_fd_t *f, int fd, short ev, int kev, int arm,
                        shim_ready_ask_t *ask)
{
    tp_shared_t *s = tp_sh(f);
    short rev = 0;

    (void)fd, (void)arm, (void)ask;
    if (s->off < s->len || s->eof)
        rev |= ev & (POLLIN | POLLRDNORM);
    if (kev > 0)
        rev |= (short)(kev & (ev | POLLHUP | POLLERR | POLLNVAL));
    return rev;
}

static short tp_kernel_events(shim_fd_t *f, short ev)
{
    (void)f;
    return ev;
}

/* Bytes that ever arrived: pulled into the buffer plus what the kernel
 * holds now (pulling alone is no news to the application). */
static uint64_t tp_change(shim_fd_t *f, int fd)
{
    int k = 0;

    if (zc_real.ioctl(fd, FIONREAD, &k) < 0)
        k = 0;
    return __atomic_load_n(&tp_sh(f)->pulled, __ATOMIC_ACQUIRE) + (uint64_t)k;
}

static void tp_forget(shim_fd_t *f, int fd)
{
    tp_conn_t *c = f->path_ctx;

    (void)fd;
    if (c && --c->refs == 0)
        shim_obj_retire(&c->obj);
}

static void tp_dup(shim_fd_t *f, int newfd)
{
    (void)newfd;
    ((tp_conn_t *)f->path_ctx)->refs++;
}

/* --- life cycle --------------------------------------------------------------- */

static void tp_stats_visit(void *arg, zc_stats_emit_func_t emit, void *ctx)
{
    (void)arg;
    emit(ctx, "path.test.claimed", tp.claimed);
    emit(ctx, "path.test.send_bytes", tp.send_bytes);
    emit(ctx, "path.test.recv_bytes", tp.recv_bytes);
    emit(ctx, "path.test.kernel_reads", tp.kernel_reads);
}

static const zc_stats_source_t tp_stats_source = { tp_stats_visit, NULL };

static void tp_init(void)
{
    extern char **environ;
    size_t i;

    for (i = 0; environ && environ[i]; i++)
        if (!strcmp(environ[i], "ZCTEST_PATH=1"))
            tp.enabled = 1;
    zc_stats_source_add(&tp_stats_source);
}

static const shim_path_ops_t tp_ops = {
    .sendmsg = tp_sendmsg,
    .recvmsg = tp_recvmsg,
    .sendfile = tp_sendfile,
    .splice = tp_splice,
    .shutdown = tp_shutdown,
    .ioctl = tp_ioctl,
    .setsockopt = tp_setsockopt,
    .flags_changed = tp_flags_changed,
    .revents = tp_revents,
    .kernel_events = tp_kernel_events,
    .change = tp_change,
    .forget = tp_forget,
    .dup = tp_dup,
};

/* Asks before the local path (order 10): with ZCTEST_PATH=1 every TCP
 * connection is its own. */
const shim_path_t path_test = {
    .name = "test",
    .order = 0,
    .ops = &tp_ops,
    .init = tp_init,
    .connect_after = tp_connect_after,
    .accepted = tp_accepted,
};

SHIM_PATH_REGISTER(path_test);
