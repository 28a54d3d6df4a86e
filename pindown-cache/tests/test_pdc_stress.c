/* Thread stress of the cache (fake backend), bounded in time.
 *
 * Getter threads take and release random ranges of a reserved address
 * space; an invalidator thread invalidates random ranges, directly or with
 * the cache lock held (forcing the deferred queue, which is kept tiny so it
 * overflows); a storm thread mallocs and frees and invalidates what it
 * frees, as the hooks would; the main thread forks in the middle and the
 * child checks that it starts from an empty cache.
 *
 * Invariant: a get that starts after invalidate(R) returned never returns a
 * region overlapping R that existed before that invalidation began.  The
 * invalidator reads the generation counter g0 before invalidating and then
 * publishes g0 for every slot of R; a getter snapshots those values before
 * its get and checks that the region it got is younger for every slot the
 * region covers. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pdc_fake.h"
#include "pdc_int.h"

#define T_PAGE 4096u
#define T_SLOT (16 * T_PAGE)
#define T_NSLOTS 64
#define T_GETTERS 3

typedef struct t_stress {
    pdc_t *cache;
    t_fake_t *fake;
    char *base;
    _Atomic uint64_t inv_gen[T_NSLOTS];
    _Atomic int stop;
    _Atomic unsigned long violations, uncovered, gets, fails, invals;
} t_stress_t;

static uint64_t t_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static unsigned t_rand(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 8) & 0xffffff;
}

/* A random range: start anywhere in a slot, up to three slots long. */
static void t_range(t_stress_t *s, unsigned *seed, char **addr_p, size_t *len_p)
{
    unsigned slot = t_rand(seed) % (T_NSLOTS - 3);
    size_t off = t_rand(seed) % T_SLOT;
    size_t len = 1 + t_rand(seed) % (3 * T_SLOT - off);

    *addr_p = s->base + (size_t)slot * T_SLOT + off;
    *len_p = len;
}

static void t_check_region(t_stress_t *s, pdc_region_t *r, const uint64_t *snap,
                           char *addr, size_t len)
{
    uintptr_t lo = (uintptr_t)r->addr - (uintptr_t)s->base;
    uintptr_t hi = lo + r->len;
    unsigned k;

    for (k = lo / T_SLOT; k < T_NSLOTS && k * T_SLOT < hi; k++)
        if (r->gen <= snap[k])
            s->violations++;
    if ((uintptr_t)r->addr > (uintptr_t)addr ||
        (uintptr_t)r->addr + r->len < (uintptr_t)addr + len)
        s->violations++;
    if (!t_fake_covered(s->fake, (uintptr_t)r->addr, r->len))
        s->uncovered++;
}

static void *t_getter(void *arg)
{
    t_stress_t *s = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    uint64_t snap[T_NSLOTS];

    while (!s->stop) {
        pdc_dir_t dir = t_rand(&seed) & 1 ? PDC_SEND : PDC_RECV;
        unsigned flags = t_rand(&seed) % 3 == 0 ? PDC_F_NOWAIT : 0;
        pdc_region_t *r;
        char *addr;
        size_t len;
        unsigned k;
        int rc;

        t_range(s, &seed, &addr, &len);
        for (k = 0; k < T_NSLOTS; k++)
            snap[k] = atomic_load_explicit(&s->inv_gen[k], memory_order_acquire);
        rc = pdc_region_get(s->cache, addr, len, dir, flags, &r);
        s->gets++;
        if (rc) {
            if (rc != -EAGAIN && rc != -ENOSPC && rc != -ESTALE)
                s->violations++;
            s->fails++;
            continue;
        }
        t_check_region(s, r, snap, addr, len);
        if (t_rand(&seed) % 8 == 0)
            sched_yield();
        pdc_region_put(s->cache, r, dir);
    }
    return NULL;
}

static void *t_invalidator(void *arg)
{
    t_stress_t *s = arg;
    unsigned seed = 77;

    while (!s->stop) {
        unsigned first = t_rand(&seed) % T_NSLOTS, n = 1 + t_rand(&seed) % 2, k;
        int held = t_rand(&seed) % 4 == 0;
        uint64_t g0;

        if (first + n > T_NSLOTS)
            n = T_NSLOTS - first;
        pthread_mutex_lock(&s->cache->lock);
        g0 = s->cache->gen;
        if (!held)
            pthread_mutex_unlock(&s->cache->lock);
        /* Any byte of the slots: the cache rounds outwards.  With the lock
         * held every call is deferred; repeats overflow the queue. */
        for (k = held ? 1 + t_rand(&seed) % 12 : 1; k > 0; k--)
            pdc_range_invalidate(s->cache, s->base + (size_t)first * T_SLOT + 1,
                                 (size_t)n * T_SLOT - 2);
        if (held)
            pthread_mutex_unlock(&s->cache->lock);
        for (k = first; k < first + n; k++)
            atomic_store_explicit(&s->inv_gen[k], g0, memory_order_release);
        s->invals++;
        if (t_rand(&seed) % 4 == 0)
            usleep(50);
    }
    return NULL;
}

/* Allocation storm: free() events for memory the cache never registered. */
static void *t_storm(void *arg)
{
    t_stress_t *s = arg;
    unsigned seed = 5;

    while (!s->stop) {
        size_t len = 16 + t_rand(&seed) % (200 << 10);
        char *p = malloc(len);

        if (p)
            p[0] = 1;
        pdc_range_invalidate(s->cache, p, len);
        free(p);
    }
    return NULL;
}

/* In the child: nothing registered, the cache works single-threaded. */
static int t_child(t_stress_t *s)
{
    unsigned seed = 99, i;
    int bad = 0;

    pdc_fork_child(s->cache);
    bad |= s->cache->nregions != 0 || s->cache->index.n != 0 || !s->fake->forked;
    for (i = 0; i < 200 && !bad; i++) {
        pdc_region_t *r;
        char *addr;
        size_t len;
        int rc;

        t_range(s, &seed, &addr, &len);
        rc = pdc_region_get(s->cache, addr, len, PDC_SEND, PDC_F_NOWAIT, &r);
        if (rc == -EAGAIN || rc == -ENOSPC)
            continue;
        if (rc) {
            bad = 2;
            break;
        }
        bad |= !t_fake_covered(s->fake, (uintptr_t)r->addr, r->len) << 2;
        pdc_region_put(s->cache, r, PDC_SEND);
        if (i % 3 == 0)
            pdc_range_invalidate(s->cache, addr, len);
    }
    pdc_destroy(s->cache);
    bad |= (s->fake->live != 0 || s->fake->errors != 0) << 3;
    return bad;
}

static void t_stress(void **state)
{
    t_stress_t *s = calloc(1, sizeof(*s));
    pthread_t th[T_GETTERS + 2];
    pdc_params_t p;
    uint64_t t0, run_ms = getenv("QUICK") && *getenv("QUICK") ? 600 : 2000;
    int forked = 0, status, i;
    pid_t pid;

    (void)state;
    s->fake = t_fake_new(256);
    s->base = mmap(NULL, (size_t)T_NSLOTS * T_SLOT, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(s->base != MAP_FAILED);
    t_fake_params(&p, 24 * T_SLOT, 48);     /* evictions happen */
    p.budget[PDC_SEND] = 12 * T_SLOT;      /* and budget waits */
    p.budget[PDC_RECV] = 12 * T_SLOT;
    p.budget_wait_ns = 2000000;
    p.defer_slots = 8;                     /* and queue overflows */
    assert_int_equal(pdc_create(&p, &t_fake_ops, s->fake, &s->cache), 0);
    for (i = 0; i < T_GETTERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, t_getter, s), 0);
    assert_int_equal(pthread_create(&th[T_GETTERS], NULL, t_invalidator, s), 0);
    assert_int_equal(pthread_create(&th[T_GETTERS + 1], NULL, t_storm, s), 0);
    t0 = t_now_ms();
    while (t_now_ms() - t0 < run_ms) {
        usleep(10000);
        if (!forked && t_now_ms() - t0 > run_ms / 2) {
            forked = 1;
            pdc_fork_prepare(s->cache);
            pid = fork();
            if (pid == 0)
                _exit(t_child(s));
            pdc_fork_parent(s->cache);
            assert_true(pid > 0);
            assert_int_equal(waitpid(pid, &status, 0), pid);
            assert_true(WIFEXITED(status));
            assert_int_equal(WEXITSTATUS(status), 0);
        }
    }
    s->stop = 1;
    for (i = 0; i < T_GETTERS + 2; i++)
        pthread_join(th[i], NULL);
    print_message("gets %lu (failed %lu) invalidations %lu regs %lu evictions %lu "
                  "deferred %lu overflows %lu stale retries %lu inflight waits %lu "
                  "budget waits %lu\n",
                  s->gets, s->fails, s->invals,
                  (unsigned long)pdc_stats_get(s->cache, PDC_STAT_REGS),
                  (unsigned long)pdc_stats_get(s->cache, PDC_STAT_EVICTIONS),
                  (unsigned long)pdc_stats_get(s->cache, PDC_STAT_DEFERRED_INVALIDATIONS),
                  (unsigned long)pdc_stats_get(s->cache, PDC_STAT_DEFER_OVERFLOWS),
                  (unsigned long)pdc_stats_get(s->cache, PDC_STAT_STALE_RETRIES),
                  (unsigned long)pdc_stats_get(s->cache, PDC_STAT_INFLIGHT_WAITS),
                  (unsigned long)pdc_stats_get(s->cache, PDC_STAT_BUDGET_WAITS));
    /* what the limits above were set to force did happen */
    assert_true(pdc_stats_get(s->cache, PDC_STAT_EVICTIONS) > 0);
    assert_true(pdc_stats_get(s->cache, PDC_STAT_DEFERRED_INVALIDATIONS) > 0);
    assert_true(pdc_stats_get(s->cache, PDC_STAT_DEFER_OVERFLOWS) > 0);
    assert_true(pdc_stats_get(s->cache, PDC_STAT_BUDGET_WAITS) > 0);
    assert_int_equal(s->violations, 0);
    assert_int_equal(s->uncovered, 0);
    assert_true(s->gets > s->fails);
    assert_int_equal(pdc_stats_get(s->cache, PDC_STAT_BUDGET_SEND), 0);
    assert_int_equal(pdc_stats_get(s->cache, PDC_STAT_BUDGET_RECV), 0);
    assert_true(s->cache->nregions <= 48 && s->cache->pinned <= 24 * T_SLOT);
    pdc_destroy(s->cache);
    assert_int_equal(s->fake->errors, 0);
    assert_int_equal(s->fake->live, 0);
    t_fake_free(s->fake);
    munmap(s->base, (size_t)T_NSLOTS * T_SLOT);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_stress),
    };

    return cmocka_run_group_tests_name("pdc_stress", tests, NULL, NULL);
}
