/* The memory subsystem wired end to end, in one process that links the
 * library's objects (so its own malloc/free/munmap run through malloc-hooks
 * and the shim's constructor wires the pin-down cache to their events):
 *
 *   a buffer is registered through the io_uring backend, a fixed write from
 *   it carries its bytes; the application frees it; malloc hands the same
 *   memory back with new bytes; the cache must register it anew, and a fixed
 *   write from the new region must carry the NEW bytes.  Also for munmap +
 *   mmap at the same address and for madvise(DONTNEED).
 *
 * Run with ZCSOCK_ALLOC_PLACEMENT=1 (placed arena blocks) and =0 (glibc's
 * mmapped chunks, invalidated through the free hook).  Exit 0 pass, 1 fail,
 * 77 skip (io_uring unavailable, or the allocator never reused the address). */
#include <errno.h>
#include <liburing.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "pdc.h"
#include "shim_mem.h"
#include "zcsock.h"

#define T_LEN (4u << 20)

#define T_CHECK(c)                                                               \
    do {                                                                         \
        if (!(c)) {                                                              \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static struct io_uring *t_ring;
static int t_pipe[2];

/* Fixed write of 4 KiB at addr (in region r) into the pipe; return the first
 * byte that came out. */
static int t_write_fixed(pdc_region_t *r, const char *addr)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(t_ring);
    struct io_uring_cqe *cqe;
    char out[4096];
    int res;

    io_uring_prep_write_fixed(sqe, t_pipe[1], addr, sizeof(out), 0, (int)r->handle.id);
    T_CHECK(io_uring_submit(t_ring) == 1);
    T_CHECK(io_uring_wait_cqe(t_ring, &cqe) == 0);
    res = cqe->res;
    io_uring_cqe_seen(t_ring, cqe);
    T_CHECK(res == (int)sizeof(out));
    T_CHECK(read(t_pipe[0], out, sizeof(out)) == (ssize_t)sizeof(out));
    for (size_t i = 1; i < sizeof(out); i++)
        T_CHECK(out[i] == out[0]);
    return out[0];
}

/* Register buf, check a fixed write carries `fill`; return the region's
 * generation. */
static uint64_t t_register_and_send(pdc_t *cache, char *buf, char fill)
{
    pdc_region_t *r;
    uint64_t gen;

    memset(buf, fill, T_LEN);
    T_CHECK(pdc_region_get(cache, buf, T_LEN, PDC_SEND, PDC_F_NOWAIT, &r) == 0);
    T_CHECK(t_write_fixed(r, buf + 8192) == fill);
    gen = r->gen;
    pdc_region_put(cache, r, PDC_SEND);
    return gen;
}

static int t_free_malloc(pdc_t *cache)
{
    char *a = malloc(T_LEN), *b;
    uint64_t g1, g2;
    int tries;

    T_CHECK(a);
    g1 = t_register_and_send(cache, a, 'A');
    /* the cache hits while the memory is unchanged */
    T_CHECK(t_register_and_send(cache, a, 'a') == g1);
    free(a);
    for (tries = 0, b = NULL; tries < 8; tries++) {
        b = malloc(T_LEN);
        if (b == a)
            break;
        free(b);
        b = NULL;
    }
    if (!b) {
        printf("skip: the allocator never handed the same address back\n");
        return 77;
    }
    g2 = t_register_and_send(cache, b, 'B');   /* checks the NEW bytes go out */
    T_CHECK(g2 != g1);
    free(b);
    return 0;
}

static int t_munmap_mmap(pdc_t *cache)
{
    char *a = mmap(NULL, T_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *b;
    uint64_t g1, g2;

    T_CHECK(a != MAP_FAILED);
    g1 = t_register_and_send(cache, a, 'C');
    T_CHECK(munmap(a, T_LEN) == 0);
    b = mmap(a, T_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
             -1, 0);
    T_CHECK(b == a);
    g2 = t_register_and_send(cache, b, 'D');
    T_CHECK(g2 != g1);
    /* madvise(DONTNEED) drops the pages too: the next get must re-register */
    T_CHECK(madvise(b, T_LEN, MADV_DONTNEED) == 0);
    T_CHECK(t_register_and_send(cache, b, 'E') != g2);
    munmap(b, T_LEN);
    return 0;
}

/* The library's arena descriptors, found through /proc (up to max). */
static int t_arena_fds(int *fds, int max)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    char path[300], target[256];
    int n = 0;

    T_CHECK(d);
    while ((e = readdir(d)) && n < max) {
        ssize_t len;

        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        len = readlink(path, target, sizeof(target) - 1);
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (strstr(target, "zcsock-arena"))
            fds[n++] = atoi(e->d_name);
    }
    closedir(d);
    return n;
}

/* The library's arena memfds are not the application's: they sit high (out
 * of the way of programs expecting the lowest free numbers), close() fails
 * with EBADF as for a descriptor it never opened, close_range() leaves them
 * open, and dup2() onto one takes the number while ours moves away; placed
 * allocations keep working throughout. */
static void t_internal_fds_stay_ours(void)
{
    struct rlimit rl;
    int fds[16], n, i, null = open("/dev/null", O_RDONLY);
    char *p;

    T_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0 && null >= 0);
    n = t_arena_fds(fds, 16);
    for (i = 0; i < n; i++) {
        T_CHECK((rlim_t)fds[i] >= rl.rlim_cur - rl.rlim_cur / 4);
        errno = 0;
        T_CHECK(close(fds[i]) == -1 && errno == EBADF);
        T_CHECK(fcntl(fds[i], F_GETFD) != -1);
    }
    T_CHECK(close_range((unsigned)null + 1, ~0u, 0) == 0);
    T_CHECK(t_arena_fds(fds, 16) == n);
    if (n) {
        int target = fds[0];

        T_CHECK(dup2(null, target) == target);
        T_CHECK(t_arena_fds(fds, 16) == n);     /* ours moved, none lost */
        for (i = 0; i < n; i++)
            T_CHECK(fds[i] != target);
        close(target);
    }
    n = t_arena_fds(fds, 16);
    if (n) {
        /* out of descriptors, ours cannot move: dup2 onto it must fail, not
         * silently replace it */
        struct rlimit low = { (rlim_t)fds[0] + 1, rl.rlim_max };
        int target = fds[0], nf = 0, *filler = calloc((size_t)target + 1, sizeof(int));

        T_CHECK(filler && setrlimit(RLIMIT_NOFILE, &low) == 0);
        while (nf <= target && (filler[nf] = dup(null)) >= 0)   /* every free number */
            nf++;
        T_CHECK(errno == EMFILE);
        errno = 0;
        T_CHECK(dup2(null, target) == -1 && errno == EMFILE);
        while (nf > 0)
            close(filler[--nf]);
        free(filler);
        T_CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
        T_CHECK(t_arena_fds(fds, 16) == n);     /* ours still in place */
        for (i = 0; i < n && fds[i] != target; i++)
            ;
        T_CHECK(i < n);
    }
    p = malloc(T_LEN);
    T_CHECK(p);
    memset(p, 7, T_LEN);
    free(p);
    close(null);
    printf("arena descriptors checked: %d\n", n);
}

int main(void)
{
    uint64_t v;
    /* issue 32: no cache until a path asks (no pdc.* counters published,
     * no memory event fed to one); the first shim_mem_cache() makes it */
    int before = zcsock_stat_get("pdc.gets", &v);
    pdc_t *cache = shim_mem_cache();
    int err = 0, rc;

    if (!cache) {
        printf("skip: memory events unavailable, no cache\n");
        return 77;
    }
    if (before == 0 || zcsock_stat_get("pdc.gets", &v) != 0) {
        fprintf(stderr, "pdc.gets published before the first shim_mem_cache() (%d) or not "
                "after\n", before);
        return 1;
    }
    t_ring = pdc_uring_ring(shim_mem_uring(), &err);
    if (!t_ring) {
        printf("skip: io_uring unavailable (%s)\n", strerror(-err));
        return 77;
    }
    {
        /* the ring's descriptor is the library's: in the top band of the
         * soft RLIMIT_NOFILE (its floor, common/zc_fd.h), close-on-exec */
        struct rlimit rl;
        rlim_t top;

        T_CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
        top = rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur;
        T_CHECK(rl.rlim_cur < 64 ||
                (rlim_t)t_ring->ring_fd >= top - (top / 4 < 1024 ? top / 4 : 1024));
        T_CHECK(fcntl(t_ring->ring_fd, F_GETFD) & FD_CLOEXEC);
    }
    T_CHECK(pipe(t_pipe) == 0);
    /* a fixed mmap threshold keeps glibc from moving big chunks to the heap
     * after the first free, so the freed chunk's address comes back */
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    rc = t_free_malloc(cache);
    if (rc)
        return rc;
    rc = t_munmap_mmap(cache);
    t_internal_fds_stay_ours();
    {
        /* invalidations are charged to the application's free/munmap/madvise
         * call sites (distinct places), not to the library's callback */
        pdc_site_t sites[8];
        unsigned n = pdc_stats_sites(cache, PDC_SITE_INVALIDATE, sites, 8);

        T_CHECK(n >= 3);
    }
    printf("pass: stale registrations never returned (misses %llu, invalidations %llu)\n",
           (unsigned long long)pdc_stats_get(cache, PDC_STAT_MISSES),
           (unsigned long long)pdc_stats_get(cache, PDC_STAT_INVALIDATIONS));
    return rc;
}
