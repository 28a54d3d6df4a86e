/* memfd arenas, size classes and the block pool behind placement.
 *
 * An arena is one memfd (sparse, 1 GiB) mapped MAP_SHARED at a 2 MiB aligned
 * address, so a local peer can map the same pages (mh_region_lookup).  Page
 * arenas carve blocks in 4 KiB units, huge arenas in 2 MiB units (advised
 * MADV_HUGEPAGE when shmem THP allows it, or a hugetlb memfd when the pool
 * has pages).  Blocks are carved with a bump pointer and recycled through
 * per-class free lists; they never split or merge.  Metadata is out of band
 * (one mh_meta_t per unit in an anonymous mapping) so block pages hold only
 * application data.  Dirty bytes cached in free lists are capped at
 * MH_POOL_CAP; beyond it a freed block's pages are released (MADV_REMOVE).
 *
 * Locking: mh_arena_lock protects bump pointers, free lists and block flags;
 * it is a plain mutex, never held while calling out (no events, no
 * allocator).  The arena table is append-only: entries are published with a
 * release store of mh_arena_n and base/size never change, so mh_arena_find
 * is lock-free.  Fork: arenas with live blocks become private generations
 * (MAP_PRIVATE over their memfd, copy-on-write in both processes), empty
 * ones get a fresh memfd in the child (see mh_arena_fork_prepare).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "mh_int.h"
#include "zc_real.h"
#include "zc_fd.h"
#include "zc_sys.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21u << 26)
#endif

mh_arena_t mh_arenas[MH_ARENA_MAX];
int mh_arena_n;                        /* published entries (atomic) */
uintptr_t mh_arena_lo;                 /* start of the reservation, 0 none */
size_t mh_arena_span;                  /* its length */
static int mh_arena_slots;             /* arenas it holds */
static int mh_arena_trimmed;           /* no more arenas: the address space is limited */

static char *mh_arena_slot(int i)
{
    return (char *)mh_arena_lo + (size_t)i * MH_ARENA_SIZE;
}
ZC_FORK_DATA static pthread_mutex_t mh_arena_lock = PTHREAD_MUTEX_INITIALIZER;
static mh_arena_cfg_t mh_arena_cfg;
static int mh_arena_tlb_used;          /* the one hugetlb arena was made */
ZC_FORK_DATA static int mh_arena_fork_ok;  /* prepare made every copy */

static void mh_arena_pool_recount(void);
static void mh_units_restore(mh_arena_t *a, size_t idx, size_t units);
static int mh_arena_remap_private(mh_arena_t *a);

#define MH_FIT_CLASSES 9      /* classes searched: up to 2x the request */

static uint64_t mh_st_placed_allocs, mh_st_placed_bytes, mh_st_pool_hits,
    mh_st_pool_bytes, mh_st_fallbacks, mh_st_units[5];

#define MH_STAT_ADD(v, n) __atomic_fetch_add(&(v), (n), __ATOMIC_RELAXED)
#define MH_STAT_SUB(v, n) __atomic_fetch_sub(&(v), (n), __ATOMIC_RELAXED)

/* ---- size classes ------------------------------------------------------ */

/* Class of a block of units units (units >= 1). */
unsigned mh_class_of(size_t units)
{
    unsigned e;
    size_t step;

    if (units <= 8)
        return (unsigned)(units ? units - 1 : 0);
    e = 63u - (unsigned)__builtin_clzll((unsigned long long)(units - 1));
    step = (size_t)1 << (e - 3);
    return 8 + (e - 3) * 8 + (unsigned)((units - ((size_t)1 << e) + step - 1) / step) - 1;
}

/* Units held by a block of class cls (the largest size mapping to cls). */
size_t mh_class_units(unsigned cls)
{
    unsigned e, k;

    if (cls < 8)
        return cls + 1;
    e = 3 + (cls - 8) / 8;
    k = (cls - 8) % 8 + 1;
    return ((size_t)1 << e) + (size_t)k * ((size_t)1 << (e - 3));
}

/* ---- arena creation ------------------------------------------------------ */

static int mh_sys_close(int fd)
{
    return (int)zc_syscall(SYS_close, fd);
}

/* Move an internal descriptor out of the way of the application: where
 * the library's descriptors go (zc_fd.h), where programs that expect the
 * lowest free numbers or dup2 onto small numbers never meet it.  Returns
 * the new descriptor (fd closed) or fd itself when it cannot move. */
static int mh_fd_move_high(int fd)
{
    int target = zc_fd_floor(), nfd;

    if (!target || fd >= target)
        return fd;
    nfd = (int)zc_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, target);
    if (nfd < 0 && errno == EINVAL && (target = zc_fd_floor_refresh()) > fd)
        nfd = (int)zc_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, target);   /* limit lowered */
    if (nfd < 0)
        return fd;
    mh_sys_close(fd);
    return nfd;
}

/* See mh_int.h. */
ssize_t mh_sysfs_read(const char *path, char *buf, size_t cap)
{
    int fd = (int)zc_syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    ssize_t r;

    if (fd < 0)
        return -1;
    r = zc_syscall(SYS_read, fd, buf, cap - 1);
    zc_syscall(SYS_close, fd);
    if (r < 0)
        return -1;
    buf[r] = 0;
    return r;
}

static long mh_hugetlb_count(const char *name)
{
    char path[96] = "/sys/kernel/mm/hugepages/hugepages-2048kB/", buf[64];
    long v = 0;

    strncat(path, name, sizeof(path) - strlen(path) - 1);
    if (mh_sysfs_read(path, buf, sizeof(buf)) <= 0)
        return 0;
    for (const char *p = buf; *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (*p - '0');
    return v;
}

/* See mh_int.h: free pages nobody has reserved (another process's arena
 * reserves all of its pages when it maps them). */
long mh_hugetlb_free(void)
{
    long v = mh_hugetlb_count("free_hugepages") - mh_hugetlb_count("resv_hugepages");

    return v > 0 ? v : 0;
}

static int mh_arena_memfd(size_t size, int hugetlb)
{
    unsigned flags = MFD_CLOEXEC | (hugetlb ? MFD_HUGETLB | MFD_HUGE_2MB : 0);
    int fd = memfd_create(hugetlb ? "zcsock-arena-huge" : "zcsock-arena", flags);

    if (fd < 0)
        return -errno;
    fd = mh_fd_move_high(fd);
    /* mode 0: not reopenable through /proc/PID/fd (the ring's reason,
     * shim/paths/local/local_ring.c) */
    if (fchmod(fd, 0) < 0 || ftruncate(fd, (off_t)size) < 0) {
        int err = -errno;

        mh_sys_close(fd);
        return err;
    }
    return fd;
}

/* Map fd over [addr, addr+size) (inside the reservation). */
static void *mh_arena_map(void *addr, size_t size, int fd, int hugetlb)
{
    int nores = hugetlb ? 0 : MAP_NORESERVE;

    return zc_real.mmap(addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED | nores,
                        fd, 0);
}

/* Is the process's address space limited (a finite RLIMIT_AS), or is every
 * mapping charged in full (vm.overcommit_memory 2)?  Then arenas, whose
 * reservation and sparse 1 GiB memfds cost address space a program without
 * the library would not use, are not made. */
int mh_space_limited(void)
{
    struct rlimit rl;
    char buf[8];

    if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY)
        return 1;
    return mh_sysfs_read("/proc/sys/vm/overcommit_memory", buf, sizeof(buf)) > 0 &&
           buf[0] == '2';
}

/* Reserve address space for every arena slot (PROT_NONE, 2 MiB aligned) so
 * an address finds its arena with one subtraction and a shift: at the first
 * arena, never before (a process that never places holds no reservation,
 * so a limit on its address space set later, as vsftpd's session process
 * sets one, meets only what the program itself mapped).  Tries the full
 * MH_ARENA_MAX slots, then fewer.  Lock held. */
static int mh_arena_reserve(void)
{
    if (mh_arena_trimmed || mh_space_limited()) {
        mh_arena_trimmed = 1;
        return -ENOMEM;
    }
    for (size_t slots = MH_ARENA_MAX; slots >= 1; slots /= 4) {
        size_t span = slots * MH_ARENA_SIZE;
        char *r = zc_real.mmap(NULL, span + MH_HUGE, PROT_NONE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0), *al;

        if (r == MAP_FAILED)
            continue;
        al = (char *)MH_ALIGN_UP((uintptr_t)r, MH_HUGE);
        if (al > r)
            zc_real.munmap(r, (size_t)(al - r));
        if (al + span < r + span + MH_HUGE)
            zc_real.munmap(al + span, (size_t)(r + span + MH_HUGE - (al + span)));
        mh_arena_slots = (int)slots;
        __atomic_store_n(&mh_arena_span, span, __ATOMIC_RELAXED);
        __atomic_store_n(&mh_arena_lo, (uintptr_t)al, __ATOMIC_RELEASE);
        return 0;
    }
    return -ENOMEM;
}

static void mh_arena_advise(mh_arena_t *a)
{
    if (a->hugetlb)
        return;
    if (a->huge && mh_arena_cfg.thp)
        zc_real.madvise(a->base, a->size, MADV_HUGEPAGE);
    else if (!a->huge)
        zc_real.madvise(a->base, a->size, MADV_NOHUGEPAGE);
}

/* Create and publish an arena of the given kind.  Lock held. */
static mh_arena_t *mh_arena_create(int huge)
{
    int n = mh_arena_n, hugetlb = 0, fd;
    size_t size = MH_ARENA_SIZE, unit = huge ? MH_HUGE : MH_PAGE;
    mh_arena_t *a;
    void *base, *meta;

    if (!mh_arena_lo && mh_arena_reserve() < 0)
        return NULL;
    if (n >= mh_arena_slots)
        return NULL;
    /* huge blocks only on 2 MiB pages: without THP, only the hugetlb arena */
    if (huge && mh_arena_cfg.huge_paged_only && !mh_arena_cfg.thp && !mh_arena_cfg.units_4k &&
        (mh_arena_tlb_used || mh_arena_cfg.hugetlb_free <= 0))
        return NULL;
    if (huge && !mh_arena_tlb_used && mh_arena_cfg.hugetlb_free > 0) {
        /* half of what is free now: the peer's arena, unit files and
         * private mappings take from the same pool */
        long avail = mh_hugetlb_free(), pages = avail / 2 < 256 ? avail / 2 : 256;

        mh_arena_tlb_used = 1;
        hugetlb = pages > 0;
        size = hugetlb ? (size_t)pages * MH_HUGE : size;
        if (!hugetlb && mh_arena_cfg.huge_paged_only && !mh_arena_cfg.units_4k)
            return NULL;
    }
    fd = mh_arena_memfd(size, hugetlb);
    base = fd >= 0 ? mh_arena_map(mh_arena_slot(n), size, fd, hugetlb) : MAP_FAILED;
    if (base == MAP_FAILED && hugetlb) {
        if (fd >= 0)
            mh_sys_close(fd);
        if (mh_arena_cfg.huge_paged_only && !mh_arena_cfg.units_4k)
            return NULL;
        hugetlb = 0;
        size = MH_ARENA_SIZE;
        fd = mh_arena_memfd(size, 0);
        base = fd >= 0 ? mh_arena_map(mh_arena_slot(n), size, fd, 0) : MAP_FAILED;
    }
    if (base == MAP_FAILED)
        goto err_fd;
    meta = zc_real.mmap(NULL, (size / unit) * sizeof(mh_meta_t), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (meta == MAP_FAILED)
        goto err_map;
    a = &mh_arenas[n];
    memset(a, 0, sizeof(*a));
    a->base = base;
    a->size = size;
    a->fd = fd;
    a->huge = huge;
    a->hugetlb = hugetlb;
    a->shift = huge ? 21 : 12;
    a->nunits = size / unit;
    a->meta = meta;
    a->fork_fd = -1;
    mh_arena_advise(a);
    __atomic_store_n(&mh_arena_n, n + 1, __ATOMIC_RELEASE);
    return a;
err_map:
    zc_real.mmap(base, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                 -1, 0);
err_fd:
    if (fd >= 0)
        mh_sys_close(fd);
    return NULL;
}

/* Configure arenas.  Neither an arena (a memfd) nor their address space
 * exists until the first placed allocation asks for one: a process that
 * never places holds no descriptor and no reservation of ours.  Called by
 * mh_init, outside hooks.  Returns 0 or -errno. */
int mh_arena_setup(const mh_arena_cfg_t *cfg)
{
    pthread_mutex_lock(&mh_arena_lock);
    mh_arena_cfg = *cfg;
    pthread_mutex_unlock(&mh_arena_lock);
    return 0;
}

/* See mh_int.h. */
int mh_arena_trim(void)
{
    uintptr_t lo;
    size_t keep, span;
    int gave = 0;

    if (pthread_mutex_trylock(&mh_arena_lock))
        return 0;       /* busy: making an arena, which sees the limit itself */
    mh_arena_trimmed = 1;
    lo = mh_arena_lo;
    span = mh_arena_span;
    keep = (size_t)mh_arena_n * MH_ARENA_SIZE;
    if (lo && span > keep) {
        __atomic_store_n(&mh_arena_span, keep, __ATOMIC_RELEASE);
        mh_arena_slots = mh_arena_n;
        zc_real.munmap((void *)(lo + keep), span - keep);
        gave = 1;
    }
    pthread_mutex_unlock(&mh_arena_lock);
    return gave;
}

/* ---- allocation and free ------------------------------------------------ */

static void *mh_arena_pop(mh_arena_t *a, unsigned cls, int *dirty_p)
{
    uint32_t idx = a->free_head[cls] - 1;
    mh_meta_t *m = &a->meta[idx];

    a->free_head[cls] = m->next;
    m->next = 0;
    *dirty_p = (m->flags & MH_BLK_DIRTY) != 0;
    m->flags = MH_BLK_USED | (m->flags & MH_BLK_DIRTY);
    a->used++;
    if (*dirty_p)
        MH_STAT_SUB(mh_st_pool_bytes, mh_class_units(cls) << a->shift);
    MH_STAT_ADD(mh_st_pool_hits, 1);
    return a->base + ((size_t)idx << a->shift);
}

static void *mh_arena_carve(mh_arena_t *a, unsigned cls, size_t units, int *dirty_p)
{
    size_t idx = a->bump;

    if (idx + units > a->nunits)
        return NULL;
    a->bump += units;
    *dirty_p = idx < a->dirty_top;
    a->meta[idx].cls = (uint8_t)(cls + 1);
    a->meta[idx].flags = MH_BLK_USED | (*dirty_p ? MH_BLK_DIRTY : 0);
    a->used++;
    return a->base + (idx << a->shift);
}

/* The first arena could not be made (no memfd here): placement off for
 * good rather than a failed memfd_create at every large malloc.  Hook-safe. */
static void mh_placement_fail(const char *reason)
{
    __atomic_store_n(&mh_g.placement_ready, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&mh_g.placement, 0, __ATOMIC_RELEASE);
    __atomic_fetch_and(&mh_g.status, ~MH_ST_PLACEMENT_ACTIVE, __ATOMIC_RELAXED);
    mh_g.reason = reason;
}

/* See mh_int.h.  Hook-safe (no allocator; may map a new arena). */
void *mh_arena_alloc(size_t n, int huge, int *dirty_p)
{
    unsigned shift = huge ? 21 : 12, cls;
    size_t units = (n + ((size_t)1 << shift) - 1) >> shift, cu;
    void *p = NULL;
    int i, cnt, first_failed = 0;

    if (n == 0 || n > MH_PLACE_MAX)
        return NULL;
    cls = mh_class_of(units);
    cu = mh_class_units(cls);
    pthread_mutex_lock(&mh_arena_lock);
    cnt = mh_arena_n;
    /* best fit among the classes up to twice the size, so blocks that
     * realloc grew in place are reused rather than leaked */
    for (unsigned c = cls; c < cls + MH_FIT_CLASSES && c < MH_CLASS_MAX && !p; c++)
        for (i = 0; i < cnt && !p; i++)
            if (mh_arenas[i].huge == huge && !mh_arenas[i].priv && mh_arenas[i].free_head[c])
                p = mh_arena_pop(&mh_arenas[i], c, dirty_p);
    for (i = 0; i < cnt && !p; i++)
        if (mh_arenas[i].huge == huge && !mh_arenas[i].priv)
            p = mh_arena_carve(&mh_arenas[i], cls, cu, dirty_p);
    if (!p) {
        mh_arena_t *a = mh_arena_create(huge);

        if (a)
            p = mh_arena_carve(a, cls, cu, dirty_p);
        else if (cnt == 0)
            first_failed = 1;
    }
    pthread_mutex_unlock(&mh_arena_lock);
    if (!p) {
        MH_STAT_ADD(mh_st_fallbacks, 1);
        if (first_failed)   /* no memfd at all: stop trying at every malloc */
            mh_placement_fail(huge && mh_arena_cfg.huge_paged_only && !mh_arena_cfg.thp
                                  ? "placement off: no free hugetlb pages for an arena"
                                  : "placement off: cannot create a memfd arena");
        return NULL;
    }
    MH_STAT_ADD(mh_st_placed_allocs, 1);
    MH_STAT_ADD(mh_st_placed_bytes, mh_arena_block_size(mh_arena_find(p), p));
    return p;
}

static mh_meta_t *mh_arena_meta(mh_arena_t *a, const void *p)
{
    size_t off = (size_t)((const char *)p - a->base);

    if (off & (((size_t)1 << a->shift) - 1))
        return NULL;
    if ((off >> a->shift) >= a->nunits)
        return NULL;
    return &a->meta[off >> a->shift];
}

/* See mh_int.h.  Lock-free: the caller owns the block. */
size_t mh_arena_block_size(mh_arena_t *a, const void *p)
{
    mh_meta_t *m = mh_arena_meta(a, p);

    if (!m || !m->cls || !(__atomic_load_n(&m->flags, __ATOMIC_RELAXED) & MH_BLK_USED))
        return 0;
    return mh_class_units(m->cls - 1u) << a->shift;
}

/* See mh_int.h.  Grows the used block p in place to hold n bytes when it
 * is the last block carved from its arena and the arena has room: the
 * common pattern of one buffer growing by realloc.  Returns the new block
 * size or 0 (caller moves the block). */
size_t mh_arena_grow(mh_arena_t *a, void *p, size_t n)
{
    mh_meta_t *m = mh_arena_meta(a, p);
    size_t idx, units, old, cu;
    unsigned cls;

    if (!m || n > MH_PLACE_MAX)
        return 0;
    units = (n + ((size_t)1 << a->shift) - 1) >> a->shift;
    cls = mh_class_of(units);
    cu = mh_class_units(cls);
    idx = (size_t)(m - a->meta);
    pthread_mutex_lock(&mh_arena_lock);
    if (!m->cls || !(m->flags & MH_BLK_USED)) {
        pthread_mutex_unlock(&mh_arena_lock);
        return 0;
    }
    old = mh_class_units(m->cls - 1u);
    if (a->priv || idx + old != a->bump || idx + cu > a->nunits || cu <= old) {
        pthread_mutex_unlock(&mh_arena_lock);
        return 0;
    }
    a->bump = idx + cu;
    m->cls = (uint8_t)(cls + 1);
    pthread_mutex_unlock(&mh_arena_lock);
    MH_STAT_ADD(mh_st_placed_bytes, (cu - old) << a->shift);
    return cu << a->shift;
}

/* A new memfd of size bytes mapped MAP_SHARED at addr (MAP_FIXED), or
 * anywhere when addr is NULL (*map_p).  hugetlb when *tlb and the pool has
 * the pages (a shared hugetlb mapping reserves them all up front, so no
 * later fault can SIGBUS), else plain shmem (*tlb cleared).  The fd or
 * -errno. */
static int mh_arena_memfd_mapped(size_t size, int *tlb, void *addr, void **map_p)
{
    for (;;) {
        int fd = mh_arena_memfd(size, *tlb);
        void *m = MAP_FAILED;

        if (fd >= 0) {
            m = addr ? mh_arena_map(addr, size, fd, *tlb)
                     : zc_real.mmap(NULL, size, PROT_READ | PROT_WRITE,
                                    MAP_SHARED | (*tlb ? 0 : MAP_NORESERVE), fd, 0);
            if (m != MAP_FAILED) {
                *map_p = m;
                return fd;
            }
            fd = -errno;
        }
        if (!*tlb)
            return fd;
        *tlb = 0;
    }
}

/* Give arena slot a a fresh memfd and empty metadata (its old memfd may
 * still back a forked process's private mapping: only our reference is
 * dropped).  A hugetlb arena whose pool ran dry gets plain shmem.  Lock
 * held.  Returns 0 or -errno (the arena is left as it was). */
static int mh_arena_reset(mh_arena_t *a)
{
    int tlb = a->hugetlb;
    void *m;
    int fd = mh_arena_memfd_mapped(a->size, &tlb, a->base, &m);

    if (fd < 0)
        return fd;
    mh_sys_close(a->fd);
    __atomic_store_n(&a->fd, fd, __ATOMIC_RELAXED);
    a->hugetlb = tlb;
    zc_real.madvise(a->meta, a->nunits * sizeof(mh_meta_t), MADV_DONTNEED);
    memset(a->free_head, 0, sizeof(a->free_head));
    a->bump = 0;
    a->dirty_top = 0;
    a->used = 0;
    mh_arena_advise(a);
    __atomic_store_n(&a->priv, 0, __ATOMIC_RELEASE);
    return 0;
}

/* Free a block of a private (forked) arena: drop our copy-on-write pages;
 * when it was the last block, reclaim the slot with a fresh memfd. */
static size_t mh_arena_free_priv(mh_arena_t *a, mh_meta_t *m, void *p, size_t size)
{
    pthread_mutex_lock(&mh_arena_lock);
    if (!(m->flags & MH_BLK_USED)) {
        pthread_mutex_unlock(&mh_arena_lock);
        return 0;
    }
    mh_units_restore(a, (size_t)(m - a->meta), size >> a->shift);
    zc_real.madvise(p, size, MADV_DONTNEED);
    m->flags = 0;
    if (--a->used == 0)
        mh_arena_reset(a);
    pthread_mutex_unlock(&mh_arena_lock);
    MH_STAT_SUB(mh_st_placed_bytes, size);
    return size;
}

/* See mh_int.h.  Releases the pages first when the pool is over its cap. */
size_t mh_arena_free(mh_arena_t *a, void *p)
{
    mh_meta_t *m = mh_arena_meta(a, p);
    size_t size;
    int release;

    if (!m)
        return 0;
    size = mh_arena_block_size(a, p);
    if (!size)
        return 0;
    if (__atomic_load_n(&a->priv, __ATOMIC_RELAXED))
        return mh_arena_free_priv(a, m, p, size);
    if (__atomic_load_n(&a->ustates, __ATOMIC_RELAXED)) {
        /* frozen or foreign units get the arena's shared pages back first */
        pthread_mutex_lock(&mh_arena_lock);
        if ((m->flags & MH_BLK_USED) && !a->priv)
            mh_units_restore(a, (size_t)(m - a->meta), size >> a->shift);
        pthread_mutex_unlock(&mh_arena_lock);
    }
    /* hugetlb pages stay: a punched page leaves the arena's reservation,
     * and its next fault SIGBUSes if another process took it meanwhile */
    release = !a->hugetlb &&
              __atomic_load_n(&mh_st_pool_bytes, __ATOMIC_RELAXED) + size > MH_POOL_CAP;
    if (release)
        zc_real.madvise(p, size, MADV_REMOVE);
    pthread_mutex_lock(&mh_arena_lock);
    if (!(m->flags & MH_BLK_USED)) {
        pthread_mutex_unlock(&mh_arena_lock);
        return 0;
    }
    if (a->priv) {
        /* a fork made the arena private while we were on our way here */
        mh_units_restore(a, (size_t)(m - a->meta), size >> a->shift);
        zc_real.madvise(p, size, MADV_DONTNEED);
        m->flags = 0;
        if (--a->used == 0)
            mh_arena_reset(a);
        pthread_mutex_unlock(&mh_arena_lock);
        MH_STAT_SUB(mh_st_placed_bytes, size);
        return size;
    }
    a->used--;
    if ((size_t)(m - a->meta) + (size >> a->shift) == a->bump) {
        /* the last block carved: give it back to the bump region */
        a->bump = (size_t)(m - a->meta);
        if (!release && a->bump + (size >> a->shift) > a->dirty_top)
            a->dirty_top = a->bump + (size >> a->shift);
        m->cls = 0;
        m->flags = 0;
        release = 1;    /* not counted in the pool */
    } else {
        m->flags = release ? 0 : MH_BLK_DIRTY;
        m->next = a->free_head[m->cls - 1];
        a->free_head[m->cls - 1] = (uint32_t)(m - a->meta) + 1;
    }
    pthread_mutex_unlock(&mh_arena_lock);
    if (!release)
        MH_STAT_ADD(mh_st_pool_bytes, size);
    MH_STAT_SUB(mh_st_placed_bytes, size);
    return size;
}

int mh_arena_count(void)
{
    return __atomic_load_n(&mh_arena_n, __ATOMIC_ACQUIRE);
}

mh_arena_t *mh_arena_get(int i)
{
    return i >= 0 && i < mh_arena_count() ? &mh_arenas[i] : NULL;
}

/* See mh.h. */
int mh_region_lookup(const void *addr, size_t len, int *memfd_p, uint64_t *offset_p,
                     int *huge_p)
{
    mh_arena_t *a = mh_arena_find(addr);
    size_t off;

    if (!a)
        return 0;
    off = (size_t)((const char *)addr - a->base);
    if (len > a->size - off || __atomic_load_n(&a->fd, __ATOMIC_RELAXED) < 0 ||
        __atomic_load_n(&a->priv, __ATOMIC_ACQUIRE))
        return 0;
    *memfd_p = __atomic_load_n(&a->fd, __ATOMIC_RELAXED);
    *offset_p = off;
    if (huge_p)
        *huge_p = a->huge;
    return 1;
}

/* See mh.h. */
int mh_fd_is_internal(int fd)
{
    int n = mh_arena_count();

    for (int i = 0; i < n; i++)
        if (__atomic_load_n(&mh_arenas[i].fd, __ATOMIC_RELAXED) == fd && fd >= 0)
            return 1;
    return 0;
}

/* See mh.h. */
int mh_fd_move(int fd)
{
    int n = mh_arena_count(), moved = 0;

    for (int i = 0; i < n; i++) {
        mh_arena_t *a = &mh_arenas[i];
        int nfd;

        if (fd < 0 || __atomic_load_n(&a->fd, __ATOMIC_RELAXED) != fd)
            continue;
        /* above it if there is room, else any free number */
        nfd = (int)zc_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, fd + 1);
        if (nfd < 0)
            nfd = (int)zc_syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 0);
        if (nfd < 0)
            return -errno;
        __atomic_store_n(&a->fd, nfd, __ATOMIC_RELEASE);
        moved = 1;
    }
    if (moved)
        mh_sys_close(fd);
    return 0;
}

uint64_t mh_placed_allocs(void)
{
    return __atomic_load_n(&mh_st_placed_allocs, __ATOMIC_RELAXED);
}

void mh_arena_stats(mh_stats_t *st)
{
    st->placed_allocs = __atomic_load_n(&mh_st_placed_allocs, __ATOMIC_RELAXED);
    st->placed_bytes = __atomic_load_n(&mh_st_placed_bytes, __ATOMIC_RELAXED);
    st->pool_hits = __atomic_load_n(&mh_st_pool_hits, __ATOMIC_RELAXED);
    st->pool_bytes = __atomic_load_n(&mh_st_pool_bytes, __ATOMIC_RELAXED);
    st->arena_fallbacks = __atomic_load_n(&mh_st_fallbacks, __ATOMIC_RELAXED);
    for (int i = 0; i < (int)(sizeof(st->units) / sizeof(st->units[0])); i++)
        st->units[i] = __atomic_load_n(&mh_st_units[i], __ATOMIC_RELAXED);
}

/* ---- fork ------------------------------------------------------------------ */

/* A private arena hands out no blocks: forget its free lists (their pages
 * are dropped so the memory is not held twice). */
static void mh_arena_drop_free_lists(mh_arena_t *a)
{
    for (unsigned c = 0; c < MH_CLASS_MAX; c++) {
        for (uint32_t i = a->free_head[c]; i;) {
            mh_meta_t *m = &a->meta[i - 1];
            uint32_t next = m->next;

            zc_real.madvise(a->base + ((size_t)(i - 1) << a->shift),
                            mh_class_units(c) << a->shift, MADV_DONTNEED);
            m->cls = 0;
            m->flags = 0;
            m->next = 0;
            i = next;
        }
        a->free_head[c] = 0;
    }
    mh_arena_pool_recount();
}

/* pool_bytes from the free lists of shared arenas.  Lock held. */
ZC_FORK_CODE static void mh_arena_pool_recount(void)
{
    uint64_t bytes = 0;

    for (int k = 0; k < mh_arena_n; k++) {
        mh_arena_t *a = &mh_arenas[k];

        for (unsigned c = 0; c < MH_CLASS_MAX && !a->priv; c++)
            for (uint32_t i = a->free_head[c]; i; i = a->meta[i - 1].next)
                if (a->meta[i - 1].flags & MH_BLK_DIRTY)
                    bytes += mh_class_units(c) << a->shift;
    }
    /* (only when it changed: a forking server's child writes no page of
     * ours it need not, FORK PAGES in zc_real.h) */
    if (__atomic_load_n(&mh_st_pool_bytes, __ATOMIC_RELAXED) != bytes)
        __atomic_store_n(&mh_st_pool_bytes, bytes, __ATOMIC_RELAXED);
}

/* Copy the data segments of [off, off+len) of a's memfd into dst. */
static void mh_arena_copy_range(mh_arena_t *a, char *dst, size_t off, size_t len)
{
    size_t end = off + len;

    if (a->hugetlb) {
        memcpy(dst + off, a->base + off, len);
        return;
    }
    while (off < end) {
        off_t d = lseek(a->fd, (off_t)off, SEEK_DATA), h;

        if (d < 0 || (size_t)d >= end)
            return;
        h = lseek(a->fd, d, SEEK_HOLE);
        if (h < 0 || (size_t)h > end)
            h = (off_t)end;
        memcpy(dst + d, a->base + d, (size_t)(h - d));
        off = (size_t)h;
    }
}

/* Copy every used block of a into a fresh memfd (a->fork_fd; hugetlb when
 * the pool has the pages, a->fork_tlb). */
static int mh_arena_fork_copy(mh_arena_t *a)
{
    void *m;
    char *dst;
    int tlb = a->hugetlb, fd = mh_arena_memfd_mapped(a->size, &tlb, NULL, &m);

    if (fd < 0)
        return fd;
    dst = m;
    for (size_t i = 0; i < a->bump;) {
        mh_meta_t *m = &a->meta[i];
        size_t units = m->cls ? mh_class_units(m->cls - 1u) : 1;

        if (m->cls && (m->flags & MH_BLK_USED))
            mh_arena_copy_range(a, dst, i << a->shift, units << a->shift);
        i += units;
    }
    zc_real.munmap(dst, a->size);
    a->fork_fd = fd;
    a->fork_tlb = tlb;
    return 0;
}

/* See mh_int.h.  The ranges that mh_arena_fork_prepare will remap
 * private: registrations over them must go before the pages change. */
void mh_arena_fork_events(void)
{
    int n = mh_arena_count();

    for (int i = 0; i < n; i++) {
        mh_arena_t *a = &mh_arenas[i];

        if (!__atomic_load_n(&a->priv, __ATOMIC_ACQUIRE) && a->bump)
            mh_event_dispatch(MH_EV_MAP_FIXED, a->base, a->bump << a->shift);
    }
}

/* Placed memory is MAP_SHARED: a plain fork would share it.  Arenas that
 * hold used blocks become a private generation in the parent, before the
 * fork, so parent and child each see the data as of the fork through their
 * own copy-on-write pages (the cost of a plain fork, paid lazily); neither
 * writes the memfd again.  New blocks then come from new arenas.  Should the
 * private remap fail, the arena's live blocks are copied into a fresh memfd
 * for the child instead.  A hugetlb arena is always copied: a copy-on-write
 * of a private hugetlb page needs a free page of the pool, and a child that
 * finds none gets SIGBUS where anonymous memory would just copy.  Arenas
 * without used blocks get a fresh memfd in the child
 * (mh_arena_fork_child).  Takes the lock until parent/child. */
void mh_arena_fork_prepare(void)
{
    int n;

    pthread_mutex_lock(&mh_arena_lock);
    n = mh_arena_n;
    mh_arena_fork_ok = 1;
    for (int i = 0; i < n; i++) {
        mh_arena_t *a = &mh_arenas[i];

        if (a->priv || !a->used)
            continue;
        if (!a->hugetlb && mh_arena_remap_private(a) == 0) {
            mh_arena_drop_free_lists(a);
            __atomic_store_n(&a->priv, 1, __ATOMIC_RELEASE);
        } else if (mh_arena_fork_copy(a) < 0) {
            mh_arena_fork_ok = 0;
        }
    }
}

void mh_arena_fork_parent(void)
{
    for (int i = 0; i < mh_arena_n; i++) {
        if (mh_arenas[i].fork_fd >= 0)
            mh_sys_close(mh_arenas[i].fork_fd);
        mh_arenas[i].fork_fd = -1;
    }
    pthread_mutex_unlock(&mh_arena_lock);
}

/* Free blocks of the child's copy hold no data: mark them clean. */
static void mh_arena_clean_free_lists(mh_arena_t *a)
{
    for (unsigned c = 0; c < MH_CLASS_MAX; c++)
        for (uint32_t i = a->free_head[c]; i; i = a->meta[i - 1].next)
            a->meta[i - 1].flags = 0;
}

/* Child: private arenas are already right.  Shared arenas without used
 * blocks get a fresh memfd; copied arenas map their copy.  When neither
 * works the child maps the parent's memfd privately (a snapshot that may
 * still see the parent's later writes to pages the child never wrote) and
 * stops placing. */
ZC_FORK_CODE void mh_arena_fork_child(void)
{
    for (int i = 0; i < mh_arena_n; i++) {
        mh_arena_t *a = &mh_arenas[i];

        if (a->priv)
            continue;
        if (a->fork_fd < 0 && !a->used && mh_arena_reset(a) == 0)
            continue;
        if (mh_arena_fork_ok && a->fork_fd >= 0 &&
            mh_arena_map(a->base, a->size, a->fork_fd, a->fork_tlb) != MAP_FAILED) {
            mh_sys_close(a->fd);
            a->fd = a->fork_fd;
            a->hugetlb = a->fork_tlb;
            mh_arena_advise(a);
            mh_arena_clean_free_lists(a);
            a->dirty_top = 0;
            /* the copy holds what frozen and foreign units showed: all of
             * the child's units are its own shared memory */
            for (size_t u = 0; a->ustates && u < a->nunits; u++)
                a->meta[u].ustate = MH_UNIT_SHARED;
            a->ustates = 0;
        } else {
            zc_real.mmap(a->base, a->size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, a->fd, 0);
            if (a->fork_fd >= 0)
                mh_sys_close(a->fork_fd);
            mh_sys_close(a->fd);
            __atomic_store_n(&a->fd, -1, __ATOMIC_RELAXED);
            __atomic_store_n(&mh_g.placement_ready, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&mh_g.placement, 0, __ATOMIC_RELAXED);
        }
        a->fork_fd = -1;
    }
    mh_arena_pool_recount();
    pthread_mutex_unlock(&mh_arena_lock);
}

/* ---- exchange units (mh.h) ------------------------------------------------ */

#define MH_UNIT_SCAN 256      /* units a block can span, with class rounding */

static int mh_fd_hugetlb(int fd);

/* The meta of the unit at addr when it lies in a used block of a shared
 * huge arena whose pages are 2 MiB (shmem THP, or the hugetlb arena: a
 * fork copies that one for the child, so no private hugetlb mapping
 * outlives a fork), else NULL.  Lock held. */
static mh_meta_t *mh_unit_find(const void *addr, mh_arena_t **a_p)
{
    mh_arena_t *a = mh_arena_find(addr);
    size_t idx, i;

    if (!a || !a->huge || a->priv ||
        !(a->hugetlb || mh_arena_cfg.thp || mh_arena_cfg.units_4k) ||
        ((uintptr_t)addr & (MH_HUGE - 1)))
        return NULL;
    idx = (size_t)((const char *)addr - a->base) >> a->shift;
    if (idx >= a->bump)
        return NULL;
    for (i = idx; !a->meta[i].cls; i--)       /* back to the block's start */
        if (i == 0 || idx - i >= MH_UNIT_SCAN)
            return NULL;
    if (!(a->meta[i].flags & MH_BLK_USED) || i + mh_class_units(a->meta[i].cls - 1u) <= idx)
        return NULL;
    *a_p = a;
    return &a->meta[idx];
}

/* Map [addr, addr+len) of arena a (file range at the same offset) again,
 * MAP_SHARED or MAP_PRIVATE.  0 or -errno.  Lock held. */
/* Map [off, off+len) of fd over addr (type MAP_SHARED or MAP_PRIVATE).  A
 * private hugetlb mapping reserves the pages its copy-on-writes will take,
 * and fails (ENOMEM) with the pool dry; a failed MAP_FIXED would leave a
 * hole where the application's memory was, so it is made elsewhere and
 * moved over addr (mremap moves its reservation).  0 or -errno, the range
 * untouched on error. */
static int mh_map_over(void *addr, size_t len, int type, int fd, off_t off, int tlb)
{
    void *t;

    if (!tlb || type != MAP_PRIVATE)
        return zc_real.mmap(addr, len, PROT_READ | PROT_WRITE,
                            type | MAP_FIXED | (tlb ? 0 : MAP_NORESERVE), fd, off) == MAP_FAILED
                   ? -errno : 0;
    t = zc_real.mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, off);
    if (t == MAP_FAILED)
        return -errno;
    if (zc_real.mremap(t, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, addr) == MAP_FAILED) {
        int err = -errno;

        zc_real.munmap(t, len);
        return err;
    }
    return 0;
}

static int mh_unit_remap(mh_arena_t *a, void *addr, size_t len, int type)
{
    off_t off = (off_t)((char *)addr - a->base);
    int rc = mh_map_over(addr, len, type, a->fd, off, a->hugetlb);

    if (rc)
        return rc;
    if (mh_arena_cfg.thp)
        zc_real.madvise(addr, len, MADV_HUGEPAGE);
    return 0;
}

static void mh_unit_set(mh_arena_t *a, mh_meta_t *m, uint8_t st)
{
    if (st == MH_UNIT_APP && m->ustate != MH_UNIT_APP)
        MH_STAT_ADD(mh_st_units[4], 1);
    /* counted as in mh_stats_t.units: frozen, mapped in, released, thawed */
    if (st == MH_UNIT_PRIV && m->ustate == MH_UNIT_SHARED)
        MH_STAT_ADD(mh_st_units[0], 1);
    if (st == MH_UNIT_FOREIGN)
        MH_STAT_ADD(mh_st_units[1], 1);
    if (m->ustate == MH_UNIT_FOREIGN)
        MH_STAT_ADD(mh_st_units[2], 1);
    if (st == MH_UNIT_SHARED && m->ustate == MH_UNIT_PRIV)
        MH_STAT_ADD(mh_st_units[3], 1);
    a->ustates += (st != MH_UNIT_SHARED) - (m->ustate != MH_UNIT_SHARED);
    m->ustate = st;
}

/* The unit at addr from state `from` to `to` by remapping it (type: MAP_SHARED
 * or MAP_PRIVATE over the arena memfd): 1 done, 0 not in state `from` (its
 * state in *was), -EINVAL not a unit, or the mmap error. */
static int mh_unit_turn(void *addr, uint8_t from, int type, uint8_t to, int *was)
{
    int e = errno, rc = 0;
    mh_arena_t *a;
    mh_meta_t *m;

    pthread_mutex_lock(&mh_arena_lock);
    m = mh_unit_find(addr, &a);
    if (!m) {
        rc = -EINVAL;
    } else if ((*was = m->ustate) == from && (rc = mh_unit_remap(a, addr, MH_HUGE, type)) == 0) {
        mh_unit_set(a, m, to);
        rc = 1;
    }
    pthread_mutex_unlock(&mh_arena_lock);
    errno = e;
    return rc;
}

int mh_unit_freeze(void *addr)
{
    int was = -1, rc = mh_unit_turn(addr, MH_UNIT_SHARED, MAP_PRIVATE, MH_UNIT_PRIV, &was);

    if (rc)
        return rc > 0 ? 0 : rc;
    return was == MH_UNIT_FOREIGN || was == MH_UNIT_APP ? -EPERM : 0;     /* PRIV stays */
}

/* See mh_int.h. */
void mh_arena_units_app(const void *addr, size_t len)
{
    uintptr_t p = (uintptr_t)addr & ~(MH_HUGE - 1), end = (uintptr_t)addr + len;
    int e = errno;

    if (!len || !__atomic_load_n(&mh_arena_n, __ATOMIC_ACQUIRE))
        return;
    if (end < (uintptr_t)addr)
        end = UINTPTR_MAX;
    pthread_mutex_lock(&mh_arena_lock);
    for (; p < end; p += MH_HUGE) {
        mh_arena_t *a;
        mh_meta_t *m = mh_unit_find((const void *)p, &a);

        if (m)
            mh_unit_set(a, m, MH_UNIT_APP);
        if (p > UINTPTR_MAX - MH_HUGE)
            break;
    }
    pthread_mutex_unlock(&mh_arena_lock);
    errno = e;
}

int mh_unit_map(void *addr, int fd)
{
    int e = errno, rc = 0;
    mh_arena_t *a;
    mh_meta_t *m;

    /* the unit's bytes change: registrations over it (a lend of this very
     * buffer) must go first, as for any mmap(MAP_FIXED) */
    mh_event_dispatch(MH_EV_MAP_FIXED, addr, MH_HUGE);
    pthread_mutex_lock(&mh_arena_lock);
    m = mh_unit_find(addr, &a);
    if (!m) {
        rc = -EINVAL;
    } else if (m->ustate == MH_UNIT_APP) {
        rc = -EPERM;        /* the application's own mapping there */
    } else if (mh_fd_hugetlb(fd) != a->hugetlb) {
        rc = -EXDEV;        /* a hugetlb file over shmem or the reverse */
    } else if ((rc = mh_map_over(addr, MH_HUGE, MAP_PRIVATE, fd, 0, a->hugetlb)) != 0) {
    } else {
        if (mh_arena_cfg.thp)
            zc_real.madvise(addr, MH_HUGE, MADV_HUGEPAGE);
        mh_unit_set(a, m, MH_UNIT_FOREIGN);
    }
    pthread_mutex_unlock(&mh_arena_lock);
    errno = e;
    return rc;
}

int mh_unit_reclaim(void *addr)
{
    int e = errno, was, rc = mh_unit_turn(addr, MH_UNIT_FOREIGN, MAP_SHARED, MH_UNIT_SHARED, &was);

    /* its negative registration (a received unit is not lent) goes: it is
     * the application's own memory again */
    if (rc == 1)
        mh_event_dispatch(MH_EV_MAP_FIXED, addr, MH_HUGE);
    errno = e;
    return rc;
}

/* 1 when fd is a hugetlbfs file. */
static int mh_fd_hugetlb(int fd)
{
    struct statfs sf;

    return fstatfs(fd, &sf) == 0 && sf.f_type == HUGETLBFS_MAGIC;
}

int mh_unit_hugetlb(const void *addr)
{
    mh_arena_t *a = mh_arena_find(addr);

    return a && __atomic_load_n(&a->hugetlb, __ATOMIC_RELAXED);
}

int mh_unit_state(const void *addr)
{
    mh_arena_t *a;
    mh_meta_t *m;
    int st;

    pthread_mutex_lock(&mh_arena_lock);
    m = mh_unit_find(addr, &a);
    st = m ? m->ustate : -1;
    pthread_mutex_unlock(&mh_arena_lock);
    return st;
}

/* Units [idx, idx+units) of a go back to the arena's memfd: MAP_SHARED in a
 * shared arena, MAP_PRIVATE in a private generation (a freed block whose
 * pages are dropped next).  Lock held. */
static void mh_units_restore(mh_arena_t *a, size_t idx, size_t units)
{
    for (size_t i = idx; a->ustates && i < idx + units && i < a->nunits; i++)
        if (a->meta[i].ustate != MH_UNIT_SHARED) {
            mh_unit_remap(a, a->base + (i << a->shift), MH_HUGE,
                          a->priv ? MAP_PRIVATE : MAP_SHARED);
            mh_unit_set(a, &a->meta[i], MH_UNIT_SHARED);
        }
}

/* See mh_int.h. */
int mh_arena_units_zero(mh_arena_t *a, void *addr, size_t len)
{
    char *p = addr, *end = p + MH_ALIGN_UP(len, MH_PAGE);
    int e = errno;

    if (!a->huge || !__atomic_load_n(&a->ustates, __ATOMIC_RELAXED))
        return 0;
    pthread_mutex_lock(&mh_arena_lock);
    while (p < end) {
        size_t idx = (size_t)(p - a->base) >> a->shift;
        char *ue = a->base + ((idx + 1) << a->shift), *se = ue < end ? ue : end;
        off_t off = (off_t)(p - a->base);
        uint8_t st = idx < a->nunits ? a->meta[idx].ustate : MH_UNIT_SHARED;

        if (st == MH_UNIT_SHARED) {
            zc_real.madvise(p, (size_t)(se - p), MADV_REMOVE);
        } else {
            /* zero the memfd's range, then read it through a private view */
            zc_syscall(SYS_fallocate, a->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
                    (off_t)(se - p));
            if (st == MH_UNIT_PRIV)
                zc_real.madvise(p, (size_t)(se - p), MADV_DONTNEED);
            else
                mh_unit_remap(a, p, (size_t)(se - p), MAP_PRIVATE);
        }
        p = se;
    }
    pthread_mutex_unlock(&mh_arena_lock);
    errno = e;
    return 1;
}

/* Remap arena a MAP_PRIVATE over its memfd for a fork, except frozen and
 * foreign units, which are private already (a remap would drop their
 * copied-on-write pages).  0 or -1.  Lock held. */
static int mh_arena_remap_private(mh_arena_t *a)
{
    size_t i = 0, n = a->ustates ? a->bump : 0;

    if (!n)
        return zc_real.mmap(a->base, a->size, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_FIXED | (a->hugetlb ? 0 : MAP_NORESERVE), a->fd,
                            0) == MAP_FAILED ? -1 : 0;
    while (i < a->nunits) {
        size_t j = i;

        while (j < a->nunits && (j >= n || a->meta[j].ustate == MH_UNIT_SHARED))
            j++;
        if (j > i && zc_real.mmap(a->base + (i << a->shift), (j - i) << a->shift,
                                  PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE,
                                  a->fd, (off_t)(i << a->shift)) == MAP_FAILED)
            return -1;
        i = j + 1;          /* j is a frozen or foreign unit (or the end) */
    }
    return 0;
}

/* Unit tests only: unmap every arena and forget them. */
void mh_arena_reset_for_test(void)
{
    pthread_mutex_lock(&mh_arena_lock);
    for (int i = 0; i < mh_arena_n; i++) {
        zc_real.munmap(mh_arenas[i].meta, mh_arenas[i].nunits * sizeof(mh_meta_t));
        mh_sys_close(mh_arenas[i].fd);
    }
    if (mh_arena_lo)
        zc_real.munmap((void *)mh_arena_lo, mh_arena_span);
    mh_arena_lo = 0;
    mh_arena_span = 0;
    memset(mh_arenas, 0, sizeof(mh_arenas));
    __atomic_store_n(&mh_arena_n, 0, __ATOMIC_RELEASE);
    mh_arena_tlb_used = 0;
    mh_st_placed_allocs = mh_st_placed_bytes = mh_st_pool_hits = 0;
    mh_st_pool_bytes = mh_st_fallbacks = 0;
    memset(mh_st_units, 0, sizeof(mh_st_units));
    pthread_mutex_unlock(&mh_arena_lock);
}
