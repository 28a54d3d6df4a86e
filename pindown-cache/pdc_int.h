/* pdc internals: the cache structure shared by pdc_*.c and the tests of this
 * folder.  Never included outside pindown-cache/. */
#ifndef PDC_INT_H
#define PDC_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "pdc.h"

/* uthash allocates through the cache's allocator: every HASH_ADD/HASH_DEL
 * site has a `cache` variable in scope.  HASH_NONFATAL_OOM: a failed add
 * leaves hh.tbl NULL instead of exiting the host. */
#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) pdc_mem_alloc(cache, (sz))
#define uthash_free(ptr, sz) pdc_mem_free(cache, (ptr), (sz))
/* Keys are page addresses (uintptr_t): a multiplicative hash of the page
 * number and a word compare, instead of Jenkins and memcmp. */
#define HASH_FUNCTION(keyptr, keylen, hashv)                                  \
    do {                                                                      \
        uint64_t _pk = *(const uint64_t *)(const void *)(keyptr) >> 12;       \
        (hashv) = (unsigned)((_pk * 0x9e3779b97f4a7c15ull) >> 32);            \
    } while (0)
#define HASH_KEYCMP(a, b, n)                                                  \
    (*(const uintptr_t *)(const void *)(a) != *(const uintptr_t *)(const void *)(b))
#include <uthash.h>

typedef struct pdc_list {
    struct pdc_list *prev, *next;
} pdc_list_t;

/* Region states and flags. */
enum {
    PDC_RS_INFLIGHT = 1,   /* placeholder: reg() running without the lock */
    PDC_RS_READY = 2,
    PDC_RS_NEG = 3,        /* negative entry: reg() failed for good (err) */
};
#define PDC_RF_INDEX 0x1u   /* in the range index */
#define PDC_RF_HASH 0x2u    /* in the exact-start hash */
#define PDC_RF_DEAD 0x4u    /* invalidated/evicted: never returned again */
#define PDC_RF_ONLIST 0x8u  /* link is on the LRU or the dead list */
#define PDC_RF_ZOMBIE 0x20u /* dead, referenced, link on the zombie list */
#define PDC_RF_ORPHAN 0x10u /* pre-fork region dropped in a fork child */

typedef struct pdc_rgn {
    pdc_region_t pub;       /* first: pdc_region_t * <-> pdc_rgn_t * */
    uintptr_t start, end;   /* page-aligned [start, end) */
    uintptr_t key;          /* hash key: start */
    unsigned refs;          /* references held by get callers (+1 in flight) */
    unsigned dref[PDC_DIR_COUNT];  /* of which per direction (budget charge) */
    unsigned state;
    unsigned flags;
    unsigned epoch;         /* cache->epoch at creation (fork detection) */
    int err;                /* PDC_RS_NEG: the backend's error */
    pdc_list_t link;        /* LRU when idle and linked; dead list when dead */
    UT_hash_handle hh;
} pdc_rgn_t;

/* The overlap index: regions in the index never overlap, sorted by start. */
typedef struct pdc_range_index {
    pdc_rgn_t **v;
    unsigned n, cap;
} pdc_range_index_t;

/* The deferred-invalidation queue (Vyukov's bounded MPMC ring). */
typedef struct pdc_defer_cell {
    _Atomic size_t seq;
    uintptr_t addr;
    size_t len;
} pdc_defer_cell_t;

typedef struct pdc_defer {
    pdc_defer_cell_t *cells;
    size_t mask;
    _Atomic size_t enq;
    _Atomic size_t deq;
    _Atomic int overflow;   /* set when a push found the ring full */
} pdc_defer_t;

#define PDC_SITES 16
typedef struct pdc_site_table {
    pdc_site_t v[PDC_SITES];
} pdc_site_table_t;

struct pdc {
    /* Immutable after create. */
    pdc_params_t params;
    const pdc_ops_t *ops;
    void *ops_arg;
    size_t page;
    size_t max_bytes;       /* min(params.max_bytes, memlock) */
    unsigned max_entries;   /* min(params.max_entries, ops->max_regions) */
    size_t max_region_len;

    /* lock protects everything below except stats reads and the defer
     * queue.  Order: cache lock, then the backend's own lock.  Hooks only
     * ever trylock it. */
    pthread_mutex_t lock;
    pthread_cond_t reg_cond;     /* an in-flight registration completed */
    pthread_cond_t budget_cond;  /* budget released */
    unsigned budget_sleepers;

    pdc_rgn_t *hash;             /* uthash head, keyed by start */
    pdc_range_index_t index;
    pdc_list_t lru;              /* idle linked regions, oldest first */
    pdc_list_t dead;             /* dead regions to unhash/dereg */
    pdc_list_t zombies;          /* dead regions still referenced */
    unsigned nregions;           /* registrations held (incl. in flight) */
    size_t pinned;               /* their bytes */
    size_t inuse[PDC_DIR_COUNT]; /* charged budget */
    uint64_t gen;                /* last generation handed out */
    unsigned epoch;              /* bumped by pdc_fork_child() */
    pdc_budget_waiter_t *waiters, **waiters_tail;
    pdc_site_table_t sites[PDC_SITE_KINDS];

    /* Bounds of the indexed regions, read without the lock by
     * pdc_range_invalidate() to ignore ranges nothing can overlap. */
    _Atomic uintptr_t span_lo, span_hi;

    pdc_defer_t defer;
    _Atomic uint64_t stats[PDC_STAT_COUNT];
};

static inline pdc_rgn_t *pdc_rgn_of(pdc_region_t *r)
{
    return (pdc_rgn_t *)r;
}

/* Memory, through the caller's allocator. */
static inline void *pdc_mem_alloc(pdc_t *cache, size_t size)
{
    return cache->params.alloc(cache->params.alloc_arg, size);
}

static inline void pdc_mem_free(pdc_t *cache, void *ptr, size_t size)
{
    if (ptr)
        cache->params.free(cache->params.alloc_arg, ptr, size);
}

/* Statistics: writers hold the lock (plain add of an atomic load), hook
 * paths use pdc_stat_inc_atomic. */
static inline void pdc_stat_add(pdc_t *cache, unsigned id, uint64_t n)
{
    uint64_t v = atomic_load_explicit(&cache->stats[id], memory_order_relaxed);
    atomic_store_explicit(&cache->stats[id], v + n, memory_order_relaxed);
}

static inline void pdc_stat_set(pdc_t *cache, unsigned id, uint64_t v)
{
    atomic_store_explicit(&cache->stats[id], v, memory_order_relaxed);
}

static inline void pdc_stat_inc_atomic(pdc_t *cache, unsigned id)
{
    atomic_fetch_add_explicit(&cache->stats[id], 1, memory_order_relaxed);
}

/* Intrusive list. */
static inline void pdc_list_init(pdc_list_t *head)
{
    head->prev = head->next = head;
}

static inline int pdc_list_empty(const pdc_list_t *head)
{
    return head->next == head;
}

static inline void pdc_list_append(pdc_list_t *head, pdc_list_t *node)
{
    node->prev = head->prev;
    node->next = head;
    head->prev->next = node;
    head->prev = node;
}

static inline void pdc_list_del(pdc_list_t *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->prev = node->next = node;
}

#define pdc_rgn_of_link(l) ((pdc_rgn_t *)((char *)(l) - offsetof(pdc_rgn_t, link)))

/* pdc_range.c: the overlap index and the exact-start hash.  Lock held. */
int pdc_range_init(pdc_t *cache, unsigned cap);
void pdc_range_fini(pdc_t *cache);
unsigned pdc_range_lower(const pdc_range_index_t *ix, uintptr_t addr);
pdc_rgn_t *pdc_range_lookup(pdc_t *cache, uintptr_t start, uintptr_t end);
int pdc_range_insert(pdc_t *cache, pdc_rgn_t *rgn);
void pdc_range_remove(pdc_t *cache, pdc_rgn_t *rgn);
void pdc_range_unhash(pdc_t *cache, pdc_rgn_t *rgn);
void pdc_range_kill(pdc_t *cache, pdc_rgn_t *rgn);
unsigned pdc_range_invalidate_locked(pdc_t *cache, uintptr_t start, uintptr_t end);
unsigned pdc_range_invalidate_all(pdc_t *cache);

/* pdc_defer.c: the deferred invalidation queue. */
int pdc_defer_init(pdc_t *cache, unsigned slots);
void pdc_defer_fini(pdc_t *cache);
void pdc_defer_reset(pdc_t *cache);
int pdc_defer_push(pdc_defer_t *q, uintptr_t addr, size_t len);
int pdc_defer_pop(pdc_defer_t *q, uintptr_t *addr_p, size_t *len_p);
void pdc_defer_drain(pdc_t *cache);
static inline int pdc_defer_pending(pdc_defer_t *q)
{
    return atomic_load_explicit(&q->enq, memory_order_acquire) !=
               atomic_load_explicit(&q->deq, memory_order_relaxed) ||
           atomic_load_explicit(&q->overflow, memory_order_relaxed);
}

/* pdc_stats.c: call-site attribution.  Lock held. */
uintptr_t pdc_site_capture(pdc_t *cache, pdc_site_kind_t kind, uintptr_t ra);
void pdc_site_count(pdc_t *cache, pdc_site_kind_t kind, uintptr_t pc);
void pdc_sites_warmup(void);

/* pdc_cache.c: shared by the files above.  Lock held. */
void pdc_cache_release(pdc_t *cache, pdc_rgn_t *rgn);
void pdc_cache_reap_locked(pdc_t *cache);
void pdc_cache_gauges(pdc_t *cache);

#endif
