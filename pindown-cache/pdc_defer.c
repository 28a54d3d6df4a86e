/* pdc_defer: invalidation, including from inside allocator hooks.
 *
 * pdc_range_invalidate() runs inside malloc/free/munmap hooks, so it may
 * neither allocate nor block.  It try-locks the cache: on success it kills
 * the overlapping regions there and then (pdc_range_kill never allocates and
 * never calls the backend); when the lock is busy - another thread's
 * operation, or this very thread inside the cache (a metadata allocation
 * that unmaps, a backend that frees) - it pushes the range onto a bounded
 * lock-free queue.  Every cache operation drains the queue under the lock
 * before it looks anything up, so no operation that starts after an
 * invalidation returned can see a region it killed.  A full queue sets the
 * overflow flag instead, and the next operation kills every region: slower,
 * never stale.
 *
 * The queue is Dmitry Vyukov's bounded MPMC ring: producers claim a cell
 * with a CAS on enq and publish it by its sequence number; the consumer (the
 * lock holder) reads cells in order.  A cell claimed but not yet published
 * belongs to an invalidation that has not returned yet and is seen by the
 * next drain. */
#include <errno.h>

#include "pdc_int.h"

int pdc_defer_init(pdc_t *cache, unsigned slots)
{
    pdc_defer_t *q = &cache->defer;
    size_t i;

    if (slots < 2 || (slots & (slots - 1)))
        return -EINVAL;
    q->cells = pdc_mem_alloc(cache, slots * sizeof(*q->cells));
    if (!q->cells)
        return -ENOMEM;
    q->mask = slots - 1;
    for (i = 0; i < slots; i++)
        atomic_init(&q->cells[i].seq, i);
    atomic_init(&q->enq, 0);
    atomic_init(&q->deq, 0);
    atomic_init(&q->overflow, 0);
    return 0;
}

void pdc_defer_fini(pdc_t *cache)
{
    pdc_defer_t *q = &cache->defer;

    pdc_mem_free(cache, q->cells, (q->mask + 1) * sizeof(*q->cells));
    q->cells = NULL;
}

/* Empty the queue without applying it (fork child: nothing is registered). */
void pdc_defer_reset(pdc_t *cache)
{
    pdc_defer_t *q = &cache->defer;
    size_t i;

    for (i = 0; i <= q->mask; i++)
        atomic_store_explicit(&q->cells[i].seq, i, memory_order_relaxed);
    atomic_store_explicit(&q->enq, 0, memory_order_relaxed);
    atomic_store_explicit(&q->deq, 0, memory_order_relaxed);
    atomic_store_explicit(&q->overflow, 0, memory_order_relaxed);
}

/* Queue [addr, addr+len).  Returns 0 or -ENOSPC (full).  Lock-free,
 * allocation-free. */
int pdc_defer_push(pdc_defer_t *q, uintptr_t addr, size_t len)
{
    size_t pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
    pdc_defer_cell_t *cell;

    for (;;) {
        size_t seq;
        intptr_t dif;

        cell = &q->cells[pos & q->mask];
        seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
        dif = (intptr_t)seq - (intptr_t)pos;
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->enq, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            return -ENOSPC;
        } else {
            pos = atomic_load_explicit(&q->enq, memory_order_relaxed);
        }
    }
    cell->addr = addr;
    cell->len = len;
    atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
    return 0;
}

/* Take the oldest published range.  Returns 0, or -EAGAIN when empty. */
int pdc_defer_pop(pdc_defer_t *q, uintptr_t *addr_p, size_t *len_p)
{
    size_t pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
    pdc_defer_cell_t *cell;

    for (;;) {
        size_t seq;
        intptr_t dif;

        cell = &q->cells[pos & q->mask];
        seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
        dif = (intptr_t)seq - (intptr_t)(pos + 1);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&q->deq, &pos, pos + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (dif < 0) {
            return -EAGAIN;
        } else {
            pos = atomic_load_explicit(&q->deq, memory_order_relaxed);
        }
    }
    *addr_p = cell->addr;
    *len_p = cell->len;
    atomic_store_explicit(&cell->seq, pos + q->mask + 1, memory_order_release);
    return 0;
}

/* Page-round [addr, addr+len) outwards, saturating at the top. */
static void pdc_defer_round(const pdc_t *cache, uintptr_t addr, size_t len,
                            uintptr_t *start_p, uintptr_t *end_p)
{
    uintptr_t pmask = cache->page - 1;
    uintptr_t end = addr + len;

    if (end < addr || end > UINTPTR_MAX - pmask)
        end = UINTPTR_MAX & ~pmask;
    else
        end = (end + pmask) & ~pmask;
    *start_p = addr & ~pmask;
    *end_p = end;
}

/* Kill what [addr, addr+len) overlaps.  Lock held; hook-safe. */
static unsigned pdc_defer_apply(pdc_t *cache, uintptr_t addr, size_t len)
{
    uintptr_t start, end;
    unsigned n;

    pdc_defer_round(cache, addr, len, &start, &end);
    n = pdc_range_invalidate_locked(cache, start, end);
    if (n)
        pdc_stat_add(cache, PDC_STAT_INVALIDATIONS, n);
    return n;
}

/* Apply every queued invalidation, then the overflow fallback.  Lock held;
 * hook-safe (it only kills). */
void pdc_defer_drain(pdc_t *cache)
{
    pdc_defer_t *q = &cache->defer;
    uintptr_t addr;
    size_t len;

    while (pdc_defer_pop(q, &addr, &len) == 0)
        pdc_defer_apply(cache, addr, len);
    if (atomic_exchange_explicit(&q->overflow, 0, memory_order_acq_rel)) {
        unsigned n = pdc_range_invalidate_all(cache);

        pdc_stat_add(cache, PDC_STAT_INVALIDATIONS, n);
        pdc_stat_add(cache, PDC_STAT_FLUSHES, 1);
    }
}

void pdc_range_invalidate(pdc_t *cache, const void *addr, size_t len)
{
    uintptr_t ra = (uintptr_t)__builtin_return_address(0);
    uintptr_t start, end;
    unsigned n;

    if (!cache || len == 0)
        return;
    /* Nothing registered there: most frees end here, without the lock. */
    pdc_defer_round(cache, (uintptr_t)addr, len, &start, &end);
    if (end <= atomic_load_explicit(&cache->span_lo, memory_order_acquire) ||
        start >= atomic_load_explicit(&cache->span_hi, memory_order_acquire))
        return;
    if (pthread_mutex_trylock(&cache->lock) != 0) {
        pdc_stat_inc_atomic(cache, PDC_STAT_DEFERRED_INVALIDATIONS);
        if (pdc_defer_push(&cache->defer, (uintptr_t)addr, len) != 0) {
            atomic_store_explicit(&cache->defer.overflow, 1, memory_order_release);
            pdc_stat_inc_atomic(cache, PDC_STAT_DEFER_OVERFLOWS);
        }
        return;
    }
    if (pdc_defer_pending(&cache->defer))
        pdc_defer_drain(cache);
    n = pdc_defer_apply(cache, (uintptr_t)addr, len);
    if (n)
        pdc_site_count(cache, PDC_SITE_INVALIDATE, pdc_site_capture(cache, PDC_SITE_INVALIDATE, ra));
    pdc_cache_gauges(cache);
    pthread_mutex_unlock(&cache->lock);
}
