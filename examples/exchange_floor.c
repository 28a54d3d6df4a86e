/* exchange_floor: where page exchange would beat copying on this machine
 * (issue 13: "on 4 KiB pages exchange only where the measured crossover says
 * it wins; make bench measures and prints the crossover").
 *
 * A message of S bytes sits in a memfd, as a sender's placed buffer would.
 * The receiver gets it either
 *   copy:      memcpy from its shared mapping of the memfd into its own
 *              buffer (what a one-copy receive costs; the ring pays two);
 *   exchange:  mmap(MAP_SHARED | MAP_FIXED) of the memfd's pages over its
 *              own buffer, then a first read of every 4 KiB page (what the
 *              mapping itself costs, TLB and page-table work included).
 * Two units alternate so that every exchange replaces a populated mapping.
 * Backings: shmem on 4 KiB pages; shmem with MADV_HUGEPAGE (2 MiB pages
 * only when /sys/kernel/mm/transparent_hugepage/shmem_enabled allows it);
 * hugetlb (MFD_HUGETLB, only with free huge pages).  The two huge-page kinds
 * exchange only in 2 MiB units.  Prints the median microseconds per message
 * and the smallest size at which the exchange wins, per backing.
 *
 * A second table prices what page exchange leaves behind: after a 2 MiB
 * unit was handed over, the sender's (and the receiver's) copy of it must
 * stay unchanged for the other side, so a write to it costs
 *   owned:     memset of the unit while it is ours alone (MAP_SHARED, the
 *              floor any scheme pays);
 *   kernel CoW: memset of the unit mapped MAP_PRIVATE over the lent pages
 *              (the kernel copies on write, one 4 KiB page per fault, even
 *              on a huge page);
 *   replace:   copy the unit into a pooled, already populated unit, map that
 *              MAP_SHARED | MAP_FIXED over it, then memset (what a trap that
 *              replaces the whole unit at the first write pays, the trap's
 *              own 7-19 us excluded);
 *   check:     one pread of /proc/self/pagemap for the unit's 512 entries
 *              (is any page of a lent unit written since: PM_FILE clear).
 *
 * usage: exchange_floor [iterations]   (default 200; 20 for 8 MiB and up) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probe.h"

#define HUGE (2u << 20)

enum { B_SHMEM, B_THP, B_HUGETLB, B_COUNT };
static const char *const bname[B_COUNT] = { "shmem 4 KiB", "shmem THP", "hugetlb" };

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_d);
    return v[n / 2];
}

/* shmem THP allowed for MADV_HUGEPAGE mappings (the bracketed setting of
 * shmem_enabled is advise, within_size, always or force). */
static int ef_thp(void)
{
    char buf[256] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");

    if (!f)
        return 0;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = 0;
    fclose(f);
    return !strstr(buf, "[never]") && !strstr(buf, "[deny]") && strchr(buf, '[');
}

/* A memfd of 2 units of size s on backing b, filled; -1 when the backing
 * is not available here. */
static int ef_memfd(int b, size_t s)
{
    int fd = memfd_create("zc-exchange-floor", b == B_HUGETLB ? MFD_HUGETLB : 0);
    char *p;

    if (fd < 0 || (b == B_THP && !ef_thp())) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (ftruncate(fd, (off_t)(2 * s)) < 0) {
        close(fd);
        return -1;
    }
    p = mmap(NULL, 2 * s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    if (b == B_THP)
        madvise(p, 2 * s, MADV_HUGEPAGE);
    for (size_t i = 0; i < 2 * s; i += 4096)
        p[i] = (char)i;
    munmap(p, 2 * s);
    return fd;
}

/* A 2 MiB-aligned area of s bytes (the receiver's buffer). */
static char *ef_area(size_t s)
{
    char *p = mmap(NULL, s + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED)
        return NULL;
    return (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
}

/* Median microseconds per message: exchange (mode 1) or copy (mode 0). */
static double ef_run(int b, size_t s, int iters, int mode)
{
    int fd = ef_memfd(b, s);
    char *dst = ef_area(s), *src = NULL;
    double *t = calloc((size_t)iters, sizeof(double)), r = -1;
    volatile char sink = 0;

    if (fd < 0 || !dst || !t)
        goto out;
    if (!mode) {
        src = mmap(NULL, 2 * s, PROT_READ, MAP_SHARED, fd, 0);
        if (src == MAP_FAILED)
            goto out;
        memset(dst, 1, s);
    }
    for (int i = 0; i < iters; i++) {
        off_t off = (off_t)((size_t)(i & 1) * s);
        double t0 = probe_now();

        if (mode) {
            if (mmap(dst, s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off) != dst)
                goto out;
            if (b == B_THP)
                madvise(dst, s, MADV_HUGEPAGE);
            for (size_t k = 0; k < s; k += 4096)
                sink += dst[k];
        } else {
            memcpy(dst, src + off, s);
            sink += dst[s - 1];
        }
        t[i] = (probe_now() - t0) * 1e6;
    }
    r = median(t, iters);
out:
    (void)sink;
    free(t);
    if (src && src != MAP_FAILED)
        munmap(src, 2 * s);
    if (fd >= 0)
        close(fd);
    return r;
}

/* Median microseconds of one write episode on a 2 MiB unit of backing b:
 * what 0 owned, 1 kernel CoW, 2 replace, 3 pagemap check (see the header). */
static double ef_write(int b, int what, int iters)
{
    int fd = ef_memfd(b, HUGE), pm = open("/proc/self/pagemap", O_RDONLY);
    char *u = ef_area(HUGE), *pool = NULL;
    double *t = calloc((size_t)iters, sizeof(double)), r = -1;
    uint64_t ent[HUGE / 4096];
    volatile char sink = 0;

    if (fd < 0 || pm < 0 || !u || !t)
        goto out;
    for (int i = 0; i < iters; i++) {
        int flags = what == 0 ? MAP_SHARED : MAP_PRIVATE;
        double t0;

        /* the unit as it stands after a hand-over: populated, lent */
        if (mmap(u, HUGE, PROT_READ | PROT_WRITE, flags | MAP_FIXED, fd, 0) != u)
            goto out;
        if (b == B_THP)
            madvise(u, HUGE, MADV_HUGEPAGE);
        for (size_t k = 0; k < HUGE; k += 4096)
            sink += u[k];
        if (what == 2) {    /* a pooled unit, populated before */
            pool = mmap(NULL, HUGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)HUGE);
            if (pool == MAP_FAILED)
                goto out;
            if (b == B_THP)
                madvise(pool, HUGE, MADV_HUGEPAGE);
            for (size_t k = 0; k < HUGE; k += 4096)
                pool[k] = 1;
        }
        t0 = probe_now();
        if (what == 3) {
            if (pread(pm, ent, sizeof(ent), (off_t)((uintptr_t)u / 4096 * 8)) != sizeof(ent))
                goto out;
            sink += (char)(ent[0] >> 61);
        } else {
            if (what == 2) {
                memcpy(pool, u, HUGE);
                if (mmap(u, HUGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                         (off_t)HUGE) != u)
                    goto out;
                if (b == B_THP)
                    madvise(u, HUGE, MADV_HUGEPAGE);
            }
            memset(u, i & 0x7f, HUGE);
        }
        t[i] = (probe_now() - t0) * 1e6;
        if (pool) {
            munmap(pool, HUGE);
            pool = NULL;
        }
    }
    r = median(t, iters);
out:
    (void)sink;
    free(t);
    if (pool && pool != MAP_FAILED)
        munmap(pool, HUGE);
    if (pm >= 0)
        close(pm);
    if (fd >= 0)
        close(fd);
    return r;
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = { 16u << 10, 64u << 10, 256u << 10, 1u << 20,
                                    2u << 20, 8u << 20, 32u << 20 };
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    int n = (int)(sizeof(sizes) / sizeof(sizes[0]));

    if (iters < 3)
        iters = 3;
    printf("page exchange versus one copy, median us per message (%d iterations)\n", iters);
    printf("  %-12s %10s %12s %12s %8s\n", "backing", "size", "copy us", "exchange us",
           "ratio");
    for (int b = 0; b < B_COUNT; b++) {
        size_t cross = 0;
        int shown = 0;

        for (int i = 0; i < n; i++) {
            size_t s = sizes[i];
            int it = s >= (8u << 20) ? (iters < 20 ? iters : 20) : iters;
            double c, x;

            if (b != B_SHMEM && s % HUGE)
                continue;           /* huge pages exchange in 2 MiB units only */
            c = ef_run(b, s, it, 0);
            x = ef_run(b, s, it, 1);
            if (c < 0 || x < 0) {
                printf("  %-12s %10s %s\n", bname[b], "-", b == B_THP ? "unavailable: shmem THP "
                       "is off (echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled)"
                       : shown ? "larger sizes: not enough free huge pages"
                       : "unavailable: no free huge pages (/proc/sys/vm/nr_hugepages)");
                break;
            }
            shown = 1;
            printf("  %-12s %8zuKiB %12.1f %12.1f %8.2f\n", bname[b], s >> 10, c, x, x / c);
            if (x < c && !cross)
                cross = s;
            else if (x >= c)
                cross = 0;          /* a crossover holds for every larger size */
        }
        if (!shown)
            continue;
        if (cross)
            printf("  %-12s crossover: exchange wins from %zu KiB up\n", bname[b], cross >> 10);
        else
            printf("  %-12s crossover: none (copying wins at every size measured)\n", bname[b]);
    }
    printf("after an exchange: a write of a whole 2 MiB unit, median us (%d iterations)\n",
           iters);
    printf("  %-12s %10s %12s %10s %10s\n", "backing", "owned", "kernel CoW", "replace",
           "check");
    for (int b = 0; b < B_HUGETLB; b++) {
        double w[4];
        int ok = 1;

        for (int k = 0; k < 4; k++)
            ok &= (w[k] = ef_write(b, k, iters)) >= 0;
        if (!ok) {
            printf("  %-12s unavailable\n", bname[b]);
            continue;
        }
        printf("  %-12s %10.1f %12.1f %10.1f %10.1f   (kernel CoW %.1fx, replace %.1fx owned)\n",
               bname[b], w[0], w[1], w[2], w[3], w[1] / w[0], w[2] / w[0]);
    }
    return 0;
}
