/* Placement: large blocks page aligned in a memfd arena; data survives
 * realloc across sizes and kinds (small, placed, glibc-foreign); the
 * aligned family honours alignments; malloc_usable_size >= request; calloc
 * zeroes recycled blocks; madvise(DONTNEED) zeroes; errno is preserved.
 * Without placement (or without the library) the generic checks still run. */
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include "t_mh.h"

extern void *__libc_malloc(size_t);

#define KB 1024u
#define MB (1024u * 1024u)

static void t_realloc_chain(void)
{
    static const size_t sizes[] = { 100, 64 * KB, 200 * KB, 3 * MB, 5 * MB, 300 * KB,
                                    150 * KB, 4000, 1 * MB, 50, 2 * MB };
    unsigned char *p = malloc(sizes[0]);
    size_t prev = sizes[0];

    T_CHECK(p);
    t_fill(p, prev, 3);
    for (unsigned i = 1; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i], keep = prev < n ? prev : n;

        p = realloc(p, n);
        T_CHECK(p);
        T_CHECK(t_same(p, keep, 3));
        T_CHECK(malloc_usable_size(p) >= n);
        t_fill(p, n, 3);
        prev = n;
    }
    free(p);
}

static void t_foreign(void)
{
    unsigned char *p = __libc_malloc(1000), *q;

    /* allocated behind the hooks' back, as before the library loaded */
    T_CHECK(p);
    t_fill(p, 1000, 9);
    T_CHECK(malloc_usable_size(p) >= 1000);
    q = realloc(p, 2 * MB);
    T_CHECK(q && t_same(q, 1000, 9));
    free(q);
    p = __libc_malloc(400 * KB);
    T_CHECK(p);
    free(p);
}

static void t_aligned(int placed)
{
    static const size_t sizes[] = { 24, 5000, 256 * KB, 3 * MB };
    static const size_t aligns[] = { 16, 64, 4096, 65536, 2 * MB };

    for (unsigned i = 0; i < 4; i++) {
        size_t n = sizes[i];

        for (unsigned j = 0; j < 5; j++) {
            size_t al = aligns[j];
            void *p = NULL;

            T_CHECK(posix_memalign(&p, al, n) == 0 && (uintptr_t)p % al == 0);
            T_CHECK(malloc_usable_size(p) >= n);
            memset(p, 1, n);
            free(p);
            p = aligned_alloc(al, n);
            T_CHECK(p && (uintptr_t)p % al == 0);
            free(p);
            p = memalign(al, n);
            T_CHECK(p && (uintptr_t)p % al == 0);
            if (placed && n >= 256 * KB)
                T_CHECK(t_in_memfd(p));
            free(p);
        }
        void *v = valloc(n), *pv = pvalloc(n);

        T_CHECK(v && (uintptr_t)v % 4096 == 0 && malloc_usable_size(v) >= n);
        T_CHECK(pv && (uintptr_t)pv % 4096 == 0 && malloc_usable_size(pv) >= n);
        free(v);
        free(pv);
    }
    void *bad = NULL;

    T_CHECK(posix_memalign(&bad, 3, 64) == EINVAL && bad == NULL);
}

static void t_calloc_recycled(void)
{
    for (int round = 0; round < 4; round++) {
        size_t n = (round + 1) * 300 * KB;
        unsigned char *p = malloc(n), *q;

        T_CHECK(p);
        memset(p, 0xff, n);
        free(p);
        q = calloc(1, n);
        T_CHECK(q);
        for (size_t i = 0; i < n; i++)
            if (q[i]) {
                fprintf(stderr, "calloc byte %zu = %d (recycled %d)\n", i, q[i], p == q);
                exit(1);
            }
        free(q);
    }
    volatile size_t big = (size_t)1 << 40;

    T_CHECK(calloc(big, big) == NULL && errno == ENOMEM);
}

static void t_madvise_zeroes(void)
{
    unsigned char *p = malloc(1 * MB);

    T_CHECK(p);
    memset(p, 7, 1 * MB);
    if ((uintptr_t)p % 4096 == 0) {
        T_CHECK(madvise(p, 1 * MB, MADV_DONTNEED) == 0);
        T_CHECK(p[0] == 0 && p[MB - 1] == 0);
    }
    free(p);
}

static void t_errno_kept(void)
{
    void *p, *q, *m;

    errno = 4321;
    p = malloc(10);
    q = malloc(1 * MB);
    p = realloc(p, 300 * KB);
    q = realloc(q, 20);
    free(p);
    free(q);
    p = calloc(1, 512 * KB);
    free(p);
    m = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    m = mremap(m, 8192, 16384, MREMAP_MAYMOVE);
    madvise(m, 4096, MADV_DONTNEED);
    munmap(m, 16384);
    T_CHECK(errno == 4321);
}

int main(void)
{
    int placed = t_placement();

    if (placed) {
        void *p = malloc(200 * KB), *h = malloc(3 * MB);

        T_CHECK(p && (uintptr_t)p % 4096 == 0 && t_in_memfd(p));
        T_CHECK(h && (uintptr_t)h % (2 * MB) == 0 && t_in_memfd(h));
        free(p);
        free(h);
        p = malloc(100);
        T_CHECK(p && !t_in_memfd(p));
        free(p);
    } else if ((t_status() & (MH_ST_PLACEMENT_ACTIVE | MH_ST_PLACEMENT_NARROW)) ==
               (MH_ST_PLACEMENT_ACTIVE | MH_ST_PLACEMENT_NARROW)) {
        /* page exchange's narrow placement: a block smaller than a 2 MiB
         * page stays with glibc */
        void *p = malloc(200 * KB);

        T_CHECK(p && !t_in_memfd(p));
        free(p);
    }
    t_realloc_chain();
    t_foreign();
    t_aligned(placed);
    t_calloc_recycled();
    t_madvise_zeroes();
    t_errno_kept();
    T_CHECK(malloc_usable_size(NULL) == 0);
    free(NULL);
    printf("ok (placement %s)\n", placed ? "on" : t_status() & MH_ST_PLACEMENT_ACTIVE ? "narrow" : "off");
    return 0;
}
