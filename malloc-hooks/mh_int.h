/* malloc-hooks internals: shared by the files of this folder only. */
#ifndef MH_INT_H
#define MH_INT_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>
#include <stdint.h>

#include "mh.h"

#define MH_PAGE        4096ul
#define MH_HUGE        (2ul << 20)
#define MH_ALIGN_UP(x, a)   (((x) + ((a) - 1)) & ~((a) - 1))
#define MH_LIKELY(x)   __builtin_expect(!!(x), 1)
#define MH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MH_HIDDEN      __attribute__((visibility("hidden")))

/* ---- global state (mh_init.c) ------------------------------------------ */

typedef struct mh_state {
    int active;          /* mh_init done: hooks do their work (atomic read) */
    int placement;       /* placement on (atomic read; off after fork failure) */
    int placement_ready; /* arenas set up: mh_placement_set may turn it on */
    int glibc_chunks;    /* malloc is glibc's: chunk headers may be read */
    size_t alloc_min;    /* place at or above this */
    size_t huge_min;     /* 2 MiB blocks at or above this */
    unsigned huge_slack; /* 0, or: a huge block's unused tail <= n >> this */
    unsigned status;     /* MH_ST_* */
    const char *reason;  /* static string */
} mh_state_t;

extern mh_state_t mh_g MH_HIDDEN;

/* Thread-local re-entry guard: set while a hook does its own work (events,
 * arena management, lazy resolution).  A hook entered with it set passes
 * straight through (or to the bootstrap arena while zc_real is empty). */
extern __thread int mh_tls_guard;

/* ---- bootstrap arena (mh_boot.c) -------------------------------------- */

#define MH_BOOT_SIZE (256u << 10)
extern char mh_boot_mem[MH_BOOT_SIZE] MH_HIDDEN;

void *mh_boot_alloc(size_t n, size_t align);

/* 1 when p lies in the bootstrap arena.  Hook-safe. */
static inline int mh_boot_owns(const void *p)
{
    return (uintptr_t)p - (uintptr_t)mh_boot_mem < MH_BOOT_SIZE;
}

size_t mh_boot_size(const void *p);
extern uint64_t mh_boot_used;

/* ---- events (mh_event.c) ---------------------------------------------- */

extern unsigned mh_event_mask;   /* OR of subscribed masks (atomic read) */

/* Deliver kind for [addr, addr+len) to every matching subscriber.  Sets the
 * TLS guard around the callbacks; a nested dispatch on the same thread is
 * dropped (counted).  Cheap when nobody subscribed to kind. */
void mh_event_dispatch(unsigned kind, const void *addr, size_t len);

/* Resolve zc_real lazily from a hook that found its entry empty.  Returns 1
 * when it tried, 0 when this thread is already inside the resolver (dlsym
 * allocating): the caller then uses its fallback (the bootstrap arena, or
 * ENOSYS for the mapping hooks).  errno preserved. */
int mh_real_resolve(void) MH_HIDDEN;
#define MH_REAL_OK(name) (MH_LIKELY(zc_real.name != NULL) || \
                          (mh_real_resolve() && zc_real.name != NULL))

/* The application's call site of the hook now running (its return address),
 * for attributing events: set on entry of every hook that can fire one. */
extern __thread uintptr_t mh_tls_site MH_HIDDEN;
#define MH_SITE_MARK() (mh_tls_site = (uintptr_t)__builtin_return_address(0))

static inline int mh_event_wanted(unsigned kind)
{
    return (__atomic_load_n(&mh_event_mask, __ATOMIC_RELAXED) & kind) != 0;
}

void mh_event_count_add(unsigned kind);
void mh_event_reset_for_test(void);

/* ---- size classes and arenas (mh_arena.c) ----------------------------- */

/* Classes: 8 per power of two of the unit count (units are pages or 2 MiB),
 * exact below 8 units; waste at most 12.5 %. */
#define MH_CLASS_MAX 160
unsigned mh_class_of(size_t units);
size_t mh_class_units(unsigned cls);

#define MH_ARENA_MAX   64
#define MH_ARENA_SIZE  ((size_t)1 << 30)        /* virtual bytes per arena */
#define MH_PLACE_MAX   (MH_ARENA_SIZE / 4)      /* larger goes to the real malloc */
#define MH_POOL_CAP    ((uint64_t)256 << 20)    /* dirty bytes kept in free lists */

typedef struct mh_meta {
    uint32_t next;     /* free list link: unit index + 1, 0 = end */
    uint8_t cls;       /* class + 1 at a block start, 0 elsewhere */
    uint8_t flags;     /* MH_BLK_* (block start) */
    uint8_t ustate;    /* huge arenas, every unit: MH_UNIT_* (mh.h; lock) */
    uint8_t pad;
} mh_meta_t;

#define MH_BLK_USED  0x1
#define MH_BLK_DIRTY 0x2     /* pages were touched: calloc must zero */

typedef struct mh_arena {
    char *base;            /* immutable once published */
    size_t size;
    int fd;                /* memfd (replaced in a fork child) */
    int huge;              /* units of 2 MiB */
    int hugetlb;
    unsigned shift;        /* log2(unit) */
    size_t bump;           /* units carved so far (lock) */
    size_t dirty_top;      /* units below this past bump may hold old data (lock) */
    size_t nunits;
    mh_meta_t *meta;       /* one per unit, anonymous mapping */
    uint32_t free_head[MH_CLASS_MAX];   /* unit index + 1 (lock) */
    int fork_fd;           /* copy made by mh_fork_prepare, -1 none */
    int fork_tlb;          /* fork_fd is hugetlb */
    int priv;              /* forked generation: mapped MAP_PRIVATE, not
                              exchangeable, no new blocks; reclaimed with a
                              fresh memfd when its last block is freed */
    size_t used;           /* used blocks (lock) */
    size_t ustates;        /* units not MH_UNIT_SHARED (lock) */
} mh_arena_t;

typedef struct mh_arena_cfg {
    int thp;           /* madvise MADV_HUGEPAGE on arenas */
    long hugetlb_free; /* free hugetlb pages at init (2 MiB), 0 none */
    int huge_paged_only; /* huge blocks only in arenas of 2 MiB pages */
    int units_4k;      /* exchange units also on 4 KiB pages */
} mh_arena_cfg_t;

int mh_arena_setup(const mh_arena_cfg_t *cfg);
/* The address space got limited (setrlimit RLIMIT_AS), or a mapping of the
 * application's failed for want of it: the reservation's slots no arena
 * uses go back, and no arena is made from now on.  1 when address space was
 * given back.  Hook-safe (gives up when the arena lock is busy). */
int mh_arena_trim(void);
/* The application maps over, moves or protects [addr, addr+len): every
 * unit of a used huge block it touches becomes MH_UNIT_APP (mh.h).
 * Hook-safe. */
void mh_arena_units_app(const void *addr, size_t len);
/* 1 when RLIMIT_AS is finite or vm.overcommit_memory is 2. */
int mh_space_limited(void);
/* Read a small sysfs file into buf (NUL terminated).  Returns its length or
 * -1.  Raw syscalls: the shim interposes read. */
ssize_t mh_sysfs_read(const char *path, char *buf, size_t cap);
/* Free 2 MiB hugetlb pages not reserved by anyone, now.  Hook-safe (raw
 * reads of sysfs). */
long mh_hugetlb_free(void);
/* Allocate a block of at least n bytes; huge: 2 MiB aligned.  *dirty_p says
 * whether its pages may hold old data.  NULL when arenas are exhausted. */
void *mh_arena_alloc(size_t n, int huge, int *dirty_p);
extern mh_arena_t mh_arenas[MH_ARENA_MAX] MH_HIDDEN;
extern int mh_arena_n MH_HIDDEN;        /* published entries (atomic) */
extern uintptr_t mh_arena_lo MH_HIDDEN; /* reserved span for every arena slot */
extern size_t mh_arena_span MH_HIDDEN;

/* 1 when p lies in the arenas' reserved span (one compare). */
static inline int mh_arena_span_has(const void *p)
{
    return (uintptr_t)p - __atomic_load_n(&mh_arena_lo, __ATOMIC_RELAXED) <
           __atomic_load_n(&mh_arena_span, __ATOMIC_RELAXED);
}

/* Is p inside an arena?  Returns the arena or NULL.  Lock-free: arena i
 * lives at slot i of the reservation; entries are published before
 * mh_arena_n counts them. */
static inline mh_arena_t *mh_arena_find(const void *p)
{
    uintptr_t off = (uintptr_t)p - __atomic_load_n(&mh_arena_lo, __ATOMIC_ACQUIRE);
    size_t i;

    if (off >= __atomic_load_n(&mh_arena_span, __ATOMIC_RELAXED))
        return NULL;
    i = off / MH_ARENA_SIZE;
    if ((int)i >= __atomic_load_n(&mh_arena_n, __ATOMIC_ACQUIRE) ||
        off - i * MH_ARENA_SIZE >= mh_arenas[i].size)
        return NULL;
    return &mh_arenas[i];
}

/* Size of the used block starting at p (0: not a used block start). */
size_t mh_arena_block_size(mh_arena_t *a, const void *p);
/* Grow the used block p in place to at least n bytes when it is the last
 * block of its arena; returns the new size or 0. */
size_t mh_arena_grow(mh_arena_t *a, void *p, size_t n);
/* Return a used block to its free list; returns its size or 0 when p is
 * not a used block start (double free: ignored). */
size_t mh_arena_free(mh_arena_t *a, void *p);
int mh_arena_count(void);
mh_arena_t *mh_arena_get(int i);
void mh_arena_stats(mh_stats_t *st);
/* Deliver MH_EV_MAP_FIXED for every arena range a fork will remap (call
 * before mh_arena_fork_prepare, outside the lock). */
void mh_arena_fork_events(void);
void mh_arena_fork_prepare(void);
void mh_arena_fork_parent(void);
void mh_arena_fork_child(void);
void mh_arena_reset_for_test(void);
/* madvise(DONTNEED) over [addr, addr+len) of a shared huge arena that holds
 * frozen or foreign units (mh_unit_*): 1 when it handled the call (the
 * range now reads zeros), 0 when the caller's plain MADV_REMOVE is right
 * (no such unit in the range).  Hook-safe. */
int mh_arena_units_zero(mh_arena_t *a, void *addr, size_t len);

/* ---- allocator / mapping helpers ------------------------------------- */

/* Deliver MH_EV_FREE for a glibc chunk that free/realloc will unmap. */
void mh_alloc_chunk_event(void *p);
int mh_alloc_detect_foreign(const char **reason_p);

/* Length of the mapping starting at addr according to /proc/self/maps
 * (0 when not found).  No allocation, no stdio. */
size_t mh_map_len_from_proc(const void *addr);
void mh_map_shm_forget_all(void);

#endif
