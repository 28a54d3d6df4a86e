/* Two processes stream through one local_ring channel: the child attaches by
 * the inherited memfd, doorbells travel over an AF_UNIX socketpair, each side
 * sleeps on it only after announcing it.  Mixed message sizes (1 B .. 1 MiB),
 * random iovec splits on both sides, random MSG_PEEK-style reads, ring sizes
 * that force wrap-around everywhere.  The receiver checks every byte against
 * the pattern stream and both ends compare a Fletcher-64 checksum; the stream
 * ends with an EOF record that must come exactly after the last byte.
 *
 * Volume (T = 1 GiB; QUICK=1 or a sanitizer build: 256 MiB): T/16 through a
 * 16 KiB ring, T/4 through 256 KiB (child sending), T/2 and T/4 through the
 * default ring (both ways), then T/2 of fixed 4 KiB messages and reads, then
 * 20000 (5000) 1-byte round trips with blocking doorbells only.
 * Exit 0 pass, 1 fail. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t_ring.h"

#define PAT_LEN ((1u << 20) + 13)       /* not a divisor of any ring size */
#define MSG_MAX (1u << 20)
#define RBUF    (2u << 20)

static uint8_t *pat;                    /* 2 * PAT_LEN: contiguous windows */
static size_t fixed;                    /* nonzero: every message and read this size */

typedef struct fl64 {
    uint64_t a, b;
} fl64_t;

static void fl64_add(fl64_t *f, const uint8_t *p, size_t n)
{
    uint64_t a = f->a, b = f->b;

    for (size_t i = 0; i < n; i++) {
        a += p[i];
        b += a;
    }
    f->a = a;
    f->b = b;
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
    uint64_t x = rnd_state;

    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rnd_state = x;
}

static size_t rnd_msg_len(void)
{
    if (fixed)
        return fixed;
    switch (rnd() % 8) {
    case 0: case 1: return 1 + rnd() % 64;
    case 2: case 3: return 64 + rnd() % 8192;
    case 4: case 5: return 4096 + rnd() % (256u << 10);
    case 6: return (64u << 10) * (1 + rnd() % 4);
    default: return 1 + rnd() % MSG_MAX;
    }
}

/* Split len bytes at stream offset off into 1..8 iovecs over the pattern. */
static int iov_split(struct iovec *v, uint8_t *base_of, uint64_t off, size_t len, int map_pat)
{
    int cnt = fixed ? 1 : 1 + (int)(rnd() % 8), n = 0;
    size_t done = 0;

    for (int i = 0; i < cnt && done < len; i++) {
        size_t k = i == cnt - 1 ? len - done : 1 + rnd() % (len - done);

        v[n].iov_base = map_pat ? pat + (off + done) % PAT_LEN : base_of + done;
        v[n].iov_len = k;
        n++;
        done += k;
    }
    if (done < len) {
        v[n - 1].iov_len += len - done;
    }
    /* an empty iovec now and then */
    if (n < 8 && !fixed && rnd() % 4 == 0) {
        memmove(v + 1, v, (size_t)n * sizeof(*v));
        v[0].iov_base = NULL;
        v[0].iov_len = 0;
        n++;
    }
    return n;
}

static int produce(t_ring_end_t *e, int dir, uint64_t total, fl64_t *sum)
{
    uint64_t off = 0;
    struct iovec v[9];
    long msgs = 0;

    while (off < total) {
        size_t len = rnd_msg_len();
        int n, rc;

        if (len > total - off)
            len = (size_t)(total - off);
        n = iov_split(v, NULL, off, len, 1);
        if (!fixed)     /* fixed mode: the consumer must keep up (memcmp only) */
            fl64_add(sum, pat + off % PAT_LEN, len);
        e->spin = fixed ? 200 : (msgs++ / 512) % 2 ? 100 : 0;
        rc = t_ring_sendv(e, dir, v, n);
        if (rc) {
            fprintf(stderr, "produce: send at %llu: %s\n", (unsigned long long)off,
                    strerror(-rc));
            return -1;
        }
        off += len;
    }
    for (int tries = 0; tries < 100000; tries++) {
        int rc = local_ring_eof_write(e->ch, dir);

        if (rc >= 0) {
            if ((rc & LOCAL_RING_F_DOORBELL) && t_ring_bell(e))
                return -1;
            return 0;
        }
        if (rc != -EAGAIN)
            return -1;
        usleep(100);
    }
    return -1;
}

static int consume(t_ring_end_t *e, int dir, uint64_t total, fl64_t *sum, uint8_t *buf)
{
    uint64_t off = 0;
    struct iovec v[9];
    long reads = 0;

    for (;;) {
        size_t want = fixed ? fixed : 1 + rnd() % (rnd() % 2 ? 256u << 10 : 4096);
        int n = iov_split(v, buf, 0, want, 0), peek = !fixed && rnd() % 16 == 0;
        ssize_t r;

        e->spin = fixed ? 200 : (reads++ / 300) % 2 ? 100 : 0;
        r = t_ring_recvv(e, dir, v, n, peek ? LOCAL_RING_PEEK : 0);
        if (r < 0) {
            fprintf(stderr, "consume: %s at %llu\n", strerror((int)-r), (unsigned long long)off);
            return -1;
        }
        if (r == 0)
            break;
        if (off + (uint64_t)r > total) {
            fprintf(stderr, "consume: %zd bytes past the end\n", r);
            return -1;
        }
        /* buf got r bytes, scattered over v[] which covers buf in order */
        if (memcmp(buf, pat + off % PAT_LEN, (size_t)r)) {
            fprintf(stderr, "consume: corrupt data at %llu (%zd bytes%s)\n",
                    (unsigned long long)off, r, peek ? ", peek" : "");
            return -1;
        }
        if (!peek) {
            if (!fixed)
                fl64_add(sum, buf, (size_t)r);
            off += (uint64_t)r;
        }
    }
    if (off != total) {
        fprintf(stderr, "consume: EOF after %llu of %llu bytes\n", (unsigned long long)off,
                (unsigned long long)total);
        return -1;
    }
    return 0;
}

static int stream_once(size_t ring_size, uint64_t total, int parent_sends)
{
    int sv[2], res[2], memfd, st, rc, dir = parent_sends ? LOCAL_RING_AB : LOCAL_RING_BA;
    local_ring_t ch;
    uint8_t *buf = malloc(RBUF);
    fl64_t mine = { 0, 0 }, theirs;
    t_ring_end_t e;
    pid_t pid;

    if (!buf || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(res))
        return -1;
    memfd = local_ring_create(ring_size, &ch);
    if (memfd < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        local_ring_t cch;

        alarm(240);
        close(sv[0]);
        local_ring_close(&ch, 0);
        if (local_ring_attach(memfd, &cch))
            _exit(3);
        close(memfd);
        e = (t_ring_end_t){ &cch, sv[1], 0, 0, 0 };
        rnd_state ^= 0x1234567;
        rc = parent_sends ? consume(&e, dir, total, &mine, buf)
                          : produce(&e, dir, total, &mine);
        if (write(res[1], &mine, sizeof(mine)) != sizeof(mine))
            _exit(4);
        local_ring_close(&cch, 1);
        _exit(rc ? 1 : 0);
    }
    close(sv[1]);
    close(memfd);
    e = (t_ring_end_t){ &ch, sv[0], 0, 0, 0 };
    rc = parent_sends ? produce(&e, dir, total, &mine) : consume(&e, dir, total, &mine, buf);
    if (read(res[0], &theirs, sizeof(theirs)) != sizeof(theirs))
        rc = -1;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "child failed: status 0x%x\n", st);
        rc = -1;
    }
    if (!rc && (mine.a != theirs.a || mine.b != theirs.b)) {
        fprintf(stderr, "checksum mismatch\n");
        rc = -1;
    }
    printf("ring %zu KiB, %s%s, %llu MiB: %s (bells %lu, sleeps %lu, peer doorbells d/s %llu/%llu)\n",
           ring_size >> 10, parent_sends ? "A->B" : "B->A", fixed ? " fixed 4 KiB" : "", (unsigned long long)(total >> 20),
           rc ? "FAIL" : "ok", e.bells_sent, e.sleeps,
           (unsigned long long)ch.stats.doorbells_data, (unsigned long long)ch.stats.doorbells_space);
    if (local_ring_peer_state(&ch) != LOCAL_RING_PEER_GONE) {
        fprintf(stderr, "peer state not GONE after the child left\n");
        rc = -1;
    }
    local_ring_close(&ch, 1);
    close(sv[0]);
    close(res[0]);
    close(res[1]);
    free(buf);
    return rc;
}

/* Ping-pong with blocking doorbells only (spin 0): every message is a sleep
 * and a wake-up, so a lost wake-up hangs the test (caught by alarm). */
static int pingpong(int iters)
{
    int sv[2], memfd, st, rc = 0;
    local_ring_t ch;
    t_ring_end_t e;
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return -1;
    memfd = local_ring_create(4096, &ch);
    if (memfd < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        local_ring_t cch;
        uint8_t b;

        alarm(120);
        close(sv[0]);
        local_ring_close(&ch, 0);
        if (local_ring_attach(memfd, &cch))
            _exit(3);
        e = (t_ring_end_t){ &cch, sv[1], 0, 0, 0 };
        for (int i = 0; i < iters; i++) {
            if (t_ring_recv(&e, LOCAL_RING_AB, &b, 1) != 1)
                _exit(4);
            b++;
            if (t_ring_send(&e, LOCAL_RING_BA, &b, 1))
                _exit(5);
        }
        _exit(0);
    }
    close(sv[1]);
    e = (t_ring_end_t){ &ch, sv[0], 0, 0, 0 };
    for (int i = 0; i < iters && !rc; i++) {
        uint8_t b = (uint8_t)i;

        if (t_ring_send(&e, LOCAL_RING_AB, &b, 1) || t_ring_recv(&e, LOCAL_RING_BA, &b, 1) != 1 ||
            b != (uint8_t)(i + 1))
            rc = -1;
    }
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st))
        rc = -1;
    printf("ping-pong %d round trips, blocking: %s (bells %lu, sleeps %lu)\n", iters,
           rc ? "FAIL" : "ok", e.bells_sent, e.sleeps);
    local_ring_close(&ch, 1);
    close(memfd);
    close(sv[0]);
    return rc;
}

static int sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
    return 1;
#endif
#endif
    return 0;
}

int main(void)
{
    const char *q = getenv("QUICK");
    uint64_t total = (q && *q && strcmp(q, "0")) || sanitized() ? 256u << 20 : 1024u << 20;
    static const size_t rings[] = { 16384, 256u << 10, 0 };
    int rc = 0;

    alarm(300);
    signal(SIGPIPE, SIG_IGN);
    pat = malloc(2 * PAT_LEN);
    if (!pat)
        return 1;
    for (size_t i = 0; i < 2 * PAT_LEN; i++)
        pat[i] = i < PAT_LEN ? (uint8_t)(rnd() >> 56) : pat[i - PAT_LEN];
    /* small rings get a small share: they are slow by design */
    rc |= stream_once(rings[0], total / 16, 1);
    rc |= stream_once(rings[1], total / 4, 0);
    rc |= stream_once(rings[2], total / 2, 1);
    rc |= stream_once(rings[2], total / 4, 0);
    /* fixed 4 KiB messages and reads, spinning: a tight publish/consume
     * interleaving, no checksum (memcmp only) so the consumer keeps up */
    fixed = 4096;
    rc |= stream_once(rings[2], total / 2, 1);
    rc |= pingpong(total > (256u << 20) ? 20000 : 5000);
    printf("%s\n", rc ? "FAIL" : "PASS");
    return rc ? 1 : 0;
}
