/* pdc_range: where regions are found.
 *
 * Two structures index the linked regions, both under the cache lock:
 *   - an exact-start hash (uthash), the fast path: most gets start where a
 *     registration starts (a buffer reused for I/O);
 *   - a sorted array of non-overlapping regions, for containment and overlap
 *     lookups (binary search; insertion and removal move pointers).  Its
 *     capacity is the entry limit, allocated once, so removal never
 *     allocates and can run inside a hook.
 *
 * Killing a region (invalidation, eviction, merge) takes it out of the array
 * at once and marks it dead; it leaves the hash (whose removal may free
 * memory) when the next operation reaps the dead list, outside any hook.
 * Lookups skip dead regions, so a dead region is never returned. */
#include <errno.h>
#include <string.h>

#include "pdc_int.h"

/* Publish the index's bounds for the lock-free filter of invalidations. */
static void pdc_range_span_update(pdc_t *cache)
{
    const pdc_range_index_t *ix = &cache->index;

    atomic_store_explicit(&cache->span_lo, ix->n ? ix->v[0]->start : UINTPTR_MAX,
                          memory_order_release);
    atomic_store_explicit(&cache->span_hi, ix->n ? ix->v[ix->n - 1]->end : 0,
                          memory_order_release);
}

int pdc_range_init(pdc_t *cache, unsigned cap)
{
    pdc_range_index_t *ix = &cache->index;

    ix->v = pdc_mem_alloc(cache, (size_t)cap * sizeof(*ix->v));
    if (!ix->v)
        return -ENOMEM;
    ix->n = 0;
    ix->cap = cap;
    cache->hash = NULL;
    pdc_range_span_update(cache);
    return 0;
}

void pdc_range_fini(pdc_t *cache)
{
    pdc_range_index_t *ix = &cache->index;

    HASH_CLEAR(hh, cache->hash);
    pdc_mem_free(cache, ix->v, (size_t)ix->cap * sizeof(*ix->v));
    ix->v = NULL;
    ix->n = ix->cap = 0;
}

/* Index of the first region whose end is above addr (ix->n if none). */
unsigned pdc_range_lower(const pdc_range_index_t *ix, uintptr_t addr)
{
    unsigned lo = 0, hi = ix->n;

    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;

        if (ix->v[mid]->end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Index of rgn in the array (it must be there). */
static unsigned pdc_range_find_index(const pdc_range_index_t *ix, const pdc_rgn_t *rgn)
{
    unsigned i = pdc_range_lower(ix, rgn->start);

    while (i < ix->n && ix->v[i] != rgn)
        i++;
    return i;
}

/* The live region containing [start, end), or NULL. */
pdc_rgn_t *pdc_range_lookup(pdc_t *cache, uintptr_t start, uintptr_t end)
{
    pdc_range_index_t *ix = &cache->index;
    pdc_rgn_t *rgn = NULL;
    unsigned i;

    HASH_FIND(hh, cache->hash, &start, sizeof(start), rgn);
    if (rgn && !(rgn->flags & PDC_RF_DEAD) && rgn->end >= end)
        return rgn;
    i = pdc_range_lower(ix, start);
    if (i < ix->n && ix->v[i]->start <= start && ix->v[i]->end >= end)
        return ix->v[i];
    return NULL;
}

/* Link rgn into the array and the hash.  The caller made sure nothing live
 * overlaps it and reaped the dead list (so no dead region shares its key).
 * Returns 0, -ENOSPC (array full) or -ENOMEM (hash). */
int pdc_range_insert(pdc_t *cache, pdc_rgn_t *rgn)
{
    pdc_range_index_t *ix = &cache->index;
    unsigned i;

    if (ix->n == ix->cap)
        return -ENOSPC;
    rgn->key = rgn->start;
    HASH_ADD(hh, cache->hash, key, sizeof(rgn->key), rgn);
    if (!rgn->hh.tbl)
        return -ENOMEM;
    i = pdc_range_lower(ix, rgn->start);
    memmove(&ix->v[i + 1], &ix->v[i], (ix->n - i) * sizeof(*ix->v));
    ix->v[i] = rgn;
    ix->n++;
    rgn->flags |= PDC_RF_INDEX | PDC_RF_HASH;
    pdc_range_span_update(cache);
    return 0;
}

/* Take rgn out of the array.  Never allocates (hook-safe). */
void pdc_range_remove(pdc_t *cache, pdc_rgn_t *rgn)
{
    pdc_range_index_t *ix = &cache->index;
    unsigned i;

    if (!(rgn->flags & PDC_RF_INDEX))
        return;
    i = pdc_range_find_index(ix, rgn);
    if (i < ix->n) {
        memmove(&ix->v[i], &ix->v[i + 1], (ix->n - i - 1) * sizeof(*ix->v));
        ix->n--;
    }
    rgn->flags &= ~PDC_RF_INDEX;
    pdc_range_span_update(cache);
}

/* Take rgn out of the hash.  May free memory: never from a hook. */
void pdc_range_unhash(pdc_t *cache, pdc_rgn_t *rgn)
{
    if (!(rgn->flags & PDC_RF_HASH))
        return;
    HASH_DEL(cache->hash, rgn);
    rgn->flags &= ~PDC_RF_HASH;
}

/* Unlink rgn: out of the array and the LRU, dead, onto the dead list for the
 * next reap.  Never allocates, never calls the backend (hook-safe). */
void pdc_range_kill(pdc_t *cache, pdc_rgn_t *rgn)
{
    if (rgn->flags & PDC_RF_DEAD)
        return;
    pdc_range_remove(cache, rgn);
    if (rgn->flags & PDC_RF_ONLIST)
        pdc_list_del(&rgn->link);
    rgn->flags |= PDC_RF_DEAD | PDC_RF_ONLIST;
    pdc_list_append(&cache->dead, &rgn->link);
}

/* Kill every live region overlapping the pages [start, end).  Returns how
 * many.  Hook-safe (lock held by the caller). */
unsigned pdc_range_invalidate_locked(pdc_t *cache, uintptr_t start, uintptr_t end)
{
    pdc_range_index_t *ix = &cache->index;
    unsigned i = pdc_range_lower(ix, start), count = 0;

    while (i < ix->n && ix->v[i]->start < end) {
        pdc_range_kill(cache, ix->v[i]);   /* shifts the array down */
        count++;
    }
    return count;
}

/* Kill every live region.  Returns how many.  Hook-safe. */
unsigned pdc_range_invalidate_all(pdc_t *cache)
{
    pdc_range_index_t *ix = &cache->index;
    unsigned count = 0;

    while (ix->n > 0) {
        pdc_range_kill(cache, ix->v[ix->n - 1]);
        count++;
    }
    return count;
}
