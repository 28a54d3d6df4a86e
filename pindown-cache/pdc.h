/* pdc: the pin-down (registration) cache.
 *
 * Registering memory with a device or the kernel (io_uring fixed buffers, a
 * peer's exchanged segments) is expensive, so registrations are kept after
 * use and reused (Tezuka et al., "Pin-down cache", 1998).  A cache maps page
 * ranges of this process to backend registrations:
 *
 *   pdc_region_get()   returns a referenced region covering [addr, addr+len)
 *                      (page-rounded), registering on a miss;
 *   pdc_region_put()   drops the reference; idle regions stay registered and
 *                      are evicted least-recently-used first under the byte,
 *                      entry and RLIMIT_MEMLOCK limits;
 *   pdc_range_invalidate()  called when the application frees or unmaps
 *                      memory: no region overlapping the range is ever
 *                      returned again.  Callable from inside malloc/free/munmap
 *                      hooks: it never allocates and never blocks.
 *
 * Pinned memory is a bounded resource: each direction (send, receive) has its
 * own budget of pinned bytes in use (a region referenced in a direction
 * counts its length once there, however many gets hold it).  When a budget is exhausted a get either
 * fails at once with -EAGAIN (PDC_F_NOWAIT), waits a bounded time, or the
 * caller queues a callback with pdc_budget_wait() that runs when a put
 * releases budget: never a deadlock, never an unbounded wait.
 *
 * The cache knows nothing about sockets or allocator hooks; the shim wires
 * malloc-hooks' events to pdc_range_invalidate() and calls the fork handlers.
 * Metadata comes from the allocator given in the parameters, never from the
 * process allocator.  Functions return 0 or -errno; nothing here logs.
 *
 * Backends
 *   A backend is a pdc_ops_t.  This folder has two: pdc_uring (io_uring fixed
 *   buffers, below) and the test fake (tests/pdc_fake.h).  The local path's
 *   peer-attachment backend plugs in the same way: reg() maps (or looks up)
 *   the exchanged segment that backs [addr, addr+len) and returns its segment
 *   id in handle.id, the offset in handle.aux and the local mapping in
 *   handle.ptr; dereg() unmaps it; fork_child() forgets the mappings without
 *   touching the parent's segments; max_region_len bounds a segment.  The
 *   cache then gives that path the same reuse, limits, invalidation and
 *   budget rules as the wire path, in a second pdc_t of its own.
 */
#ifndef PDC_H
#define PDC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pdc pdc_t;

/* What a backend returns for a registration; opaque to the cache.
 * io_uring: id = fixed-buffer slot (buf_index), aux = registration serial,
 * ptr = registered address. */
typedef struct pdc_handle {
    uint64_t id;
    uint64_t aux;
    void *ptr;
} pdc_handle_t;

/* A region handed out by pdc_region_get().  Read-only for the caller; valid
 * until the matching pdc_region_put(). */
typedef struct pdc_region {
    void *addr;             /* page-aligned start of the registration */
    size_t len;             /* page multiple */
    pdc_handle_t handle;    /* the backend's registration */
    uint64_t gen;           /* unique per registration, increasing */
} pdc_region_t;

typedef enum pdc_dir {
    PDC_SEND = 0,
    PDC_RECV = 1,
} pdc_dir_t;
#define PDC_DIR_COUNT 2

/* pdc_region_get() flags */
#define PDC_F_NOWAIT 0x1u   /* budget exhausted: -EAGAIN at once, no wait */
#define PDC_F_NOMERGE 0x2u  /* register exactly the page-rounded range */
#define PDC_F_NOREG 0x4u    /* lookup only: -ENOENT on a miss */
#define PDC_F_NOHIT 0x8u    /* a hit is not counted: the caller checks the
                               registration still holds and then calls
                               pdc_region_hit() (else invalidates it) */

/* Backend operations.  reg() and dereg() are called without the cache lock
 * held (reg) or with it held (dereg), never from inside a hook; they may
 * allocate and make system calls but must not call back into this cache.
 * A backend that is used from several threads locks itself. */
typedef struct pdc_ops {
    const char *name;
    /* Register [addr, addr+len) (page-aligned); fill *h_p.  0 or -errno. */
    int (*reg)(void *arg, void *addr, size_t len, pdc_handle_t *h_p);
    /* Release a registration made by reg().  0 or -errno (counted, ignored). */
    int (*dereg)(void *arg, pdc_handle_t h);
    /* Optional: in a fork child, forget every registration without touching
     * the parent's state (shared io_uring context, peer segments). */
    void (*fork_child)(void *arg);
    size_t max_region_len;  /* largest single registration; 0: no limit */
    unsigned max_regions;   /* registrations the backend can hold; 0: no limit */
} pdc_ops_t;

typedef void *(*pdc_alloc_func_t)(void *arg, size_t size);
typedef void (*pdc_free_func_t)(void *arg, void *ptr, size_t size);
/* Call-site attribution (see pdc_stats_sites()). */
typedef enum pdc_site_kind {
    PDC_SITE_MISS = 0,
    PDC_SITE_INVALIDATE = 1,
} pdc_site_kind_t;
#define PDC_SITE_KINDS 2
/* Returns the call site (a code address) to charge a miss or an
 * invalidation to, or 0 to let pdc choose.  For PDC_SITE_INVALIDATE it runs
 * inside the memory hook: it must be hook-safe (e.g. return the interposed
 * free/munmap's return address that the hook stashed in a TLS variable). */
typedef uintptr_t (*pdc_site_func_t)(void *arg, pdc_site_kind_t kind);

#define PDC_DEFAULT_MAX_BYTES ((size_t)256 << 20)   /* ZCSOCK_PDC_MAX_BYTES */
#define PDC_DEFAULT_MAX_ENTRIES 1024u               /* ZCSOCK_PDC_MAX_ENTRIES */
#define PDC_MEMLOCK_AUTO 0           /* RLIMIT_MEMLOCK, unless CAP_IPC_LOCK */
#define PDC_MEMLOCK_NONE SIZE_MAX    /* ignore RLIMIT_MEMLOCK */

/* pdc_params_t.flags */
#define PDC_P_UNWIND_SITES 0x1u  /* attribute misses by unwinding (_Unwind_Backtrace) */

typedef struct pdc_params {
    size_t max_bytes;            /* registered bytes, 0: default */
    unsigned max_entries;        /* registrations, 0: default */
    size_t memlock_bytes;        /* PDC_MEMLOCK_AUTO, _NONE or a byte count */
    size_t budget[PDC_DIR_COUNT];/* referenced bytes per direction, 0: none */
    uint64_t budget_wait_ns;     /* bound of a blocking get's wait */
    unsigned defer_slots;        /* deferred-invalidation queue, power of 2 */
    unsigned flags;              /* PDC_P_* */
    unsigned site_skip;          /* frames above pdc's caller to charge */
    pdc_alloc_func_t alloc;      /* metadata allocator (mandatory) */
    pdc_free_func_t free;
    void *alloc_arg;
    pdc_site_func_t site_func;   /* optional site hook, preferred */
    void *site_arg;
} pdc_params_t;

/* Fill *params with the defaults (no allocator: the caller sets alloc/free).
 * Any context. */
void pdc_params_default(pdc_params_t *params);

/* Create a cache over the backend ops/ops_arg (both kept by pointer; they
 * must outlive the cache).  Allocates its tables with params->alloc and
 * reads RLIMIT_MEMLOCK when asked.  Returns 0 and sets *cache_p, or -EINVAL
 * (bad parameters), -ENOMEM.  Not from a hook. */
int pdc_create(const pdc_params_t *params, const pdc_ops_t *ops, void *ops_arg,
               pdc_t **cache_p);

/* Deregister everything and free the cache.  Regions still referenced are
 * deregistered anyway (their holders must be gone).  Not from a hook. */
void pdc_destroy(pdc_t *cache);

/* Return in *region_p a referenced region covering the page-rounded
 * [addr, addr+len) for direction dir, registering it on a miss (merging with
 * overlapping registrations unless PDC_F_NOMERGE).  The first reference in
 * dir charges region->len to dir's budget until the last put in dir.
 * Errors: -EINVAL (len 0, bad dir), -EAGAIN (budget exhausted and
 * PDC_F_NOWAIT, or still exhausted after budget_wait_ns), -ENOENT (a miss
 * with PDC_F_NOREG), -ENOSPC (limits reached and nothing idle to evict),
 * -E2BIG (longer than the backend's max_region_len), -ESTALE (the range kept
 * being invalidated while registering), -ENOMEM, or the backend's reg()
 * error.  A permanent reg() error (-EFAULT, -EOPNOTSUPP, -EINVAL, -EPERM:
 * memory the backend cannot pin, e.g. a file mapping) for a range that
 * overlapped no registration is remembered: gets inside it fail at once with
 * the same error until the range is invalidated or evicted.  Thread-safe;
 * may block briefly (cache lock, another thread's registration of an
 * overlapping range).  Not from a hook. */
int pdc_region_get(pdc_t *cache, const void *addr, size_t len, pdc_dir_t dir,
                   unsigned flags, pdc_region_t **region_p);

/* Count the hit of a get made with PDC_F_NOHIT whose registration the
 * caller found still valid.  Lock-free, hook-safe. */
void pdc_region_hit(pdc_t *cache);

/* Drop a reference taken by pdc_region_get() with the same dir (a put in a
 * direction the region holds no reference in is ignored).  The last
 * put of an invalidated region deregisters it; otherwise the region becomes
 * idle (LRU).  Runs budget callbacks that the freed budget satisfies, after
 * dropping the lock, in this thread.  Not from a hook. */
void pdc_region_put(pdc_t *cache, pdc_region_t *region, pdc_dir_t dir);

/* The memory [addr, addr+len) is being freed or unmapped: no region
 * overlapping its pages is returned again once this returns.  Hook-safe and
 * async-signal-safe in effect: never allocates, never blocks.  When the cache
 * lock is busy the range goes onto a bounded lock-free queue drained by the
 * next cache operation; if that queue is full, the next operation drops
 * every region.  Deregistration always happens later, outside the hook. */
void pdc_range_invalidate(pdc_t *cache, const void *addr, size_t len);

/* Deregister what invalidations left behind and apply deferred ones now.
 * Not from a hook. */
void pdc_cache_reap(pdc_t *cache);

/* Invalidate every region (idle ones are deregistered now). Not from a hook. */
void pdc_cache_flush(pdc_t *cache);

/* Budget delay queue.  A caller whose get failed with -EAGAIN may queue
 * *waiter (caller-owned, no allocation) to have cb(arg) called once when at
 * least `bytes` of dir's budget is free; the callback runs in the thread
 * that called pdc_region_put(), without the cache lock, and may call the
 * cache.  It is a wake-up, not a reservation: retry the get.  Returns 0
 * (queued) or 1 (budget available now, not queued). */
typedef void (*pdc_budget_func_t)(void *arg);
typedef struct pdc_budget_waiter {
    struct pdc_budget_waiter *next;
    pdc_budget_func_t cb;
    void *arg;
    size_t bytes;
    pdc_dir_t dir;
    int queued;
} pdc_budget_waiter_t;
int pdc_budget_wait(pdc_t *cache, pdc_budget_waiter_t *waiter, pdc_dir_t dir,
                    size_t bytes, pdc_budget_func_t cb, void *arg);
/* Remove a queued waiter.  0, or -ENOENT when it already fired (its callback
 * may be running right now) or was never queued. */
int pdc_budget_cancel(pdc_t *cache, pdc_budget_waiter_t *waiter);

/* Fork handlers, for pthread_atfork order: prepare takes the cache lock,
 * parent releases it, child re-initialises the locks and drops every
 * registration without calling the backend's dereg (the backend's
 * fork_child() runs instead).  Regions the child still holds stay readable
 * and their puts are harmless. */
void pdc_fork_prepare(pdc_t *cache);
void pdc_fork_parent(pdc_t *cache);
void pdc_fork_child(pdc_t *cache);

/* Statistics: counters (monotonic) and gauges (current values).
 * X(id, suffix): the report key is "pdc." suffix; a second cache can be
 * reported under another prefix with a table of its own built from this
 * list, e.g. [PDC_STAT_##id] = "pdc.local." suffix. */
#define PDC_STAT_LIST(X)                                                     \
    X(GETS, "gets")                                                         \
    X(HITS, "hits")                                                         \
    X(MISSES, "misses")                                                     \
    X(MERGES, "merges")                                                     \
    X(REGS, "regs")                                                         \
    X(REG_FAILS, "reg_fails")                                               \
    X(DEREGS, "deregs")                                                     \
    X(DEREG_FAILS, "dereg_fails")                                           \
    X(EVICTIONS, "evictions")                                               \
    X(INVALIDATIONS, "invalidations")                                       \
    X(DEFERRED_INVALIDATIONS, "deferred_invalidations")                     \
    X(DEFER_OVERFLOWS, "defer_overflows")                                   \
    X(FLUSHES, "flushes")                                                   \
    X(BYTES_REGISTERED, "bytes_registered")                                 \
    X(REG_NS, "reg_ns")                                                     \
    X(NOSPACE, "nospace")                                                   \
    X(BUDGET_WAITS, "budget_waits")                                         \
    X(BUDGET_EAGAIN, "budget_eagain")                                       \
    X(INFLIGHT_WAITS, "inflight_waits")                                     \
    X(NEG_ENTRIES, "neg_entries")                                           \
    X(NEG_HITS, "neg_hits")                                                 \
    X(STALE_RETRIES, "stale_retries")                                       \
    X(FORK_DROPS, "fork_drops")                                             \
    X(REGIONS, "regions")                                                   \
    X(PINNED_BYTES, "pinned_bytes")                                         \
    X(BUDGET_SEND, "budget_used.send")                                      \
    X(BUDGET_RECV, "budget_used.recv")

enum {
#define PDC_STAT_ENUM(id, name) PDC_STAT_##id,
    PDC_STAT_LIST(PDC_STAT_ENUM)
#undef PDC_STAT_ENUM
    PDC_STAT_COUNT
};

/* "pdc.gets", ... indexed by PDC_STAT_*. */
extern const char *const pdc_stat_names[PDC_STAT_COUNT];

/* Current value of counter idx (0 for a bad index).  Lock-free, hook-safe.
 * pdc_stats_read() is the same with the (void *arg, unsigned idx) shape of
 * a statistics-source getter. */
uint64_t pdc_stats_get(const pdc_t *cache, unsigned idx);
uint64_t pdc_stats_read(void *cache, unsigned idx);

/* Call-site attribution: the top sites charged with misses or invalidations,
 * kept in a small fixed table per kind (space-saving: a new site replaces the
 * least counted one).  A site is a code address: what params.site_func
 * returns if set and non-zero; else for a miss the frame site_skip levels
 * above pdc_region_get()'s caller with PDC_P_UNWIND_SITES (libgcc's
 * _Unwind_Backtrace, on misses only, never inside a hook; it opens no
 * descriptor), or that caller itself; for an
 * invalidation pdc_range_invalidate()'s caller.  Only invalidations that
 * kill a region are charged; deferred ones are not. */
typedef struct pdc_site {
    uintptr_t pc;
    uint64_t count;
} pdc_site_t;

/* Copy up to n sites of kind, most counted first, into out.  Returns how
 * many.  Takes the cache lock; not from a hook. */
unsigned pdc_stats_sites(pdc_t *cache, pdc_site_kind_t kind, pdc_site_t *out,
                         unsigned n);

/* Format pc as "symbol+0xoff (object)" into buf (dladdr; report time only,
 * never from a hook).  Returns buf. */
char *pdc_site_format(uintptr_t pc, char *buf, size_t size);

/* Write the top `top` sites of each kind as report lines into buf:
 *   <prefix>.top_miss.1: 42 send_path+0x1c (app)
 *   <prefix>.top_invalidate.1: 7 free+0x0 (libc.so.6)
 * prefix is e.g. "pdc" or "pdc.wire".  Returns the length written
 * (truncated at size - 1, always NUL-terminated).  Report time only. */
size_t pdc_stats_sites_format(pdc_t *cache, const char *prefix, unsigned top,
                              char *buf, size_t size);

/* io_uring fixed-buffer backend (pdc_uring.c).
 * Owns a ring with a sparse table of nr_slots fixed buffers, created lazily
 * on the first registration (and again after fork in the child).  A
 * registration fills one slot with io_uring_register_buffers_update_tag(),
 * which pins the pages; dereg clears the slot.  The wire path submits
 * *_FIXED operations on pdc_uring_ring() with buf_index = handle.id. */
typedef struct pdc_uring pdc_uring_t;
extern const pdc_ops_t pdc_uring_ops;   /* ops_arg: a pdc_uring_t */

/* Allocate the backend state with alloc/alloc_arg (no ring yet).  nr_slots
 * (0: 1024, at most 16384) bounds the registrations; sq_entries the ring.
 * Returns 0, -EINVAL or -ENOMEM. */
int pdc_uring_create(unsigned nr_slots, unsigned sq_entries,
                     pdc_alloc_func_t alloc, pdc_free_func_t free,
                     void *alloc_arg, pdc_uring_t **uring_p);
void pdc_uring_destroy(pdc_uring_t *uring);
/* Put the ring's descriptor at floor or above when it is made (the caller
 * keeps its own descriptors out of the application's lowest numbers).
 * 0 (the default): wherever the kernel puts it.  Call before the first
 * registration. */
void pdc_uring_fd_floor_set(pdc_uring_t *uring, int floor);
/* The ring (struct io_uring *), set up on demand.  NULL with *err_p = -errno
 * when io_uring is unavailable. */
void *pdc_uring_ring(pdc_uring_t *uring, int *err_p);
/* pdc_uring_ops with max_regions set to this backend's slot count. */
void pdc_uring_ops_init(const pdc_uring_t *uring, pdc_ops_t *ops_p);

#ifdef __cplusplus
}
#endif
#endif
