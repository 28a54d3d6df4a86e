/* malloc-hooks public API: the only header shim/ sees of this module.
 *
 * malloc-hooks interposes the allocator family (malloc ... malloc_usable_size)
 * and the mapping family (mmap, munmap, mremap, madvise, brk/sbrk, shmat/shmdt).
 * It does two things:
 *
 *  (a) memory events: before a range stops holding its current pages (munmap,
 *      mremap, mmap(MAP_FIXED), madvise(DONTNEED|FREE|REMOVE), shmdt, a
 *      shrinking brk/sbrk, free()/realloc() of a chunk glibc releases with its
 *      own internal munmap/mremap, free() of a placed block) every subscriber
 *      whose mask matches is called with the range;
 *  (b) placement: allocations of at least alloc_min bytes come back page
 *      aligned (2 MiB aligned from huge_min up) from memfd-backed arenas that
 *      a local peer can map (mh_region_lookup), recycled through a pool.
 *
 * Life cycle: before mh_init() the hooks pass straight through to the real
 * functions (resolving zc_real lazily, serving dlsym's own allocations from a
 * static bootstrap arena).  The shim's constructor calls zc_real_resolve()
 * then mh_init().  Libraries never log: mh_init() records a status (flags plus
 * a short reason) that the shim reads with mh_status() and logs.
 */
#ifndef MH_H
#define MH_H

#include <stddef.h>
#include <stdint.h>

/* Event kinds, one bit each; a subscriber's mask is an OR of them. */
#define MH_EV_UNMAP     0x001u /* munmap, or the moved-away part of mremap */
#define MH_EV_REMAP     0x002u /* mremap: the old range (whole or shrunk tail) */
#define MH_EV_MAP_FIXED 0x004u /* mmap(MAP_FIXED), mremap(MREMAP_FIXED) target */
#define MH_EV_MADVISE   0x008u /* madvise DONTNEED / DONTNEED_LOCKED / FREE / REMOVE */
#define MH_EV_SHMDT     0x010u /* shmdt of an attached segment */
#define MH_EV_BRK       0x020u /* brk/sbrk shrinking the program break */
#define MH_EV_FREE      0x040u /* free/realloc of a glibc-mmapped chunk */
#define MH_EV_BLOCK     0x080u /* free/realloc of a placed arena block (recycled) */
#define MH_EV_ALL       0x0ffu
#define MH_EV_KINDS     8

/* Event callback: [addr, addr+len) is about to stop holding its current
 * pages (page-rounded outward where the kernel would act on whole pages).
 * Called from inside hooks, before the real operation, on the thread that
 * made the call, possibly with a glibc lock held (free of a chunk):
 * it must not allocate, block on a lock that an allocating thread may hold,
 * call stdio/getenv, or unmap memory.  It may try-lock and defer. */
typedef void (*mh_event_func_t)(unsigned kind, void *addr, size_t len, void *arg);

/* Status flags (mh_status()). */
#define MH_ST_INIT              0x01u /* mh_init() ran */
#define MH_ST_EVENTS_OK         0x02u /* self-test saw the probe event */
#define MH_ST_PLACEMENT_ACTIVE  0x04u /* large allocations are placed in arenas */
#define MH_ST_FOREIGN_ALLOCATOR 0x08u /* malloc is not glibc's: events only */
#define MH_ST_SELFTEST_FAILED   0x10u /* probe event missing: disable zero-copy */
#define MH_ST_HUGE_THP          0x20u /* arenas advised MADV_HUGEPAGE (shmem THP on) */
#define MH_ST_HUGE_TLB          0x40u /* huge blocks come from a hugetlb memfd */
#define MH_ST_PLACEMENT_NARROW  0x80u /* huge_paged_only: only blocks that fill 2 MiB
                                         pages are placed (page exchange alone) */

typedef struct mh_params {
    size_t alloc_min;  /* ZCSOCK_ALLOC_MIN: place allocations >= this (0: default) */
    size_t huge_min;   /* ZCSOCK_ALLOC_HUGE_MIN: 2 MiB alignment from here (0: default) */
    unsigned huge_slack; /* 0: place every eligible huge block; k: only those
                            whose last 2 MiB unit's unused end is <= n >> k */
    int units_4k;      /* 1: exchange units also in huge arenas of 4 KiB
                          pages (no THP, no hugetlb) */
    int huge_paged_only; /* 1: huge blocks only in arenas of 2 MiB pages
                            (shmem THP, or the one hugetlb arena); past
                            that, the real allocator */
    int placement;     /* ZCSOCK_ALLOC_PLACEMENT: 0 off (events only), 1 on,
                          2 deferred: arenas ready, off until mh_placement_set(1) */
    int no_atfork;     /* 1: the shim calls mh_fork_* itself; 0: mh_init registers
                          them with pthread_atfork */
} mh_params_t;

#define MH_ALLOC_MIN_DEFAULT ((size_t)128 << 10)
#define MH_HUGE_MIN_DEFAULT  ((size_t)2 << 20)

/* Initialise: detect a foreign allocator, read THP/hugetlb settings, reserve
 * the arenas' address space when placement is on (no memfd until the first
 * placed allocation), run the self-test.  Call once from
 * the shim's constructor after zc_real_resolve(), outside any hook.  May
 * allocate.  Returns 0, or -errno when the module cannot work at all (events
 * and placement are then off, the hooks pass through).  Failures of optional
 * parts (placement, huge pages) are reported in mh_status(), not here. */
int mh_init(const mh_params_t *p);

/* Status flags (MH_ST_*) and, when reason_p is not NULL, a static short
 * reason string for the last degradation ("" when none).  Hook-safe. */
unsigned mh_status(const char **reason_p);

/* Turn placement on (1) or off (0) at run time, for example on when the
 * process makes its first local-peer connection (placement 2 in mh_init).
 * Blocks already placed stay valid either way.  Returns 0, or -ENOTSUP when
 * mh_init did not set placement up (off, foreign allocator, no arena).
 * Hook-safe (two atomic stores). */
int mh_placement_set(int on);

/* Subscribe cb(kind, addr, len, arg) to the events in mask.  At most
 * MH_SUBSCRIBERS_MAX subscribers.  Returns a handle >= 0, or -EINVAL /
 * -ENOSPC.  Not hook-safe (takes a mutex); call it from init code. */
#define MH_SUBSCRIBERS_MAX 8
int mh_event_subscribe(unsigned mask, mh_event_func_t cb, void *arg);

/* Inside an event callback: the application's call site (return address)
 * of the free/realloc/munmap/... that fired the event, for attribution.
 * Hook-safe. */
uintptr_t mh_event_site(void);

/* Remove a subscription.  A dispatch already running may still call cb once:
 * keep arg valid until the process ends or a quiescent point. */
int mh_event_unsubscribe(int handle);

/* Run the self-test again: maps and unmaps a probe page through the exported
 * (interposed) munmap and checks an event arrived.  Returns 0 or -ENOSYS.
 * Called by mh_init; not hook-safe. */
int mh_selftest(void);

/* Fork handlers, in pthread_atfork order.  Placed memory is MAP_SHARED:
 * prepare delivers MH_EV_MAP_FIXED for the arenas, then remaps those with
 * live blocks MAP_PRIVATE (copy-on-write in parent and child, as a plain
 * fork; those blocks stop being exchangeable until freed); child gives
 * empty arenas a fresh memfd.  prepare holds the arena lock until parent
 * or child.  Registered by mh_init unless p->no_atfork; call prepare after
 * any handler that takes locks an event subscriber needs. */
void mh_fork_prepare(void);
void mh_fork_parent(void);
void mh_fork_child(void);

/* Is [addr, addr+len) entirely inside one placed arena?  (No data path
 * asks yet: page exchange will.)  Then 1, with the
 * arena's memfd in *memfd_p and the file offset of addr in *offset_p, and
 * *huge_p (may be NULL) 1 when the arena's pages are huge (2 MiB units).
 * 0 otherwise.  Hook-safe, lock-free, O(1). */
int mh_region_lookup(const void *addr, size_t len, int *memfd_p,
                     uint64_t *offset_p, int *huge_p);

/* Exchange units (page exchange, shim/paths/local/xchg.c).  A unit is one
 * 2 MiB unit of a used block of a huge arena (2 MiB aligned).  States:
 *   MH_UNIT_SHARED   the arena's memfd, MAP_SHARED (every unit at first);
 *   MH_UNIT_PRIV     frozen: MAP_PRIVATE over the same memfd range, so
 *                    every later write (the kernel's too) copies on write
 *                    and the memfd range keeps the bytes it had when frozen;
 *   MH_UNIT_FOREIGN  some of it maps another file MAP_PRIVATE (a received
 *                    unit mapped in place);
 *   MH_UNIT_APP      the application mapped something over (part of) it
 *                    (mmap MAP_FIXED, mremap, shmat) or changed its
 *                    protection (mprotect): left alone, never lent, frozen
 *                    or mapped over, until its block is freed (a freeze
 *                    would map the arena back over the application's own
 *                    mapping, or make a read-only buffer writable).
 * Units are those of arenas with 2 MiB pages: shmem THP, or the hugetlb
 * arena (there a private mapping reserves its copy-on-write page, so a
 * freeze or map fails with ENOMEM when the pool is dry).
 * Freeing the block maps the arena's memfd back (SHARED); a fork keeps
 * frozen and foreign units of a THP arena as they are (already private:
 * both processes copy on write) and gives the child a shared copy of the
 * hugetlb arena; madvise(DONTNEED) zeroes through the memfd.  All three
 * are hook-safe (raw mmap under the arena lock, no allocation). */
enum { MH_UNIT_SHARED = 0, MH_UNIT_PRIV = 1, MH_UNIT_FOREIGN = 2, MH_UNIT_APP = 3 };
#define MH_UNIT_SIZE ((size_t)2 << 20)
/* Freeze the unit at addr (SHARED -> PRIV; PRIV stays).  0, -EINVAL (not a
 * unit of a used block of a shared huge arena), -EPERM (FOREIGN or APP), or
 * the mmap error. */
int mh_unit_freeze(void *addr);
/* Map the first 2 MiB of fd MAP_PRIVATE over the unit at addr: FOREIGN.
 * 0, -EINVAL (not a unit as above), -EPERM (APP), -EXDEV (fd is hugetlbfs
 * and the arena not, or the reverse) or the mmap error (the unit
 * unchanged). */
int mh_unit_map(void *addr, int fd);
/* The unit's state, or -1 when addr is not a unit of a used block. */
int mh_unit_state(const void *addr);
/* 1 when addr is in the hugetlb arena (its pages come from the hugetlb
 * pool), else 0.  Lock-free. */
int mh_unit_hugetlb(const void *addr);
/* The unit at addr is about to be overwritten whole (a receive copies into
 * every byte of it): a FOREIGN unit gets the arena's memfd back (SHARED), so
 * the writes land in its own 2 MiB page instead of copying each 4 KiB page
 * of the received file on write.  Its bytes until then are the memfd's
 * (stale): only for a range the caller overwrites entirely.  1 done, 0 not
 * FOREIGN (nothing to do), -EINVAL not a unit, or the mmap error. */
int mh_unit_reclaim(void *addr);

/* 1 when fd is one of this module's arena memfds (the shim refuses
 * close/dup2 over it).  Hook-safe. */
int mh_fd_is_internal(int fd);

/* The application is about to take descriptor number fd (dup2/dup3 onto
 * it): if it is one of this module's, move ours to another number first.
 * Returns 0 or -errno.  Hook-safe (raw syscalls only). */
int mh_fd_move(int fd);

/* Counters, read with relaxed atomics (hook-safe).  The shim publishes them
 * as mh.events.<kind> and mh.alloc.<name>. */
typedef struct mh_stats {
    uint64_t events[MH_EV_KINDS];     /* per event kind, in bit order */
    uint64_t placed_allocs;           /* allocations served from arenas */
    uint64_t placed_bytes;            /* bytes currently held by placed blocks */
    uint64_t pool_hits;               /* placed allocations served by recycling */
    uint64_t pool_bytes;              /* bytes cached in free lists */
    uint64_t arena_fallbacks;         /* placement failed, passed to real malloc */
    uint64_t boot_bytes;              /* bytes served by the bootstrap arena */
    /* exchange units (page exchange): frozen (SHARED -> PRIV), mapped in
     * (a received unit file mapped over one), released (a mapped-in unit
     * let go: its block freed, or another unit mapped over it), thawed (a
     * frozen unit given its memfd back: its block freed), the
     * application's (mapped over or protected by the application: APP) */
    uint64_t units[5];
} mh_stats_t;

void mh_stats_get(mh_stats_t *st_p);
/* Allocations served from arenas so far (mh_stats_t.placed_allocs), one
 * relaxed load: for hot paths.  Hook-safe. */
uint64_t mh_placed_allocs(void);

/* The counters by name, for zcsock_stat_get and the stats report:
 * "mh.status", "mh.events.<kind>" (mh_event_names), "mh.alloc.<field>"
 * (placed_allocs, placed_bytes, pool_hits, pool_bytes, arena_fallbacks,
 * boot_bytes), "mh.units.<field>" (frozen, mapped_in, released, thawed).  mh_stat_lookup returns 0 with *value_p set, or -ENOENT.
 * mh_stat_visit calls fn once per counter in that order.  Both hook-safe
 * (no allocation, no locks). */
int mh_stat_lookup(const char *name, uint64_t *value_p);
typedef void (*mh_stat_visit_func_t)(void *arg, const char *name, uint64_t value);
void mh_stat_visit(mh_stat_visit_func_t fn, void *arg);

/* Names of the event kinds, in bit order ("unmap", "remap", "map_fixed",
 * "madvise", "shmdt", "brk", "free", "block"), for the shim's stats table
 * (mh.events.<name>; the other fields are mh.alloc.<field name>). */
extern const char *const mh_event_names[MH_EV_KINDS];

#endif
