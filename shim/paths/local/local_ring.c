/* The shared-memory channel of the local path (see local_ring.h for the
 * layout, the trust model and the contracts).
 *
 * Memory ordering, and why a wake-up cannot be lost
 * -------------------------------------------------
 * Data: the producer copies the payload and the record header into the ring,
 * then stores head with release semantics; the consumer loads head with
 * acquire semantics before it reads any record below it.  Space: the
 * consumer copies out, then stores tail with release semantics; the producer
 * loads tail with acquire semantics before it overwrites anything below
 * tail + ring_size.
 *
 * Sleeping consumer (the producer's case is symmetric with tail and
 * prod_waiting):
 *
 *   consumer (rx_wait_prepare)          producer (after publishing)
 *   C1 store cons_waiting = 1           P1 store head = h' (release)
 *   C2 fence seq_cst                    P2 fence seq_cst
 *   C3 load head                        P3 load cons_waiting
 *      == tail: sleep on the socket        == 1 and xchg(cons_waiting, 0) == 1:
 *                                            send a doorbell
 *
 * This is the store-buffering pattern with a seq_cst fence between each
 * side's store and load.  The two fences are totally ordered.  If C2 comes
 * first, C1 precedes P3 in that order and P3 reads 1 (or a later value, 0
 * only when the consumer itself withdrew, i.e. it is not asleep).  If P2
 * comes first, P1 is visible to C3, which reads h' and does not sleep.  So
 * "consumer sleeps on an old head" and "producer saw no waiter" cannot both
 * happen.  The xchg makes exactly one party own a given announcement: either
 * the producer (who then sends exactly one doorbell) or the consumer
 * withdrawing it (rx_wait_cancel / a non-sleeping prepare), so one sleep costs
 * at most one doorbell byte and a sleeper is always woken.  A stale doorbell
 * byte (announcement claimed by the producer after the consumer found data
 * anyway) only causes one spurious wake-up, after which the sleeper re-checks.
 */
#include "local_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zc_copy.h"
#include "zc_real.h"
#include "zc_sys.h"

#define LR_ALIGN        8u
#define LR_REC_HDR      8u
#define LR_BYTES_CAP    (1ULL << 40)    /* sanity bound of bytes_head - bytes_tail */
#define LR_DESC_SIZE    16u
#define LR_LEFT_PAGES   0x80000000u     /* rec_left: the rest of the PAGES record at tail */
#define LR_PAGES_BYTES_MAX ((uint64_t)LOCAL_RING_PAGES_MAX << 21)  /* stream bytes per PAGES */
#define LR_MARK_SIZE    8u

_Static_assert(sizeof(local_ring_hdr_t) <= LOCAL_RING_HDR_SIZE, "header page");
_Static_assert(offsetof(local_ring_hdr_t, ctl) % 64 == 0 && sizeof(local_ring_ctl_t) == 192,
               "control lines on their own cache lines");
_Static_assert(sizeof(local_ring_page_t) == 16, "PAGES descriptor size");
_Static_assert(LOCAL_RING_SIZE_MIN % 8 == 0 && LOCAL_RING_CHUNK % 8 == 0, "record alignment");

#define LR_LOAD(p)          __atomic_load_n((p), __ATOMIC_RELAXED)
#define LR_LOAD_ACQ(p)      __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define LR_STORE(p, v)      __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define LR_STORE_REL(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define LR_XCHG(p, v)       __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)
#define LR_FENCE()          __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define LR_STAT(ch, field, v) \
    LR_STORE(&(ch)->stats.field, LR_LOAD(&(ch)->stats.field) + (v))

static inline uint64_t lr_round8(uint64_t x)
{
    return (x + LR_ALIGN - 1) & ~(uint64_t)(LR_ALIGN - 1);
}

static inline int lr_pow2(uint64_t x)
{
    return x && !(x & (x - 1));
}

/* --- real system calls (zc_real when resolved; raw syscalls otherwise, so
 * the module also works outside the library, e.g. in the fuzz target) --- */

static void *lr_mmap(size_t len, int fd)
{
    if (zc_real.mmap)
        return zc_real.mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return (void *)zc_syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

static void lr_munmap(void *p, size_t len)
{
    if (zc_real.munmap)
        zc_real.munmap(p, len);
    else
        zc_syscall(SYS_munmap, p, len);
}

static int lr_fcntl(int fd, int cmd, long arg)
{
    if (zc_real.fcntl)
        return zc_real.fcntl(fd, cmd, arg);
    return (int)zc_syscall(SYS_fcntl, fd, cmd, arg);
}

static void lr_close(int fd)
{
    if (zc_real.close)
        zc_real.close(fd);
    else
        zc_syscall(SYS_close, fd);
}

/* --- ring copies, wrap-aware; offsets are always masked with the local size */

static void lr_ring_put(local_ring_t *ch, int dir, uint64_t pos, const void *src, size_t n)
{
    uint64_t off = pos & (ch->ring_size - 1);
    size_t first = ch->ring_size - off;

    if (first >= n) {
        zc_copy(ch->ring[dir] + off, src, n);
    } else {
        zc_copy(ch->ring[dir] + off, src, first);
        zc_copy(ch->ring[dir], (const uint8_t *)src + first, n - first);
    }
}

static void lr_ring_get(const local_ring_t *ch, int dir, uint64_t pos, void *dst, size_t n)
{
    uint64_t off = pos & (ch->ring_size - 1);
    size_t first = ch->ring_size - off;

    if (first >= n) {
        zc_copy(dst, ch->ring[dir] + off, n);
    } else {
        zc_copy(dst, ch->ring[dir] + off, first);
        zc_copy((uint8_t *)dst + first, ch->ring[dir], n - first);
    }
}

/* An iovec cursor: gather/scatter straight from/to the caller's iovecs. */
typedef struct lr_iov_cur {
    const struct iovec *iov;
    int cnt, i;
    size_t off;
} lr_iov_cur_t;

static int lr_cur_more(lr_iov_cur_t *c)
{
    while (c->i < c->cnt && c->off >= c->iov[c->i].iov_len) {
        c->i++;
        c->off = 0;
    }
    return c->i < c->cnt;
}

/* Copy up to n bytes from the iovecs into the ring at pos; returns the count. */
static size_t lr_cur_to_ring(local_ring_t *ch, int dir, lr_iov_cur_t *c, uint64_t pos, size_t n)
{
    size_t done = 0;

    while (done < n && lr_cur_more(c)) {
        size_t k = c->iov[c->i].iov_len - c->off;

        if (k > n - done)
            k = n - done;
        lr_ring_put(ch, dir, pos + done, (const uint8_t *)c->iov[c->i].iov_base + c->off, k);
        c->off += k;
        done += k;
    }
    return done;
}

/* Copy up to n bytes from the ring at pos into the iovecs; returns the count. */
static size_t lr_ring_to_cur(local_ring_t *ch, int dir, lr_iov_cur_t *c, uint64_t pos, size_t n)
{
    size_t done = 0;

    while (done < n && lr_cur_more(c)) {
        size_t k = c->iov[c->i].iov_len - c->off;

        if (k > n - done)
            k = n - done;
        lr_ring_get(ch, dir, pos + done, (uint8_t *)c->iov[c->i].iov_base + c->off, k);
        c->off += k;
        done += k;
    }
    return done;
}

static int lr_broken(local_ring_t *ch)
{
    if (!ch->broken) {
        ch->broken = 1;
        LR_STAT(ch, proto_errors, 1);
    }
    return -EPROTO;
}

static int lr_check(const local_ring_t *ch, int dir)
{
    if (!ch->hdr || (dir != LOCAL_RING_AB && dir != LOCAL_RING_BA))
        return -EINVAL;
    return ch->broken ? -EPROTO : 0;
}

/* --- the validating readers of shared memory --- */

int local_ring_ctl_snap(local_ring_t *ch, int dir, int role, local_ring_snap_t *s)
{
    local_ring_ctl_t *ctl;
    int rc = lr_check(ch, dir);

    if (rc)
        return rc;
    ctl = &ch->hdr->ctl[dir];
    memset(s, 0, sizeof(*s));
    if (role == LOCAL_RING_ROLE_PROD) {
        s->head = LR_LOAD(&ctl->head);
        s->tail = LR_LOAD_ACQ(&ctl->tail);
        if ((s->head & (LR_ALIGN - 1)) || s->head - s->tail > ch->ring_size)
            return lr_broken(ch);
        ch->tail_seen[dir] = s->tail;
        return 0;
    }
    /* head before bytes_head: the producer stores bytes_head, then head
     * (release), so bytes_head is at least what the records below head carry,
     * and never below bytes_tail (everything consumed lay below a head this
     * consumer acquired).  It may count one record still being published. */
    s->head = LR_LOAD_ACQ(&ctl->head);
    s->bytes_head = LR_LOAD(&ctl->bytes_head);
    s->tail = LR_LOAD(&ctl->tail);
    s->rec_left = LR_LOAD(&ctl->rec_left);
    s->bytes_tail = LR_LOAD(&ctl->bytes_tail);
    if ((s->head & (LR_ALIGN - 1)) || s->head - s->tail > ch->ring_size)
        return lr_broken(ch);
    if (s->rec_left & LR_LEFT_PAGES) {
        /* the rest of a PAGES record at tail (the record's header is there) */
        if ((s->tail & (LR_ALIGN - 1)) || (s->rec_left & ~LR_LEFT_PAGES) == 0 ||
            (s->rec_left & ~LR_LEFT_PAGES) > LR_PAGES_BYTES_MAX || s->head - s->tail < LR_REC_HDR)
            return lr_broken(ch);
    } else if (s->rec_left == 0 ? (s->tail & (LR_ALIGN - 1)) != 0
                                : (s->rec_left > LOCAL_RING_CHUNK ||
                                   s->rec_left > s->head - s->tail)) {
        return lr_broken(ch);
    }
    if (s->bytes_head - s->bytes_tail > LR_BYTES_CAP)
        return lr_broken(ch);
    return 0;
}

static int lr_page_check(const local_ring_page_t *p, uint64_t *bytes_p)
{
    uint64_t len;

    if (p->shift != 12 && p->shift != 21)
        return -EINVAL;
    if (p->npages == 0 || p->npages > (1u << 30) >> p->shift)
        return -EINVAL;
    len = (uint64_t)p->npages << p->shift;
    if ((p->offset & ((1ULL << p->shift) - 1)) || p->offset > UINT64_MAX - len)
        return -EINVAL;
    *bytes_p += len;
    return 0;
}

int local_ring_frame_parse(local_ring_t *ch, int dir, const local_ring_snap_t *s,
                           uint64_t pos, local_ring_frame_t *f)
{
    uint64_t word, avail;
    uint32_t tf;
    int rc = lr_check(ch, dir);

    if (rc)
        return rc;
    if (pos - s->tail > s->head - s->tail || (pos & (LR_ALIGN - 1)))
        return lr_broken(ch);
    if (pos == s->head)
        return -EAGAIN;
    if (s->head - pos < LR_REC_HDR)
        return lr_broken(ch);
    word = LR_LOAD((uint64_t *)(ch->ring[dir] + (pos & (ch->ring_size - 1))));
    tf = (uint32_t)word;
    f->type = tf & 0xff;
    f->len = (uint32_t)(word >> 32);
    f->pos = pos;
    f->bytes = 0;
    f->skip = 0;
    f->npages = 0;
    f->mark = 0;
    avail = s->head - pos - LR_REC_HDR;
    if (tf >> 8)
        return lr_broken(ch);
    switch (f->type) {
    case LOCAL_RING_REC_BYTES:
        if (f->len == 0 || f->len > LOCAL_RING_CHUNK || lr_round8(f->len) > avail)
            return lr_broken(ch);
        f->bytes = f->len;
        break;
    case LOCAL_RING_REC_EOF:
        if (f->len != 0)
            return lr_broken(ch);
        break;
    case LOCAL_RING_REC_MARK: {
        uint64_t kind;

        if (f->len != LR_MARK_SIZE || f->len > avail)
            return lr_broken(ch);
        lr_ring_get(ch, dir, pos + LR_REC_HDR, &kind, sizeof(kind));
        if (kind != LOCAL_RING_MARK_REVERT)
            return lr_broken(ch);
        f->mark = (uint32_t)kind;
        break;
    }
    case LOCAL_RING_REC_PAD:
        if (f->len % LR_ALIGN || f->len > avail)
            return lr_broken(ch);
        break;
    case LOCAL_RING_REC_PAGES:
        if (f->len == 0 || f->len % LR_DESC_SIZE || f->len / LR_DESC_SIZE > LOCAL_RING_PAGES_MAX ||
            f->len > avail)
            return lr_broken(ch);
        f->npages = (int)(f->len / LR_DESC_SIZE);
        /* Copy first, then check the copies: the peer may rewrite the ring. */
        lr_ring_get(ch, dir, pos + LR_REC_HDR, f->pages, f->len);
        for (int i = 0; i < f->npages; i++)
            if (lr_page_check(&f->pages[i], &f->bytes))
                return lr_broken(ch);
        if (f->bytes > LR_PAGES_BYTES_MAX)
            return lr_broken(ch);
        break;
    default:
        return lr_broken(ch);
    }
    f->next = pos + LR_REC_HDR + lr_round8(f->len);
    return 0;
}

/* --- setup --- */

int local_ring_view_init(void *base, size_t map_size, int side, local_ring_t *ch)
{
    local_ring_hdr_t *h = base;
    uint64_t magic, ring, total;
    uint32_t version, hsize;

    if (!base || (side != LOCAL_RING_SIDE_A && side != LOCAL_RING_SIDE_B))
        return -EINVAL;
    if (map_size < LOCAL_RING_HDR_SIZE + 2ULL * LOCAL_RING_SIZE_MIN)
        return -EPROTO;
    magic = LR_LOAD(&h->magic);
    version = LR_LOAD(&h->version);
    hsize = LR_LOAD(&h->hdr_size);
    ring = LR_LOAD(&h->ring_size);
    total = LR_LOAD(&h->total_size);
    if (magic != LOCAL_RING_MAGIC || version != LOCAL_RING_VERSION ||
        hsize != LOCAL_RING_HDR_SIZE || !lr_pow2(ring) || ring < LOCAL_RING_SIZE_MIN ||
        ring > LOCAL_RING_SIZE_MAX || total != LOCAL_RING_HDR_SIZE + 2 * ring ||
        total != map_size)
        return -EPROTO;
    memset(ch, 0, sizeof(*ch));
    ch->base = base;
    ch->map_size = map_size;
    ch->ring_size = ring;
    ch->hdr = h;
    ch->ring[LOCAL_RING_AB] = ch->base + LOCAL_RING_HDR_SIZE;
    ch->ring[LOCAL_RING_BA] = ch->base + LOCAL_RING_HDR_SIZE + ring;
    ch->side = side;
    ch->armed[LOCAL_RING_AB][LOCAL_RING_ROLE_CONS] = 1;
    ch->armed[LOCAL_RING_BA][LOCAL_RING_ROLE_CONS] = 1;
    return 0;
}

static void lr_side_mark(local_ring_t *ch, int state)
{
    LR_STORE(&ch->hdr->side_pid[ch->side], (int32_t)zc_getpid());
    __atomic_store_n(&ch->hdr->side_state[ch->side], (uint32_t)state, __ATOMIC_SEQ_CST);
}

int local_ring_create(size_t ring_size, local_ring_t *ch)
{
    local_ring_hdr_t *h;
    size_t total;
    void *p;
    int fd, rc;

    if (ring_size == 0)
        ring_size = LOCAL_RING_SIZE_DEFAULT;
    if (!lr_pow2(ring_size) || ring_size < LOCAL_RING_SIZE_MIN || ring_size > LOCAL_RING_SIZE_MAX)
        return -EINVAL;
    total = LOCAL_RING_HDR_SIZE + 2 * ring_size;
    fd = (int)zc_syscall(SYS_memfd_create, "zcsock-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    /* Mode 0: the descriptor (and the peer's, passed over SCM_RIGHTS) keeps
     * working, but nobody without CAP_DAC_OVERRIDE can open it again
     * through /proc/PID/fd, which PTRACE_MODE_READ alone would allow a
     * same-user process that may not attach (Yama ptrace_scope=1). */
    if (zc_syscall(SYS_fchmod, fd, 0) < 0 || zc_syscall(SYS_ftruncate, fd, (off_t)total) < 0 ||
        lr_fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        rc = -errno;
        goto err_close;
    }
    p = lr_mmap(total, fd);
    if (p == MAP_FAILED) {
        rc = -errno;
        goto err_close;
    }
    h = p;
    h->magic = LOCAL_RING_MAGIC;
    h->version = LOCAL_RING_VERSION;
    h->hdr_size = LOCAL_RING_HDR_SIZE;
    h->ring_size = ring_size;
    h->total_size = total;
    rc = local_ring_view_init(p, total, LOCAL_RING_SIDE_A, ch);
    if (rc) {
        lr_munmap(p, total);
        goto err_close;
    }
    ch->owned = 1;
    lr_side_mark(ch, LOCAL_RING_PEER_ATTACHED);
    return fd;

err_close:
    lr_close(fd);
    return rc;
}

int local_ring_unit_file_ok(int fd, size_t size, uint64_t ino)
{
    const int need = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
    struct stat st;
    int seals;

    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size != (off_t)size ||
        (uint64_t)st.st_ino != ino)
        return 0;
    seals = lr_fcntl(fd, F_GET_SEALS, 0);
    return seals >= 0 && (seals & need) == need;
}

static int lr_map_checked(int memfd, int side, local_ring_t *ch)
{
    struct stat st;
    local_ring_t tmp;
    void *p;
    int seals, rc;

    if (fstat(memfd, &st) < 0)
        return -errno;
    seals = lr_fcntl(memfd, F_GET_SEALS, 0);
    if (seals < 0 || !(seals & F_SEAL_SHRINK) || !S_ISREG(st.st_mode))
        return -EPROTO;
    if (st.st_size < (off_t)(LOCAL_RING_HDR_SIZE + 2ULL * LOCAL_RING_SIZE_MIN) ||
        st.st_size > (off_t)(LOCAL_RING_HDR_SIZE + 2ULL * LOCAL_RING_SIZE_MAX))
        return -EPROTO;
    p = lr_mmap((size_t)st.st_size, memfd);
    if (p == MAP_FAILED)
        return -errno;
    rc = local_ring_view_init(p, (size_t)st.st_size, side, &tmp);
    if (rc) {
        lr_munmap(p, (size_t)st.st_size);
        return rc;
    }
    tmp.owned = 1;
    *ch = tmp;
    return 0;
}

int local_ring_attach(int memfd, local_ring_t *ch)
{
    int rc = lr_map_checked(memfd, LOCAL_RING_SIDE_B, ch);

    if (rc == 0)
        lr_side_mark(ch, LOCAL_RING_PEER_ATTACHED);
    return rc;
}

int local_ring_adopt(int memfd, int side, local_ring_t *ch)
{
    if (side != LOCAL_RING_SIDE_A && side != LOCAL_RING_SIDE_B)
        return -EINVAL;
    return lr_map_checked(memfd, side, ch);
}

void local_ring_side_gone(local_ring_t *ch)
{
    if (ch->hdr)
        lr_side_mark(ch, LOCAL_RING_PEER_GONE);
}

void local_ring_close(local_ring_t *ch, int last)
{
    if (!ch->hdr)
        return;
    if (last)
        lr_side_mark(ch, LOCAL_RING_PEER_GONE);
    if (ch->owned)
        lr_munmap(ch->base, ch->map_size);
    memset(ch, 0, sizeof(*ch));
}

int local_ring_peer_state(local_ring_t *ch)
{
    uint32_t st;

    if (!ch->hdr)
        return -EINVAL;
    st = __atomic_load_n(&ch->hdr->side_state[!ch->side], __ATOMIC_SEQ_CST);
    if (st > LOCAL_RING_PEER_GONE)
        return lr_broken(ch);
    return (int)st;
}

/* --- producer --- */

/* After publishing: does the consumer sleep?  (P2/P3 of the proof above.) */
/* Claim the announcement in waiting word w (it is ours to answer from now
 * on): how to wake its owner, 0 when nobody waited. */
static int lr_claim(uint32_t *w)
{
    uint32_t old;

    if (!LR_LOAD(w) || !(old = LR_XCHG(w, 0)))
        return 0;
    return old == LOCAL_RING_WAIT_FUTEX     ? LOCAL_RING_F_FUTEX
           : old == LOCAL_RING_WAIT_EVENTFD ? LOCAL_RING_F_EVENTFD
           : old == LOCAL_RING_WAIT_BOTH    ? LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX
                                            : LOCAL_RING_F_DOORBELL;
}

static int lr_wake_consumer(local_ring_t *ch, int dir)
{
    int flags;

    if (ch->quiet)
        return 0;
    LR_FENCE();
    flags = lr_claim(&ch->hdr->ctl[dir].cons_waiting);
    if (flags)
        LR_STAT(ch, doorbells_data, 1);
    return flags;
}

/* Publish one record of rec_bytes ring bytes starting at s->head. */
static int lr_publish(local_ring_t *ch, int dir, local_ring_snap_t *s, uint32_t type,
                      uint32_t len, uint64_t rec_bytes, uint64_t stream_bytes)
{
    local_ring_ctl_t *ctl = &ch->hdr->ctl[dir];
    uint64_t word = (uint64_t)type | ((uint64_t)len << 32);

    LR_STORE((uint64_t *)(ch->ring[dir] + (s->head & (ch->ring_size - 1))), word);
    s->head += rec_bytes;
    s->bytes_head += stream_bytes;
    LR_STORE(&ctl->bytes_head, s->bytes_head);
    LR_STORE_REL(&ctl->head, s->head);
    LR_STAT(ch, records_in, 1);
    return lr_wake_consumer(ch, dir);
}

/* Free ring bytes (multiple of 8) for the producer, re-reading tail once
 * when less than need is free. */
static int lr_room(local_ring_t *ch, int dir, local_ring_snap_t *s, uint64_t need,
                   uint64_t *room_p)
{
    uint64_t room = (ch->ring_size - (s->head - s->tail)) & ~(uint64_t)(LR_ALIGN - 1);

    if (room < need) {
        uint64_t head = s->head, bh = s->bytes_head;
        int rc = local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_PROD, s);

        if (rc)
            return rc;
        if (s->head != head)        /* only we move head */
            return lr_broken(ch);
        s->bytes_head = bh;
        room = (ch->ring_size - (s->head - s->tail)) & ~(uint64_t)(LR_ALIGN - 1);
    }
    *room_p = room;
    return 0;
}

/* TAIL SEEN.  The consumer writes its tail at every read; a producer that
 * loaded it at every write took the consumer's line away each message, and
 * the consumer took it back at its next commit, under its fence: two cache
 * misses a message of a request/response stream, one on each side's
 * critical path.  So the producer keeps the tail it loaded last
 * (ch->tail_seen): tails only grow, and the room it gives is never more than
 * the real room.  A fresh load only when that room is short of what a write
 * needs (lr_room, local_ring_writable_min), when the hot window would send
 * the ring back to its start (which needs "empty" for sure: lr_hot_pad), and
 * for every other reader (local_ring_ctl_snap).  A seen tail that no longer
 * fits the head (another image of ours wrote: exec, SCM_RIGHTS, fork) is
 * loaded again too.  (The waiting word the producer loads at every publish
 * sits on a line of its own for the same reason: local_ring.h.) */
static int lr_prod_snap(local_ring_t *ch, int dir, local_ring_snap_t *s)
{
    int rc = lr_check(ch, dir);

    if (rc)
        return rc;
    memset(s, 0, sizeof(*s));
    s->head = LR_LOAD(&ch->hdr->ctl[dir].head);
    s->tail = ch->tail_seen[dir];
    if ((s->head & (LR_ALIGN - 1)) || s->head - s->tail > ch->ring_size)
        return local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_PROD, s);
    return 0;
}

static int lr_prod_begin(local_ring_t *ch, int dir, local_ring_snap_t *s)
{
    int rc = lr_prod_snap(ch, dir, s);

    if (rc)
        return rc;
    s->bytes_head = LR_LOAD(&ch->hdr->ctl[dir].bytes_head);  /* ours: only added to */
    return 0;
}

/* The consumer has read everything and the head is past the hot window: a
 * small message (at most LOCAL_RING_HOT_MSG with its headers) goes back to
 * the ring's start, behind a PAD record over the rest of the ring.  The
 * PAD is not published by itself: the record written next publishes both.
 * (Measured, epoll ping-pong, medians of 5 alternating runs: 4 KiB 9.7 us
 * walking the 4 MiB ring, 4.1 us within the window; 16 and 64 KiB messages
 * gained nothing, the peer's cache then still holds the lines the writer
 * must take back, so they are left alone.  Streaming 4 KiB messages lost
 * 22 % in the window for the same reason: only a caller that read since it
 * last wrote sets ch->hot.) */
static void lr_hot_pad(local_ring_t *ch, int dir, local_ring_snap_t *s, uint64_t total)
{
    uint64_t off = s->head & (ch->ring_size - 1), need = lr_round8(total) + 2 * LR_REC_HDR;

    /* (need: what the write's first room check asks for when the message
     * fits one record, so that check needs no fresh look at the published
     * head, which does not count the PAD yet) */
    if (!ch->hot || ch->ring_size < 4 * LOCAL_RING_HOT || !total ||
        total > LOCAL_RING_HOT_MSG || off + need <= LOCAL_RING_HOT || need > off)
        return;
    if (s->head != s->tail) {   /* the tail seen may be old (TAIL SEEN) */
        uint64_t tail = LR_LOAD_ACQ(&ch->hdr->ctl[dir].tail);

        if (s->head - tail > ch->ring_size || tail - s->tail > ch->ring_size)
            return;             /* (the write's fresh look finds it broken) */
        s->tail = ch->tail_seen[dir] = tail;
        if (s->head != s->tail)
            return;
    }
    LR_STORE((uint64_t *)(ch->ring[dir] + off),
             (uint64_t)LOCAL_RING_REC_PAD | ((uint64_t)(ch->ring_size - off - LR_REC_HDR) << 32));
    s->head += ch->ring_size - off;
    LR_STAT(ch, pads, 1);
}

/* The bytes of iov (saturating). */
static uint64_t lr_iov_total(const struct iovec *iov, int iovcnt)
{
    uint64_t total = 0;

    for (int i = 0; i < iovcnt; i++)
        total = iov[i].iov_len > UINT64_MAX / 2 - total ? UINT64_MAX / 2 : total + iov[i].iov_len;
    return total;
}

int local_ring_write(local_ring_t *ch, int dir, const struct iovec *iov, int iovcnt,
                     size_t *done_p)
{
    lr_iov_cur_t cur = { iov, iovcnt, 0, 0 };
    local_ring_snap_t s;
    uint64_t left;
    size_t done = 0;
    int rc, flags = 0;

    *done_p = 0;
    if (iovcnt < 0 || (iovcnt > 0 && !iov))
        return -EINVAL;
    rc = lr_prod_begin(ch, dir, &s);
    if (rc)
        return rc;
    left = lr_iov_total(iov, iovcnt);
    lr_hot_pad(ch, dir, &s, left);
    while (lr_cur_more(&cur)) {
        uint64_t room, n;

        /* a fresh look at the consumer's tail only when the room seen is
         * short of a whole chunk and of what is left to write */
        rc = lr_room(ch, dir, &s, 2 * LR_REC_HDR + (left < LOCAL_RING_CHUNK ? lr_round8(left)
                                                                        : LOCAL_RING_CHUNK),
                     &room);
        if (rc)
            return rc;
        if (room < 2 * LR_REC_HDR)
            break;
        n = room - LR_REC_HDR;
        if (n > LOCAL_RING_CHUNK)
            n = LOCAL_RING_CHUNK;
        n = lr_cur_to_ring(ch, dir, &cur, s.head + LR_REC_HDR, n);
        flags |= lr_publish(ch, dir, &s, LOCAL_RING_REC_BYTES, (uint32_t)n,
                            LR_REC_HDR + lr_round8(n), n);
        done += n;
        left -= n < left ? n : left;
    }
    if (!done && lr_cur_more(&cur))
        LR_STAT(ch, full, 1);
    LR_STAT(ch, bytes_in, done);
    *done_p = done;
    return flags;
}

int local_ring_eof_write(local_ring_t *ch, int dir)
{
    local_ring_snap_t s;
    uint64_t room;
    int rc = lr_prod_begin(ch, dir, &s);

    if (rc || (rc = lr_room(ch, dir, &s, LR_REC_HDR, &room)))
        return rc;
    if (room < LR_REC_HDR)
        return -EAGAIN;
    return lr_publish(ch, dir, &s, LOCAL_RING_REC_EOF, 0, LR_REC_HDR, 0);
}

uint64_t local_ring_unread(local_ring_t *ch, int dir)
{
    uint64_t tail = LR_LOAD(&ch->hdr->ctl[dir].bytes_tail);   /* the peer's */
    uint64_t head = LR_LOAD(&ch->hdr->ctl[dir].bytes_head);   /* ours */

    return head - tail > LR_BYTES_CAP ? LR_BYTES_CAP : head - tail;
}

uint64_t local_ring_bytes_head(local_ring_t *ch, int dir)
{
    return LR_LOAD(&ch->hdr->ctl[dir].bytes_head);
}

uint64_t local_ring_head_pos(local_ring_t *ch, int dir)
{
    return LR_LOAD(&ch->hdr->ctl[dir].head);
}

int local_ring_pages_write(local_ring_t *ch, int dir, const local_ring_page_t *pages, int n)
{
    local_ring_snap_t s;
    uint64_t room, bytes = 0, need;
    int rc;

    if (n < 1 || n > LOCAL_RING_PAGES_MAX || !pages)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        if (lr_page_check(&pages[i], &bytes))
            return -EINVAL;
    if (bytes > LR_PAGES_BYTES_MAX)
        return -EINVAL;
    need = LR_REC_HDR + (uint64_t)n * LR_DESC_SIZE;
    rc = lr_prod_begin(ch, dir, &s);
    if (rc || (rc = lr_room(ch, dir, &s, need, &room)))
        return rc;
    if (room < need)
        return -EAGAIN;
    lr_ring_put(ch, dir, s.head + LR_REC_HDR, pages, (size_t)n * LR_DESC_SIZE);
    return lr_publish(ch, dir, &s, LOCAL_RING_REC_PAGES, (uint32_t)n * LR_DESC_SIZE, need, bytes);
}

int local_ring_mark_write(local_ring_t *ch, int dir, uint32_t kind)
{
    local_ring_snap_t s;
    uint64_t room, k = kind;
    int rc;

    if (kind != LOCAL_RING_MARK_REVERT)
        return -EINVAL;
    rc = lr_prod_begin(ch, dir, &s);
    if (rc || (rc = lr_room(ch, dir, &s, LR_REC_HDR + LR_MARK_SIZE, &room)))
        return rc;
    if (room < LR_REC_HDR + LR_MARK_SIZE)
        return -EAGAIN;
    lr_ring_put(ch, dir, s.head + LR_REC_HDR, &k, sizeof(k));
    return lr_publish(ch, dir, &s, LOCAL_RING_REC_MARK, LR_MARK_SIZE, LR_REC_HDR + LR_MARK_SIZE,
                      0);
}

int local_ring_claim(local_ring_t *ch, int dir, int role)
{
    return lr_check(ch, dir) ? 0 : lr_claim(local_ring_wait_word(ch, dir, role));
}

int local_ring_claim_kind(local_ring_t *ch, int dir, int role, int kind)
{
    uint32_t cur = (uint32_t)kind;

    if (lr_check(ch, dir))
        return 0;
    return __atomic_compare_exchange_n(local_ring_wait_word(ch, dir, role), &cur, 0, 0,
                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* Payload room of snapshot s. */
static int64_t lr_writable_of(const local_ring_t *ch, const local_ring_snap_t *s)
{
    uint64_t room = (ch->ring_size - (s->head - s->tail)) & ~(uint64_t)(LR_ALIGN - 1);
    /* every LOCAL_RING_CHUNK of payload costs one record header */
    uint64_t hdrs = LR_REC_HDR * (room / (LOCAL_RING_CHUNK + LR_REC_HDR) + 1);

    return room > hdrs ? (int64_t)(room - hdrs) : 0;
}

int64_t local_ring_writable(local_ring_t *ch, int dir)
{
    return local_ring_writable_min(ch, dir, UINT64_MAX);
}

int64_t local_ring_writable_min(local_ring_t *ch, int dir, uint64_t min)
{
    local_ring_snap_t s;
    int64_t room;
    int rc;

    if (min != UINT64_MAX) {    /* the tail seen, when it leaves min (TAIL SEEN) */
        rc = lr_prod_snap(ch, dir, &s);
        if (rc)
            return rc;
        room = lr_writable_of(ch, &s);
        if ((uint64_t)room >= min)
            return room;
    }
    rc = local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_PROD, &s);
    return rc ? rc : lr_writable_of(ch, &s);
}

/* --- consumer --- */

/* After freeing space: does the producer sleep for this much room? */
static int lr_wake_producer(local_ring_t *ch, int dir, uint64_t tail)
{
    local_ring_ctl_t *ctl = &ch->hdr->ctl[dir];
    uint64_t want, used, room;

    if (ch->quiet)
        return 0;
    LR_FENCE();
    if (!LR_LOAD(&ctl->prod_waiting))
        return 0;
    want = LR_LOAD(&ctl->prod_want);
    if (want > ch->ring_size - 2 * LR_REC_HDR)     /* an empty ring satisfies it */
        want = ch->ring_size - 2 * LR_REC_HDR;
    used = LR_LOAD(&ctl->head) - tail;
    room = used > ch->ring_size ? ch->ring_size : (ch->ring_size - used) & ~(uint64_t)7;
    if (room >= lr_round8(want) + LR_REC_HDR) {
        int flags = lr_claim(&ctl->prod_waiting);

        if (flags)
            LR_STAT(ch, doorbells_space, 1);
        return flags;
    }
    return 0;
}

static int lr_cons_commit(local_ring_t *ch, int dir, uint64_t tail, uint32_t rec_left,
                          uint64_t bytes_tail)
{
    local_ring_ctl_t *ctl = &ch->hdr->ctl[dir];

    LR_STORE(&ctl->rec_left, rec_left);
    LR_STORE(&ctl->bytes_tail, bytes_tail);
    LR_STORE_REL(&ctl->tail, tail);
    return lr_wake_producer(ch, dir, tail);
}

/* Take up to n bytes of the cursor's destination as iovecs (at most wmax),
 * advancing it; returns how many iovecs, *got_p the bytes they hold. */
static int lr_cur_window(lr_iov_cur_t *c, size_t n, struct iovec *w, int wmax, size_t *got_p)
{
    size_t got = 0;
    int k = 0;

    while (got < n && k < wmax && lr_cur_more(c)) {
        size_t m = c->iov[c->i].iov_len - c->off;

        if (m > n - got)
            m = n - got;
        w[k].iov_base = (uint8_t *)c->iov[c->i].iov_base + c->off;
        w[k++].iov_len = m;
        c->off += m;
        got += m;
    }
    *got_p = got;
    return k;
}

/* Read up to the rest of PAGES record f (from byte off) through
 * ch->pages_read into the cursor.  Bytes placed, or -errno. */
static ssize_t lr_pages_to_cur(local_ring_t *ch, int dir, lr_iov_cur_t *c,
                               const local_ring_frame_t *f, uint64_t off, int peek)
{
    struct iovec w[16];
    lr_iov_cur_t save = *c;
    size_t got;
    int k = lr_cur_window(c, f->bytes - off, w, 16, &got);
    ssize_t n;

    if (!k)
        return 0;
    n = ch->pages_read(ch->pages_ctx, dir, f, off, w, k, !peek && off + got == f->bytes);
    if (n != (ssize_t)got) {
        *c = save;
        return n < 0 ? n : -EPROTO;
    }
    return n;
}

int local_ring_read(local_ring_t *ch, int dir, const struct iovec *iov, int iovcnt,
                    int flags, size_t *done_p)
{
    lr_iov_cur_t cur = { iov, iovcnt, 0, 0 };
    local_ring_snap_t s;
    local_ring_frame_t f;
    uint64_t pos, left;
    size_t done = 0;
    int rc, ret = 0;

    *done_p = 0;
    if (iovcnt < 0 || (iovcnt > 0 && !iov))
        return -EINVAL;
    rc = local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_CONS, &s);
    if (rc)
        return rc;
    pos = s.tail;
    left = s.rec_left;
    while (lr_cur_more(&cur)) {
        size_t n;

        if (left == 0 || (left & LR_LEFT_PAGES)) {
            rc = local_ring_frame_parse(ch, dir, &s, pos, &f);
            if (rc == -EAGAIN)
                break;
            if (rc)
                return rc;
            if (left && (f.type != LOCAL_RING_REC_PAGES || (left & ~LR_LEFT_PAGES) > f.bytes))
                return lr_broken(ch);
            if (f.type == LOCAL_RING_REC_PAD) {
                pos = f.next;
                if (!done) {    /* taken at once, even by a peek: no stream bytes */
                    ret |= lr_cons_commit(ch, dir, pos, 0, s.bytes_tail);
                    s.tail = pos;
                }
                continue;
            }
            if (f.type == LOCAL_RING_REC_PAGES && ch->pages_read) {
                uint64_t off = left ? f.bytes - (left & ~LR_LEFT_PAGES) : 0;
                ssize_t m = lr_pages_to_cur(ch, dir, &cur, &f, off, flags & LOCAL_RING_PEEK);

                if (m < 0) {
                    if (done)
                        break;      /* what was read stands; the error comes next time */
                    return (int)m;
                }
                done += (size_t)m;
                if (off + (uint64_t)m == f.bytes) {
                    pos = f.next;
                    left = 0;
                } else {
                    left = LR_LEFT_PAGES | (f.bytes - off - (uint64_t)m);
                }
                continue;
            }
            if (f.type != LOCAL_RING_REC_BYTES) {
                ret |= f.type == LOCAL_RING_REC_EOF ? LOCAL_RING_F_EOF : LOCAL_RING_F_RECORD;
                break;
            }
            left = f.len;
            pos += LR_REC_HDR;
        }
        n = lr_ring_to_cur(ch, dir, &cur, pos, left);
        pos += n;
        left -= n;
        done += n;
        if (left == 0)
            pos = lr_round8(pos);
    }
    *done_p = done;
    if (!done && !ret)
        LR_STAT(ch, empty, 1);
    if (done && !(flags & LOCAL_RING_PEEK)) {
        LR_STAT(ch, bytes_out, done);
        ret |= lr_cons_commit(ch, dir, pos, (uint32_t)left, s.bytes_tail + done);
    }
    return ret;
}

int64_t local_ring_readable(local_ring_t *ch, int dir)
{
    local_ring_snap_t s;
    int rc = local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_CONS, &s);

    if (rc)
        return rc;
    if (s.head == s.tail)
        return 0;       /* a record being published is not readable yet */
    return (int64_t)(s.bytes_head - s.bytes_tail);
}

int local_ring_rx_idle(const local_ring_t *ch, int dir)
{
    const local_ring_ctl_t *ctl;

    if (lr_check(ch, dir))
        return 0;
    ctl = &ch->hdr->ctl[dir];
    return LR_LOAD_ACQ(&ctl->head) == LR_LOAD(&ctl->tail);
}

int64_t local_ring_bytes_run(local_ring_t *ch, int dir, uint64_t max)
{
    local_ring_snap_t s;
    local_ring_frame_t f;
    uint64_t pos, run = 0;
    int rc = local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_CONS, &s);

    if (rc)
        return rc;
    if (s.rec_left & LR_LEFT_PAGES)
        return 0;
    pos = s.tail;
    if (s.rec_left) {
        run = s.rec_left;
        pos = lr_round8(s.tail + s.rec_left);
    }
    for (int i = 0; i < 4096 && run < max; i++) {
        if (local_ring_frame_parse(ch, dir, &s, pos, &f))
            break;      /* the end of what is published, or a bad frame: the read says */
        if (f.type == LOCAL_RING_REC_BYTES)
            run += f.len;
        else if (f.type != LOCAL_RING_REC_PAD)
            break;
        pos = f.next;
    }
    return (int64_t)run;
}

int local_ring_frame_next(local_ring_t *ch, int dir, local_ring_frame_t *f)
{
    local_ring_snap_t s;
    int rc = local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_CONS, &s);

    if (rc)
        return rc;
    if (s.rec_left & LR_LEFT_PAGES) {
        rc = local_ring_frame_parse(ch, dir, &s, s.tail, f);
        if (rc)
            return rc;
        if (f->type != LOCAL_RING_REC_PAGES || (s.rec_left & ~LR_LEFT_PAGES) > f->bytes)
            return lr_broken(ch);
        f->skip = f->bytes - (s.rec_left & ~LR_LEFT_PAGES);
        f->bytes -= f->skip;
        return 0;
    }
    if (s.rec_left) {
        memset(f, 0, sizeof(*f));
        f->type = LOCAL_RING_REC_BYTES;
        f->len = s.rec_left;
        f->pos = s.tail;
        f->next = lr_round8(s.tail + s.rec_left);
        f->bytes = s.rec_left;
        return 0;
    }
    return local_ring_frame_parse(ch, dir, &s, s.tail, f);
}

int local_ring_frame_consume(local_ring_t *ch, int dir, const local_ring_frame_t *f)
{
    local_ring_snap_t s;
    int rc = local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_CONS, &s);

    if (rc)
        return rc;
    if (f->pos != s.tail || f->next - s.tail > s.head - s.tail || f->next == s.tail)
        return -EINVAL;
    LR_STAT(ch, bytes_out, f->bytes);
    return lr_cons_commit(ch, dir, f->next, 0, s.bytes_tail + f->bytes);
}

/* --- waiting protocol --- */

/* Our announcement of direction dir and role was withdrawn by its claimer:
 * a socket-kind one means one doorbell byte for us. */
static void lr_claimed(local_ring_t *ch, int dir, int role)
{
    if (ch->wait_kind[dir][role] != LOCAL_RING_WAIT_FUTEX &&
        ch->wait_kind[dir][role] != LOCAL_RING_WAIT_EVENTFD)
        ch->bells_claimed++;    /* socket kind (0: the creator's first announcements) */
    ch->armed[dir][role] = 0;
}

/* A new announcement of (dir, role) replaced the word's value old: when an
 * announcement of ours stood and the peer had claimed it meanwhile (the
 * word was empty), that claim is counted now, under the kind it had (its
 * doorbell byte is on its way); re-announcing must not lose it. */
static void lr_announced(local_ring_t *ch, int dir, int role, uint32_t old)
{
    if (ch->armed[dir][role] && old == 0)
        lr_claimed(ch, dir, role);
}

/* Withdraw our announcement (dir, role): 1 when the peer had claimed it
 * (counted once: a word we did not arm, or already found claimed, is not
 * ours to count). */
static int lr_withdraw(local_ring_t *ch, int dir, int role, uint32_t *w)
{
    if (LR_XCHG(w, 0)) {
        ch->armed[dir][role] = 0;
        return 0;
    }
    if (!ch->armed[dir][role])
        return 0;
    lr_claimed(ch, dir, role);
    return 1;
}

int local_ring_rx_wait_prepare(local_ring_t *ch, int dir)
{
    return local_ring_rx_wait_prepare_kind(ch, dir, LOCAL_RING_WAIT_SOCKET);
}

static int lr_rx_prepare(local_ring_t *ch, int dir, int kind, int next);

int local_ring_rx_wait_prepare_kind(local_ring_t *ch, int dir, int kind)
{
    return lr_rx_prepare(ch, dir, kind, 0);
}

int local_ring_rx_wait_arm_next(local_ring_t *ch, int dir, int kind)
{
    return lr_rx_prepare(ch, dir, kind, 1);
}

/* next: stay announced with data already there (the producer's next write
 * wakes this waiter: an edge-triggered wait that reported those bytes). */
static int lr_rx_prepare(local_ring_t *ch, int dir, int kind, int next)
{
    local_ring_snap_t s;
    uint32_t *w, prev, mine;
    uint8_t prev_kind, prev_armed;
    int rc = lr_check(ch, dir);

    if (rc)
        return rc;
    if (kind != LOCAL_RING_WAIT_FUTEX && kind != LOCAL_RING_WAIT_EVENTFD)
        kind = LOCAL_RING_WAIT_SOCKET;
    w = &ch->hdr->ctl[dir].cons_waiting;
    prev_kind = ch->wait_kind[dir][LOCAL_RING_ROLE_CONS];
    prev_armed = ch->armed[dir][LOCAL_RING_ROLE_CONS];
    if (kind == LOCAL_RING_WAIT_EVENTFD) {
        uint32_t cur = 0;

        /* into an empty word only; a standing kind stays (ours when armed:
         * its kind is known; anybody's: a waiter of that kind may sleep) */
        if (__atomic_compare_exchange_n(w, &cur, (uint32_t)kind, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            lr_announced(ch, dir, LOCAL_RING_ROLE_CONS, 0);
        } else if (cur != LOCAL_RING_WAIT_EVENTFD) {
            kind = cur == LOCAL_RING_WAIT_FUTEX ? LOCAL_RING_WAIT_FUTEX : LOCAL_RING_WAIT_SOCKET;
        }
        prev = cur;                 /* 0 when ours went in, else what stands (and stays) */
    } else {
        prev = LR_XCHG(w, (uint32_t)kind);                  /* C1 */
        lr_announced(ch, dir, LOCAL_RING_ROLE_CONS, prev);
    }
    mine = prev && kind == LOCAL_RING_WAIT_EVENTFD ? prev : (uint32_t)kind;
    if (prev == 0)
        prev_armed = 0;
    ch->wait_kind[dir][LOCAL_RING_ROLE_CONS] = (uint8_t)kind;
    LR_FENCE();                                             /* C2 */
    rc = local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_CONS, &s);  /* C3 */
    if (rc)
        return rc;
    ch->armed[dir][LOCAL_RING_ROLE_CONS] = 1;
    if (s.head != s.tail && !next) {
        /* Data already: withdraw our part only.  An announcement that stood
         * before ours (another thread's or holder's poll/epoll wait, which
         * looked before this data came and sleeps) goes back as it was: the
         * producer may look at the word only now, and must find it.  One of
         * this process's with no other waiter possible is our own stale
         * one: withdrawn with ours. */
        uint32_t now = mine;

        if (prev == 0 || (prev_armed && !ch->others)) {
            lr_withdraw(ch, dir, LOCAL_RING_ROLE_CONS, w);
        } else if (__atomic_compare_exchange_n(w, &now, prev, 0, __ATOMIC_SEQ_CST,
                                               __ATOMIC_SEQ_CST)) {
            ch->wait_kind[dir][LOCAL_RING_ROLE_CONS] = prev_kind;
            ch->armed[dir][LOCAL_RING_ROLE_CONS] = prev_armed;
        } else if (now == 0) {
            lr_claimed(ch, dir, LOCAL_RING_ROLE_CONS);  /* claimed meanwhile: its wake */
        }
        LR_STAT(ch, wait_aborts, 1);
        return 0;
    }
    LR_STAT(ch, waits, 1);
    return 1;
}

int local_ring_rx_wait_cancel(local_ring_t *ch, int dir)
{
    int rc = lr_check(ch, dir);

    if (rc)
        return rc;
    return lr_withdraw(ch, dir, LOCAL_RING_ROLE_CONS, &ch->hdr->ctl[dir].cons_waiting);
}

/* Withdraw our announcement (dir, role) only while its word holds kind.
 * (The send side's sleeper withdraws its part of BOTH with
 * local_ring_tx_wait_cancel_futex.) */
static int lr_withdraw_kind(local_ring_t *ch, int dir, int role, int kind)
{
    uint32_t *w, cur = (uint32_t)kind;
    int rc = lr_check(ch, dir);

    if (rc)
        return rc;
    w = local_ring_wait_word(ch, dir, role);
    if (__atomic_compare_exchange_n(w, &cur, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
        ch->armed[dir][role] = 0;
        return 0;
    }
    if (cur != 0 || !ch->armed[dir][role])
        return 0;       /* another waiter's announcement replaced ours: it stays */
    lr_claimed(ch, dir, role);
    return 1;
}

int local_ring_rx_wait_cancel_kind(local_ring_t *ch, int dir, int kind)
{
    return lr_withdraw_kind(ch, dir, LOCAL_RING_ROLE_CONS, kind);
}

int local_ring_tx_wait_cancel_futex(local_ring_t *ch, int dir)
{
    uint32_t *w, cur;
    int rc = lr_check(ch, dir);

    if (rc)
        return rc;
    w = &ch->hdr->ctl[dir].prod_waiting;
    cur = LR_LOAD(w);
    while (cur == LOCAL_RING_WAIT_FUTEX || cur == LOCAL_RING_WAIT_BOTH) {
        uint32_t to = cur == LOCAL_RING_WAIT_BOTH ? LOCAL_RING_WAIT_SOCKET : 0;

        if (__atomic_compare_exchange_n(w, &cur, to, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            if (to)
                ch->wait_kind[dir][LOCAL_RING_ROLE_PROD] = (uint8_t)to;
            else
                ch->armed[dir][LOCAL_RING_ROLE_PROD] = 0;
            return 0;
        }
    }
    if (cur != 0 || !ch->armed[dir][LOCAL_RING_ROLE_PROD])
        return 0;       /* a socket waiter's announcement stands: it stays */
    lr_claimed(ch, dir, LOCAL_RING_ROLE_PROD);
    return 1;
}

int local_ring_rx_armed(const local_ring_t *ch, int dir)
{
    return lr_check(ch, dir) == 0 && ch->armed[dir][LOCAL_RING_ROLE_CONS];
}

int local_ring_tx_wait_prepare(local_ring_t *ch, int dir, size_t want)
{
    return local_ring_tx_wait_prepare_kind(ch, dir, want, LOCAL_RING_WAIT_SOCKET);
}

int local_ring_tx_wait_prepare_kind(local_ring_t *ch, int dir, size_t want, int kind)
{
    local_ring_ctl_t *ctl;
    local_ring_snap_t s;
    uint64_t room;
    uint32_t prev;
    uint8_t prev_kind, prev_armed;
    int rc = lr_check(ch, dir);

    if (rc)
        return rc;
    if (kind != LOCAL_RING_WAIT_FUTEX && kind != LOCAL_RING_WAIT_FUTEX_JOIN)
        kind = LOCAL_RING_WAIT_SOCKET;
    ctl = &ch->hdr->ctl[dir];
    if (want == 0)
        want = 1;
    if (want > ch->ring_size - 2 * LR_REC_HDR)     /* an empty ring satisfies it */
        want = ch->ring_size - 2 * LR_REC_HDR;
    LR_STORE(&ctl->prod_want, (uint32_t)want);
    {
        /* A socket waiter (poll/epoll) over a futex sleeper, or a joining
         * futex sleeper over a socket waiter: both stand (BOTH), so that a
         * waiter of one kind never hides one of the other; the plain futex
         * kind replaces what stands (a process where nobody else waits). */
        uint32_t *w = &ctl->prod_waiting, cur = LR_LOAD(w), nk;

        prev_kind = ch->wait_kind[dir][LOCAL_RING_ROLE_PROD];
        prev_armed = ch->armed[dir][LOCAL_RING_ROLE_PROD];

        do {
            int sock = cur == LOCAL_RING_WAIT_SOCKET || cur == LOCAL_RING_WAIT_BOTH;
            int fut = cur == LOCAL_RING_WAIT_FUTEX || cur == LOCAL_RING_WAIT_BOTH;

            if (kind == LOCAL_RING_WAIT_SOCKET)
                nk = fut ? LOCAL_RING_WAIT_BOTH : LOCAL_RING_WAIT_SOCKET;
            else if (kind == LOCAL_RING_WAIT_FUTEX_JOIN)
                nk = sock ? LOCAL_RING_WAIT_BOTH : LOCAL_RING_WAIT_FUTEX;
            else
                nk = LOCAL_RING_WAIT_FUTEX;
        } while (!__atomic_compare_exchange_n(w, &cur, nk, 0, __ATOMIC_SEQ_CST,
                                              __ATOMIC_SEQ_CST));
        lr_announced(ch, dir, LOCAL_RING_ROLE_PROD, cur);
        prev = cur;
        if (prev == 0)
            prev_armed = 0;         /* nothing of ours stood (or it was claimed: counted) */
        kind = (int)nk;
    }
    ch->wait_kind[dir][LOCAL_RING_ROLE_PROD] = (uint8_t)kind;
    LR_FENCE();
    rc = local_ring_ctl_snap(ch, dir, LOCAL_RING_ROLE_PROD, &s);
    if (rc)
        return rc;
    room = (ch->ring_size - (s.head - s.tail)) & ~(uint64_t)(LR_ALIGN - 1);
    ch->armed[dir][LOCAL_RING_ROLE_PROD] = 1;
    if (room >= lr_round8(want) + LR_REC_HDR) {
        /* Room already: withdraw our part only.  An announcement that stood
         * before ours (a poll/epoll waiter, a blocked sender, who looked
         * before this room came and sleeps) goes back as it was: the
         * consumer that made the room may look at the word only now, and
         * must find it (clearing it lost that waiter's wake-up).  One of
         * this process's with no other waiter possible is our own stale
         * one: withdrawn with ours. */
        uint32_t now = (uint32_t)kind;

        if (prev == 0 || (prev_armed && !ch->others)) {
            lr_withdraw(ch, dir, LOCAL_RING_ROLE_PROD, &ctl->prod_waiting);
        } else if (__atomic_compare_exchange_n(&ctl->prod_waiting, &now, prev, 0,
                                               __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            ch->wait_kind[dir][LOCAL_RING_ROLE_PROD] = prev_kind;
            ch->armed[dir][LOCAL_RING_ROLE_PROD] = prev_armed;
        } else if (now == 0) {
            lr_claimed(ch, dir, LOCAL_RING_ROLE_PROD);  /* claimed meanwhile: its byte */
        }
        LR_STAT(ch, wait_aborts, 1);
        return 0;
    }
    LR_STAT(ch, waits, 1);
    return 1;
}

int local_ring_tx_wait_cancel(local_ring_t *ch, int dir)
{
    int rc = lr_check(ch, dir);

    if (rc)
        return rc;
    return lr_withdraw(ch, dir, LOCAL_RING_ROLE_PROD, &ch->hdr->ctl[dir].prod_waiting);
}
