/* Unit tests of the cache through the fake backend: hits, misses, overlap,
 * reference counts, LRU eviction under both limits, RLIMIT_MEMLOCK (mocked
 * getrlimit/capget), budgets and the delay queue, invalidation of idle and
 * in-use regions, deferred invalidation and its overflow fallback,
 * registration failures, fork, statistics.
 *
 * The whole group runs twice: plainly, then as the re-entrancy pass, where
 * the backend's reg() and dereg() call malloc/free (small and mmap-sized)
 * and pdc_range_invalidate() on unrelated ranges, as an allocator hook
 * would when the cache's own calls allocate (jemalloc's three-pass idea). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include <cmocka.h>

#include "pdc_fake.h"
#include "pdc_int.h"

#define T_PAGE 4096u
#define T_SPACE ((size_t)64 << 20)

typedef struct t_env {
    pdc_t *cache;
    t_fake_t *fake;
    pdc_params_t params;
    char *base;          /* reserved PROT_NONE address space for ranges */
    unsigned hook_calls;
} t_env_t;

static int t_reentrant;
static char t_unrelated[4 * T_PAGE];

/* Mocked syscalls (test_pdc_cache is linked with --wrap for both). */
static int t_mock_rlimit;
static rlim_t t_mock_memlock;
static int t_mock_cap;

int __real_getrlimit(int res, struct rlimit *rl);
int __wrap_getrlimit(int res, struct rlimit *rl)
{
    if (!t_mock_rlimit || res != RLIMIT_MEMLOCK)
        return __real_getrlimit(res, rl);
    rl->rlim_cur = rl->rlim_max = t_mock_memlock;
    return 0;
}

int __real_capget(cap_user_header_t hdr, cap_user_data_t data);
int __wrap_capget(cap_user_header_t hdr, cap_user_data_t data)
{
    if (!t_mock_rlimit)
        return __real_capget(hdr, data);
    memset(data, 0, 2 * sizeof(*data));
    if (t_mock_cap)
        data[0].effective = 1u << CAP_IPC_LOCK;
    return 0;
}

/* The re-entrancy hook: allocate and free (one mmap-sized block), and
 * invalidate ranges the cache never registered. */
static void t_reentrant_hook(void *arg, void *addr, size_t len)
{
    t_env_t *e = arg;
    void *small = malloc(48), *big = malloc(256 << 10);

    (void)addr;
    (void)len;
    e->hook_calls++;
    if (big)
        memset(big, 1, 4096);
    free(small);
    free(big);
    if (e->cache)
        pdc_range_invalidate(e->cache, t_unrelated + 100, T_PAGE);
}

/* Re-entrancy pass: the metadata allocator, called with the cache lock held,
 * allocates too and raises an invalidation (deferred: the lock is busy). */
static t_env_t *t_cur;

static void *t_meta_alloc(void *arg, size_t size)
{
    void *p = malloc(size), *tmp = malloc(size + 128);

    (void)arg;
    free(tmp);
    if (t_cur && t_cur->cache)
        pdc_range_invalidate(t_cur->cache, t_unrelated, 64);
    return p;
}

static void t_meta_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    free(ptr);
    if (t_cur && t_cur->cache)
        pdc_range_invalidate(t_cur->cache, t_unrelated + T_PAGE, 64);
}

static int t_setup(void **state)
{
    t_env_t *e = calloc(1, sizeof(*e));

    e->fake = t_fake_new(64);
    e->base = mmap(NULL, T_SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    assert_true(e->base != MAP_FAILED);
    t_fake_params(&e->params, 1 << 30, 1024);
    if (t_reentrant) {
        e->fake->hook = t_reentrant_hook;
        e->fake->hook_arg = e;
        e->params.alloc = t_meta_alloc;
        e->params.free = t_meta_free;
        t_cur = e;
    }
    *state = e;
    return 0;
}

/* Destroy the cache; the re-entrant allocator must not see it any more. */
static void t_close(t_env_t *e)
{
    pdc_t *c = e->cache;

    e->cache = NULL;
    pdc_destroy(c);
}

static int t_teardown(void **state)
{
    t_env_t *e = *state;

    if (e->cache)
        t_close(e);
    assert_int_equal(e->fake->errors, 0);
    assert_int_equal(e->fake->live, 0);
    if (t_reentrant)
        assert_true(e->hook_calls > 0 || e->fake->regs == 0);
    t_cur = NULL;
    t_fake_free(e->fake);
    munmap(e->base, T_SPACE);
    free(e);
    t_mock_rlimit = 0;
    return 0;
}

static pdc_t *t_open(t_env_t *e)
{
    assert_int_equal(pdc_create(&e->params, &t_fake_ops, e->fake, &e->cache), 0);
    return e->cache;
}

static void *t_addr(t_env_t *e, size_t off)
{
    return e->base + off;
}

static pdc_region_t *t_get(pdc_t *c, void *addr, size_t len, pdc_dir_t dir)
{
    pdc_region_t *r = NULL;

    assert_int_equal(pdc_region_get(c, addr, len, dir, 0, &r), 0);
    assert_non_null(r);
    assert_true((uintptr_t)r->addr <= (uintptr_t)addr);
    assert_true((uintptr_t)r->addr + r->len >= (uintptr_t)addr + len);
    return r;
}

static uint64_t t_stat(pdc_t *c, unsigned idx)
{
    return pdc_stats_get(c, idx);
}

static void t_hit_miss(void **state)
{
    t_env_t *e = *state;
    pdc_t *c = t_open(e);
    pdc_region_t *r1, *r2, *r3;

    r1 = t_get(c, t_addr(e, 100), 60000, PDC_SEND);
    assert_ptr_equal(r1->addr, t_addr(e, 0));
    assert_int_equal(r1->len, 15 * T_PAGE);
    pdc_region_put(c, r1, PDC_SEND);
    r2 = t_get(c, t_addr(e, 0), 15 * T_PAGE, PDC_SEND);   /* exact: hash */
    assert_ptr_equal(r2, r1);
    r3 = t_get(c, t_addr(e, 5 * T_PAGE + 7), 100, PDC_RECV);  /* inside: index */
    assert_ptr_equal(r3, r1);
    pdc_region_put(c, r2, PDC_SEND);
    pdc_region_put(c, r3, PDC_RECV);
    assert_int_equal(pdc_region_get(c, t_addr(e, 0), 16 * T_PAGE, PDC_SEND, PDC_F_NOREG,
                                    &r2), -ENOENT);   /* lookup only */
    assert_int_equal(pdc_region_get(c, t_addr(e, T_PAGE), T_PAGE, PDC_SEND, PDC_F_NOREG,
                                    &r2), 0);
    assert_ptr_equal(r2, r1);
    pdc_region_put(c, r2, PDC_SEND);
    assert_int_equal(t_stat(c, PDC_STAT_GETS), 5);
    assert_int_equal(t_stat(c, PDC_STAT_HITS), 3);
    assert_int_equal(t_stat(c, PDC_STAT_MISSES), 1);
    assert_int_equal(t_stat(c, PDC_STAT_REGS), 1);
    assert_int_equal(t_stat(c, PDC_STAT_BYTES_REGISTERED), 15 * T_PAGE);
    assert_int_equal(t_stat(c, PDC_STAT_REGIONS), 1);
    assert_int_equal(e->fake->live, 1);
    /* PDC_F_NOHIT: found but not counted until the caller says it holds */
    assert_int_equal(pdc_region_get(c, t_addr(e, 0), T_PAGE, PDC_SEND, PDC_F_NOHIT, &r2), 0);
    assert_ptr_equal(r2, r1);
    assert_int_equal(t_stat(c, PDC_STAT_HITS), 3);
    pdc_region_hit(c);
    assert_int_equal(t_stat(c, PDC_STAT_HITS), 4);
    assert_int_equal(t_stat(c, PDC_STAT_MISSES), 1);
    pdc_region_put(c, r2, PDC_SEND);
}

static void t_overlap_merge(void **state)
{
    t_env_t *e = *state;
    pdc_t *c = t_open(e);
    pdc_region_t *a, *b, *d;

    a = t_get(c, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    pdc_region_put(c, a, PDC_SEND);
    b = t_get(c, t_addr(e, 2 * T_PAGE), 6 * T_PAGE, PDC_SEND);
    assert_ptr_equal(b->addr, t_addr(e, 0));           /* merged */
    assert_int_equal(b->len, 8 * T_PAGE);
    assert_int_equal(t_stat(c, PDC_STAT_MERGES), 1);
    assert_int_equal(e->fake->live, 1);                 /* a deregistered */
    /* A third range overlapping b while b is in use, without merging. */
    assert_int_equal(pdc_region_get(c, t_addr(e, 7 * T_PAGE), 2 * T_PAGE, PDC_SEND,
                                    PDC_F_NOMERGE, &d), 0);
    assert_ptr_equal(d->addr, t_addr(e, 7 * T_PAGE));
    assert_int_equal(d->len, 2 * T_PAGE);
    assert_int_equal(e->fake->live, 2);                 /* b: a zombie */
    pdc_region_put(c, b, PDC_SEND);                      /* deregisters b */
    assert_int_equal(e->fake->live, 1);
    pdc_region_put(c, d, PDC_SEND);
    /* Disjoint neighbours stay separate. */
    a = t_get(c, t_addr(e, 20 * T_PAGE), T_PAGE, PDC_SEND);
    b = t_get(c, t_addr(e, 21 * T_PAGE), T_PAGE, PDC_SEND);
    assert_ptr_not_equal(a, b);
    pdc_region_put(c, a, PDC_SEND);
    pdc_region_put(c, b, PDC_SEND);
    assert_int_equal(c->index.n, 3);
}

static void t_refcount_invalidate_inuse(void **state)
{
    t_env_t *e = *state;
    pdc_t *c = t_open(e);
    pdc_region_t *a, *b, *n;
    uint64_t gen;

    a = t_get(c, t_addr(e, 0), 8 * T_PAGE, PDC_SEND);
    b = t_get(c, t_addr(e, 0), 8 * T_PAGE, PDC_RECV);
    assert_ptr_equal(a, b);
    gen = a->gen;
    pdc_range_invalidate(c, t_addr(e, 3 * T_PAGE + 5), 1);
    assert_int_equal(t_stat(c, PDC_STAT_INVALIDATIONS), 1);
    n = t_get(c, t_addr(e, 0), 8 * T_PAGE, PDC_SEND);   /* never the old one */
    assert_ptr_not_equal(n, a);
    assert_true(n->gen > gen);
    assert_int_not_equal(n->handle.aux, a->handle.aux);
    assert_int_equal(e->fake->live, 2);   /* the old one is still in use */
    assert_ptr_equal(a->addr, t_addr(e, 0));   /* and still readable */
    pdc_region_put(c, a, PDC_SEND);
    assert_int_equal(e->fake->live, 2);
    pdc_region_put(c, b, PDC_RECV);       /* last put deregisters */
    assert_int_equal(e->fake->live, 1);
    assert_int_equal(t_stat(c, PDC_STAT_DEREGS), 1);
    pdc_region_put(c, n, PDC_SEND);
    assert_int_equal(t_stat(c, PDC_STAT_BUDGET_SEND), 0);
    assert_int_equal(t_stat(c, PDC_STAT_BUDGET_RECV), 0);
}

static void t_invalidate_idle(void **state)
{
    t_env_t *e = *state;
    pdc_t *c = t_open(e);
    pdc_region_t *a, *n;
    uint64_t gen;

    a = t_get(c, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    gen = a->gen;
    pdc_region_put(c, a, PDC_SEND);
    pdc_range_invalidate(c, t_addr(e, 4 * T_PAGE), T_PAGE);   /* adjacent: no */
    assert_int_equal(t_stat(c, PDC_STAT_INVALIDATIONS), 0);
    pdc_range_invalidate(c, t_addr(e, 4 * T_PAGE - 1), 1);
    assert_int_equal(t_stat(c, PDC_STAT_INVALIDATIONS), 1);
    assert_int_equal(e->fake->live, 1);   /* dereg happens outside the hook */
    pdc_cache_reap(c);
    assert_int_equal(e->fake->live, 0);
    n = t_get(c, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    assert_true(n->gen > gen);
    assert_int_equal(t_stat(c, PDC_STAT_MISSES), 2);
    pdc_region_put(c, n, PDC_SEND);
    pdc_cache_flush(c);
    assert_int_equal(e->fake->live, 0);
    assert_int_equal(t_stat(c, PDC_STAT_REGIONS), 0);
}

/* Register n one-page regions at pages first.., leaving them idle. */
static void t_fill(t_env_t *e, unsigned first, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        pdc_region_t *r = t_get(e->cache, t_addr(e, (first + i) * 2 * T_PAGE), T_PAGE,
                                PDC_SEND);

        pdc_region_put(e->cache, r, PDC_SEND);
    }
}

static int t_present(t_env_t *e, unsigned idx)
{
    return t_fake_covered(e->fake, (uintptr_t)t_addr(e, idx * 2 * T_PAGE), T_PAGE);
}

static void t_lru_entries(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r;

    e->params.max_entries = 4;
    t_open(e);
    t_fill(e, 0, 4);
    r = t_get(e->cache, t_addr(e, 0), T_PAGE, PDC_SEND);   /* touch #0 */
    pdc_region_put(e->cache, r, PDC_SEND);
    t_fill(e, 4, 1);                                       /* evicts #1 */
    assert_int_equal(t_stat(e->cache, PDC_STAT_EVICTIONS), 1);
    assert_true(t_present(e, 0));
    assert_false(t_present(e, 1));
    assert_true(t_present(e, 2) && t_present(e, 3) && t_present(e, 4));
    t_fill(e, 5, 2);                                       /* evicts #2, #3 */
    assert_false(t_present(e, 2) || t_present(e, 3));
    assert_int_equal(e->fake->live, 4);
    assert_int_equal(t_stat(e->cache, PDC_STAT_REGIONS), 4);
}

static void t_lru_bytes(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r, *big;

    e->params.max_bytes = 4 * T_PAGE;
    t_open(e);
    t_fill(e, 0, 4);
    r = t_get(e->cache, t_addr(e, 2 * 2 * T_PAGE), T_PAGE, PDC_SEND);   /* #2 */
    pdc_region_put(e->cache, r, PDC_SEND);
    big = t_get(e->cache, t_addr(e, 40 * T_PAGE), 2 * T_PAGE, PDC_SEND);
    assert_false(t_present(e, 0) || t_present(e, 1));
    assert_true(t_present(e, 2) && t_present(e, 3));
    assert_int_equal(t_stat(e->cache, PDC_STAT_PINNED_BYTES), 4 * T_PAGE);
    pdc_region_put(e->cache, big, PDC_SEND);
}

static void t_nospace(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *a, *b, *x = NULL;

    e->params.max_entries = 2;
    t_open(e);
    a = t_get(e->cache, t_addr(e, 0), T_PAGE, PDC_SEND);
    b = t_get(e->cache, t_addr(e, 4 * T_PAGE), T_PAGE, PDC_SEND);
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 8 * T_PAGE), T_PAGE, PDC_SEND, 0,
                                    &x), -ENOSPC);
    assert_null(x);
    assert_int_equal(t_stat(e->cache, PDC_STAT_NOSPACE), 1);
    pdc_region_put(e->cache, a, PDC_SEND);
    x = t_get(e->cache, t_addr(e, 8 * T_PAGE), T_PAGE, PDC_SEND);   /* evicts a */
    pdc_region_put(e->cache, x, PDC_SEND);
    pdc_region_put(e->cache, b, PDC_SEND);
    /* Larger than the byte limit: never. */
    e->params.max_bytes = 2 * T_PAGE;
    t_close(e);
    t_open(e);
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 0), 3 * T_PAGE, PDC_SEND, 0, &x),
                     -ENOSPC);
}

static void t_memlock(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r = NULL;

    t_mock_rlimit = 1;
    t_mock_memlock = 8 * T_PAGE;
    t_mock_cap = 0;
    e->params.memlock_bytes = PDC_MEMLOCK_AUTO;
    t_open(e);
    assert_int_equal(e->cache->max_bytes, 8 * T_PAGE);
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 0), 9 * T_PAGE, PDC_SEND, 0, &r),
                     -ENOSPC);
    r = t_get(e->cache, t_addr(e, 0), 8 * T_PAGE, PDC_SEND);
    pdc_region_put(e->cache, r, PDC_SEND);
    t_close(e);
    t_mock_cap = 1;                       /* CAP_IPC_LOCK: no memlock charge */
    t_open(e);
    assert_int_equal(e->cache->max_bytes, e->params.max_bytes);
    t_close(e);
    t_mock_cap = 0;
    t_mock_memlock = RLIM_INFINITY;
    t_open(e);
    assert_int_equal(e->cache->max_bytes, e->params.max_bytes);
    t_close(e);
    t_mock_memlock = 8 * T_PAGE;          /* an explicit value wins */
    e->params.memlock_bytes = 2 * T_PAGE;
    t_open(e);
    assert_int_equal(e->cache->max_bytes, 2 * T_PAGE);
}

static void t_budget_nowait(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *a, *b, *x = NULL;

    e->params.budget[PDC_SEND] = 16 * T_PAGE;
    e->params.budget[PDC_RECV] = 16 * T_PAGE;
    t_open(e);
    a = t_get(e->cache, t_addr(e, 0), 16 * T_PAGE, PDC_SEND);
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 64 * T_PAGE), T_PAGE, PDC_SEND,
                                    PDC_F_NOWAIT, &x), -EAGAIN);
    assert_null(x);
    /* The same region again is already charged: it fits. */
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 0), T_PAGE, PDC_SEND,
                                    PDC_F_NOWAIT, &x), 0);
    assert_ptr_equal(x, a);
    pdc_region_put(e->cache, x, PDC_SEND);
    b = t_get(e->cache, t_addr(e, 64 * T_PAGE), 16 * T_PAGE, PDC_RECV);   /* own budget */
    assert_int_equal(t_stat(e->cache, PDC_STAT_BUDGET_EAGAIN), 1);
    assert_int_equal(t_stat(e->cache, PDC_STAT_BUDGET_SEND), 16 * T_PAGE);
    pdc_region_put(e->cache, a, PDC_SEND);
    x = t_get(e->cache, t_addr(e, 64 * T_PAGE), T_PAGE, PDC_SEND);
    pdc_region_put(e->cache, x, PDC_SEND);
    pdc_region_put(e->cache, b, PDC_RECV);
    /* A single request above the budget passes when nothing is charged:
     * progress is always possible. */
    x = t_get(e->cache, t_addr(e, 200 * T_PAGE), 32 * T_PAGE, PDC_SEND);
    pdc_region_put(e->cache, x, PDC_SEND);
}

static void t_budget_cb(void *arg)
{
    (*(int *)arg)++;
}

static void t_budget_delay_queue(void **state)
{
    t_env_t *e = *state;
    pdc_budget_waiter_t w1, w2, w3;
    int fired1 = 0, fired2 = 0, fired3 = 0;
    pdc_region_t *a, *x = NULL;

    e->params.budget[PDC_SEND] = 8 * T_PAGE;
    t_open(e);
    assert_int_equal(pdc_budget_wait(e->cache, &w1, PDC_SEND, T_PAGE, t_budget_cb,
                                     &fired1), 1);   /* fits now */
    a = t_get(e->cache, t_addr(e, 0), 8 * T_PAGE, PDC_SEND);
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 32 * T_PAGE), T_PAGE, PDC_SEND,
                                    PDC_F_NOWAIT, &x), -EAGAIN);
    assert_int_equal(pdc_budget_wait(e->cache, &w1, PDC_SEND, T_PAGE, t_budget_cb,
                                     &fired1), 0);
    assert_int_equal(pdc_budget_wait(e->cache, &w2, PDC_SEND, T_PAGE, t_budget_cb,
                                     &fired2), 0);
    assert_int_equal(pdc_budget_wait(e->cache, &w3, PDC_SEND, T_PAGE, t_budget_cb,
                                     &fired3), 0);
    assert_int_equal(pdc_budget_cancel(e->cache, &w2), 0);
    assert_int_equal(pdc_budget_cancel(e->cache, &w2), -ENOENT);
    pdc_region_put(e->cache, a, PDC_SEND);
    assert_int_equal(fired1, 1);
    assert_int_equal(fired2, 0);
    assert_int_equal(fired3, 1);
    assert_int_equal(pdc_budget_cancel(e->cache, &w1), -ENOENT);
    x = t_get(e->cache, t_addr(e, 32 * T_PAGE), T_PAGE, PDC_SEND);
    pdc_region_put(e->cache, x, PDC_SEND);
    assert_int_equal(fired1 + fired3, 2);   /* fired once each */
}

typedef struct t_putter {
    pdc_t *cache;
    pdc_region_t *r;
    unsigned delay_us;
} t_putter_t;

static void *t_putter_main(void *arg)
{
    t_putter_t *p = arg;

    usleep(p->delay_us);
    pdc_region_put(p->cache, p->r, PDC_SEND);
    return NULL;
}

static void t_budget_blocking(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *a, *x = NULL;
    struct timespec t0, t1;
    t_putter_t p;
    pthread_t th;
    long ms;

    e->params.budget[PDC_SEND] = 8 * T_PAGE;
    e->params.budget_wait_ns = 30 * 1000000ull;
    t_open(e);
    a = t_get(e->cache, t_addr(e, 0), 8 * T_PAGE, PDC_SEND);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 32 * T_PAGE), T_PAGE, PDC_SEND, 0,
                                    &x), -EAGAIN);   /* bounded wait */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    assert_true(ms >= 25);          /* it waited (how long at most is the bench's) */
    assert_true(t_stat(e->cache, PDC_STAT_BUDGET_WAITS) >= 1);
    /* Another thread releases the budget: the blocked get proceeds. */
    e->params.budget_wait_ns = 5000 * 1000000ull;
    t_close(e);
    pdc_region_put(NULL, a, PDC_SEND);   /* ignored */
    t_open(e);
    a = t_get(e->cache, t_addr(e, 0), 8 * T_PAGE, PDC_SEND);
    p.cache = e->cache;
    p.r = a;
    p.delay_us = 20000;
    assert_int_equal(pthread_create(&th, NULL, t_putter_main, &p), 0);
    x = t_get(e->cache, t_addr(e, 32 * T_PAGE), T_PAGE, PDC_SEND);
    pthread_join(th, NULL);
    assert_true(t_stat(e->cache, PDC_STAT_BUDGET_WAITS) >= 1);
    pdc_region_put(e->cache, x, PDC_SEND);
}

static void t_deferred_lock_held(void **state)
{
    t_env_t *e = *state;
    pdc_t *c = t_open(e);
    pdc_region_t *a, *n;
    uint64_t gen;

    a = t_get(c, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    gen = a->gen;
    pdc_region_put(c, a, PDC_SEND);
    pthread_mutex_lock(&c->lock);              /* as if another op ran */
    pdc_range_invalidate(c, t_addr(e, T_PAGE), 10);
    pthread_mutex_unlock(&c->lock);
    assert_int_equal(t_stat(c, PDC_STAT_DEFERRED_INVALIDATIONS), 1);
    assert_int_equal(t_stat(c, PDC_STAT_INVALIDATIONS), 0);
    n = t_get(c, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    assert_true(n->gen > gen);
    assert_int_equal(t_stat(c, PDC_STAT_INVALIDATIONS), 1);
    pdc_region_put(c, n, PDC_SEND);
    assert_int_equal(e->fake->live, 1);
}

static void t_defer_overflow(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *a, *n;
    uint64_t gen;
    unsigned i;

    e->params.defer_slots = 4;
    t_open(e);
    a = t_get(e->cache, t_addr(e, 300 * T_PAGE), T_PAGE, PDC_SEND);  /* bounds */
    pdc_region_put(e->cache, a, PDC_SEND);
    a = t_get(e->cache, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    gen = a->gen;
    pdc_region_put(e->cache, a, PDC_SEND);
    pthread_mutex_lock(&e->cache->lock);
    /* Outside every registration: filtered without the lock or the queue. */
    pdc_range_invalidate(e->cache, t_addr(e, 400 * T_PAGE), T_PAGE);
    assert_int_equal(t_stat(e->cache, PDC_STAT_DEFERRED_INVALIDATIONS), 0);
    for (i = 0; i < 10; i++)   /* unrelated ranges, more than the queue holds */
        pdc_range_invalidate(e->cache, t_addr(e, (100 + i) * T_PAGE), T_PAGE);
    pthread_mutex_unlock(&e->cache->lock);
    assert_int_equal(t_stat(e->cache, PDC_STAT_DEFERRED_INVALIDATIONS), 10);
    assert_int_equal(t_stat(e->cache, PDC_STAT_DEFER_OVERFLOWS), 6);
    n = t_get(e->cache, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);   /* flushed */
    assert_true(n->gen > gen);
    gen = n->gen;
    assert_int_equal(t_stat(e->cache, PDC_STAT_FLUSHES), 1);
    pdc_region_put(e->cache, n, PDC_SEND);
    /* The queue works again afterwards. */
    pthread_mutex_lock(&e->cache->lock);
    pdc_range_invalidate(e->cache, t_addr(e, 0), 1);
    pthread_mutex_unlock(&e->cache->lock);
    a = t_get(e->cache, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    assert_true(a->gen > gen);
    assert_int_equal(t_stat(e->cache, PDC_STAT_FLUSHES), 1);
    pdc_region_put(e->cache, a, PDC_SEND);
}

static void t_defer_queue(void **state)
{
    pdc_defer_t q;
    pdc_defer_cell_t cells[8];
    uintptr_t a;
    size_t l;
    unsigned i, round;

    (void)state;
    memset(&q, 0, sizeof(q));
    q.cells = cells;
    q.mask = 7;
    for (i = 0; i < 8; i++)
        atomic_init(&cells[i].seq, i);
    for (round = 0; round < 3; round++) {
        for (i = 0; i < 8; i++)
            assert_int_equal(pdc_defer_push(&q, 1000 + i, i + 1), 0);
        assert_int_equal(pdc_defer_push(&q, 1, 1), -ENOSPC);
        for (i = 0; i < 8; i++) {
            assert_int_equal(pdc_defer_pop(&q, &a, &l), 0);
            assert_int_equal(a, 1000 + i);
            assert_int_equal(l, i + 1);
        }
        assert_int_equal(pdc_defer_pop(&q, &a, &l), -EAGAIN);
    }
}

/* Invalidate the range being registered while reg() runs: the get must not
 * return that registration. */
static void t_inflight_hook(void *arg, void *addr, size_t len)
{
    t_env_t *e = arg;

    if (addr && e->hook_calls++ == 0)
        pdc_range_invalidate(e->cache, addr, len);
}

static void t_inflight_invalidate(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r;

    e->fake->hook = t_inflight_hook;
    e->fake->hook_arg = e;
    t_open(e);
    r = t_get(e->cache, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    assert_int_equal(t_stat(e->cache, PDC_STAT_STALE_RETRIES), 1);
    assert_int_equal(t_stat(e->cache, PDC_STAT_REGS), 2);
    assert_int_equal(t_stat(e->cache, PDC_STAT_DEREGS), 1);
    assert_int_equal(e->fake->live, 1);
    assert_int_equal(r->handle.aux, 2);   /* the second registration */
    pdc_region_put(e->cache, r, PDC_SEND);
}

static void t_reg_fail(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r = NULL;

    e->params.budget[PDC_SEND] = 64 * T_PAGE;
    t_open(e);
    e->fake->fail_next = 1;
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 0), 4 * T_PAGE, PDC_SEND, 0, &r),
                     -ENOMEM);
    assert_null(r);
    assert_int_equal(t_stat(e->cache, PDC_STAT_REG_FAILS), 1);
    assert_int_equal(t_stat(e->cache, PDC_STAT_REGIONS), 0);
    assert_int_equal(t_stat(e->cache, PDC_STAT_PINNED_BYTES), 0);
    assert_int_equal(t_stat(e->cache, PDC_STAT_BUDGET_SEND), 0);
    assert_int_equal(t_stat(e->cache, PDC_STAT_DEREGS), 0);
    r = t_get(e->cache, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    pdc_region_put(e->cache, r, PDC_SEND);
    /* -ENOMEM from the backend (memlock shared with other processes): idle
     * regions are evicted and the registration retried once. */
    e->fake->fail_next = 1;
    r = t_get(e->cache, t_addr(e, 16 * T_PAGE), 2 * T_PAGE, PDC_SEND);
    assert_int_equal(t_stat(e->cache, PDC_STAT_EVICTIONS), 1);
    assert_int_equal(t_stat(e->cache, PDC_STAT_REG_FAILS), 2);
    assert_int_equal(e->fake->live, 1);
    pdc_region_put(e->cache, r, PDC_SEND);
}

/* Memory the backend cannot pin (a file mapping): remembered, not retried,
 * until invalidated; a merged attempt is not remembered. */
static void t_negative(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r = NULL;
    uint64_t calls;

    t_open(e);
    e->fake->fail_next = 1;
    e->fake->fail_err = -EFAULT;
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 0), 4 * T_PAGE, PDC_SEND, 0, &r),
                     -EFAULT);
    calls = e->fake->reg_calls;
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, T_PAGE), T_PAGE, PDC_SEND, 0, &r),
                     -EFAULT);                       /* inside: no new attempt */
    assert_int_equal(e->fake->reg_calls, calls);
    assert_null(r);
    assert_int_equal(t_stat(e->cache, PDC_STAT_NEG_ENTRIES), 1);
    assert_int_equal(t_stat(e->cache, PDC_STAT_NEG_HITS), 1);
    assert_int_equal(t_stat(e->cache, PDC_STAT_PINNED_BYTES), 0);
    assert_int_equal(t_stat(e->cache, PDC_STAT_REGIONS), 1);
    assert_int_equal(t_stat(e->cache, PDC_STAT_BUDGET_SEND), 0);
    /* Partly outside: a new attempt replaces the negative entry. */
    r = t_get(e->cache, t_addr(e, 2 * T_PAGE), 4 * T_PAGE, PDC_SEND);
    assert_ptr_equal(r->addr, t_addr(e, 2 * T_PAGE));   /* not merged with it */
    pdc_region_put(e->cache, r, PDC_SEND);
    assert_int_equal(t_stat(e->cache, PDC_STAT_REGIONS), 1);
    /* Invalidation forgets a negative entry too. */
    e->fake->fail_next = 1;
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 20 * T_PAGE), T_PAGE, PDC_SEND, 0,
                                    &r), -EFAULT);
    pdc_range_invalidate(e->cache, t_addr(e, 20 * T_PAGE), 1);
    r = t_get(e->cache, t_addr(e, 20 * T_PAGE), T_PAGE, PDC_SEND);
    pdc_region_put(e->cache, r, PDC_SEND);
    /* A failed merged registration is not remembered. */
    e->fake->fail_next = 1;
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 20 * T_PAGE + 100), T_PAGE,
                                    PDC_SEND, 0, &r), -EFAULT);   /* overlaps page 20 */
    assert_int_equal(t_stat(e->cache, PDC_STAT_NEG_ENTRIES), 2);
    r = t_get(e->cache, t_addr(e, 20 * T_PAGE + 100), T_PAGE, PDC_SEND);
    pdc_region_put(e->cache, r, PDC_SEND);
    /* Transient errors are never remembered (t_reg_fail). */
}

static void t_fork_child_drop(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *held, *idle, *n;
    uint64_t held_gen;
    int status;
    pid_t pid;

    t_open(e);
    held = t_get(e->cache, t_addr(e, 0), 4 * T_PAGE, PDC_SEND);
    idle = t_get(e->cache, t_addr(e, 16 * T_PAGE), 4 * T_PAGE, PDC_SEND);
    pdc_region_put(e->cache, idle, PDC_SEND);
    held_gen = held->gen;
    pdc_fork_prepare(e->cache);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = 0;

        pdc_fork_child(e->cache);
        bad |= !e->fake->forked;
        bad |= (pdc_stats_get(e->cache, PDC_STAT_REGIONS) != 0) << 1;
        bad |= (e->cache->index.n != 0) << 2;
        pdc_region_put(e->cache, held, PDC_SEND);   /* harmless */
        bad |= (e->fake->deregs != 0) << 3;         /* parent's state untouched */
        if (pdc_region_get(e->cache, t_addr(e, 0), 4 * T_PAGE, PDC_SEND, 0, &n) != 0) {
            bad |= 1 << 4;
        } else {
            bad |= (n->gen <= held_gen || e->fake->live != 1) << 5;
            pdc_region_put(e->cache, n, PDC_SEND);
        }
        t_close(e);
        bad |= (e->fake->live != 0 || e->fake->errors != 0) << 6;
        _exit(bad);
    }
    pdc_fork_parent(e->cache);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(e->fake->live, 2);   /* the parent keeps its own */
    n = t_get(e->cache, t_addr(e, 16 * T_PAGE), 4 * T_PAGE, PDC_SEND);
    assert_ptr_equal(n, idle);
    pdc_region_put(e->cache, n, PDC_SEND);
    pdc_region_put(e->cache, held, PDC_SEND);
}

static __attribute__((noinline)) pdc_region_t *t_site_helper(t_env_t *e, size_t off)
{
    pdc_region_t *r = NULL;

    assert_int_equal(pdc_region_get(e->cache, t_addr(e, off), T_PAGE, PDC_SEND, 0, &r), 0);
    return r;
}

static __attribute__((noinline)) void t_site_invalidate(t_env_t *e, size_t off)
{
    pdc_range_invalidate(e->cache, t_addr(e, off), T_PAGE);
    __asm__ volatile("" ::: "memory");   /* no tail call: one site */
}

static uintptr_t t_site_func(void *arg, pdc_site_kind_t kind)
{
    (void)arg;
    return kind == PDC_SITE_INVALIDATE ? 0x1234 : 0;   /* 0: pdc decides */
}

static void t_stats_sites(void **state)
{
    t_env_t *e = *state;
    pdc_site_t sites[4];
    char buf[256];
    unsigned i, n;
    pdc_region_t *r;

    for (i = 0; i < PDC_STAT_COUNT; i++) {
        assert_non_null(pdc_stat_names[i]);
        assert_memory_equal(pdc_stat_names[i], "pdc.", 4);
    }
    assert_string_equal(pdc_stat_names[PDC_STAT_GETS], "pdc.gets");
    assert_string_equal(pdc_stat_names[PDC_STAT_REG_NS], "pdc.reg_ns");
    t_open(e);
    assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_COUNT), 0);
    for (i = 0; i < 5; i++) {
        r = t_site_helper(e, i * 4 * T_PAGE);
        pdc_region_put(e->cache, r, PDC_SEND);
    }
    n = pdc_stats_sites(e->cache, PDC_SITE_MISS, sites, 4);
    assert_int_equal(n, 1);   /* all from t_site_helper */
    assert_int_equal(sites[0].count, 5);
    assert_true(pdc_stats_get(e->cache, PDC_STAT_REG_NS) > 0);
    t_site_invalidate(e, 0);
    t_site_invalidate(e, 4 * T_PAGE);
    t_site_invalidate(e, 500 * T_PAGE);   /* hits nothing: not counted */
    n = pdc_stats_sites(e->cache, PDC_SITE_INVALIDATE, sites, 4);
    assert_int_equal(n, 1);
    assert_int_equal(sites[0].count, 2);
    assert_true(strlen(pdc_site_format(sites[0].pc, buf, sizeof(buf))) > 0);
    assert_true(pdc_stats_sites_format(e->cache, "pdc", 3, buf, sizeof(buf)) > 0);
    assert_non_null(strstr(buf, "pdc.top_miss.1: 5 "));
    assert_non_null(strstr(buf, "pdc.top_invalidate.1: 2 "));
    assert_null(strstr(buf, "top_miss.2"));
    assert_int_equal(pdc_stats_sites_format(e->cache, "pdc", 3, buf, 10), 9);
    assert_int_equal(pdc_stats_read(e->cache, PDC_STAT_MISSES), 5);
    t_close(e);
    /* Unwinding: charge the caller of t_site_helper instead, so its two
     * call sites are two sites (without unwinding both are one, above). */
    e->params.flags = PDC_P_UNWIND_SITES;
    e->params.site_skip = 1;
    t_open(e);
    r = t_site_helper(e, 0);
    pdc_region_put(e->cache, r, PDC_SEND);
    r = t_site_helper(e, 8 * T_PAGE);
    pdc_region_put(e->cache, r, PDC_SEND);
    n = pdc_stats_sites(e->cache, PDC_SITE_MISS, sites, 4);
    assert_int_equal(n, 2);
    assert_true(sites[0].pc != sites[1].pc);
    t_close(e);
    /* A site hook supplied by the caller. */
    e->params.flags = 0;
    e->params.site_func = t_site_func;
    t_open(e);
    r = t_site_helper(e, 0);
    pdc_region_put(e->cache, r, PDC_SEND);
    t_site_invalidate(e, 0);
    assert_int_equal(pdc_stats_sites(e->cache, PDC_SITE_INVALIDATE, sites, 4), 1);
    assert_int_equal(sites[0].pc, 0x1234);
    assert_int_equal(pdc_stats_sites(e->cache, PDC_SITE_MISS, sites, 4), 1);
    assert_true(sites[0].pc != 0x1234);
}

static void t_args(void **state)
{
    t_env_t *e = *state;
    pdc_params_t p = e->params;
    pdc_region_t *r = NULL;
    pdc_t *c = NULL;

    p.alloc = NULL;
    assert_int_equal(pdc_create(&p, &t_fake_ops, e->fake, &c), -EINVAL);
    p = e->params;
    p.defer_slots = 6;
    assert_int_equal(pdc_create(&p, &t_fake_ops, e->fake, &c), -EINVAL);
    assert_int_equal(pdc_create(&e->params, NULL, e->fake, &c), -EINVAL);
    assert_null(c);
    t_open(e);
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 0), 0, PDC_SEND, 0, &r), -EINVAL);
    assert_int_equal(pdc_region_get(e->cache, t_addr(e, 0), 1, (pdc_dir_t)2, 0, &r),
                     -EINVAL);
    assert_int_equal(pdc_region_get(e->cache, (void *)(UINTPTR_MAX - 10), 100, PDC_SEND,
                                    0, &r), -EINVAL);
    assert_null(r);
    pdc_range_invalidate(NULL, t_addr(e, 0), 1);
    pdc_range_invalidate(e->cache, t_addr(e, 0), 0);
    pdc_range_invalidate(e->cache, (void *)(UINTPTR_MAX - 10), 100);
}

static void t_destroy_live(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r;
    unsigned i;

    t_open(e);
    for (i = 0; i < 20; i++) {
        r = t_get(e->cache, t_addr(e, i * 3 * T_PAGE), 2 * T_PAGE, PDC_SEND);
        if (i % 2)
            pdc_region_put(e->cache, r, PDC_SEND);
    }
    pdc_range_invalidate(e->cache, t_addr(e, 0), 6 * T_PAGE);
    assert_int_equal(e->fake->live, 20);
    pdc_cache_reap(e->cache);   /* region 0: a zombie now; 1 deregistered */
    assert_int_equal(e->fake->live, 19);
    /* pdc_destroy() in the teardown deregisters all, held ones too. */
}

#define T_CASES                                                              \
    cmocka_unit_test_setup_teardown(t_hit_miss, t_setup, t_teardown),        \
    cmocka_unit_test_setup_teardown(t_overlap_merge, t_setup, t_teardown),   \
    cmocka_unit_test_setup_teardown(t_refcount_invalidate_inuse, t_setup,    \
                                    t_teardown),                             \
    cmocka_unit_test_setup_teardown(t_invalidate_idle, t_setup, t_teardown), \
    cmocka_unit_test_setup_teardown(t_lru_entries, t_setup, t_teardown),     \
    cmocka_unit_test_setup_teardown(t_lru_bytes, t_setup, t_teardown),       \
    cmocka_unit_test_setup_teardown(t_nospace, t_setup, t_teardown),         \
    cmocka_unit_test_setup_teardown(t_memlock, t_setup, t_teardown),         \
    cmocka_unit_test_setup_teardown(t_budget_nowait, t_setup, t_teardown),   \
    cmocka_unit_test_setup_teardown(t_budget_delay_queue, t_setup,           \
                                    t_teardown),                             \
    cmocka_unit_test_setup_teardown(t_budget_blocking, t_setup, t_teardown), \
    cmocka_unit_test_setup_teardown(t_deferred_lock_held, t_setup,           \
                                    t_teardown),                             \
    cmocka_unit_test_setup_teardown(t_defer_overflow, t_setup, t_teardown),  \
    cmocka_unit_test(t_defer_queue),                                         \
    cmocka_unit_test_setup_teardown(t_inflight_invalidate, t_setup,          \
                                    t_teardown),                             \
    cmocka_unit_test_setup_teardown(t_reg_fail, t_setup, t_teardown),        \
    cmocka_unit_test_setup_teardown(t_negative, t_setup, t_teardown),        \
    cmocka_unit_test_setup_teardown(t_fork_child_drop, t_setup, t_teardown), \
    cmocka_unit_test_setup_teardown(t_stats_sites, t_setup, t_teardown),     \
    cmocka_unit_test_setup_teardown(t_args, t_setup, t_teardown),            \
    cmocka_unit_test_setup_teardown(t_destroy_live, t_setup, t_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = { T_CASES };
    int failed;

    failed = cmocka_run_group_tests_name("pdc_cache", tests, NULL, NULL);
    t_reentrant = 1;
    failed += cmocka_run_group_tests_name("pdc_cache_reentrant", tests, NULL, NULL);
    return failed ? 1 : 0;
}
