/* Micro-benchmark for malloc-hooks, run with and without LD_PRELOAD by
 * bench_mh.sh.
 *
 *   bench_mh pairs ITER        malloc/free with 64 live slots, sizes 16 B to
 *                              64 KiB (log-uniform, fixed seed): ns per pair
 *   bench_mh small ITER        the same with sizes 16 B to 1 KiB (tcache)
 *   bench_mh touch SIZE ITER   malloc(SIZE), write one byte per 4 KiB page,
 *                              free: ns per round (placement threshold data)
 *   bench_mh batch SIZE ITER   64 blocks of SIZE live at once, touched, freed:
 *                              ns per block (buffer-pool pattern)
 *   bench_mh realloc ITER      realloc growth 1 KiB..8 MiB and back: ns per call
 *
 * Prints one number (ns) on stdout. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* glibc trims its heap with brk as blocks are freed; that kernel work
 * (page zaps and refaults) varies with memory layout and drowns the
 * user-space cost the hooks add, so pairs runs with trimming off. */
static double bench_pairs(long iters, unsigned max_shift)
{
    enum { SLOTS = 64, NSIZES = 4096 };
    static void *slot[SLOTS];
    static size_t sizes[NSIZES];
    double t0;

    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    for (int i = 0; i < NSIZES; i++)
        sizes[i] = (size_t)16 << (next() % max_shift);      /* 16 B .. 16 << max */
    for (int i = 0; i < NSIZES; i++)
        sizes[i] += next() % sizes[i];
    t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        unsigned k = (unsigned)(i * 2654435761u) % SLOTS;
        volatile char *p;

        free(slot[k]);
        p = malloc(sizes[i % NSIZES] > 65536 ? 65536 : sizes[i % NSIZES]);
        p[0] = (char)i;
        slot[k] = (void *)p;
    }
    t0 = now_ns() - t0;
    for (int k = 0; k < SLOTS; k++)
        free(slot[k]);
    return t0 / iters;
}

static double bench_touch(size_t size, long iters)
{
    double t0 = now_ns();

    for (long i = 0; i < iters; i++) {
        volatile char *p = malloc(size);

        for (size_t o = 0; o < size; o += 4096)
            p[o] = (char)o;
        free((void *)p);
    }
    return (now_ns() - t0) / iters;
}

static double bench_batch(size_t size, long iters)
{
    enum { N = 64 };
    char *b[N];
    double t0 = now_ns();

    for (long i = 0; i < iters; i++) {
        for (int k = 0; k < N; k++) {
            volatile char *p = malloc(size);

            for (size_t o = 0; o < size; o += 4096)
                p[o] = (char)o;
            b[k] = (char *)p;
        }
        for (int k = 0; k < N; k++)
            free(b[k]);
    }
    return (now_ns() - t0) / ((double)iters * N);
}

static double bench_realloc(long iters)
{
    double t0 = now_ns();
    long calls = 0;

    for (long i = 0; i < iters; i++) {
        char *p = NULL;

        for (size_t n = 1024; n <= (8u << 20); n *= 2, calls++) {
            p = realloc(p, n);
            p[n - 1] = 1;
        }
        for (size_t n = 4u << 20; n >= 1024; n /= 2, calls++)
            p = realloc(p, n);
        free(p);
    }
    return (now_ns() - t0) / calls;
}

int main(int argc, char **argv)
{
    double ns;

    if (argc >= 3 && !strcmp(argv[1], "pairs"))
        ns = bench_pairs(atol(argv[2]), 13);
    else if (argc >= 3 && !strcmp(argv[1], "small"))
        ns = bench_pairs(atol(argv[2]), 5);
    else if (argc >= 4 && !strcmp(argv[1], "touch"))
        ns = bench_touch((size_t)strtoull(argv[2], NULL, 0), atol(argv[3]));
    else if (argc >= 4 && !strcmp(argv[1], "batch"))
        ns = bench_batch((size_t)strtoull(argv[2], NULL, 0), atol(argv[3]));
    else if (argc >= 3 && !strcmp(argv[1], "realloc"))
        ns = bench_realloc(atol(argv[2]));
    else {
        fprintf(stderr, "usage: bench_mh pairs ITER | small ITER | touch SIZE ITER | batch SIZE ITER | realloc ITER\n");
        return 2;
    }
    printf("%.1f\n", ns);
    return 0;
}
