/* The local path: page exchange (issue 13; ARCHITECTURE.md "Page exchange").
 *
 * SENDING (lp_xchg_send, from the ring send loop, TX lock held).  Where a
 * send's bytes reach a 2 MiB-aligned address with at least one whole 2 MiB
 * unit after it in the same iovec, the units are lent instead of copied:
 * shim_xu_lend() gives each one's sealed unit file (the exchange-unit cache's
 * registration, made anew when the application rewrote the unit),
 * one message on the unit transport carries the files (SCM_RIGHTS) with
 * {seq, inodes}, then one PAGES record names them in the ring.  Bytes before
 * the first unit go through the ring as usual, the ring window cut at the
 * unit.  A unit that is refused (not placed huge memory, a received unit,
 * cache limits, no transport, the send budget: ZCSOCK_PDC_SEND_BUDGET
 * bytes lent and not yet read) goes through the ring, counted by reason; the
 * ring then fills and blocks as the kernel's buffers would.  A blocking send
 * over the budget waits for the receiver instead (naps of LP_XCHG_NAP_US
 * within its timeout: send.c), since mixing in ring copies would make it
 * run at the ring's pace with the receiver copying misaligned units.
 *
 * THE UNIT TRANSPORT.  A socketpair (SOCK_SEQPACKET) of the sending side,
 * made by the process that paired the connection at its first lend.  It
 * keeps both ends and offers the receiving one in its side words (xs_pid,
 * xs_no, xs_gen), as efd.c offers eventfds; the receiver fetches it
 * (pidfd_getfd) and acknowledges the generation (xs_ack); units are lent
 * only while that acknowledgement stands.  The receiver's copy makes a lend
 * durable: a sender that dies after its sendmsg leaves the message queued
 * there, files included, as the kernel still delivers a crashed TCP
 * sender's bytes.  Order: under the TX lock the message goes out before its
 * record is published, with the record's ring position as seq, so the head
 * of the queue always belongs to the oldest PAGES record in the ring.
 *
 * RECEIVING (lp_xchg_pages_read: the ring's pages_read).  local_ring_read
 * meets a PAGES record: the head message is peeked (MSG_PEEK installs copies
 * of its files) and checked against the record (seq, count; each file a
 * sealed 2 MiB regular file with the inode the message names), then the
 * record's bytes are placed: a whole unit that lands on a 2 MiB-aligned unit
 * of a placed huge block is mapped there copy-on-write (shim_xu_map, no
 * copy); anything else (a part, a peek, another buffer) is copied out of a
 * read-only map of the file: one copy where the ring makes two.  The read
 * that ends the record takes the message off the queue.  Whoever reads a
 * ring resolves its records this way: a receive, a hand-back giving our own
 * unread records to the kernel (through our copy of the receiving end), a
 * pump, a process that inherited the connection (fetching the transport
 * from the sender on demand).
 *
 * TRUST.  The transport is fetched only from the process the channel header
 * names as the peer side, and must be a SOCK_SEQPACKET AF_UNIX socket; a
 * message is checked before use and a bad one breaks the channel (reads as
 * reset).  A peer that lies can only corrupt what it sends to us, which it
 * could do through the ring anyway.  Unit files are sealed against writes:
 * nobody, their maker included, changes one after it is made.
 */
#include "lp_int.h"
#include "xchg.h"
#include "shim_mem.h"

#include <sys/mman.h>
#include <sys/socket.h>

#define LX_UNIT  ((size_t)2 << 20)
#define LX_MAGIC 0x31787a63736b637aULL

typedef struct lx_msg {
    uint64_t magic;
    uint64_t seq;           /* ring position of the PAGES record it belongs to */
    uint32_t n;             /* files, one per descriptor of the record */
    uint32_t pad;
    uint64_t ino[LOCAL_RING_PAGES_MAX];
} lx_msg_t;

typedef union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(LOCAL_RING_PAGES_MAX * sizeof(int))];
} lx_cmsg_t;

static ssize_t lp_xchg_pages_read(void *ctx, int dir, const local_ring_frame_t *f, uint64_t off,
                                  const struct iovec *dst, int dstcnt, int consume);

static int lx_transport(lp_conn_t *c);
static int lx_is_transport(int fd);
static void lx_offer(lp_conn_t *c);

void lp_xchg_attach(lp_conn_t *c)
{
    c->ch.pages_read = lp_xchg_pages_read;
    c->ch.pages_ctx = c;
    lx_offer(c);
}

/* Offer our transport early, so that the peer's next receive acknowledges
 * it and our first big send already lends, but only once this process
 * placed a block it could lend: a server of small messages (thousands of
 * connections) makes no transport descriptors.  Otherwise the first lend
 * makes it, and its bytes go through the ring until the peer acknowledged. */
static void lx_offer(lp_conn_t *c)
{
    if (c->x.tx < 0 && !c->x.off && c->sole && zc_config.exchange &&
        shim_mem_ops.xu_placed_any() && shim_mem_ops.xu_ready())
        lx_transport(c);
}

void lp_xchg_init(lp_conn_t *c)
{
    c->x.tx = c->x.rx = c->x.in = -1;
    c->x.rec.n = 0;
}

/* --- the transport ------------------------------------------------------------ */

/* Our transport, made at the first lend of a connection this process
 * paired, and acknowledged by the peer: 1, else 0. */
static int lx_transport(lp_conn_t *c)
{
    lp_side_t *me;
    int sv[2];
    uint32_t gen;

    if (c->x.tx < 0) {
        if (c->x.off || !c->sole || shim_vfork_child())
            return 0;
        if (zc_real.socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv)) {
            c->x.off = 1;
            return 0;
        }
        c->x.tx = shim_fd_internal_keep(sv[0], &path_local, c);
        c->x.rx = shim_fd_internal_keep(sv[1], &path_local, c);
        me = lp_side(c, c->ch.side);
        gen = __atomic_load_n(&me->xs_gen, __ATOMIC_ACQUIRE) + 1;
        if (!gen)
            gen = 1;
        __atomic_store_n(&me->xs_pid, (int32_t)zc_getpid(), __ATOMIC_RELAXED);
        __atomic_store_n(&me->xs_no, c->x.rx, __ATOMIC_RELAXED);
        __atomic_store_n(&me->xs_gen, gen, __ATOMIC_RELEASE);
        c->x.gen = gen;
    }
    return __atomic_load_n(&lp_side(c, !c->ch.side)->xs_ack, __ATOMIC_ACQUIRE) == c->x.gen;
}

/* Name our copy of the peer's transport in our side words (an exec'd image
 * of this process takes it up, lp_xchg_inherit). */
static void lx_publish_in(lp_conn_t *c)
{
    lp_side_t *me = lp_side(c, c->ch.side);

    if (!c->sole)
        return;
    __atomic_store_n(&me->xi_no, c->x.in, __ATOMIC_RELAXED);
    __atomic_store_n(&me->xi_pid, (int32_t)zc_getpid(), __ATOMIC_RELEASE);
}

/* Fetch the peer's offered transport end when we do not hold that
 * generation yet.  ack: say so in our side words (the peer may lend from
 * now on).  The descriptor, or -1. */
static int lx_fetch(lp_conn_t *c, int ack)
{
    lp_side_t *peer = lp_side(c, !c->ch.side);
    uint32_t gen = __atomic_load_n(&peer->xs_gen, __ATOMIC_ACQUIRE);
    int32_t pid = __atomic_load_n(&peer->xs_pid, __ATOMIC_RELAXED);
    int32_t no = __atomic_load_n(&peer->xs_no, __ATOMIC_RELAXED);
    int fd;

    if (!gen || (gen == c->x.in_gen && c->x.in >= 0))
        goto out;
    if (pid <= 0 || no < 0 || shim_vfork_child() ||
        pid != __atomic_load_n(&c->ch.hdr->side_pid[!c->ch.side], __ATOMIC_RELAXED))
        goto out;
    fd = lp_fetch_fd(pid, no, 0);
    if (fd < 0)
        goto out;
    if (!lx_is_transport(fd)) {
        LP_SYS(SYS_close, fd, 0, 0);
        goto out;
    }
    if (c->x.in >= 0)
        shim_fd_internal_drop(c->x.in);
    c->x.in = shim_fd_internal_keep(fd, &path_local, c);
    c->x.in_gen = gen;
    lx_publish_in(c);
out:
    if (ack && c->x.in >= 0 && c->sole)
        __atomic_store_n(&lp_side(c, c->ch.side)->xs_ack, c->x.in_gen, __ATOMIC_SEQ_CST);
    return c->x.in;
}

/* Set once this process mapped a received unit in place: only then can a
 * receive land on one. */
static int lx_mapped_any;

void lp_xchg_rx_reclaim(lp_conn_t *c, const struct iovec *win, int n)
{
    int64_t run;
    size_t left, total = 0;

    if (!__atomic_load_n(&lx_mapped_any, __ATOMIC_RELAXED))
        return;
    for (int i = 0; i < n; i++)
        total += win[i].iov_len;
    if (total < LX_UNIT)
        return;
    run = local_ring_bytes_run(&c->ch, lp_rxdir(c), total);
    if (run < (int64_t)LX_UNIT)
        return;
    left = (size_t)run;
    for (int i = 0; i < n && left >= LX_UNIT; i++) {
        size_t len = win[i].iov_len < left ? win[i].iov_len : left;
        uintptr_t b = (uintptr_t)win[i].iov_base, e = b + len;
        uintptr_t u = (b + LX_UNIT - 1) & ~(uintptr_t)(LX_UNIT - 1);

        for (; u + LX_UNIT <= e; u += LX_UNIT)
            if (shim_mem_ops.xu_reclaim((void *)u) == 1)
                zc_stat_add(ZC_STAT_LOCAL_XCHG_RECLAIMED, 1);
        left -= len;
    }
}

/* A receive is about to read the ring: take up a transport the peer offers
 * (only with exchange on: acknowledging it lets the peer lend), and offer
 * ours if we have something to lend by now. */
void lp_xchg_offered(lp_conn_t *c)
{
    uint32_t gen;

    if (!zc_config.exchange || !c->ch.base)
        return;
    lx_offer(c);
    gen = __atomic_load_n(&lp_side(c, !c->ch.side)->xs_gen, __ATOMIC_RELAXED);
    if (gen && (gen != c->x.in_gen || c->x.in < 0))
        lx_fetch(c, 1);
}

/* --- sending ------------------------------------------------------------------- */

/* The iovec element holding stream byte `sent` of msg: its address and the
 * bytes left in it. */
static const char *lx_at(const struct msghdr *msg, size_t sent, size_t *avail_p)
{
    for (size_t i = 0; i < msg->msg_iovlen; i++) {
        size_t l = msg->msg_iov[i].iov_len;

        if (sent < l) {
            *avail_p = l - sent;
            return (const char *)msg->msg_iov[i].iov_base + sent;
        }
        sent -= l;
    }
    *avail_p = 0;
    return NULL;
}

/* A unit refused for why (SHIM_XU_WHY_*): counted, charged to the
 * application's send call, and kept as the connection's last reason
 * (zcsock stat --conns). */
static void lx_refused(lp_conn_t *c, int why)
{
    static const unsigned stat[SHIM_XU_WHYS] = {
        [SHIM_XU_WHY_NOT_PLACED] = ZC_STAT_LOCAL_XCHG_NOT_PLACED,
        [SHIM_XU_WHY_REWRITTEN] = ZC_STAT_LOCAL_XCHG_REWRITTEN,
        [SHIM_XU_WHY_BUDGET] = ZC_STAT_LOCAL_XCHG_BUDGET,
        [SHIM_XU_WHY_NO_TRANSPORT] = ZC_STAT_LOCAL_XCHG_NO_TRANSPORT,
        [SHIM_XU_WHY_POOL] = ZC_STAT_LOCAL_XCHG_POOL_DRY,
        [SHIM_XU_WHY_TOO_SMALL] = ZC_STAT_LOCAL_XCHG_TOO_SMALL,
        [SHIM_XU_WHY_UNALIGNED] = ZC_STAT_LOCAL_XCHG_UNALIGNED,
        [SHIM_XU_WHY_COST] = ZC_STAT_LOCAL_XCHG_COST,
        [SHIM_XU_WHY_APP] = ZC_STAT_LOCAL_XCHG_APP,
    };

    zc_stat_add(stat[why], 1);
    c->x.why = (uint8_t)(why + 1);
    shim_mem_ops.xu_refused(shim_send_site, why);
}

static int lx_why(int rc)
{
    return rc == -EFAULT ? SHIM_XU_WHY_REWRITTEN
           : rc == -EACCES ? SHIM_XU_WHY_APP
           : rc == -EINVAL || rc == -EPERM ? SHIM_XU_WHY_NOT_PLACED
           : rc == -ENOSPC ? SHIM_XU_WHY_POOL
           : rc == -ECANCELED ? SHIM_XU_WHY_COST
           : SHIM_XU_WHY_BUDGET;
}

void lp_xchg_small(lp_conn_t *c)
{
    if (!c->x.off && shim_mem_ops.xu_ready())
        lx_refused(c, SHIM_XU_WHY_TOO_SMALL);
}

/* PER-PROCESS BUDGET (issue 31).  ZCSOCK_PDC_SEND_BUDGET bounds the bytes a
 * connection lent that its receiver has not read, and also their sum over
 * every connection of the process: 16 connections whose receiver
 * acknowledged and never read held 2,111 MiB of shared memory, against
 * about 4 MiB of unread data each on the kernel (its socket buffers).  A
 * connection's part (x.est) is all its direction's unread bytes while the
 * receiver has not read past its last lent record (x.mark), else nothing:
 * an upper bound (ring bytes may be among them), brought up to date at each
 * of its sends and, when the sum stands in the way of a lend, for every
 * connection of the process (receivers read meanwhile).  Over it, bytes go
 * through the ring, which fills and blocks (or says EAGAIN), as over the
 * connection's own budget. */
static uint64_t lx_proc_est;

static uint64_t lx_est_of(lp_conn_t *c)
{
    int d = lp_txdir(c);
    uint64_t mark = __atomic_load_n(&c->x.mark, __ATOMIC_RELAXED), unread;

    if (!mark || !c->ch.base)
        return 0;
    unread = local_ring_unread(&c->ch, d);
    return local_ring_bytes_head(&c->ch, d) - unread >= mark ? 0 : unread;
}

static uint64_t lx_est_update(lp_conn_t *c)
{
    uint64_t now = lx_est_of(c), was = __atomic_exchange_n(&c->x.est, now, __ATOMIC_ACQ_REL);

    __atomic_add_fetch(&lx_proc_est, now - was, __ATOMIC_RELAXED);   /* (mod 2^64) */
    return now;
}

/* (called with a role lock held: the list lock only when free, as the
 * lock order has it taken never while holding a role lock; a busy list
 * leaves the sum as it is, an upper bound) */
static void lx_est_refresh(void)
{
    if (__atomic_exchange_n(&lp.list_lock, 1, __ATOMIC_ACQUIRE))
        return;
    for (lp_conn_t *c = lp.head; c; c = c->next)
        if (__atomic_load_n(&c->x.est, __ATOMIC_RELAXED))
            lx_est_update(c);
    lp_list_unlock();
}

/* Units (of k) that fit both budgets beside unread bytes of this
 * connection.  *own_p: 1 when its own budget allowed none (a blocking send
 * then waits for its receiver: lp_xchg_over); never for the process's sum,
 * which other connections' receivers hold: waiting for them could wait
 * forever (one of them may be waiting for our bytes), so those units go
 * through the ring, which blocks on our receiver alone. */
static size_t lx_fit(lp_conn_t *c, uint64_t unread, size_t k, int *own_p)
{
    uint64_t budget = zc_config.pdc_send_budget, others;

    *own_p = 0;
    if (!budget)
        return k;
    while (k && unread + k * LX_UNIT > budget)
        k--;
    if (!k) {
        *own_p = 1;
        return 0;
    }
    others = __atomic_load_n(&lx_proc_est, __ATOMIC_RELAXED) -
             __atomic_load_n(&c->x.est, __ATOMIC_RELAXED);
    if (k && others + unread + k * LX_UNIT > budget) {
        lx_est_refresh();
        others = __atomic_load_n(&lx_proc_est, __ATOMIC_RELAXED) -
                 __atomic_load_n(&c->x.est, __ATOMIC_RELAXED);
        while (k && others + unread + k * LX_UNIT > budget)
            k--;
        if (!k)
            zc_stat_add(ZC_STAT_LOCAL_XCHG_PROC_BUDGET, 1);
    }
    return k;
}

ssize_t lp_xchg_send(lp_conn_t *c, const struct msghdr *msg, size_t sent, size_t *lim_p,
                     int *flags_p, int *over_p)
{
    local_ring_page_t pg[LOCAL_RING_PAGES_MAX];
    shim_xu_t x[LOCAL_RING_PAGES_MAX];
    lx_msg_t m = { .magic = LX_MAGIC };
    lx_cmsg_t cm;
    struct iovec v = { &m, sizeof(m) };
    struct msghdr mh = { .msg_iov = &v, .msg_iovlen = 1, .msg_control = cm.buf };
    struct cmsghdr *h;
    size_t avail, k, n = 0, gap;
    uint64_t unread;
    const char *p = lx_at(msg, sent, &avail);
    int rc;

    *flags_p = 0;
    *over_p = 0;
    if (!p || avail < LX_UNIT || c->x.off)
        return 0;
    if (!shim_mem_ops.xu_ready()) {
        c->x.off = 1;           /* not on this connection, ever */
        zc_stat_add(ZC_STAT_LOCAL_XCHG_UNAVAILABLE, 1);
        return 0;
    }
    gap = (size_t)(-(uintptr_t)p & (LX_UNIT - 1));
    if (gap) {
        /* the ring takes the bytes up to the first unit */
        if (gap < avail && avail - gap >= LX_UNIT) {
            if (gap < *lim_p)
                *lim_p = gap;
        } else if (!sent) {
            lx_refused(c, SHIM_XU_WHY_UNALIGNED);      /* no whole unit in it */
        }
        return 0;
    }
    k = avail / LX_UNIT;
    if (k > LOCAL_RING_PAGES_MAX)
        k = LOCAL_RING_PAGES_MAX;
    while (k && *lim_p < 8 + 16 * k)
        k--;
    if (!k)
        return 0;
    /* Lent bytes take no ring room: the send budget bounds those the
     * receiver has not read, after which bytes go through the ring, which
     * fills and blocks (or says EAGAIN) as the kernel's buffers would. */
    lx_est_update(c);
    unread = local_ring_unread(&c->ch, lp_txdir(c));
    k = lx_fit(c, unread, k, over_p);
    if (!k) {
        lx_refused(c, SHIM_XU_WHY_BUDGET);
        goto ring_one;
    }
    if (!lx_transport(c)) {
        lx_refused(c, SHIM_XU_WHY_NO_TRANSPORT);
        goto ring_one;
    }
    for (; n < k; n++) {
        rc = shim_mem_ops.xu_lend((char *)p + n * LX_UNIT, &x[n]);
        if (rc) {
            lx_refused(c, lx_why(rc));
            break;
        }
        pg[n] = (local_ring_page_t){ .offset = 0, .npages = 1, .seg = 0, .shift = 21 };
        m.ino[n] = x[n].ino;
    }
    if (!n)
        goto ring_one;
    m.n = (uint32_t)n;
    m.seq = local_ring_head_pos(&c->ch, lp_txdir(c));
    mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
    memset(&cm, 0, sizeof(cm));
    h = CMSG_FIRSTHDR(&mh);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(n * sizeof(int));
    for (size_t i = 0; i < n; i++)
        memcpy(CMSG_DATA(h) + i * sizeof(int), &x[i].fd, sizeof(int));
    if (zc_real.sendmsg(c->x.tx, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(m)) {
        /* full (the receiver is behind), or too many files in flight */
        lx_refused(c, SHIM_XU_WHY_NO_TRANSPORT);
        for (size_t i = 0; i < n; i++)
            shim_mem_ops.xu_release(&x[i]);
        goto ring_one;
    }
    rc = local_ring_pages_write(&c->ch, lp_txdir(c), pg, (int)n);
    for (size_t i = 0; i < n; i++)
        shim_mem_ops.xu_release(&x[i]);
    if (rc < 0)
        return rc;      /* the channel is broken (our message has no record now) */
    *flags_p = rc;
    zc_stat_add(ZC_STAT_LOCAL_XCHG_LENT, n * LX_UNIT);
    c->x.lent += n * LX_UNIT;
    __atomic_store_n(&c->x.mark, local_ring_bytes_head(&c->ch, lp_txdir(c)), __ATOMIC_RELAXED);
    lx_est_update(c);
    return (ssize_t)(n * LX_UNIT);
ring_one:
    /* this unit (the refused one) goes through the ring; the next is tried */
    if (*lim_p > LX_UNIT)
        *lim_p = LX_UNIT;
    return 0;
}

/* --- receiving ------------------------------------------------------------------ */

static void lx_close_fds(const int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            LP_SYS(SYS_close, fds[i], 0, 0);
}

static void lx_rec_drop(lp_xrec_t *r)
{
    for (int i = 0; i < r->n; i++) {
        if (r->map[i])
            zc_real.munmap(r->map[i], LX_UNIT);
        if (r->fd[i] >= 0)
            LP_SYS(SYS_close, r->fd[i], 0, 0);
    }
    r->n = 0;
}

/* Receive the head message of transport sock (peek: leave it there) into
 * *m and fds.  The number of files, or -errno. */
static int lx_msg_recv(int sock, lx_msg_t *m, int *fds, int peek)
{
    lx_cmsg_t cm;
    struct iovec v = { m, sizeof(*m) };
    struct msghdr mh = { .msg_iov = &v, .msg_iovlen = 1, .msg_control = cm.buf,
                         .msg_controllen = sizeof(cm.buf) };
    int nfd = 0;
    ssize_t got = zc_real.recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | (peek ? MSG_PEEK : 0));

    if (got < 0)
        return -errno;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
        size_t k;

        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;

            memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
            if (nfd < LOCAL_RING_PAGES_MAX)
                fds[nfd++] = fd;
            else
                LP_SYS(SYS_close, fd, 0, 0);
        }
    }
    if (got != (ssize_t)sizeof(*m) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        lx_close_fds(fds, nfd);
        return -EPROTO;
    }
    return nfd;
}

/* Load record f's files from the head of transport sock into r: -EPROTO
 * when the message does not belong to it or a file is not a sealed unit. */
static int lx_rec_load(int sock, const local_ring_frame_t *f, int dir, lp_xrec_t *r)
{
    lx_msg_t m;
    int fds[LOCAL_RING_PAGES_MAX], n = lx_msg_recv(sock, &m, fds, 1);

    if (n < 0)
        return n == -EAGAIN ? -EPROTO : n;      /* sent before its record: must be there */
    if (m.magic != LX_MAGIC || m.seq != f->pos || m.n != (uint32_t)f->npages ||
        n != f->npages)
        goto bad;
    for (int i = 0; i < n; i++) {
        const local_ring_page_t *pg = &f->pages[i];

        if (pg->shift != 21 || pg->npages != 1 || pg->offset != 0 ||
            !local_ring_unit_file_ok(fds[i], LX_UNIT, m.ino[i]))
            goto bad;
    }
    for (int i = 0; i < n; i++) {
        r->fd[i] = fds[i];
        r->map[i] = NULL;
    }
    r->pos = f->pos;
    r->dir = dir;
    r->n = n;
    return 0;
bad:
    lx_close_fds(fds, n);
    return -EPROTO;
}

static ssize_t lp_xchg_pages_read(void *ctx, int dir, const local_ring_frame_t *f, uint64_t off,
                                  const struct iovec *dst, int dstcnt, int consume)
{
    lp_conn_t *c = ctx;
    lp_xrec_t *r = &c->x.rec;
    int sock = dir == lp_txdir(c) ? c->x.rx : (c->x.in >= 0 ? c->x.in : lx_fetch(c, 0));
    uint64_t o = off;
    ssize_t total = 0;
    int rc;

    if (sock < 0)
        return -EPROTO;     /* no transport to read this record's units from */
    if (!r->n || r->pos != f->pos || r->dir != dir) {
        lx_rec_drop(r);
        rc = lx_rec_load(sock, f, dir, r);
        if (rc)
            return rc;
    }
    for (int i = 0; i < dstcnt; i++) {
        char *d = dst[i].iov_base;
        size_t len = dst[i].iov_len;

        while (len) {
            size_t u = (size_t)(o / LX_UNIT), uo = (size_t)(o % LX_UNIT);
            size_t k = LX_UNIT - uo < len ? LX_UNIT - uo : len;

            if (u >= (size_t)r->n)
                return -EPROTO;
            int mrc = !uo && k == LX_UNIT && !((uintptr_t)d & (LX_UNIT - 1))
                          ? shim_mem_ops.xu_map(d, r->fd[u]) : -EINVAL;

            if (mrc == 0) {
                __atomic_store_n(&lx_mapped_any, 1, __ATOMIC_RELAXED);
                zc_stat_add(ZC_STAT_LOCAL_XCHG_MAPPED, k);
            } else {
                if (mrc == -ENOMEM)     /* no hugetlb page for its copy-on-write */
                    zc_stat_add(ZC_STAT_LOCAL_XCHG_POOL_DRY, 1);
                if (!r->map[u]) {
                    void *mp = zc_real.mmap(NULL, LX_UNIT, PROT_READ, MAP_SHARED, r->fd[u], 0);

                    if (mp == MAP_FAILED)
                        return -errno;
                    r->map[u] = mp;
                }
                memcpy(d, (char *)r->map[u] + uo, k);
                zc_stat_add(ZC_STAT_LOCAL_XCHG_COPIED, k);
            }
            d += k;
            len -= k;
            o += k;
            total += (ssize_t)k;
        }
    }
    if (consume) {
        lx_msg_t m;
        int fds[LOCAL_RING_PAGES_MAX], n = lx_msg_recv(sock, &m, fds, 0);

        if (n < 0)
            return n;
        lx_close_fds(fds, n);
        lx_rec_drop(r);
        if (m.seq != f->pos)
            return -EPROTO;
    }
    return total;
}

/* --- descriptors ---------------------------------------------------------------- */

/* A SOCK_SEQPACKET AF_UNIX socket? */
static int lx_is_transport(int fd)
{
    int type = 0, dom = 0;

    return fd >= 0 &&
           !zc_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &(socklen_t){ sizeof(int) }) &&
           !zc_real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &(socklen_t){ sizeof(int) }) &&
           type == SOCK_SEQPACKET && dom == AF_UNIX;
}

void lp_xchg_close(lp_conn_t *c)
{
    /* (final: no longer in the list, so no refresh looks at it) */
    __atomic_sub_fetch(&lx_proc_est, __atomic_exchange_n(&c->x.est, 0, __ATOMIC_ACQ_REL),
                       __ATOMIC_RELAXED);
    lx_rec_drop(&c->x.rec);
    /* (no system call for a connection that never lent: every short one) */
    if (c->ch.base && (c->x.rx >= 0 || c->x.in >= 0) && !shim_vfork_child()) {
        lp_side_t *s = lp_side(c, c->ch.side);
        int32_t me = (int32_t)zc_getpid();

        /* our offer and our copy stop being fetchable: their numbers may be
         * anything once closed */
        if (c->x.rx >= 0 && __atomic_load_n(&s->xs_pid, __ATOMIC_RELAXED) == me &&
            __atomic_load_n(&s->xs_no, __ATOMIC_RELAXED) == c->x.rx)
            __atomic_store_n(&s->xs_gen, 0, __ATOMIC_RELEASE);
        if (c->x.in >= 0 && __atomic_load_n(&s->xi_pid, __ATOMIC_RELAXED) == me)
            __atomic_store_n(&s->xi_pid, 0, __ATOMIC_RELEASE);
    }
    if (c->x.tx >= 0) {
        shim_fd_internal_drop(c->x.tx);
        shim_mem_ops.xu_reap();     /* unit files of buffers freed meanwhile */
    }
    if (c->x.rx >= 0)
        shim_fd_internal_drop(c->x.rx);
    if (c->x.in >= 0)
        shim_fd_internal_drop(c->x.in);
    c->x.tx = c->x.rx = c->x.in = -1;
}

/* exec of a connection the next image inherits (keep: 1 before, 0 when the
 * exec failed): the receiving ends survive it, so that the next image can
 * read PAGES records already sent, and resolve our own, whatever becomes of
 * the peer.  Our sending end does not: the next image lends on a transport
 * of its own, if at all.  xfds (keep): the receiving ends that survive
 * (x.rx, x.in; -1: none), which ZCSOCK_INHERIT gives the next image. */
void lp_xchg_exec(lp_conn_t *c, int keep, int xfds[2])
{
    int flag = keep ? 0 : FD_CLOEXEC;
    int32_t me = (int32_t)zc_getpid();
    lp_side_t *s = c->ch.base ? lp_side(c, c->ch.side) : NULL;

    xfds[0] = xfds[1] = -1;
    /* Only the ends our side words name for this process: the copies a
     * forked child holds of its parent's would reach its image as
     * descriptors of nobody's (tier fds, with page exchange on). */
    if (c->x.rx >= 0 && s && (!keep || __atomic_load_n(&s->xs_pid, __ATOMIC_ACQUIRE) == me)) {
        zc_real.fcntl(c->x.rx, F_SETFD, flag);
        xfds[0] = c->x.rx;
    }
    if (c->x.in >= 0 && s && (!keep || __atomic_load_n(&s->xi_pid, __ATOMIC_ACQUIRE) == me)) {
        zc_real.fcntl(c->x.in, F_SETFD, flag);
        xfds[1] = c->x.in;
    }
}

/* An exec'd image adopted connection c: take up the receiving ends the
 * previous image of this process left open.  Their numbers come from
 * ZCSOCK_INHERIT (xfds), which our previous image wrote, never from the
 * side words, which the peer can write too: a peer naming an application
 * socket of ours there would have had it taken over and renumbered (issue
 * 30, item 4).  The side words only learn the new numbers. */
void lp_xchg_inherit(lp_conn_t *c, const int xfds[2])
{
    lp_side_t *s = lp_side(c, c->ch.side);
    int32_t me = (int32_t)zc_getpid();

    if (lx_is_transport(xfds[0])) {
        c->x.rx = shim_fd_internal_keep(xfds[0], &path_local, c);
        zc_real.fcntl(c->x.rx, F_SETFD, FD_CLOEXEC);
        if (__atomic_load_n(&s->xs_pid, __ATOMIC_ACQUIRE) == me)
            __atomic_store_n(&s->xs_no, c->x.rx, __ATOMIC_RELEASE);
    }
    if (lx_is_transport(xfds[1])) {
        c->x.in = shim_fd_internal_keep(xfds[1], &path_local, c);
        zc_real.fcntl(c->x.in, F_SETFD, FD_CLOEXEC);
        c->x.in_gen = __atomic_load_n(&lp_side(c, !c->ch.side)->xs_gen, __ATOMIC_RELAXED);
        if (__atomic_load_n(&s->xi_pid, __ATOMIC_ACQUIRE) == me)
            __atomic_store_n(&s->xi_no, c->x.in, __ATOMIC_RELEASE);
    }
}

int lp_xchg_moved(lp_conn_t *c, int from, int to)
{
    if (c->x.tx == from) {
        c->x.tx = to;
        return 1;
    }
    if (c->x.rx == from) {
        c->x.rx = to;
        if (c->ch.base && c->sole)
            __atomic_store_n(&lp_side(c, c->ch.side)->xs_no, to, __ATOMIC_RELEASE);
        return 1;
    }
    if (c->x.in == from) {
        c->x.in = to;
        return 1;
    }
    return 0;
}

/* PARTS (lp_int.h): page exchange's part of a connection: made with it,
 * attached to its channel, closed with it. */
const lp_part_t lp_part_xchg = {
    .made = lp_xchg_init, .adopted = lp_xchg_attach, .final = lp_xchg_close
};
