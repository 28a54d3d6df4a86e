/* Memory subsystem wiring: malloc-hooks' events feed the pin-down cache.
 *
 * The shim is the only module that knows both: it passes malloc-hooks its
 * configuration, creates the cache over the io_uring fixed-buffer backend
 * when a path first asks for it (shim_mem_cache(); the ring itself is made
 * on the first registration), subscribes the cache's invalidation to every
 * memory event from then on, publishes both modules' counters and the
 * cache's top call sites, and orders their fork handlers.  A process whose
 * paths never ask builds no cache and delivers no event to one (issue 32:
 * no path of the library uses the io_uring cache today; page exchange has
 * its own, shim_xu.c).  When malloc-hooks cannot deliver events (another
 * allocator, a failed self-test) the zero-copy paths must not register
 * memory: shim_mem_cache() then returns NULL. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "mh.h"
#include "pdc.h"
#include "shim_mem.h"
#include "shim_path.h"
#include "zc_config.h"
#include "zc_log.h"
#include "zc_pool.h"
#include "zc_stats.h"

static pdc_t *shim_pdc;             /* NULL: no cache (not asked for yet, or unavailable) */
static pdc_uring_t *shim_uring;
static pdc_ops_t shim_uring_ops;
static int shim_mem_events;         /* malloc-hooks delivers events: a cache may be made */
static int shim_mem_cache_tried;    /* shim_mem_cache_start ran (once per process image) */
ZC_FORK_DATA static pthread_mutex_t shim_mem_lock = PTHREAD_MUTEX_INITIALIZER;  /* making the cache */

static void shim_mem_on_event(unsigned kind, void *addr, size_t len, void *arg)
{
    (void)kind;
    pdc_range_invalidate(arg, addr, len);
}

/* Charge an invalidation to the application's free/munmap call site, not to
 * our callback; misses are left to pdc (it unwinds, outside hooks, when a
 * report is asked for). */
static uintptr_t shim_mem_site(void *arg, pdc_site_kind_t kind)
{
    (void)arg;
    return kind == PDC_SITE_INVALIDATE ? mh_event_site() : 0;
}

static void shim_mem_mh_visit(void *arg, zc_stats_emit_func_t emit, void *ctx)
{
    (void)arg;
    mh_stat_visit(emit, ctx);
}

static void shim_mem_pdc_visit(void *arg, zc_stats_emit_func_t emit, void *ctx)
{
    unsigned i;

    for (i = 0; i < PDC_STAT_COUNT; i++)
        emit(ctx, pdc_stat_names[i], pdc_stats_get(arg, i));
}

static const zc_stats_source_t shim_mem_mh_source = { shim_mem_mh_visit, NULL };
static zc_stats_source_t shim_mem_pdc_source = { shim_mem_pdc_visit, NULL };

/* Fork: malloc-hooks first (its prepare remaps arenas and delivers events,
 * which end in pdc_range_invalidate), then the cache lock, then the pool
 * lock; released in the opposite order. */
static void shim_mem_fork_prepare(void)
{
    pthread_mutex_lock(&shim_mem_lock);     /* a cache being made: before its modules' locks */
    mh_fork_prepare();
    if (shim_pdc)
        pdc_fork_prepare(shim_pdc);
    shim_xu_fork_prepare();
    zc_pool_fork_prepare();
}

static void shim_mem_fork_parent(void)
{
    zc_pool_fork_parent();
    shim_xu_fork_parent();
    if (shim_pdc)
        pdc_fork_parent(shim_pdc);
    mh_fork_parent();
    pthread_mutex_unlock(&shim_mem_lock);
}

ZC_FORK_CODE static void shim_mem_fork_child(void)
{
    zc_pool_fork_child();
    shim_xu_fork_child();
    if (shim_pdc)
        pdc_fork_child(shim_pdc);
    mh_fork_child();
    pthread_mutex_unlock(&shim_mem_lock);
}

/* Say once what malloc-hooks could not do, and whether events work. */
static int shim_mem_hooks_start(void)
{
    mh_params_t mp = {
        .alloc_min = zc_config.alloc_placement || zc_config.alloc_min > zc_config.alloc_huge_min
                         ? zc_config.alloc_min : zc_config.alloc_huge_min,
        .huge_min = zc_config.alloc_huge_min,
        /* page exchange alone: set up, turned on below only where it can
         * lend (2 MiB shared pages), and only for blocks it can lend */
        .placement = zc_config.alloc_placement ? 1 : zc_config.exchange ? 2 : 0,
        .no_atfork = 1,     /* ordered with the cache's in shim_mem_fork_* */
        /* page exchange alone places only blocks it can lend well: at most
         * an eighth of the last unit unused (a 2.1 MB block would take, zero
         * and hold 4 MiB of huge pages to lend one unit) */
        .huge_slack = zc_config.alloc_placement ? 0 : 3,
        /* and only on 2 MiB pages: without THP, the hugetlb arena alone */
        .huge_paged_only = !zc_config.alloc_placement,
        .units_4k = zc_config.exchange && zc_config.exchange_4k,
    };
    const char *reason = "";
    unsigned st;
    int rc = mh_init(&mp);

    st = mh_status(&reason);
    /* Page exchange places only what it can lend, 2 MiB blocks on 2 MiB
     * pages, from start-up: most programs allocate their buffers before
     * they connect (an MPI connects at its first message), and those must
     * be lendable.  With huge_slack above, only blocks that fill their
     * units are placed, so a process that never pairs pays nothing
     * measurable (bench-mh, "python3 fixed script"). */
    if (!zc_config.alloc_placement && zc_config.exchange &&
        ((st & (MH_ST_HUGE_THP | MH_ST_HUGE_TLB)) || zc_config.exchange_4k) &&
        mh_placement_set(1) == 0)
        st = mh_status(&reason);
    if (rc)
        zc_log(ZC_LOG_NOTICE, "memory hooks unavailable (%s): copying only", strerrordesc_np(-rc));
    if (st & MH_ST_FOREIGN_ALLOCATOR)
        zc_log(ZC_LOG_NOTICE, "another allocator provides malloc (%s): large-buffer "
               "placement off, memory events only", reason);
    if (st & MH_ST_SELFTEST_FAILED)
        zc_log(ZC_LOG_NOTICE, "memory events are not delivered (%s): zero-copy paths off",
               reason);
    if (zc_config.alloc_placement && !(st & MH_ST_PLACEMENT_ACTIVE) &&
        !(st & MH_ST_FOREIGN_ALLOCATOR))
        zc_log(ZC_LOG_NOTICE, "large-buffer placement unavailable (%s)", reason);
    else if (!rc && zc_config.exchange && !(st & MH_ST_PLACEMENT_ACTIVE) &&
             !(st & MH_ST_FOREIGN_ALLOCATOR))
        zc_log(ZC_LOG_NOTICE, "large-buffer placement off: page exchange lends only from "
               "2 MiB shared-memory pages and there are none here (shmem THP never or deny, "
               "no free hugetlb pages; ZCSOCK_EXCHANGE_4K=1 lends on 4 KiB pages)");
    zc_stats_source_add(&shim_mem_mh_source);
    if (!rc)
        pthread_atfork(shim_mem_fork_prepare, shim_mem_fork_parent, shim_mem_fork_child);
    return !rc && (st & MH_ST_EVENTS_OK) ? 0 : -ENOSYS;
}

static int shim_mem_cache_start(void)
{
    pdc_params_t pp;
    pdc_t *cache = NULL;
    int rc;

    pdc_params_default(&pp);
    pp.max_bytes = zc_config.pdc_max_bytes;
    pp.max_entries = (unsigned)zc_config.pdc_max_entries;
    pp.budget[PDC_SEND] = zc_config.pdc_send_budget;
    pp.budget[PDC_RECV] = zc_config.pdc_recv_budget;
    /* Attribution of misses is printed only in the report: unwind only
     * when one is asked for. */
    if (zc_config.stats)
        pp.flags |= PDC_P_UNWIND_SITES;
    pp.site_func = shim_mem_site;
    pp.alloc = zc_pool_alloc_cb;
    pp.free = zc_pool_free_cb;
    rc = pdc_uring_create(pp.max_entries, 64, zc_pool_alloc_cb, zc_pool_free_cb, NULL,
                          &shim_uring);
    if (rc)
        return rc;
    pdc_uring_fd_floor_set(shim_uring, shim_fd_internal_floor());
    pdc_uring_ops_init(shim_uring, &shim_uring_ops);
    rc = pdc_create(&pp, &shim_uring_ops, shim_uring, &cache);
    if (rc) {
        pdc_uring_destroy(shim_uring);
        shim_uring = NULL;
        return rc;
    }
    /* registrations start only once the cache is returned: an event
     * before the subscription concerns no registered range */
    rc = mh_event_subscribe(MH_EV_ALL, shim_mem_on_event, cache);
    if (rc < 0) {
        pdc_destroy(cache);
        pdc_uring_destroy(shim_uring);
        shim_uring = NULL;
        return rc;
    }
    shim_mem_pdc_source.arg = cache;
    zc_stats_source_add(&shim_mem_pdc_source);
    __atomic_store_n(&shim_pdc, cache, __ATOMIC_RELEASE);
    return 0;
}

int shim_mem_init(void)
{
    int rc = shim_mem_hooks_start();

    if (!rc)
        shim_mem_events = 1;
    return rc;
}

/* Made on the first call (not inside a hook: it allocates and may log),
 * once per process image; a fork child keeps its parent's. */
pdc_t *shim_mem_cache(void)
{
    pdc_t *cache = __atomic_load_n(&shim_pdc, __ATOMIC_ACQUIRE);
    int rc = 0;

    if (cache || !shim_mem_events)
        return cache;
    pthread_mutex_lock(&shim_mem_lock);
    if (!shim_mem_cache_tried) {
        shim_mem_cache_tried = 1;
        rc = shim_mem_cache_start();
    }
    pthread_mutex_unlock(&shim_mem_lock);
    if (rc)
        zc_log(ZC_LOG_NOTICE, "pin-down cache unavailable (%s): copying only",
               strerrordesc_np(-rc));
    return __atomic_load_n(&shim_pdc, __ATOMIC_ACQUIRE);
}

pdc_uring_t *shim_mem_uring(void)
{
    return shim_mem_cache() ? shim_uring : NULL;
}

size_t shim_mem_report(char *buf, size_t size)
{
    size_t n = shim_pdc ? pdc_stats_sites_format(shim_pdc, "pdc", 5, buf, size) : 0;

    return n + shim_xu_report(buf + n, size - n);
}

int shim_mem_fd_is_internal(int fd)
{
    return mh_fd_is_internal(fd) || shim_xu_fd_is_internal(fd);
}

int shim_mem_fd_move(int fd)
{
    int rc = mh_fd_move(fd);

    return rc ? rc : shim_xu_fd_move(fd);
}

/* See shim_mem.h. */
const shim_mem_ops_t shim_mem_ops = {
    .init = shim_mem_init,
    .report = shim_mem_report,
    .fd_is_internal = shim_mem_fd_is_internal,
    .fd_move = shim_mem_fd_move,
    .xu_ready = shim_xu_ready,
    .xu_placed_any = shim_xu_placed_any,
    .xu_lend = shim_xu_lend,
    .xu_release = shim_xu_release,
    .xu_ring_paid = shim_xu_ring_paid,
    .xu_reap = shim_xu_reap,
    .xu_map = shim_xu_map,
    .xu_reclaim = shim_xu_reclaim,
    .xu_refused = shim_xu_refused,
    .xu_why_name = shim_xu_why_name,
};
