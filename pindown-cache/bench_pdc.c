/* bench_pdc: micro-benchmarks of the pin-down cache (make bench-pdc).
 *
 *   hit           pdc_region_get alone, and get + put, on a cached region:
 *                 exact start (hash) and inside a region (index), with 1000
 *                 regions cached; target <= 50 ns for the lookup
 *   miss+register get of an uncached range through the io_uring backend
 *                 (registration pins the pages), per MiB, and the
 *                 deregistration that follows an invalidation
 *   invalidation  pdc_range_invalidate: outside every registration (the
 *                 common free), killing an idle region, deferred (lock busy)
 *
 * Prints `key: value` lines.  --quick runs fewer iterations. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "pdc_fake.h"
#include "pdc_int.h"

#define B_PAGE 4096u

static unsigned b_scale = 1;

static double b_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *b_alloc(void *arg, size_t size)
{
    (void)arg;
    return malloc(size);
}

static void b_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    free(ptr);
}

static void b_params(pdc_params_t *p)
{
    pdc_params_default(p);
    p->alloc = b_alloc;
    p->free = b_free;
    p->memlock_bytes = PDC_MEMLOCK_NONE;
    p->max_bytes = (size_t)1 << 34;
    p->max_entries = 4096;
    p->budget[PDC_SEND] = p->budget[PDC_RECV] = 0;
}

/* Best of 5 runs of n get/put pairs at addr, in ns per pair. */
static double b_hit_loop(pdc_t *c, char *addr, size_t len, unsigned n)
{
    double best = 1e30;
    unsigned run, i;

    for (run = 0; run < 5; run++) {
        double t0 = b_now(), dt;

        for (i = 0; i < n; i++) {
            pdc_region_t *r;

            if (pdc_region_get(c, addr, len, PDC_SEND, 0, &r) != 0)
                abort();
            pdc_region_put(c, r, PDC_SEND);
        }
        dt = (b_now() - t0) * 1e9 / n;
        if (dt < best)
            best = dt;
    }
    return best;
}

/* Best of 5 runs of n gets (then n puts, untimed), in ns per get. */
static double b_get_loop(pdc_t *c, char *addr, size_t len, unsigned n)
{
    static pdc_region_t *held[100000];
    double best = 1e30;
    unsigned run, i;

    if (n > 100000)
        n = 100000;
    for (run = 0; run < 5; run++) {
        double t0 = b_now(), dt;

        for (i = 0; i < n; i++)
            if (pdc_region_get(c, addr, len, PDC_SEND, 0, &held[i]) != 0)
                abort();
        dt = (b_now() - t0) * 1e9 / n;
        for (i = 0; i < n; i++)
            pdc_region_put(c, held[i], PDC_SEND);
        if (dt < best)
            best = dt;
    }
    return best;
}

static void b_hit(void)
{
    t_fake_t *f = t_fake_new(2048);
    unsigned n = 1000000 / b_scale, i;
    pdc_params_t p;
    pdc_t *c;
    char *base;

    b_params(&p);
    base = mmap(NULL, (size_t)4096 * 32 * B_PAGE, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED || pdc_create(&p, &t_fake_ops, f, &c) != 0)
        abort();
    for (i = 0; i < 1000; i++) {
        pdc_region_t *r;

        if (pdc_region_get(c, base + (size_t)i * 32 * B_PAGE, 16 * B_PAGE, PDC_SEND,
                           0, &r) != 0)
            abort();
        pdc_region_put(c, r, PDC_SEND);
    }
    printf("pdc.bench.hit_get_ns: %.1f\n",
           b_get_loop(c, base + 500 * 32 * B_PAGE, 16 * B_PAGE, n / 10));
    printf("pdc.bench.hit_get_put_ns: %.1f\n",
           b_hit_loop(c, base + 500 * 32 * B_PAGE, 16 * B_PAGE, n));
    printf("pdc.bench.hit_inside_get_put_ns: %.1f\n",
           b_hit_loop(c, base + 500 * 32 * B_PAGE + 3 * B_PAGE + 100, 5000, n));
    printf("pdc.bench.hit_target_ns: 50\n");
    pdc_destroy(c);
    t_fake_free(f);
    munmap(base, (size_t)4096 * 32 * B_PAGE);
}

static void b_miss_size(pdc_t *c, size_t size, unsigned iters)
{
    char *buf = aligned_alloc(2 << 20, size);
    double reg = 0, dereg = 0;
    unsigned i;

    if (!buf)
        abort();
    memset(buf, 1, size);   /* populated: measure pinning, not faulting */
    for (i = 0; i < iters; i++) {
        pdc_region_t *r;
        double t0 = b_now(), t1, t2;
        int rc = pdc_region_get(c, buf, size, PDC_SEND, 0, &r);

        t1 = b_now();
        if (rc) {
            printf("pdc.bench.miss_error: %s\n", strerror(-rc));
            break;
        }
        pdc_region_put(c, r, PDC_SEND);
        pdc_range_invalidate(c, buf, size);
        t2 = b_now();
        pdc_cache_reap(c);   /* deregisters */
        dereg += b_now() - t2;
        reg += t1 - t0;
    }
    printf("pdc.bench.miss_register_us_per_mib.%zuk: %.1f\n", size >> 10,
           reg * 1e6 / iters / ((double)size / (1 << 20)));
    printf("pdc.bench.deregister_us_per_mib.%zuk: %.1f\n", size >> 10,
           dereg * 1e6 / iters / ((double)size / (1 << 20)));
    free(buf);
}

static void b_miss(void)
{
    pdc_uring_t *u;
    pdc_params_t p;
    pdc_ops_t ops;
    pdc_t *c;
    int err;

    if (pdc_uring_create(64, 8, b_alloc, b_free, NULL, &u) != 0)
        abort();
    if (!pdc_uring_ring(u, &err)) {
        printf("pdc.bench.miss_register: skipped (io_uring: %s)\n", strerror(-err));
        pdc_uring_destroy(u);
        return;
    }
    pdc_uring_ops_init(u, &ops);
    b_params(&p);
    p.memlock_bytes = PDC_MEMLOCK_AUTO;
    if (pdc_create(&p, &ops, u, &c) != 0)
        abort();
    b_miss_size(c, (size_t)64 << 10, 400 / b_scale);
    b_miss_size(c, (size_t)1 << 20, 100 / b_scale);
    b_miss_size(c, (size_t)16 << 20, 20 / b_scale);
    pdc_destroy(c);
    pdc_uring_destroy(u);
}

static void b_invalidate(void)
{
    enum { N = 2048 };
    t_fake_t *f = t_fake_new(N + 8);
    unsigned rounds = 20 / b_scale, i, k;
    double out = 0, kill = 0, deferred = 0;
    pdc_params_t p;
    pdc_t *c;
    char *base;

    b_params(&p);
    p.defer_slots = N;
    base = mmap(NULL, (size_t)N * 4 * B_PAGE, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED || pdc_create(&p, &t_fake_ops, f, &c) != 0)
        abort();
    for (k = 0; k < rounds; k++) {
        double t0, t1;

        for (i = 0; i < N; i++) {
            pdc_region_t *r;

            if (pdc_region_get(c, base + (size_t)i * 4 * B_PAGE, 2 * B_PAGE, PDC_SEND, 0,
                               &r) != 0)
                abort();
            pdc_region_put(c, r, PDC_SEND);
        }
        t0 = b_now();
        for (i = 0; i < N; i++)   /* below every registration */
            pdc_range_invalidate(c, base - 64 * B_PAGE, B_PAGE);
        t1 = b_now();
        out += t1 - t0;
        pthread_mutex_lock(&c->lock);   /* as if another thread were in */
        t0 = b_now();
        for (i = 0; i < N; i++)
            pdc_range_invalidate(c, base + (size_t)i * 4 * B_PAGE + 2 * B_PAGE, 64);
        t1 = b_now();
        pthread_mutex_unlock(&c->lock);
        deferred += t1 - t0;
        pdc_cache_reap(c);   /* drains (no region there) */
        t0 = b_now();
        for (i = 0; i < N; i++)
            pdc_range_invalidate(c, base + (size_t)i * 4 * B_PAGE + 100, 64);
        t1 = b_now();
        kill += t1 - t0;
        pdc_cache_reap(c);
    }
    printf("pdc.bench.invalidate_miss_ns: %.1f\n", out * 1e9 / rounds / N);
    printf("pdc.bench.invalidate_kill_ns: %.1f\n", kill * 1e9 / rounds / N);
    printf("pdc.bench.invalidate_deferred_ns: %.1f\n", deferred * 1e9 / rounds / N);
    pdc_destroy(c);
    t_fake_free(f);
    munmap(base, (size_t)N * 4 * B_PAGE);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 1 && strcmp(argv[1], "--quick") == 0)
        b_scale = 10;
    printf("# bench_pdc: pin-down cache micro-benchmarks\n");
    b_hit();
    b_miss();
    b_invalidate();
    return 0;
}
