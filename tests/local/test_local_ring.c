/* Unit tests of shim/paths/local/local_ring.c: setup and attach validation, wrap-around,
 * iovec gather/scatter across the wrap, PEEK, full ring and partial writes,
 * EOF and PAGES records, the waiting protocol, and corrupted shared state
 * (every case must give -EPROTO, never a crash or an access outside). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "local_ring.h"

#define AB LOCAL_RING_AB
#define BA LOCAL_RING_BA

typedef struct t_pair {
    local_ring_t a, b;  /* the same channel seen by side A and side B */
    int memfd;
} t_pair_t;

static void t_pair_open(t_pair_t *p, size_t size)
{
    p->memfd = local_ring_create(size, &p->a);
    assert_true(p->memfd >= 0);
    assert_int_equal(local_ring_attach(p->memfd, &p->b), 0);
}

static void t_pair_close(t_pair_t *p)
{
    local_ring_close(&p->b, 1);
    local_ring_close(&p->a, 1);
    close(p->memfd);
}

static void t_fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

static size_t t_write(local_ring_t *ch, int dir, const void *p, size_t n, int *flags_p)
{
    struct iovec v = { (void *)p, n };
    size_t done;
    int rc = local_ring_write(ch, dir, &v, 1, &done);

    assert_true(rc >= 0);
    if (flags_p)
        *flags_p = rc;
    return done;
}

static size_t t_read(local_ring_t *ch, int dir, void *p, size_t n, int flags, int *ret_p)
{
    struct iovec v = { p, n };
    size_t done;
    int rc = local_ring_read(ch, dir, &v, 1, flags, &done);

    assert_true(rc >= 0);
    if (ret_p)
        *ret_p = rc;
    return done;
}

static void test_create_attach(void **state)
{
    t_pair_t p;
    local_ring_t x;
    uint8_t in[100], out[100];

    (void)state;
    assert_int_equal(local_ring_create(5000, &x), -EINVAL);
    assert_int_equal(local_ring_create(2048, &x), -EINVAL);
    assert_int_equal(local_ring_create((size_t)LOCAL_RING_SIZE_MAX * 2, &x), -EINVAL);
    t_pair_open(&p, 0);
    assert_int_equal(p.a.ring_size, LOCAL_RING_SIZE_DEFAULT);
    assert_int_equal(p.b.ring_size, LOCAL_RING_SIZE_DEFAULT);
    assert_int_equal(local_ring_dir_tx(&p.a), AB);
    assert_int_equal(local_ring_dir_rx(&p.b), AB);
    assert_int_equal(fcntl(p.memfd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    assert_int_equal(local_ring_peer_state(&p.a), LOCAL_RING_PEER_ATTACHED);
    assert_int_equal(local_ring_peer_state(&p.b), LOCAL_RING_PEER_ATTACHED);
    /* both directions, each side's own mapping */
    t_fill(in, sizeof(in), 1);
    assert_int_equal(t_write(&p.a, AB, in, sizeof(in), NULL), sizeof(in));
    assert_int_equal(local_ring_readable(&p.b, AB), sizeof(in));
    assert_int_equal(t_read(&p.b, AB, out, sizeof(out), 0, NULL), sizeof(out));
    assert_memory_equal(in, out, sizeof(in));
    assert_int_equal(t_write(&p.b, BA, in, 10, NULL), 10);
    assert_int_equal(t_read(&p.a, BA, out, sizeof(out), 0, NULL), 10);
    assert_int_equal(p.a.stats.bytes_in, 100);
    assert_int_equal(p.a.stats.bytes_out, 10);
    /* the peer leaving is visible */
    local_ring_close(&p.b, 1);
    assert_int_equal(local_ring_peer_state(&p.a), LOCAL_RING_PEER_GONE);
    local_ring_close(&p.a, 1);
    close(p.memfd);
}

static int t_memfd(size_t size, int seal)
{
    int fd = (int)syscall(SYS_memfd_create, "t", MFD_CLOEXEC | MFD_ALLOW_SEALING);

    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    if (seal)
        assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
    return fd;
}

/* A PAGES record's unit file must be a sealed memfd of the unit's size
 * and inode (issue 30, item 6: a hostile peer lent an ordinary file, whose
 * F_GET_SEALS answer -1 passed as every seal, then changed and truncated
 * it under the receiver's mapping). */
static void test_unit_file(void **state)
{
    const size_t unit = 2u << 20;
    const int all = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
    char path[] = "/tmp/zc-unit-XXXXXX";
    struct stat st;
    int fd;

    (void)state;
    fd = t_memfd(unit, 0);
    assert_int_equal(fcntl(fd, F_ADD_SEALS, all), 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(local_ring_unit_file_ok(fd, unit, st.st_ino), 1);
    assert_int_equal(local_ring_unit_file_ok(fd, unit, st.st_ino + 1), 0);   /* another file */
    assert_int_equal(local_ring_unit_file_ok(fd, unit / 2, st.st_ino), 0);   /* another size */
    close(fd);
    fd = t_memfd(unit, 1);                      /* shrink and grow sealed, not write */
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(local_ring_unit_file_ok(fd, unit, st.st_ino), 0);
    close(fd);
    fd = mkstemp(path);                         /* an ordinary file: no seals at all */
    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(ftruncate(fd, (off_t)unit), 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(local_ring_unit_file_ok(fd, unit, st.st_ino), 0);
    close(fd);
    fd = (int)syscall(SYS_memfd_create, "t", MFD_CLOEXEC);  /* a memfd without sealing */
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)unit), 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(local_ring_unit_file_ok(fd, unit, st.st_ino), 0);
    close(fd);
}

static void t_hdr_write(int fd, uint64_t magic, uint32_t version, uint64_t ring, uint64_t total)
{
    local_ring_hdr_t h;

    memset(&h, 0, sizeof(h));
    h.magic = magic;
    h.version = version;
    h.hdr_size = LOCAL_RING_HDR_SIZE;
    h.ring_size = ring;
    h.total_size = total;
    assert_int_equal(pwrite(fd, &h, sizeof(h), 0), sizeof(h));
}

static void test_attach_validation(void **state)
{
    size_t ring = 4096, total = LOCAL_RING_HDR_SIZE + 2 * ring;
    local_ring_t ch;
    int fd, pfd[2];

    (void)state;
    /* a valid header but no seal: the creator could shrink it under us */
    fd = t_memfd(total, 0);
    t_hdr_write(fd, LOCAL_RING_MAGIC, LOCAL_RING_VERSION, ring, total);
    assert_int_equal(local_ring_attach(fd, &ch), -EPROTO);
    close(fd);
    /* sealed and valid: accepted */
    fd = t_memfd(total, 1);
    t_hdr_write(fd, LOCAL_RING_MAGIC, LOCAL_RING_VERSION, ring, total);
    assert_int_equal(local_ring_attach(fd, &ch), 0);
    local_ring_close(&ch, 0);
    /* wrong magic, version, sizes */
    t_hdr_write(fd, LOCAL_RING_MAGIC + 1, LOCAL_RING_VERSION, ring, total);
    assert_int_equal(local_ring_attach(fd, &ch), -EPROTO);
    t_hdr_write(fd, LOCAL_RING_MAGIC, LOCAL_RING_VERSION + 1, ring, total);
    assert_int_equal(local_ring_attach(fd, &ch), -EPROTO);
    t_hdr_write(fd, LOCAL_RING_MAGIC, LOCAL_RING_VERSION, ring * 2, total);
    assert_int_equal(local_ring_attach(fd, &ch), -EPROTO);
    t_hdr_write(fd, LOCAL_RING_MAGIC, LOCAL_RING_VERSION, 6144, LOCAL_RING_HDR_SIZE + 12288);
    assert_int_equal(local_ring_attach(fd, &ch), -EPROTO);
    t_hdr_write(fd, LOCAL_RING_MAGIC, LOCAL_RING_VERSION, ring, total + 4096);
    assert_int_equal(local_ring_attach(fd, &ch), -EPROTO);
    t_hdr_write(fd, LOCAL_RING_MAGIC, LOCAL_RING_VERSION, 1ULL << 62, total);
    assert_int_equal(local_ring_attach(fd, &ch), -EPROTO);
    close(fd);
    /* header claims more than the file holds */
    fd = t_memfd(total, 1);
    t_hdr_write(fd, LOCAL_RING_MAGIC, LOCAL_RING_VERSION, 8192, LOCAL_RING_HDR_SIZE + 16384);
    assert_int_equal(local_ring_attach(fd, &ch), -EPROTO);
    close(fd);
    /* too small to hold anything, not a regular file, not a descriptor */
    fd = t_memfd(4096, 1);
    assert_int_equal(local_ring_attach(fd, &ch), -EPROTO);
    close(fd);
    assert_int_equal(pipe(pfd), 0);
    assert_int_equal(local_ring_attach(pfd[0], &ch), -EPROTO);
    close(pfd[0]);
    close(pfd[1]);
    assert_int_equal(local_ring_attach(-1, &ch), -EBADF);
}

/* Many writes and reads of awkward sizes through a 4 KiB ring. */
static void test_wrap_around(void **state)
{
    static uint8_t src[1 << 16], dst[1 << 16];
    t_pair_t p;
    size_t sent = 0, got = 0;

    (void)state;
    t_fill(src, sizeof(src), 3);
    t_pair_open(&p, 4096);
    for (int round = 0; got < sizeof(src) && round < 100000; round++) {
        size_t w = 1 + (size_t)(round * 37 % 1500), r = 1 + (size_t)(round * 53 % 1900);

        if (w > sizeof(src) - sent)
            w = sizeof(src) - sent;
        sent += t_write(&p.a, AB, src + sent, w, NULL);
        if (r > sizeof(dst) - got)
            r = sizeof(dst) - got;
        got += t_read(&p.b, AB, dst + got, r, 0, NULL);
    }
    assert_int_equal(got, sizeof(src));
    assert_memory_equal(src, dst, sizeof(src));
    assert_true(p.a.hdr->ctl[AB].head > 10 * 4096);
    assert_int_equal(local_ring_readable(&p.b, AB), 0);
    t_pair_close(&p);
}

/* A gather write and a scatter read that both straddle the end of the ring. */
static void test_iov_across_wrap(void **state)
{
    uint8_t src[3000], dst[3000], pad[4096];
    struct iovec w[4], r[5];
    t_pair_t p;
    size_t done;
    int rc;

    (void)state;
    t_fill(src, sizeof(src), 9);
    t_pair_open(&p, 4096);
    /* move head and tail to 4096 - 24 */
    assert_int_equal(t_write(&p.a, AB, pad, 4096 - 32, NULL), 4096 - 32);
    assert_int_equal(t_read(&p.b, AB, pad, sizeof(pad), 0, NULL), 4096 - 32);
    assert_int_equal(p.b.hdr->ctl[AB].tail, 4096 - 24);
    w[0] = (struct iovec){ src, 5 };
    w[1] = (struct iovec){ NULL, 0 };
    w[2] = (struct iovec){ src + 5, 40 };
    w[3] = (struct iovec){ src + 45, 1955 };
    rc = local_ring_write(&p.a, AB, w, 4, &done);
    assert_true(rc >= 0);
    assert_int_equal(done, 2000);
    r[0] = (struct iovec){ dst, 3 };
    r[1] = (struct iovec){ dst + 3, 20 };
    r[2] = (struct iovec){ dst + 23, 0 };
    r[3] = (struct iovec){ dst + 23, 1000 };
    r[4] = (struct iovec){ dst + 1023, 2000 };
    rc = local_ring_read(&p.b, AB, r, 5, 0, &done);
    assert_true(rc >= 0);
    assert_int_equal(done, 2000);
    assert_memory_equal(src, dst, 2000);
    /* zero iovecs and bad arguments */
    assert_int_equal(local_ring_write(&p.a, AB, NULL, 0, &done), 0);
    assert_int_equal(done, 0);
    assert_int_equal(local_ring_write(&p.a, AB, NULL, 1, &done), -EINVAL);
    assert_int_equal(local_ring_read(&p.b, AB, r, -1, 0, &done), -EINVAL);
    assert_int_equal(local_ring_write(&p.a, 2, w, 1, &done), -EINVAL);
    t_pair_close(&p);
}

static void test_peek(void **state)
{
    uint8_t src[300], dst[300], pk[300];
    t_pair_t p;

    (void)state;
    t_fill(src, sizeof(src), 5);
    t_pair_open(&p, 4096);
    t_write(&p.a, AB, src, 100, NULL);
    t_write(&p.a, AB, src + 100, 200, NULL);       /* two records */
    assert_int_equal(t_read(&p.b, AB, pk, 50, LOCAL_RING_PEEK, NULL), 50);
    assert_memory_equal(pk, src, 50);
    assert_int_equal(local_ring_readable(&p.b, AB), 300);
    assert_int_equal(t_read(&p.b, AB, dst, 30, 0, NULL), 30);   /* inside record 1 */
    assert_int_equal(local_ring_readable(&p.b, AB), 270);
    /* a peek from inside a record, across into the next one */
    assert_int_equal(t_read(&p.b, AB, pk, 300, LOCAL_RING_PEEK, NULL), 270);
    assert_memory_equal(pk, src + 30, 270);
    assert_int_equal(t_read(&p.b, AB, pk, 100, LOCAL_RING_PEEK, NULL), 100);
    assert_memory_equal(pk, src + 30, 100);
    assert_int_equal(t_read(&p.b, AB, dst + 30, 300, 0, NULL), 270);
    assert_memory_equal(dst, src, 300);
    assert_int_equal(t_read(&p.b, AB, pk, 10, LOCAL_RING_PEEK, NULL), 0);
    t_pair_close(&p);
}

static void test_full_partial(void **state)
{
    static uint8_t src[3 << 20], dst[3 << 20];
    t_pair_t p;
    int flags;

    (void)state;
    t_fill(src, sizeof(src), 11);
    t_pair_open(&p, 4096);
    assert_int_equal(local_ring_writable(&p.a, AB), 4096 - 8);
    assert_int_equal(t_write(&p.a, AB, src, 10000, NULL), 4096 - 8);
    assert_int_equal(local_ring_writable(&p.a, AB), 0);
    assert_int_equal(t_write(&p.a, AB, src, 10, NULL), 0);
    assert_int_equal(p.a.stats.full, 1);
    /* free 100 bytes mid-record: 96 of them usable, one header */
    assert_int_equal(t_read(&p.b, AB, dst, 100, 0, NULL), 100);
    assert_int_equal(t_write(&p.a, AB, src + 4088, 1000, NULL), 96);
    assert_int_equal(t_read(&p.b, AB, dst + 100, 10000, 0, NULL), 4088 - 100 + 96);
    assert_memory_equal(src, dst, 4088 + 96);
    t_pair_close(&p);
    /* a big write is cut into LOCAL_RING_CHUNK records, read back in one go */
    t_pair_open(&p, 4u << 20);
    assert_int_equal(t_write(&p.a, AB, src, sizeof(src), &flags), sizeof(src));
    assert_int_equal(p.a.stats.records_in, (sizeof(src) + LOCAL_RING_CHUNK - 1) / LOCAL_RING_CHUNK);
    assert_int_equal(local_ring_readable(&p.b, AB), sizeof(src));
    assert_true(local_ring_writable(&p.a, AB) > (1 << 20) - 1024);
    assert_int_equal(t_read(&p.b, AB, dst, sizeof(dst), 0, NULL), sizeof(src));
    assert_memory_equal(src, dst, sizeof(src));
    t_pair_close(&p);
}

static void test_eof(void **state)
{
    static uint8_t buf[8192];
    t_pair_t p;
    int ret;

    (void)state;
    t_pair_open(&p, 4096);
    t_write(&p.a, AB, "hello", 5, NULL);
    assert_true(local_ring_eof_write(&p.a, AB) >= 0);
    assert_int_equal(t_read(&p.b, AB, buf, 3, 0, &ret), 3);
    assert_int_equal(ret & LOCAL_RING_F_EOF, 0);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, &ret), 2);
    assert_true(ret & LOCAL_RING_F_EOF);
    for (int i = 0; i < 2; i++) {   /* EOF is sticky */
        assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, &ret), 0);
        assert_true(ret & LOCAL_RING_F_EOF);
    }
    assert_int_equal(local_ring_readable(&p.b, AB), 0);
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 0);   /* EOF: do not sleep */
    /* no room for an EOF record */
    t_write(&p.a, BA, buf, 5000, NULL);
    assert_int_equal(local_ring_eof_write(&p.a, BA), -EAGAIN);
    t_pair_close(&p);
}

static void test_pages(void **state)
{
    local_ring_page_t pg[2] = { { 0x200000, 3, 1, 21 }, { 0x5000, 2, 0, 12 } }, bad;
    local_ring_frame_t f;
    uint8_t buf[64];
    t_pair_t p;
    int ret;

    (void)state;
    t_pair_open(&p, 4096);
    t_write(&p.a, AB, "abc", 3, NULL);
    assert_true(local_ring_pages_write(&p.a, AB, pg, 2) >= 0);
    t_write(&p.a, AB, "de", 2, NULL);
    assert_int_equal(local_ring_readable(&p.b, AB), 3 + 3 * (2 << 20) + 2 * 4096 + 2);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, &ret), 3);
    assert_true(ret & LOCAL_RING_F_RECORD);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, &ret), 0);
    assert_true(ret & LOCAL_RING_F_RECORD);
    assert_int_equal(local_ring_frame_next(&p.b, AB, &f), 0);
    assert_int_equal(f.type, LOCAL_RING_REC_PAGES);
    assert_int_equal(f.npages, 2);
    assert_memory_equal(f.pages, pg, sizeof(pg));
    assert_int_equal(f.bytes, 3 * (2 << 20) + 2 * 4096);
    f.pos += 8;
    assert_int_equal(local_ring_frame_consume(&p.b, AB, &f), -EINVAL);
    f.pos -= 8;
    assert_true(local_ring_frame_consume(&p.b, AB, &f) >= 0);
    assert_int_equal(local_ring_readable(&p.b, AB), 2);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), 2);
    assert_int_equal(local_ring_frame_next(&p.b, AB, &f), -EAGAIN);
    /* descriptors the writer refuses */
    bad = pg[0];
    bad.shift = 13;
    assert_int_equal(local_ring_pages_write(&p.a, AB, &bad, 1), -EINVAL);
    bad = pg[1];
    bad.offset = 0x5001;
    assert_int_equal(local_ring_pages_write(&p.a, AB, &bad, 1), -EINVAL);
    bad.offset = 0;
    bad.npages = 0;
    assert_int_equal(local_ring_pages_write(&p.a, AB, &bad, 1), -EINVAL);
    assert_int_equal(local_ring_pages_write(&p.a, AB, pg, LOCAL_RING_PAGES_MAX + 1), -EINVAL);
    t_pair_close(&p);
}

/* A fake pages_read: the record's stream byte at offset o is (o * 7 + pos) & 0xff;
 * counts the calls that consumed. */
static int t_pr_consumed, t_pr_fail;
static ssize_t t_pages_read(void *ctx, int dir, const local_ring_frame_t *f, uint64_t off,
                            const struct iovec *dst, int dstcnt, int consume)
{
    ssize_t n = 0;

    (void)ctx;
    (void)dir;
    if (t_pr_fail)
        return -EIO;
    for (int i = 0; i < dstcnt; i++)
        for (size_t j = 0; j < dst[i].iov_len; j++, n++)
            ((uint8_t *)dst[i].iov_base)[j] = (uint8_t)((off + (uint64_t)n) * 7 + f->pos);
    assert_true(off + (uint64_t)n <= f->bytes);
    if (consume) {
        assert_int_equal(off + (uint64_t)n, f->bytes);
        t_pr_consumed++;
    }
    return n;
}

/* With pages_read, PAGES bytes read like BYTES: across records, in part
 * (the consumer line keeps the rest), peeked, and a failure consumes nothing. */
static void test_pages_read(void **state)
{
    local_ring_page_t pg = { 0, 1, 0, 21 };
    local_ring_frame_t f;
    uint64_t rpos;
    uint8_t *buf = malloc(3 << 20);
    size_t U = 2 << 20, got = 0;
    t_pair_t p;
    int ret;

    (void)state;
    t_pair_open(&p, 4096);
    p.b.pages_read = t_pages_read;
    t_pr_consumed = t_pr_fail = 0;
    assert_int_equal(local_ring_bytes_run(&p.b, AB, UINT64_MAX), 0);
    t_write(&p.a, AB, "abc", 3, NULL);
    assert_int_equal(local_ring_bytes_run(&p.b, AB, UINT64_MAX), 3);
    assert_int_equal(local_ring_frame_next(&p.b, AB, &f), 0);
    rpos = f.next;                              /* where the PAGES record will be */
    assert_true(local_ring_pages_write(&p.a, AB, &pg, 1) >= 0);
    t_write(&p.a, AB, "de", 2, NULL);
    assert_int_equal(local_ring_bytes_run(&p.b, AB, UINT64_MAX), 3);      /* up to the PAGES record */
    /* 3 bytes and 10 of the unit */
    assert_int_equal(t_read(&p.b, AB, buf, 13, 0, &ret), 13);
    assert_false(ret & LOCAL_RING_F_RECORD);
    assert_memory_equal(buf, "abc", 3);
    for (int i = 0; i < 10; i++)
        assert_int_equal(buf[3 + i], (uint8_t)(i * 7 + rpos));
    assert_int_equal(t_pr_consumed, 0);
    assert_int_equal(local_ring_readable(&p.b, AB), U - 10 + 2);
    /* the rest, seen by frame_next */
    assert_int_equal(local_ring_frame_next(&p.b, AB, &f), 0);
    assert_int_equal(f.type, LOCAL_RING_REC_PAGES);
    assert_int_equal(f.skip, 10);
    assert_int_equal(f.bytes, U - 10);
    /* a failing resolver: nothing consumed */
    t_pr_fail = 1;
    assert_int_equal(local_ring_read(&p.b, AB, &(struct iovec){ buf, 100 }, 1, 0, &got), -EIO);
    assert_int_equal(local_ring_readable(&p.b, AB), U - 10 + 2);
    t_pr_fail = 0;
    /* peek 5, then everything */
    assert_int_equal(t_read(&p.b, AB, buf, 5, LOCAL_RING_PEEK, NULL), 5);
    assert_int_equal(buf[0], (uint8_t)(10 * 7 + rpos));
    assert_int_equal(t_read(&p.b, AB, buf, 3 << 20, 0, &ret), U - 10 + 2);
    assert_int_equal(buf[0], (uint8_t)(10 * 7 + rpos));
    assert_int_equal(buf[U - 11], (uint8_t)((U - 1) * 7 + rpos));
    assert_memory_equal(buf + U - 10, "de", 2);
    /* a run of several BYTES records, read in part */
    t_write(&p.a, AB, "fgh", 3, NULL);
    t_write(&p.a, AB, "ijklm", 5, NULL);
    assert_int_equal(local_ring_bytes_run(&p.b, AB, UINT64_MAX), 8);
    assert_int_equal(local_ring_bytes_run(&p.b, AB, 2), 3);    /* stops at the record past 2 */
    assert_int_equal(t_read(&p.b, AB, buf, 2, 0, NULL), 2);
    assert_int_equal(local_ring_bytes_run(&p.b, AB, UINT64_MAX), 6);
    assert_int_equal(t_read(&p.b, AB, buf, 6, 0, NULL), 6);
    assert_int_equal(local_ring_bytes_run(&p.b, AB, UINT64_MAX), 0);
    assert_int_equal(t_pr_consumed, 1);
    assert_int_equal(local_ring_readable(&p.b, AB), 0);
    t_pair_close(&p);
    free(buf);
}

/* A MARK record (hand-back) stops reads like PAGES, carries no stream
 * bytes, and quiet mode claims no announcement while local_ring_claim does. */
static void test_mark_quiet(void **state)
{
    local_ring_frame_t f;
    uint8_t buf[64];
    t_pair_t p;
    int ret;

    (void)state;
    t_pair_open(&p, 4096);
    t_write(&p.a, AB, "abc", 3, NULL);
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 0);     /* data: no sleep */
    assert_int_equal(t_read(&p.b, AB, buf, 2, 0, NULL), 2);
    assert_int_equal(local_ring_mark_write(&p.a, AB, 99), -EINVAL);
    p.a.quiet = 1;
    assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, BA, LOCAL_RING_WAIT_FUTEX), 1);
    ret = local_ring_mark_write(&p.a, AB, LOCAL_RING_MARK_REVERT);
    assert_int_equal(ret, 0);           /* nobody waits on AB; quiet anyway */
    assert_int_equal(local_ring_readable(&p.b, AB), 1);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, &ret), 1);
    assert_true(ret & LOCAL_RING_F_RECORD);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), LOCAL_RING_PEEK, &ret), 0);
    assert_true(ret & LOCAL_RING_F_RECORD);
    assert_int_equal(local_ring_frame_next(&p.b, AB, &f), 0);
    assert_int_equal(f.type, LOCAL_RING_REC_MARK);
    assert_int_equal(f.mark, LOCAL_RING_MARK_REVERT);
    assert_int_equal(f.bytes, 0);
    assert_true(local_ring_frame_consume(&p.b, AB, &f) >= 0);
    assert_int_equal(local_ring_frame_next(&p.b, AB, &f), -EAGAIN);
    /* quiet: a write the sleeping consumer would have been woken by claims nothing */
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);
    t_write(&p.a, AB, "x", 1, &ret);
    assert_false(ret & (LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX));
    /* ... until claimed explicitly: once */
    assert_int_equal(local_ring_claim(&p.a, AB, LOCAL_RING_ROLE_CONS), LOCAL_RING_F_DOORBELL);
    assert_int_equal(local_ring_claim(&p.a, AB, LOCAL_RING_ROLE_CONS), 0);
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, AB), 1);      /* the doorbell is owed */
    assert_int_equal(local_ring_claim(&p.a, BA, LOCAL_RING_ROLE_CONS), LOCAL_RING_F_FUTEX);
    t_pair_close(&p);
}

static void test_frame_next_mid_record(void **state)
{
    local_ring_frame_t f;
    uint8_t buf[64];
    t_pair_t p;

    (void)state;
    t_pair_open(&p, 4096);
    t_write(&p.a, AB, "0123456789", 10, NULL);
    assert_int_equal(t_read(&p.b, AB, buf, 4, 0, NULL), 4);
    assert_int_equal(local_ring_frame_next(&p.b, AB, &f), 0);
    assert_int_equal(f.type, LOCAL_RING_REC_BYTES);
    assert_int_equal(f.len, 6);
    assert_true(local_ring_frame_consume(&p.b, AB, &f) >= 0);     /* discard */
    assert_int_equal(local_ring_readable(&p.b, AB), 0);
    assert_int_equal(local_ring_frame_next(&p.b, AB, &f), -EAGAIN);
    t_pair_close(&p);
}

static void test_wait_protocol(void **state)
{
    uint8_t buf[4096];
    t_pair_t p;
    int flags;

    (void)state;
    t_pair_open(&p, 4096);
    /* consumer sleeps, producer's publish claims the announcement */
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);
    assert_int_equal(p.b.stats.waits, 1);
    t_write(&p.a, AB, "x", 1, &flags);
    assert_true(flags & LOCAL_RING_F_DOORBELL);
    t_write(&p.a, AB, "y", 1, &flags);
    assert_false(flags & LOCAL_RING_F_DOORBELL);      /* one doorbell per sleep */
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, AB), 1);
    /* data present: prepare refuses to sleep and withdraws */
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 0);
    t_write(&p.a, AB, "z", 1, &flags);
    assert_false(flags & LOCAL_RING_F_DOORBELL);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, &flags), 3);
    assert_false(flags & LOCAL_RING_F_DOORBELL);
    /* woken by something else: cancel withdraws, no doorbell owed */
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, AB), 0);
    t_write(&p.a, AB, "w", 1, &flags);
    assert_false(flags & LOCAL_RING_F_DOORBELL);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), 1);
    /* producer: fill, sleep for 1000 bytes, woken only once they are free */
    assert_int_equal(t_write(&p.a, AB, buf, sizeof(buf), NULL), 4088);
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 1000), 1);
    assert_int_equal(t_read(&p.b, AB, buf, 500, 0, &flags), 500);
    assert_false(flags & LOCAL_RING_F_DOORBELL);
    assert_int_equal(t_read(&p.b, AB, buf, 600, 0, &flags), 600);
    assert_true(flags & LOCAL_RING_F_DOORBELL);
    assert_int_equal(p.b.stats.doorbells_space, 1);
    assert_int_equal(local_ring_tx_wait_cancel(&p.a, AB), 1);
    /* room already there: do not sleep */
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 100), 0);
    /* want is capped at half the ring: an empty ring always satisfies it */
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), 4088 - 1100);
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 1 << 30), 0);
    t_pair_close(&p);
}

/* The eventfd kind: announced into an empty word, claimed as
 * LOCAL_RING_F_EVENTFD and never counted as a doorbell byte owed; it never
 * replaces a socket or futex announcement standing in the word (a waiter
 * that does not listen to the eventfd may be behind it); claim_kind takes
 * only the kind it names. */
static void test_wait_eventfd(void **state)
{
    uint8_t buf[64];
    uint64_t b0;
    t_pair_t p;
    int flags;

    (void)state;
    t_pair_open(&p, 4096);
    /* take over the S3 flag (rule R2; the creator's word is not set here,
     * so it counts as claimed: the counts below are relative) */
    local_ring_rx_wait_cancel(&p.b, AB);
    b0 = p.b.bells_claimed;
    assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, AB, LOCAL_RING_WAIT_EVENTFD), 1);
    assert_int_equal(local_ring_rx_wait_kind(&p.b, AB), LOCAL_RING_WAIT_EVENTFD);
    t_write(&p.a, AB, "x", 1, &flags);
    assert_true(flags & LOCAL_RING_F_EVENTFD);
    assert_false(flags & (LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX));
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, AB), 1);
    assert_int_equal(p.b.bells_claimed, b0);       /* no byte in the stream */
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), 1);
    /* a socket announcement stands: the eventfd kind leaves it */
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);
    assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, AB, LOCAL_RING_WAIT_EVENTFD), 1);
    assert_int_equal(local_ring_rx_wait_kind(&p.b, AB), LOCAL_RING_WAIT_SOCKET);
    assert_int_equal(local_ring_claim_kind(&p.a, AB, LOCAL_RING_ROLE_CONS,
                                           LOCAL_RING_WAIT_EVENTFD), 0);
    t_write(&p.a, AB, "y", 1, &flags);
    assert_true(flags & LOCAL_RING_F_DOORBELL);
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, AB), 1);
    assert_int_equal(p.b.bells_claimed, b0 + 1);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), 1);
    /* a futex one too */
    assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, AB, LOCAL_RING_WAIT_FUTEX), 1);
    assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, AB, LOCAL_RING_WAIT_EVENTFD), 1);
    assert_int_equal(local_ring_rx_wait_kind(&p.b, AB), LOCAL_RING_WAIT_FUTEX);
    assert_int_equal(local_ring_claim(&p.a, AB, LOCAL_RING_ROLE_CONS), LOCAL_RING_F_FUTEX);
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, AB), 1);
    /* claim_kind takes an eventfd announcement (a producer retiring) */
    assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, AB, LOCAL_RING_WAIT_EVENTFD), 1);
    assert_int_equal(local_ring_claim_kind(&p.a, AB, LOCAL_RING_ROLE_CONS,
                                           LOCAL_RING_WAIT_SOCKET), 0);
    assert_int_equal(local_ring_claim_kind(&p.a, AB, LOCAL_RING_ROLE_CONS,
                                           LOCAL_RING_WAIT_EVENTFD), 1);
    t_write(&p.a, AB, "z", 1, &flags);
    assert_false(flags & (LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX | LOCAL_RING_F_EVENTFD));
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, AB), 1);
    assert_int_equal(p.b.bells_claimed, b0 + 1);
    t_pair_close(&p);
}

/* Space waits of two kinds on one producer word (a thread blocked in a
 * send beside a poll/epoll waiter for POLLOUT): both stand (BOTH), one
 * claim wakes both (a doorbell byte and a futex wake), and the sleeper's
 * withdrawal leaves the socket waiter's announcement standing. */
static void test_wait_both(void **state)
{
    uint8_t big[4096], buf[4096];
    uint32_t *w;
    uint64_t b0;
    t_pair_t p;
    int flags;

    (void)state;
    t_pair_open(&p, 4096);
    w = local_ring_wait_word(&p.a, AB, LOCAL_RING_ROLE_PROD);
    t_fill(big, sizeof(big), 5);
    while (t_write(&p.a, AB, big, sizeof(big), NULL))
        ;
    b0 = p.a.bells_claimed;
    /* the sleeper first (joining: nobody else stands yet), then the poller */
    assert_int_equal(local_ring_tx_wait_prepare_kind(&p.a, AB, 100,
                                                     LOCAL_RING_WAIT_FUTEX_JOIN), 1);
    assert_int_equal(*w, LOCAL_RING_WAIT_FUTEX);
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 100), 1);
    assert_int_equal(*w, LOCAL_RING_WAIT_BOTH);
    assert_int_equal(local_ring_tx_wait_kind(&p.a, AB), LOCAL_RING_WAIT_BOTH);
    /* the sleeper wakes for another reason and withdraws its part only */
    assert_int_equal(local_ring_tx_wait_cancel_futex(&p.a, AB), 0);
    assert_int_equal(*w, LOCAL_RING_WAIT_SOCKET);
    assert_int_equal(local_ring_tx_wait_kind(&p.a, AB), LOCAL_RING_WAIT_SOCKET);
    assert_true(t_read(&p.b, AB, buf, sizeof(buf), 0, &flags) > 0);
    assert_int_equal(flags & (LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX), LOCAL_RING_F_DOORBELL);
    assert_int_equal(local_ring_tx_wait_cancel(&p.a, AB), 1);
    assert_int_equal(p.a.bells_claimed, b0 + 1);
    /* the poller first, then the sleeper: one claim wakes both */
    while (t_write(&p.a, AB, big, sizeof(big), NULL))
        ;
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 100), 1);
    assert_int_equal(local_ring_tx_wait_prepare_kind(&p.a, AB, 100,
                                                     LOCAL_RING_WAIT_FUTEX_JOIN), 1);
    assert_int_equal(*w, LOCAL_RING_WAIT_BOTH);
    assert_true(t_read(&p.b, AB, buf, sizeof(buf), 0, &flags) > 0);
    assert_int_equal(flags & (LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX),
                     LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX);
    assert_int_equal(*w, 0);
    assert_int_equal(local_ring_tx_wait_cancel_futex(&p.a, AB), 1);
    assert_int_equal(p.a.bells_claimed, b0 + 2);      /* its byte is counted once */
    assert_int_equal(local_ring_tx_wait_cancel(&p.a, AB), 0);
    assert_int_equal(p.a.bells_claimed, b0 + 2);
    /* the sleeper's part claimed, then a poller re-armed before the sleeper
     * woke: the sleeper's withdrawal leaves the poller's announcement */
    while (t_write(&p.a, AB, big, sizeof(big), NULL))
        ;
    assert_int_equal(local_ring_tx_wait_prepare_kind(&p.a, AB, 100,
                                                     LOCAL_RING_WAIT_FUTEX_JOIN), 1);
    assert_true(t_read(&p.b, AB, buf, sizeof(buf), 0, &flags) > 0);
    assert_true(flags & LOCAL_RING_F_FUTEX);
    while (t_write(&p.a, AB, big, sizeof(big), NULL))
        ;
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 100), 1);
    assert_int_equal(*w, LOCAL_RING_WAIT_SOCKET);
    local_ring_tx_wait_cancel_futex(&p.a, AB);
    assert_int_equal(*w, LOCAL_RING_WAIT_SOCKET);
    assert_int_equal(local_ring_tx_wait_cancel(&p.a, AB), 0);
    b0 = p.a.bells_claimed - 2;     /* below: the plain kind counts no byte */
    /* a sleeper alone (plain futex kind) replaces a stale socket one */
    while (t_write(&p.a, AB, big, sizeof(big), NULL))
        ;
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 100), 1);
    assert_int_equal(local_ring_tx_wait_prepare_kind(&p.a, AB, 100, LOCAL_RING_WAIT_FUTEX), 1);
    assert_int_equal(*w, LOCAL_RING_WAIT_FUTEX);
    assert_int_equal(local_ring_tx_wait_cancel_futex(&p.a, AB), 0);
    assert_int_equal(*w, 0);
    assert_int_equal(p.a.bells_claimed, b0 + 2);
    /* a waiter that finds room at once withdraws its part only: a poller
     * that stood before it (looked, found none, sleeps) keeps its
     * announcement for the consumer that made the room and looks only now */
    local_ring_tx_wait_cancel(&p.a, AB);
    p.a.others = 1;         /* the poller is another thread of this process */
    while (t_write(&p.a, AB, big, 64, NULL))
        ;
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 2048), 1);
    assert_true(t_read(&p.b, AB, buf, 64, 0, &flags) > 0);
    assert_int_equal(flags & (LOCAL_RING_F_DOORBELL | LOCAL_RING_F_FUTEX), 0);
    assert_int_equal(*w, LOCAL_RING_WAIT_SOCKET);
    assert_int_equal(local_ring_tx_wait_prepare_kind(&p.a, AB, 16,
                                                     LOCAL_RING_WAIT_FUTEX_JOIN), 0);
    assert_int_equal(*w, LOCAL_RING_WAIT_SOCKET);
    assert_int_equal(local_ring_tx_wait_kind(&p.a, AB), LOCAL_RING_WAIT_SOCKET);
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 16), 0);  /* a second poller */
    assert_int_equal(*w, LOCAL_RING_WAIT_SOCKET);
    assert_true(t_read(&p.b, AB, buf, sizeof(buf), 0, &flags) > 0);
    assert_int_equal(flags & LOCAL_RING_F_DOORBELL, LOCAL_RING_F_DOORBELL);  /* found */
    assert_int_equal(local_ring_tx_wait_cancel(&p.a, AB), 1);
    /* with no other waiter possible, a standing announcement of ours is our
     * own stale one: withdrawn with ours (no doorbell for nobody later) */
    p.a.others = 0;
    while (t_write(&p.a, AB, big, 64, NULL))
        ;
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 2048), 1);
    assert_true(t_read(&p.b, AB, buf, 64, 0, &flags) > 0);
    assert_int_equal(local_ring_tx_wait_prepare(&p.a, AB, 16), 0);
    assert_int_equal(*w, 0);
    assert_true(t_read(&p.b, AB, buf, sizeof(buf), 0, &flags) > 0);
    /* receive side, the same: a poller of another thread stands, the
     * producer publishes without looking yet (quiet), a receive finds the
     * data at once: the poller's announcement stays for the producer */
    {
        uint32_t *rw = local_ring_wait_word(&p.b, AB, LOCAL_RING_ROLE_CONS);

        while (t_read(&p.b, AB, buf, sizeof(buf), 0, &flags) > 0)
            ;
        p.b.others = 1;
        assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);
        assert_int_equal(*rw, LOCAL_RING_WAIT_SOCKET);
        p.a.quiet = 1;
        assert_int_equal(t_write(&p.a, AB, big, 64, NULL), 64);
        p.a.quiet = 0;
        assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, AB, LOCAL_RING_WAIT_EVENTFD), 0);
        assert_int_equal(*rw, LOCAL_RING_WAIT_SOCKET);
        assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, AB, LOCAL_RING_WAIT_FUTEX), 0);
        assert_int_equal(*rw, LOCAL_RING_WAIT_SOCKET);
        assert_int_equal(t_write(&p.a, AB, big, 64, &flags), 64);
        assert_int_equal(flags & LOCAL_RING_F_DOORBELL, LOCAL_RING_F_DOORBELL);  /* found */
        p.b.others = 0;
        while (t_read(&p.b, AB, buf, sizeof(buf), 0, &flags) > 0)
            ;
        local_ring_rx_wait_cancel(&p.b, AB);
    }
    /* receive side: a futex sleeper's withdrawal leaves a socket kind that
     * replaced it */
    local_ring_rx_wait_cancel(&p.b, BA);
    assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, BA, LOCAL_RING_WAIT_FUTEX), 1);
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, BA), 1);
    assert_int_equal(local_ring_rx_wait_cancel_kind(&p.b, BA, LOCAL_RING_WAIT_FUTEX), 0);
    assert_int_equal(*local_ring_wait_word(&p.b, BA, LOCAL_RING_ROLE_CONS),
                     LOCAL_RING_WAIT_SOCKET);
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, BA), 0);
    t_pair_close(&p);
}

/* Request/response keeps to the hot window: once the head passes
 * LOCAL_RING_HOT with the ring empty, a small message goes back to the
 * ring's start behind a PAD record, which carries no stream bytes, is
 * taken even by a peek, and never shows alone; a large message, or one
 * written while the consumer is behind, walks on. */
static void test_hot_window(void **state)
{
    uint8_t msg[3000], buf[8192];
    local_ring_snap_t s;
    t_pair_t p;
    int flags;

    (void)state;
    t_pair_open(&p, 0);                 /* the default 4 MiB: a window applies */
    for (int i = 0; i < 200; i++) {     /* 200 x ~3 KiB: past 256 KiB once */
        t_fill(msg, sizeof(msg), (unsigned)i);
        p.a.hot = 1;                    /* request/response, as the caller says */
        assert_int_equal(t_write(&p.a, AB, msg, sizeof(msg), NULL), sizeof(msg));
        assert_int_equal(local_ring_readable(&p.b, AB), sizeof(msg));
        if (i == 150) {                 /* a peek first: same bytes, pad taken */
            assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), LOCAL_RING_PEEK, NULL),
                             sizeof(msg));
            assert_memory_equal(buf, msg, sizeof(msg));
            assert_int_equal(local_ring_readable(&p.b, AB), sizeof(msg));
        }
        assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, &flags), sizeof(msg));
        assert_memory_equal(buf, msg, sizeof(msg));
        assert_int_equal(local_ring_ctl_snap(&p.b, AB, LOCAL_RING_ROLE_CONS, &s), 0);
        assert_true(s.head == s.tail);
        assert_true((s.head & ((4u << 20) - 1)) <= LOCAL_RING_HOT + sizeof(msg) + 16);
    }
    assert_true(p.a.stats.pads >= 2);
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);      /* nothing left */
    local_ring_rx_wait_cancel(&p.b, AB);
    /* a message larger than LOCAL_RING_HOT_MSG walks on */
    {
        static uint8_t big[LOCAL_RING_HOT_MSG + 1];
        uint64_t pads = p.a.stats.pads, head;

        for (int i = 0; i < 40; i++) {
            assert_int_equal(local_ring_ctl_snap(&p.a, AB, LOCAL_RING_ROLE_PROD, &s), 0);
            head = s.head;
            p.a.hot = 1;
            assert_int_equal(t_write(&p.a, AB, big, sizeof(big), NULL), sizeof(big));
            assert_int_equal(t_read(&p.b, AB, big, sizeof(big), 0, NULL), sizeof(big));
            assert_int_equal(local_ring_ctl_snap(&p.a, AB, LOCAL_RING_ROLE_PROD, &s), 0);
            assert_true(s.head - head < 2 * sizeof(big));
        }
        assert_int_equal(p.a.stats.pads, pads);
    }
    /* the consumer behind (bytes unread): no pad, the stream is intact */
    for (int i = 0; i < 200; i++) {
        uint64_t pads;

        t_fill(msg, sizeof(msg), 1000u + (unsigned)i);
        p.a.hot = 1;
        assert_int_equal(t_write(&p.a, AB, msg, sizeof(msg), NULL), sizeof(msg));
        pads = p.a.stats.pads;
        assert_int_equal(t_write(&p.a, AB, msg, 1, NULL), 1);
        assert_int_equal(p.a.stats.pads, pads);
        assert_int_equal(t_read(&p.b, AB, buf, sizeof(msg), 0, NULL), sizeof(msg));
        assert_memory_equal(buf, msg, sizeof(msg));
        assert_int_equal(t_read(&p.b, AB, buf, 1, 0, NULL), 1);
        assert_int_equal(buf[0], msg[0]);
    }
    /* a stream (no hint): the ring is walked, never padded */
    {
        uint64_t pads = p.a.stats.pads;

        p.a.hot = 0;
        for (int i = 0; i < 300; i++) {
            assert_int_equal(t_write(&p.a, AB, msg, sizeof(msg), NULL), sizeof(msg));
            assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), sizeof(msg));
        }
        assert_int_equal(p.a.stats.pads, pads);
    }
    t_pair_close(&p);
}

/* A claimed announcement is counted even when we announce again before
 * withdrawing it: its doorbell byte is on its way, and a hand-back that
 * did not count it would take that byte for data. */
static void test_wait_reannounce(void **state)
{
    uint64_t b0;
    uint8_t b;
    t_pair_t p;
    int flags;

    (void)state;
    t_pair_open(&p, 4096);
    local_ring_rx_wait_cancel(&p.b, AB);    /* take over the S3 flag (rule R2) */
    b0 = p.b.bells_claimed;
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);
    t_write(&p.a, AB, "x", 1, &flags);
    assert_true(flags & LOCAL_RING_F_DOORBELL);     /* claimed: one byte sent */
    assert_int_equal(t_read(&p.b, AB, &b, 1, 0, NULL), 1);
    /* announce again without withdrawing first (an EAGAIN's arm, then a
     * poll's): the first claim is counted, the second announcement stands */
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);
    assert_int_equal(p.b.bells_claimed, b0 + 1);
    assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, AB, LOCAL_RING_WAIT_EVENTFD), 1);
    assert_int_equal(p.b.bells_claimed, b0 + 1);
    assert_int_equal(local_ring_rx_wait_kind(&p.b, AB), LOCAL_RING_WAIT_SOCKET);
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, AB), 0);
    assert_int_equal(p.b.bells_claimed, b0 + 1);
    /* the same for an eventfd announcement claimed meanwhile: nothing owed */
    assert_int_equal(local_ring_rx_wait_prepare_kind(&p.b, AB, LOCAL_RING_WAIT_EVENTFD), 1);
    t_write(&p.a, AB, "y", 1, &flags);
    assert_true(flags & LOCAL_RING_F_EVENTFD);
    assert_int_equal(t_read(&p.b, AB, &b, 1, 0, NULL), 1);
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);
    assert_int_equal(p.b.bells_claimed, b0 + 1);
    t_write(&p.a, AB, "z", 1, &flags);
    assert_true(flags & LOCAL_RING_F_DOORBELL);
    assert_int_equal(local_ring_rx_wait_cancel(&p.b, AB), 1);
    assert_int_equal(p.b.bells_claimed, b0 + 2);
    t_pair_close(&p);
}

/* The producer's publish is two stores (bytes_head, then head): a consumer
 * that looks in between must see a valid state, not a violation, and an empty
 * ring must read as empty.  (With the opposite order a consumer that had
 * consumed up to the new head could see bytes_head below bytes_tail: found by
 * bench_ring as a spurious -EPROTO.) */
static void test_publish_window(void **state)
{
    uint8_t buf[256];
    local_ring_ctl_t *c;
    uint64_t h1, h2;
    t_pair_t p;

    (void)state;
    t_pair_open(&p, 4096);
    c = &p.a.hdr->ctl[AB];
    t_write(&p.a, AB, buf, 100, NULL);
    h1 = c->head;
    t_write(&p.a, AB, buf, 50, NULL);
    h2 = c->head;
    c->head = h1;                   /* second record: bytes_head stored, head not yet */
    assert_int_equal(local_ring_readable(&p.b, AB), 150);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), 100);
    assert_int_equal(local_ring_readable(&p.b, AB), 0);
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), 1);
    local_ring_rx_wait_cancel(&p.b, AB);
    c->head = h2;                   /* published */
    assert_int_equal(local_ring_readable(&p.b, AB), 50);
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), 50);
    assert_false(p.b.broken);
    t_pair_close(&p);
}

/* local_ring_rx_idle: 1 only while the direction holds no record at all
 * (data or end), 0 for a broken or absent channel. */
static void test_rx_idle(void **state)
{
    uint8_t buf[64] = { 1 };
    t_pair_t p;
    local_ring_t none = { 0 };

    (void)state;
    t_pair_open(&p, 4096);
    assert_int_equal(local_ring_rx_idle(&p.b, AB), 1);
    assert_int_equal(local_ring_rx_idle(&p.a, BA), 1);
    assert_int_equal(t_write(&p.a, AB, buf, 1, NULL), 1);
    assert_int_equal(local_ring_rx_idle(&p.b, AB), 0);
    assert_int_equal(local_ring_rx_idle(&p.a, BA), 1);     /* the other way stays idle */
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), LOCAL_RING_PEEK, NULL), 1);
    assert_int_equal(local_ring_rx_idle(&p.b, AB), 0);      /* a peek leaves it */
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), 1);
    assert_int_equal(local_ring_rx_idle(&p.b, AB), 1);
    assert_int_equal(local_ring_eof_write(&p.a, AB), 0);
    assert_int_equal(local_ring_rx_idle(&p.b, AB), 0);      /* an end is a record */
    assert_int_equal(local_ring_readable(&p.b, AB), 0);
    p.b.broken = 1;
    assert_int_equal(local_ring_rx_idle(&p.b, BA), 0);      /* broken: the full look says */
    assert_int_equal(local_ring_rx_idle(&none, AB), 0);
    t_pair_close(&p);
}

/* --- corrupted shared state: a fresh channel, one field spoiled --- */

typedef void t_spoil_func_t(t_pair_t *p);

static void t_corrupt_case(t_spoil_func_t *spoil)
{
    uint8_t buf[8192];
    local_ring_frame_t f;
    t_pair_t p;
    size_t done;
    struct iovec v = { buf, sizeof(buf) };

    t_pair_open(&p, 4096);
    t_write(&p.a, AB, buf, 100, NULL);
    t_write(&p.a, AB, buf, 200, NULL);
    spoil(&p);
    assert_int_equal(local_ring_read(&p.b, AB, &v, 1, 0, &done), -EPROTO);
    assert_true(p.b.broken);
    assert_int_equal(p.b.stats.proto_errors, 1);
    /* sticky: every later call refuses */
    assert_int_equal(local_ring_readable(&p.b, AB), -EPROTO);
    assert_int_equal(local_ring_frame_next(&p.b, AB, &f), -EPROTO);
    assert_int_equal(local_ring_rx_wait_prepare(&p.b, AB), -EPROTO);
    assert_int_equal(local_ring_write(&p.b, BA, &v, 1, &done), -EPROTO);
    t_pair_close(&p);
}

static void spoil_head_unaligned(t_pair_t *p) { p->a.hdr->ctl[AB].head += 3; }
static void spoil_head_far(t_pair_t *p) { p->a.hdr->ctl[AB].head += 8192; }
static void spoil_tail_ahead(t_pair_t *p) { p->a.hdr->ctl[AB].tail = p->a.hdr->ctl[AB].head + 8; }
static void spoil_tail_unaligned(t_pair_t *p) { p->a.hdr->ctl[AB].tail = 4; }
static void spoil_rec_left(t_pair_t *p) { p->a.hdr->ctl[AB].rec_left = 5000; }
static void spoil_bytes(t_pair_t *p) { p->a.hdr->ctl[AB].bytes_tail = 1000; }
static void spoil_type(t_pair_t *p) { p->a.ring[AB][0] = 9; }
static void spoil_flags(t_pair_t *p) { p->a.ring[AB][1] = 1; }
static void spoil_len_long(t_pair_t *p) { *(uint32_t *)(p->a.ring[AB] + 4) = 400; }
static void spoil_len_huge(t_pair_t *p) { *(uint32_t *)(p->a.ring[AB] + 4) = 0xffffffffu; }
static void spoil_len_zero(t_pair_t *p) { *(uint32_t *)(p->a.ring[AB] + 4) = 0; }
static void spoil_eof_len(t_pair_t *p)
{
    *(uint64_t *)p->a.ring[AB] = LOCAL_RING_REC_EOF | (8ULL << 32);
}
static void spoil_pages_bad(t_pair_t *p)
{
    /* a PAGES record whose descriptor has an unaligned offset */
    local_ring_page_t d = { 0x1001, 1, 0, 12 };

    *(uint64_t *)p->a.ring[AB] = LOCAL_RING_REC_PAGES | (16ULL << 32);
    memcpy(p->a.ring[AB] + 8, &d, sizeof(d));
}
static void spoil_pages_count(t_pair_t *p)
{
    *(uint64_t *)p->a.ring[AB] = LOCAL_RING_REC_PAGES | (24ULL << 32);
}
static void spoil_mark_kind(t_pair_t *p)
{
    *(uint64_t *)p->a.ring[AB] = LOCAL_RING_REC_MARK | (8ULL << 32);
    *(uint64_t *)(p->a.ring[AB] + 8) = 77;      /* no such kind */
}
static void spoil_mark_len(t_pair_t *p)
{
    *(uint64_t *)p->a.ring[AB] = LOCAL_RING_REC_MARK | (16ULL << 32);
    *(uint64_t *)(p->a.ring[AB] + 8) = LOCAL_RING_MARK_REVERT;
}

static void test_corrupt(void **state)
{
    t_spoil_func_t *cases[] = {
        spoil_head_unaligned, spoil_head_far, spoil_tail_ahead, spoil_tail_unaligned,
        spoil_rec_left, spoil_bytes, spoil_type, spoil_flags, spoil_len_long,
        spoil_len_huge, spoil_len_zero, spoil_eof_len, spoil_pages_bad, spoil_pages_count,
        spoil_mark_kind, spoil_mark_len,
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        t_corrupt_case(cases[i]);
}

/* The producer side validates too: a consumer that claims to be ahead. */
static void test_corrupt_producer(void **state)
{
    uint8_t buf[100] = { 0 };
    t_pair_t p;

    (void)state;
    t_pair_open(&p, 4096);
    p.b.hdr->ctl[AB].tail = 1ULL << 40;
    {
        uint8_t big[4000] = { 0 };
        struct iovec v = { buf, sizeof(buf) }, w = { big, sizeof(big) };
        size_t done;

        /* the tail seen (0) leaves room for 100 bytes: no look at the
         * consumer's line, none at its garbage (TAIL SEEN) */
        assert_int_equal(local_ring_write(&p.a, AB, &v, 1, &done), 0);
        assert_int_equal(done, sizeof(buf));
        assert_int_equal(local_ring_writable_min(&p.a, AB, 64), 4096 - 8 - 112);
        /* a write the seen room is short of looks, and finds it */
        assert_int_equal(local_ring_write(&p.a, AB, &w, 1, &done), -EPROTO);
        assert_int_equal(local_ring_writable(&p.a, AB), -EPROTO);
        assert_int_equal(local_ring_eof_write(&p.a, AB), -EPROTO);
    }
    t_pair_close(&p);
    t_pair_open(&p, 4096);
    p.b.hdr->ctl[AB].tail = 1ULL << 40;
    assert_int_equal(local_ring_writable(&p.a, AB), -EPROTO);   /* exact: looks at once */
    t_pair_close(&p);
    /* header sizes rewritten after attach are ignored: the local size rules */
    t_pair_open(&p, 4096);
    p.a.hdr->ring_size = 1ULL << 30;
    assert_int_equal(t_write(&p.a, AB, buf, sizeof(buf), NULL), sizeof(buf));
    assert_int_equal(t_read(&p.b, AB, buf, sizeof(buf), 0, NULL), sizeof(buf));
    assert_int_equal(p.b.ring_size, 4096);
    p.a.hdr->side_state[0] = 77;
    assert_int_equal(local_ring_peer_state(&p.b), -EPROTO);
    t_pair_close(&p);
}

/* TAIL SEEN: the producer's room comes from the tail it loaded last while
 * that room is enough, and from a fresh look when it is not: a write the
 * seen room is short of, but the real room holds, goes through whole. */
static void test_tail_seen(void **state)
{
    static uint8_t buf[3000], out[3000];
    t_pair_t p;
    int64_t seen;

    (void)state;
    t_pair_open(&p, 4096);
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 7 + 1);
    assert_int_equal(t_write(&p.a, AB, buf, 2000, NULL), 2000);
    assert_int_equal(t_read(&p.b, AB, out, 2000, 0, NULL), 2000);
    seen = local_ring_writable_min(&p.a, AB, 1);
    assert_true(seen < 4096 - 2000);                /* what the consumer read not counted */
    assert_int_equal(local_ring_writable_min(&p.a, AB, (uint64_t)seen + 1), 4096 - 8);
    seen = local_ring_writable_min(&p.a, AB, 1);    /* that look was remembered */
    assert_int_equal(seen, 4096 - 8);
    assert_int_equal(t_write(&p.a, AB, buf, 2000, NULL), 2000);
    assert_int_equal(t_read(&p.b, AB, out, 2000, 0, NULL), 2000);
    /* 3,000 bytes: more than the seen room (about 2,000), less than the real */
    assert_true(local_ring_writable_min(&p.a, AB, 1) < 3000);
    assert_int_equal(t_write(&p.a, AB, buf, 3000, NULL), 3000);
    assert_int_equal(t_read(&p.b, AB, out, 3000, 0, NULL), 3000);
    assert_memory_equal(out, buf, 3000);
    t_pair_close(&p);
}

/* view_init over plain memory (the fuzz target's entry) checks like attach. */
static void test_view_init(void **state)
{
    size_t total = LOCAL_RING_HDR_SIZE + 2 * 4096;
    uint8_t *mem = aligned_alloc(4096, total);
    local_ring_hdr_t *h = (local_ring_hdr_t *)mem;
    local_ring_t ch;

    (void)state;
    memset(mem, 0, total);
    assert_int_equal(local_ring_view_init(mem, total, 0, &ch), -EPROTO);
    h->magic = LOCAL_RING_MAGIC;
    h->version = LOCAL_RING_VERSION;
    h->hdr_size = LOCAL_RING_HDR_SIZE;
    h->ring_size = 4096;
    h->total_size = total;
    assert_int_equal(local_ring_view_init(mem, total, 0, &ch), 0);
    assert_int_equal(ch.owned, 0);
    assert_int_equal(local_ring_view_init(mem, total - 8, 0, &ch), -EPROTO);
    assert_int_equal(local_ring_view_init(mem, total, 2, &ch), -EINVAL);
    assert_int_equal(local_ring_view_init(NULL, total, 0, &ch), -EINVAL);
    local_ring_close(&ch, 0);       /* not owned: memory stays ours */
    free(mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_attach),
        cmocka_unit_test(test_attach_validation),
        cmocka_unit_test(test_wrap_around),
        cmocka_unit_test(test_iov_across_wrap),
        cmocka_unit_test(test_peek),
        cmocka_unit_test(test_pages_read),
        cmocka_unit_test(test_full_partial),
        cmocka_unit_test(test_eof),
        cmocka_unit_test(test_rx_idle),
        cmocka_unit_test(test_pages),
        cmocka_unit_test(test_frame_next_mid_record),
        cmocka_unit_test(test_mark_quiet),
        cmocka_unit_test(test_wait_protocol),
        cmocka_unit_test(test_wait_eventfd),
        cmocka_unit_test(test_wait_reannounce),
        cmocka_unit_test(test_wait_both),
        cmocka_unit_test(test_hot_window),
        cmocka_unit_test(test_publish_window),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_corrupt_producer),
        cmocka_unit_test(test_tail_seen),
        cmocka_unit_test(test_view_init),
        cmocka_unit_test(test_unit_file),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
