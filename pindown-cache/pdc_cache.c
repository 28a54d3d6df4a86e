/* pdc_cache: the cache proper - create/destroy, get/put, LRU eviction under
 * the limits, per-direction budgets and their delay queue, fork.
 *
 * Every operation starts with the prologue: apply deferred invalidations,
 * then reap the dead list (unhash, deregister what nobody references).
 *
 * A miss inserts an in-flight placeholder (referenced by the registering
 * thread, charged to the limits and the budget), drops the lock while the
 * backend registers, and retakes it.  Gets that overlap a placeholder wait
 * for it.  An invalidation that lands while the registration is in flight
 * kills the placeholder like any region; its deregistration is deferred
 * until the registration returns, and the get retries (-ESTALE after a few
 * rounds).  So a get never returns a region killed before it returns. */
#include <errno.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "pdc_int.h"

#define PDC_RETRY 1           /* internal: state changed, look up again */
#define PDC_STALE_TRIES 3
#define PDC_RS_FAILED 0       /* reg() failed: nothing to deregister */
#define PDC_DEFAULT_BUDGET ((size_t)128 << 20)
#define PDC_DEFAULT_WAIT_NS 10000000ull
#define PDC_DEFAULT_DEFER 256u

extern int capget(cap_user_header_t hdr, cap_user_data_t data);

void pdc_params_default(pdc_params_t *params)
{
    memset(params, 0, sizeof(*params));
    params->max_bytes = PDC_DEFAULT_MAX_BYTES;
    params->max_entries = PDC_DEFAULT_MAX_ENTRIES;
    params->memlock_bytes = PDC_MEMLOCK_AUTO;
    params->budget[PDC_SEND] = PDC_DEFAULT_BUDGET;
    params->budget[PDC_RECV] = PDC_DEFAULT_BUDGET;
    params->budget_wait_ns = PDC_DEFAULT_WAIT_NS;
    params->defer_slots = PDC_DEFAULT_DEFER;
    params->site_skip = 1;
}

/* 1 when this process may lock memory without limit (CAP_IPC_LOCK): then
 * io_uring does not charge registrations to RLIMIT_MEMLOCK. */
static int pdc_cap_ipc_lock(void)
{
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[2];

    memset(data, 0, sizeof(data));
    if (capget(&hdr, data) != 0)
        return 0;
    return !!(data[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32)));
}

static size_t pdc_memlock_limit(size_t param)
{
    struct rlimit rl;

    if (param != PDC_MEMLOCK_AUTO)
        return param;
    if (pdc_cap_ipc_lock())
        return SIZE_MAX;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return SIZE_MAX;
    return (size_t)rl.rlim_cur;
}

static void pdc_conds_init(pdc_t *cache)
{
    pthread_condattr_t attr;

    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&cache->reg_cond, &attr);
    pthread_cond_init(&cache->budget_cond, &attr);
    pthread_condattr_destroy(&attr);
    cache->budget_sleepers = 0;
}

static int pdc_params_check(const pdc_params_t *params, const pdc_ops_t *ops)
{
    if (!params || !ops || !ops->reg || !ops->dereg)
        return -EINVAL;
    if (!params->alloc || !params->free)
        return -EINVAL;
    if (params->defer_slots && (params->defer_slots & (params->defer_slots - 1)))
        return -EINVAL;
    return 0;
}

static void pdc_limits_init(pdc_t *cache)
{
    pdc_params_t *p = &cache->params;
    size_t memlock;

    if (!p->max_bytes)
        p->max_bytes = PDC_DEFAULT_MAX_BYTES;
    if (!p->max_entries)
        p->max_entries = PDC_DEFAULT_MAX_ENTRIES;
    if (!p->defer_slots)
        p->defer_slots = PDC_DEFAULT_DEFER;
    memlock = pdc_memlock_limit(p->memlock_bytes);
    cache->max_bytes = p->max_bytes < memlock ? p->max_bytes : memlock;
    cache->max_entries = p->max_entries;
    if (cache->ops->max_regions && cache->ops->max_regions < cache->max_entries)
        cache->max_entries = cache->ops->max_regions;
    cache->max_region_len = cache->ops->max_region_len ? cache->ops->max_region_len
                                                       : SIZE_MAX;
}

int pdc_create(const pdc_params_t *params, const pdc_ops_t *ops, void *ops_arg,
               pdc_t **cache_p)
{
    pdc_t *cache;
    int rc;

    rc = pdc_params_check(params, ops);
    if (rc || !cache_p)
        return rc ? rc : -EINVAL;
    cache = params->alloc(params->alloc_arg, sizeof(*cache));
    if (!cache)
        return -ENOMEM;
    memset(cache, 0, sizeof(*cache));
    cache->params = *params;
    cache->ops = ops;
    cache->ops_arg = ops_arg;
    cache->page = (size_t)sysconf(_SC_PAGESIZE);
    pdc_limits_init(cache);
    rc = pdc_range_init(cache, cache->max_entries);
    if (rc)
        goto err_free;
    rc = pdc_defer_init(cache, cache->params.defer_slots);
    if (rc)
        goto err_range;
    pthread_mutex_init(&cache->lock, NULL);
    pdc_conds_init(cache);
    pdc_list_init(&cache->lru);
    pdc_list_init(&cache->dead);
    pdc_list_init(&cache->zombies);
    cache->waiters_tail = &cache->waiters;
    if (cache->params.flags & PDC_P_UNWIND_SITES)
        pdc_sites_warmup();
    *cache_p = cache;
    return 0;

err_range:
    pdc_range_fini(cache);
err_free:
    params->free(params->alloc_arg, cache, sizeof(*cache));
    return rc;
}

static uint64_t pdc_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Publish the gauges that registration changes (the budget gauges are
 * published where they change, on the hit path). */
void pdc_cache_gauges(pdc_t *cache)
{
    pdc_stat_set(cache, PDC_STAT_REGIONS, cache->nregions);
    pdc_stat_set(cache, PDC_STAT_PINNED_BYTES, cache->pinned);
    pdc_stat_set(cache, PDC_STAT_BUDGET_SEND, cache->inuse[PDC_SEND]);
    pdc_stat_set(cache, PDC_STAT_BUDGET_RECV, cache->inuse[PDC_RECV]);
}

static inline void pdc_budget_gauge(pdc_t *cache, pdc_dir_t dir)
{
    pdc_stat_set(cache, PDC_STAT_BUDGET_SEND + dir, cache->inuse[dir]);
}

static size_t pdc_rgn_len(const pdc_rgn_t *rgn)
{
    return rgn->end - rgn->start;
}

static void pdc_rgn_free(pdc_t *cache, pdc_rgn_t *rgn)
{
    pdc_mem_free(cache, rgn, sizeof(*rgn));
}

/* Deregister (if registered) and free an unreferenced region that is in no
 * structure any more.  Lock held; not from a hook. */
void pdc_cache_release(pdc_t *cache, pdc_rgn_t *rgn)
{
    if (rgn->state == PDC_RS_READY) {
        if (cache->ops->dereg(cache->ops_arg, rgn->pub.handle) != 0)
            pdc_stat_add(cache, PDC_STAT_DEREG_FAILS, 1);
        pdc_stat_add(cache, PDC_STAT_DEREGS, 1);
    }
    cache->nregions--;
    if (rgn->state != PDC_RS_NEG)
        cache->pinned -= pdc_rgn_len(rgn);
    pdc_stat_set(cache, PDC_STAT_REGIONS, cache->nregions);
    pdc_stat_set(cache, PDC_STAT_PINNED_BYTES, cache->pinned);
    pdc_rgn_free(cache, rgn);
}

/* Unhash every dead region; release those nobody references (the others
 * become zombies, released by their last put).  Lock held; not from a hook. */
void pdc_cache_reap_locked(pdc_t *cache)
{
    while (!pdc_list_empty(&cache->dead)) {
        pdc_rgn_t *rgn = pdc_rgn_of_link(cache->dead.next);

        pdc_list_del(&rgn->link);
        rgn->flags &= ~PDC_RF_ONLIST;
        pdc_range_unhash(cache, rgn);
        if (rgn->refs == 0) {
            pdc_cache_release(cache, rgn);
        } else {
            rgn->flags |= PDC_RF_ZOMBIE;
            pdc_list_append(&cache->zombies, &rgn->link);
        }
    }
}

static inline void pdc_cache_prologue(pdc_t *cache)
{
    if (pdc_defer_pending(&cache->defer))
        pdc_defer_drain(cache);
    if (!pdc_list_empty(&cache->dead))
        pdc_cache_reap_locked(cache);
}

static void pdc_rgn_ref(pdc_t *cache, pdc_rgn_t *rgn, pdc_dir_t dir)
{
    if (rgn->refs++ == 0 && (rgn->flags & PDC_RF_ONLIST)) {
        pdc_list_del(&rgn->link);
        rgn->flags &= ~PDC_RF_ONLIST;
    }
    if (rgn->dref[dir]++ == 0) {
        cache->inuse[dir] += pdc_rgn_len(rgn);
        pdc_budget_gauge(cache, dir);
    }
}

static void pdc_rgn_unref(pdc_t *cache, pdc_rgn_t *rgn, pdc_dir_t dir)
{
    if (rgn->epoch != cache->epoch) {   /* made before a fork: an orphan */
        if (--rgn->refs == 0)
            pdc_rgn_free(cache, rgn);
        return;
    }
    if (rgn->dref[dir] == 0)            /* a put in the wrong direction */
        return;
    if (--rgn->dref[dir] == 0) {
        cache->inuse[dir] -= pdc_rgn_len(rgn);
        pdc_budget_gauge(cache, dir);
        if (cache->budget_sleepers)
            pthread_cond_broadcast(&cache->budget_cond);
    }
    if (--rgn->refs > 0)
        return;
    if (!(rgn->flags & PDC_RF_DEAD)) {
        rgn->flags |= PDC_RF_ONLIST;
        pdc_list_append(&cache->lru, &rgn->link);
    } else if (rgn->flags & PDC_RF_ZOMBIE) {
        pdc_list_del(&rgn->link);        /* a zombie's last put */
        pdc_cache_release(cache, rgn);
    }                                    /* else the next reap releases it */
}

static int pdc_budget_fits(const pdc_t *cache, pdc_dir_t dir, size_t len)
{
    size_t budget = cache->params.budget[dir];

    return budget == 0 || cache->inuse[dir] == 0 || cache->inuse[dir] + len <= budget;
}

/* 0 when len fits dir's budget; else -EAGAIN (NOWAIT, or the wait ran out)
 * or PDC_RETRY after waiting (the lock was dropped).  *deadline_p is the
 * get's wait bound, set on the first wait. */
static int pdc_budget_check(pdc_t *cache, pdc_dir_t dir, size_t len, unsigned flags,
                            struct timespec *deadline_p)
{
    int rc;

    if (pdc_budget_fits(cache, dir, len))
        return 0;
    if ((flags & PDC_F_NOWAIT) || cache->params.budget_wait_ns == 0) {
        pdc_stat_add(cache, PDC_STAT_BUDGET_EAGAIN, 1);
        return -EAGAIN;
    }
    if (deadline_p->tv_sec == 0 && deadline_p->tv_nsec == 0) {
        uint64_t t = pdc_now_ns() + cache->params.budget_wait_ns;

        deadline_p->tv_sec = (time_t)(t / 1000000000ull);
        deadline_p->tv_nsec = (long)(t % 1000000000ull);
    }
    pdc_stat_add(cache, PDC_STAT_BUDGET_WAITS, 1);
    cache->budget_sleepers++;
    rc = pthread_cond_timedwait(&cache->budget_cond, &cache->lock, deadline_p);
    cache->budget_sleepers--;
    if (rc == ETIMEDOUT && !pdc_budget_fits(cache, dir, len)) {
        pdc_stat_add(cache, PDC_STAT_BUDGET_EAGAIN, 1);
        return -EAGAIN;
    }
    return PDC_RETRY;
}

/* Make room for a registration of len bytes by evicting idle regions, least
 * recently used first.  0 or -ENOSPC. */
static int pdc_cache_make_room(pdc_t *cache, size_t len)
{
    if (len > cache->max_bytes)
        return -ENOSPC;
    while (cache->pinned + len > cache->max_bytes ||
           cache->nregions + 1 > cache->max_entries) {
        if (pdc_list_empty(&cache->lru))
            return -ENOSPC;
        pdc_range_kill(cache, pdc_rgn_of_link(cache->lru.next));
        pdc_stat_add(cache, PDC_STAT_EVICTIONS, 1);
        pdc_cache_reap_locked(cache);
    }
    return 0;
}

/* The backend ran out of pinnable memory (-ENOMEM: RLIMIT_MEMLOCK is per
 * user, other processes share it): evict idle regions worth at least len
 * bytes.  Returns 1 when something was evicted. */
static int pdc_cache_shrink(pdc_t *cache, size_t len)
{
    size_t freed = 0;

    while (freed < len && !pdc_list_empty(&cache->lru)) {
        pdc_rgn_t *rgn = pdc_rgn_of_link(cache->lru.next);

        freed += pdc_rgn_len(rgn);
        pdc_range_kill(cache, rgn);
        pdc_stat_add(cache, PDC_STAT_EVICTIONS, 1);
    }
    pdc_cache_reap_locked(cache);
    return freed > 0;
}

/* Choose what a miss registers: [start, end) merged with the live regions it
 * overlaps, when the merge fits the backend and the budget.  PDC_RETRY when
 * an overlapping registration is in flight (after waiting for it). */
static int pdc_miss_span(pdc_t *cache, uintptr_t *start_p, uintptr_t *end_p,
                         pdc_dir_t dir, unsigned flags, int *overlap_p)
{
    pdc_range_index_t *ix = &cache->index;
    uintptr_t start = *start_p, end = *end_p, ustart = start, uend = end;
    unsigned i;

    *overlap_p = 0;

    for (i = pdc_range_lower(ix, start); i < ix->n && ix->v[i]->start < end; i++) {
        pdc_rgn_t *rgn = ix->v[i];

        if (rgn->state == PDC_RS_INFLIGHT) {
            pdc_stat_add(cache, PDC_STAT_INFLIGHT_WAITS, 1);
            pthread_cond_wait(&cache->reg_cond, &cache->lock);
            return PDC_RETRY;
        }
        if (rgn->state == PDC_RS_NEG)   /* not merged; replaced by this try */
            continue;
        *overlap_p = 1;
        if (rgn->start < ustart)
            ustart = rgn->start;
        if (rgn->end > uend)
            uend = rgn->end;
    }
    if ((flags & PDC_F_NOMERGE) || uend - ustart > cache->max_region_len ||
        !pdc_budget_fits(cache, dir, uend - ustart))
        return 0;
    if (ustart != start || uend != end)
        pdc_stat_add(cache, PDC_STAT_MERGES, 1);
    *start_p = ustart;
    *end_p = uend;
    return 0;
}

static pdc_rgn_t *pdc_rgn_new(pdc_t *cache, uintptr_t start, uintptr_t end)
{
    pdc_rgn_t *rgn = pdc_mem_alloc(cache, sizeof(*rgn));

    if (!rgn)
        return NULL;
    memset(rgn, 0, sizeof(*rgn));
    rgn->start = start;
    rgn->end = end;
    rgn->pub.addr = (void *)start;
    rgn->pub.len = end - start;
    rgn->pub.gen = ++cache->gen;
    rgn->epoch = cache->epoch;
    rgn->state = PDC_RS_INFLIGHT;
    return rgn;
}

/* reg() errors that retrying the same range will not cure. */
static int pdc_err_permanent(int err)
{
    return err == -EFAULT || err == -EOPNOTSUPP || err == -EINVAL || err == -EPERM;
}

/* Keep the failed placeholder rgn as a negative entry: linked, unpinned,
 * idle after the caller's reference is dropped. */
static void pdc_rgn_make_neg(pdc_t *cache, pdc_rgn_t *rgn, pdc_dir_t dir, int err)
{
    rgn->state = PDC_RS_NEG;
    rgn->err = err;
    cache->pinned -= pdc_rgn_len(rgn);
    pdc_cache_gauges(cache);
    pdc_stat_add(cache, PDC_STAT_NEG_ENTRIES, 1);
    pdc_rgn_unref(cache, rgn, dir);
}

/* Register the placeholder rgn without the lock.  Returns with the lock
 * held: 0, -ESTALE (killed meanwhile; deregistered) or reg()'s error
 * (remembered as a negative entry when permanent and may_neg). */
static int pdc_miss_register(pdc_t *cache, pdc_rgn_t *rgn, pdc_dir_t dir, int may_neg)
{
    pdc_handle_t h;
    uint64_t t0, t1;
    int rc;

    pthread_mutex_unlock(&cache->lock);
    t0 = pdc_now_ns();
    rc = cache->ops->reg(cache->ops_arg, rgn->pub.addr, rgn->pub.len, &h);
    t1 = pdc_now_ns();
    pthread_mutex_lock(&cache->lock);
    pdc_cache_prologue(cache);
    pdc_stat_add(cache, PDC_STAT_REG_NS, t1 - t0);
    if (rc == 0) {
        rgn->pub.handle = h;
        rgn->state = PDC_RS_READY;
        pdc_stat_add(cache, PDC_STAT_REGS, 1);
        pdc_stat_add(cache, PDC_STAT_BYTES_REGISTERED, rgn->pub.len);
    } else {
        rgn->state = PDC_RS_FAILED;
        pdc_stat_add(cache, PDC_STAT_REG_FAILS, 1);
    }
    pthread_cond_broadcast(&cache->reg_cond);
    if (rc == 0 && !(rgn->flags & PDC_RF_DEAD))
        return 0;
    if (rc == 0) {
        rc = -ESTALE;
    } else if (may_neg && pdc_err_permanent(rc) && !(rgn->flags & PDC_RF_DEAD)) {
        pdc_rgn_make_neg(cache, rgn, dir, rc);
        return rc;
    }
    pdc_range_kill(cache, rgn);
    pdc_cache_reap_locked(cache);
    pdc_rgn_unref(cache, rgn, dir);   /* the last reference: released */
    return rc;
}

static int pdc_miss(pdc_t *cache, uintptr_t start, uintptr_t end, pdc_dir_t dir,
                    unsigned flags, uintptr_t ra, struct timespec *deadline_p,
                    pdc_rgn_t **rgn_p)
{
    pdc_rgn_t *rgn;
    int rc, overlap;

    rc = pdc_miss_span(cache, &start, &end, dir, flags, &overlap);
    if (rc)
        return rc;
    if (end - start > cache->max_region_len)
        return -E2BIG;
    rc = pdc_budget_check(cache, dir, end - start, flags, deadline_p);
    if (rc)
        return rc;
    pdc_range_invalidate_locked(cache, start, end);   /* merged or split */
    pdc_cache_reap_locked(cache);
    rc = pdc_cache_make_room(cache, end - start);
    if (rc) {
        pdc_stat_add(cache, PDC_STAT_NOSPACE, 1);
        return rc;
    }
    rgn = pdc_rgn_new(cache, start, end);
    if (!rgn)
        return -ENOMEM;
    rc = pdc_range_insert(cache, rgn);
    if (rc) {
        pdc_rgn_free(cache, rgn);
        return rc;
    }
    cache->nregions++;
    cache->pinned += pdc_rgn_len(rgn);
    pdc_cache_gauges(cache);
    pdc_rgn_ref(cache, rgn, dir);
    pdc_stat_add(cache, PDC_STAT_MISSES, 1);
    pdc_site_count(cache, PDC_SITE_MISS, pdc_site_capture(cache, PDC_SITE_MISS, ra));
    /* Remember a permanent failure only for a range that replaced nothing:
     * a good registration must not turn into a negative entry. */
    rc = pdc_miss_register(cache, rgn, dir, !overlap);
    if (rc == 0)
        *rgn_p = rgn;
    return rc;
}

static int pdc_get_locked(pdc_t *cache, uintptr_t start, uintptr_t end, pdc_dir_t dir,
                          unsigned flags, uintptr_t ra, pdc_rgn_t **rgn_p)
{
    struct timespec deadline = { 0, 0 };
    unsigned stale = 0, shrunk = 0;
    pdc_rgn_t *rgn;
    int rc;

    for (;;) {
        pdc_cache_prologue(cache);
        rgn = pdc_range_lookup(cache, start, end);
        if (rgn && rgn->state == PDC_RS_INFLIGHT) {
            pdc_stat_add(cache, PDC_STAT_INFLIGHT_WAITS, 1);
            pthread_cond_wait(&cache->reg_cond, &cache->lock);
            continue;
        }
        if (rgn && rgn->state == PDC_RS_NEG) {
            pdc_stat_add(cache, PDC_STAT_NEG_HITS, 1);
            pdc_list_del(&rgn->link);                 /* most recently used */
            pdc_list_append(&cache->lru, &rgn->link);
            return rgn->err;
        }
        if (rgn) {
            rc = rgn->dref[dir] ? 0 : pdc_budget_check(cache, dir, pdc_rgn_len(rgn),
                                                         flags, &deadline);
            if (rc == PDC_RETRY)
                continue;
            if (rc)
                return rc;
            pdc_rgn_ref(cache, rgn, dir);
            if (!(flags & PDC_F_NOHIT))
                pdc_stat_add(cache, PDC_STAT_HITS, 1);
            *rgn_p = rgn;
            return 0;
        }
        if (flags & PDC_F_NOREG)
            return -ENOENT;
        rc = pdc_miss(cache, start, end, dir, flags, ra, &deadline, rgn_p);
        if (rc == PDC_RETRY)
            continue;
        if (rc == -ESTALE && ++stale < PDC_STALE_TRIES) {
            pdc_stat_add(cache, PDC_STAT_STALE_RETRIES, 1);
            continue;
        }
        if (rc == -ENOMEM && !shrunk++ && pdc_cache_shrink(cache, end - start))
            continue;
        return rc;
    }
}

void pdc_region_hit(pdc_t *cache)
{
    if (cache)
        pdc_stat_add(cache, PDC_STAT_HITS, 1);
}

int pdc_region_get(pdc_t *cache, const void *addr, size_t len, pdc_dir_t dir,
                   unsigned flags, pdc_region_t **region_p)
{
    uintptr_t ra = (uintptr_t)__builtin_return_address(0);
    uintptr_t pmask, start, end;
    pdc_rgn_t *rgn = NULL;
    int rc;

    if (!cache || !region_p || len == 0 || (unsigned)dir >= PDC_DIR_COUNT)
        return -EINVAL;
    pmask = cache->page - 1;
    start = (uintptr_t)addr & ~pmask;
    end = (uintptr_t)addr + len;
    if (end < (uintptr_t)addr || end > UINTPTR_MAX - pmask)
        return -EINVAL;
    end = (end + pmask) & ~pmask;
    pthread_mutex_lock(&cache->lock);
    pdc_stat_add(cache, PDC_STAT_GETS, 1);
    rc = pdc_get_locked(cache, start, end, dir, flags, ra, &rgn);
    pthread_mutex_unlock(&cache->lock);
    if (rc == 0)
        *region_p = &rgn->pub;
    return rc;
}

/* Take the queued budget waiters that now fit off the queue; returns them
 * chained through ->next.  Lock held. */
static pdc_budget_waiter_t *pdc_budget_collect(pdc_t *cache)
{
    pdc_budget_waiter_t **pp = &cache->waiters, *run = NULL, **run_tail = &run;

    while (*pp) {
        pdc_budget_waiter_t *w = *pp;

        if (!pdc_budget_fits(cache, w->dir, w->bytes)) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->queued = 0;
        w->next = NULL;
        *run_tail = w;
        run_tail = &w->next;
    }
    cache->waiters_tail = pp;
    return run;
}

void pdc_region_put(pdc_t *cache, pdc_region_t *region, pdc_dir_t dir)
{
    pdc_budget_waiter_t *run = NULL;

    if (!cache || !region || (unsigned)dir >= PDC_DIR_COUNT)
        return;
    pthread_mutex_lock(&cache->lock);
    pdc_cache_prologue(cache);
    pdc_rgn_unref(cache, pdc_rgn_of(region), dir);
    if (cache->waiters)
        run = pdc_budget_collect(cache);
    pthread_mutex_unlock(&cache->lock);
    while (run) {
        pdc_budget_waiter_t *w = run;

        run = w->next;
        w->cb(w->arg);
    }
}

int pdc_budget_wait(pdc_t *cache, pdc_budget_waiter_t *waiter, pdc_dir_t dir,
                    size_t bytes, pdc_budget_func_t cb, void *arg)
{
    int rc = 1;

    if (!cache || !waiter || !cb || (unsigned)dir >= PDC_DIR_COUNT)
        return -EINVAL;
    pthread_mutex_lock(&cache->lock);
    if (!pdc_budget_fits(cache, dir, bytes)) {
        waiter->next = NULL;
        waiter->cb = cb;
        waiter->arg = arg;
        waiter->bytes = bytes;
        waiter->dir = dir;
        waiter->queued = 1;
        *cache->waiters_tail = waiter;
        cache->waiters_tail = &waiter->next;
        rc = 0;
    }
    pthread_mutex_unlock(&cache->lock);
    return rc;
}

int pdc_budget_cancel(pdc_t *cache, pdc_budget_waiter_t *waiter)
{
    pdc_budget_waiter_t **pp;
    int rc = -ENOENT;

    if (!cache || !waiter)
        return -EINVAL;
    pthread_mutex_lock(&cache->lock);
    for (pp = &cache->waiters; *pp; pp = &(*pp)->next) {
        if (*pp != waiter)
            continue;
        *pp = waiter->next;
        if (cache->waiters_tail == &waiter->next)
            cache->waiters_tail = pp;
        waiter->queued = 0;
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&cache->lock);
    return rc;
}

void pdc_cache_reap(pdc_t *cache)
{
    if (!cache)
        return;
    pthread_mutex_lock(&cache->lock);
    pdc_cache_prologue(cache);
    pdc_cache_gauges(cache);
    pthread_mutex_unlock(&cache->lock);
}

void pdc_cache_flush(pdc_t *cache)
{
    unsigned n;

    if (!cache)
        return;
    pthread_mutex_lock(&cache->lock);
    pdc_cache_prologue(cache);
    n = pdc_range_invalidate_all(cache);
    pdc_stat_add(cache, PDC_STAT_INVALIDATIONS, n);
    pdc_stat_add(cache, PDC_STAT_FLUSHES, 1);
    pdc_cache_reap_locked(cache);
    pdc_cache_gauges(cache);
    pthread_mutex_unlock(&cache->lock);
}

void pdc_destroy(pdc_t *cache)
{
    pdc_range_index_t *ix;

    if (!cache)
        return;
    pthread_mutex_lock(&cache->lock);
    pdc_cache_prologue(cache);
    ix = &cache->index;
    while (ix->n > 0)
        pdc_range_kill(cache, ix->v[ix->n - 1]);
    while (!pdc_list_empty(&cache->zombies)) {
        pdc_rgn_t *rgn = pdc_rgn_of_link(cache->zombies.next);

        pdc_list_del(&rgn->link);
        rgn->flags &= ~PDC_RF_ZOMBIE;
        pdc_list_append(&cache->dead, &rgn->link);
    }
    for (pdc_list_t *l = cache->dead.next; l != &cache->dead; l = l->next)
        pdc_rgn_of_link(l)->refs = 0;   /* holders must be gone */
    pdc_cache_reap_locked(cache);
    pthread_mutex_unlock(&cache->lock);
    pdc_defer_fini(cache);
    pdc_range_fini(cache);
    pthread_cond_destroy(&cache->reg_cond);
    pthread_cond_destroy(&cache->budget_cond);
    pthread_mutex_destroy(&cache->lock);
    cache->params.free(cache->params.alloc_arg, cache, sizeof(*cache));
}

void pdc_fork_prepare(pdc_t *cache)
{
    if (cache)
        pthread_mutex_lock(&cache->lock);
}

void pdc_fork_parent(pdc_t *cache)
{
    if (cache)
        pthread_mutex_unlock(&cache->lock);
}

/* Orphan or free one pre-fork region in the child: nothing is
 * deregistered, nothing is charged any more. */
static void pdc_fork_drop(pdc_t *cache, pdc_rgn_t *rgn)
{
    rgn->flags = PDC_RF_DEAD | PDC_RF_ORPHAN;
    if (rgn->refs == 0)
        pdc_rgn_free(cache, rgn);
}

void pdc_fork_child(pdc_t *cache)
{
    pdc_range_index_t *ix;
    unsigned i, n = 0;

    if (!cache)
        return;
    /* pdc_fork_prepare() took the lock in the thread that is now the
     * child's only thread: it is released at the end.  Waiters on the
     * conditions are gone with their threads. */
    pdc_conds_init(cache);
    pdc_defer_reset(cache);
    cache->epoch++;
    HASH_CLEAR(hh, cache->hash);
    ix = &cache->index;
    for (i = 0; i < ix->n; i++, n++)
        pdc_fork_drop(cache, ix->v[i]);
    ix->n = 0;
    while (!pdc_list_empty(&cache->dead)) {
        pdc_rgn_t *rgn = pdc_rgn_of_link(cache->dead.next);

        pdc_list_del(&rgn->link);
        pdc_fork_drop(cache, rgn);
        n++;
    }
    pdc_list_init(&cache->lru);
    pdc_list_init(&cache->zombies);   /* orphans now; freed by their puts */
    cache->nregions = 0;
    cache->pinned = 0;
    cache->inuse[PDC_SEND] = cache->inuse[PDC_RECV] = 0;
    cache->waiters = NULL;
    cache->waiters_tail = &cache->waiters;
    pdc_stat_add(cache, PDC_STAT_FORK_DROPS, n);
    pdc_cache_gauges(cache);
    if (cache->ops->fork_child)
        cache->ops->fork_child(cache->ops_arg);
    pthread_mutex_unlock(&cache->lock);
}
