/* Hooks for the allocator family.
 *
 * Below alloc_min every call goes straight to the real allocator (one
 * compare on the fast path).  At or above it, when placement is on, the
 * block comes from a memfd arena (mh_arena.c).  free/realloc/
 * malloc_usable_size recognise three kinds of pointers: bootstrap blocks
 * (mh_boot.c), arena blocks (found by address), everything else belongs to
 * the real allocator (including blocks allocated before the library loaded).
 *
 * Events: before the real free/realloc of a glibc chunk carrying IS_MMAPPED
 * (glibc will munmap/mremap it internally, past our munmap hook) MH_EV_FREE
 * is delivered for the chunk's mapping; before an arena block is recycled
 * MH_EV_BLOCK is delivered for the block.
 *
 * Inside these hooks: no stdio, no getenv, no allocation other than the
 * real allocator call being forwarded; errno is preserved on success.
 */
#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mh_int.h"
#include "zc_real.h"

#define MH_EXPORT __attribute__((visibility("default")))

/* glibc malloc_chunk layout (malloc/malloc.c): the size field sits just
 * below the user pointer; bit 1 is IS_MMAPPED; for mmapped chunks the
 * prev_size field holds the distance from the mapping start. */
#define MH_CHUNK_IS_MMAPPED 0x2ul
#define MH_CHUNK_SIZE_BITS  0x7ul


/* A block of n bytes at or above huge_min takes whole 2 MiB units; with a
 * slack limit (huge_slack: shift) it is placed only when the unused end of
 * its last unit is at most n >> huge_slack (a 2.1 MB block would fault in,
 * zero and hold 4 MiB of huge pages, of which page exchange could lend
 * only one unit). */
static int mh_alloc_slack_ok(size_t n)
{
    unsigned k = mh_g.huge_slack;

    return !k || n < mh_g.huge_min || ((MH_HUGE - (n & (MH_HUGE - 1))) & (MH_HUGE - 1)) <= n >> k;
}

static int mh_alloc_eligible(size_t n)
{
    return n >= __atomic_load_n(&mh_g.alloc_min, __ATOMIC_RELAXED) &&
           __atomic_load_n(&mh_g.placement, __ATOMIC_RELAXED) && !mh_tls_guard &&
           mh_alloc_slack_ok(n);
}

/* Place n bytes aligned to align (0: page) in an arena.  NULL: use the real
 * allocator.  errno preserved. */
static void *mh_alloc_place(size_t n, size_t align, int zero)
{
    int saved = errno, huge = n >= mh_g.huge_min, dirty = 0;
    void *p;

    if (align > MH_PAGE) {
        if (align > MH_HUGE)
            return NULL;
        huge = 1;
    }
    mh_tls_guard = 1;
    p = mh_arena_alloc(n, huge, &dirty);
    mh_tls_guard = 0;
    if (p && zero && dirty)
        memset(p, 0, n);
    errno = saved;
    return p;
}

static void *mh_alloc_boot(size_t n, size_t align)
{
    void *p = mh_boot_alloc(n, align);

    if (!p)
        errno = ENOMEM;
    return p;
}

/* ---- events for frees ---------------------------------------------------- */

/* See mh_int.h.  p is a live glibc chunk. */
void mh_alloc_chunk_event(void *p)
{
    const size_t *hdr = (const size_t *)p;
    size_t size = hdr[-1], prev;

    if (!(size & MH_CHUNK_IS_MMAPPED))
        return;
    prev = hdr[-2];
    mh_event_dispatch(MH_EV_FREE, (char *)p - 2 * sizeof(size_t) - prev,
                      prev + (size & ~MH_CHUNK_SIZE_BITS));
}

/* Chunk headers are read only when malloc is glibc's (glibc's free reads
 * the same word next, so this costs no extra cache miss). */
static inline int mh_alloc_chunk_watch(void)
{
    return __atomic_load_n(&mh_g.glibc_chunks, __ATOMIC_RELAXED);
}

static inline void mh_alloc_chunk_check(void *p)
{
    if (mh_alloc_chunk_watch() && (((const size_t *)p)[-1] & MH_CHUNK_IS_MMAPPED))
        mh_alloc_chunk_event(p);
}

static void mh_alloc_block_free(mh_arena_t *a, void *p)
{
    size_t size = mh_arena_block_size(a, p);
    int saved = errno;

    if (!size)
        return;     /* double or invalid free: ignored */
    mh_event_dispatch(MH_EV_BLOCK, p, size);
    mh_tls_guard++;
    mh_arena_free(a, p);
    mh_tls_guard--;
    errno = saved;
}

/* ---- malloc family ------------------------------------------------------- */

#define MH_COLD __attribute__((noinline, cold))

/* 1 when free/realloc must look at p themselves: a bootstrap or arena
 * block, or a glibc chunk that glibc will unmap. */
static inline int mh_alloc_special(void *p)
{
    return mh_boot_owns(p) || mh_arena_span_has(p) ||
           (mh_alloc_chunk_watch() && (((const size_t *)p)[-1] & MH_CHUNK_IS_MMAPPED));
}

static MH_COLD void *mh_malloc_slow(size_t n)
{
    if (!MH_REAL_OK(malloc))
        return mh_alloc_boot(n, 16);
    if (mh_alloc_eligible(n)) {
        void *p = mh_alloc_place(n, 0, 0);

        if (p)
            return p;
    }
    return zc_real.malloc(n);
}

MH_EXPORT void *malloc(size_t n)
{
    void *(*f)(size_t) = zc_real.malloc;

    if (MH_LIKELY(f != NULL && n < mh_g.alloc_min))
        return f(n);
    return mh_malloc_slow(n);
}

static MH_COLD void mh_free_slow(void *p)
{
    mh_arena_t *a;

    if (mh_boot_owns(p))
        return;
    a = mh_arena_find(p);
    if (a) {
        mh_alloc_block_free(a, p);
        return;
    }
    mh_alloc_chunk_check(p);
    if (MH_REAL_OK(free))
        zc_real.free(p);
}

MH_EXPORT void free(void *p)
{
    MH_SITE_MARK();
    void (*f)(void *) = zc_real.free;

    if (!p)
        return;
    if (MH_LIKELY(f != NULL) && !mh_alloc_special(p)) {
        f(p);
        return;
    }
    mh_free_slow(p);
}

static MH_COLD void *mh_calloc_slow(size_t nm, size_t sz)
{
    size_t n;

    if (__builtin_mul_overflow(nm, sz, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    if (!MH_REAL_OK(calloc))
        return mh_alloc_boot(n, 16);
    if (mh_alloc_eligible(n)) {
        void *p = mh_alloc_place(n, 0, 1);

        if (p)
            return p;
    }
    return zc_real.calloc(nm, sz);
}

MH_EXPORT void *calloc(size_t nm, size_t sz)
{
    void *(*f)(size_t, size_t) = zc_real.calloc;
    size_t n;

    if (MH_LIKELY(f != NULL && !__builtin_mul_overflow(nm, sz, &n) && n < mh_g.alloc_min))
        return f(nm, sz);
    return mh_calloc_slow(nm, sz);
}

static size_t mh_alloc_usable(void *p)
{
    mh_arena_t *a;

    if (mh_boot_owns(p))
        return mh_boot_size(p);
    a = mh_arena_find(p);
    if (a)
        return mh_arena_block_size(a, p);
    return MH_REAL_OK(malloc_usable_size) ? zc_real.malloc_usable_size(p) : 0;
}

/* Grow the arena block p in place (it is its arena's last block). */
static int mh_alloc_grow(mh_arena_t *a, void *p, size_t n)
{
    size_t r;

    mh_tls_guard++;
    r = mh_arena_grow(a, p, n);
    mh_tls_guard--;
    return r != 0;
}

static void *mh_alloc_move(void *p, size_t old, size_t n);

/* realloc to n <= old bytes: in place while n stays placeable (pages
 * past n, in whole units, are released after their event), else moved to
 * the real allocator when less than half is used. */
static void *mh_alloc_shrink(mh_arena_t *a, void *p, size_t old, size_t n)
{
    size_t unit = (size_t)1 << a->shift, keep = MH_ALIGN_UP(n, unit);
    int saved;

    if (n < mh_g.alloc_min)
        return n > old / 2 ? p : mh_alloc_move(p, old, n);
    if (keep > old / 2)
        return p;
    saved = errno;
    mh_event_dispatch(MH_EV_BLOCK, (char *)p + keep, old - keep);
    if (!a->hugetlb)    /* hugetlb pages stay reserved (mh_arena_free) */
        zc_real.madvise((char *)p + keep, old - keep, MADV_REMOVE);
    errno = saved;
    return p;
}

/* Move the block p (usable size old) to a new block of n bytes. */
static void *mh_alloc_move(void *p, size_t old, size_t n)
{
    void *q = malloc(n);

    if (!q)
        return NULL;
    memcpy(q, p, old < n ? old : n);
    free(p);
    return q;
}

static MH_COLD void *mh_realloc_slow(void *p, size_t n)
{
    mh_arena_t *a;

    if (!p)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    if (MH_UNLIKELY(mh_boot_owns(p)))
        return mh_alloc_move(p, mh_boot_size(p), n);
    a = mh_arena_find(p);
    if (MH_UNLIKELY(a != NULL)) {
        size_t old = mh_arena_block_size(a, p);

        if (!old) {
            errno = EINVAL;
            return NULL;
        }
        if (n <= old)
            return mh_alloc_shrink(a, p, old, n);
        if (mh_alloc_grow(a, p, n))
            return p;
        return mh_alloc_move(p, old, n);
    }
    if (MH_UNLIKELY(mh_alloc_eligible(n))) {
        size_t old = zc_real.malloc_usable_size(p);

        if (n > old) {
            void *q = mh_alloc_place(n, 0, 0);

            if (q) {
                memcpy(q, p, old);
                free(p);
                return q;
            }
        }
    }
    mh_alloc_chunk_check(p);
    if (!MH_REAL_OK(realloc))
        return mh_alloc_move(p, 0, n);
    return zc_real.realloc(p, n);
}

MH_EXPORT void *realloc(void *p, size_t n)
{
    MH_SITE_MARK();
    void *(*f)(void *, size_t) = zc_real.realloc;

    if (MH_LIKELY(f != NULL && p && n && n < mh_g.alloc_min) && !mh_alloc_special(p))
        return f(p, n);
    return mh_realloc_slow(p, n);
}

MH_EXPORT void *reallocarray(void *p, size_t nm, size_t sz)
{
    size_t n;

    if (__builtin_mul_overflow(nm, sz, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}

MH_EXPORT size_t malloc_usable_size(void *p)
{
    return p ? mh_alloc_usable(p) : 0;
}

/* ---- aligned family --------------------------------------------------------- */

static int mh_alloc_pow2(size_t x)
{
    return x && !(x & (x - 1));
}

MH_EXPORT int posix_memalign(void **pp, size_t align, size_t n)
{
    void *p;

    if (!mh_alloc_pow2(align) || align % sizeof(void *))
        return EINVAL;
    if (!MH_REAL_OK(posix_memalign)) {
        p = mh_boot_alloc(n, align);
        if (!p)
            return ENOMEM;
        *pp = p;
        return 0;
    }
    if (MH_UNLIKELY(mh_alloc_eligible(n)) && (p = mh_alloc_place(n, align, 0))) {
        *pp = p;
        return 0;
    }
    return zc_real.posix_memalign(pp, align, n);
}

MH_EXPORT void *aligned_alloc(size_t align, size_t n)
{
    void *p;

    if (!MH_REAL_OK(aligned_alloc))
        return mh_alloc_pow2(align) ? mh_alloc_boot(n, align) : NULL;
    if (MH_UNLIKELY(mh_alloc_eligible(n)) && mh_alloc_pow2(align) &&
        (p = mh_alloc_place(n, align, 0)))
        return p;
    return zc_real.aligned_alloc(align, n);
}

MH_EXPORT void *memalign(size_t align, size_t n)
{
    void *p;

    if (!MH_REAL_OK(memalign))
        return mh_alloc_boot(n, mh_alloc_pow2(align) ? align : MH_PAGE);
    if (MH_UNLIKELY(mh_alloc_eligible(n)) && (p = mh_alloc_place(n, align, 0)))
        return p;
    return zc_real.memalign(align, n);
}

MH_EXPORT void *valloc(size_t n)
{
    void *p;

    if (!MH_REAL_OK(valloc))
        return mh_alloc_boot(n, MH_PAGE);
    if (MH_UNLIKELY(mh_alloc_eligible(n)) && (p = mh_alloc_place(n, 0, 0)))
        return p;
    return zc_real.valloc(n);
}

MH_EXPORT void *pvalloc(size_t n)
{
    size_t r = MH_ALIGN_UP(n ? n : 1, MH_PAGE);
    void *p;

    if (r < n) {
        errno = ENOMEM;
        return NULL;
    }
    if (!MH_REAL_OK(pvalloc))
        return MH_REAL_OK(valloc) ? zc_real.valloc(r) : mh_alloc_boot(r, MH_PAGE);
    if (MH_UNLIKELY(mh_alloc_eligible(r)) && (p = mh_alloc_place(r, 0, 0)))
        return p;
    return zc_real.pvalloc(n);
}

/* ---- foreign allocator detection --------------------------------------- */

/* Our own malloc's address: taking &malloc would go through the GOT and
 * yield whichever malloc comes first in the lookup order. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Wmissing-attributes"
extern __typeof__(malloc) mh_alloc_self_malloc
    __attribute__((alias("malloc"), visibility("hidden")));
#pragma GCC diagnostic pop

typedef struct mh_obj_find {
    uintptr_t addr;
    uintptr_t base;     /* load base of the object holding addr */
    const char *name;
    int found;
} mh_obj_find_t;

static int mh_obj_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    mh_obj_find_t *f = arg;

    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

        if (ph->p_type == PT_LOAD && f->addr - lo < ph->p_memsz) {
            f->base = info->dlpi_addr;
            f->name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "the program";
            f->found = 1;
            return 1;
        }
    }
    return 0;
}

/* The object holding addr (no symbol-table scan, unlike dladdr). */
static int mh_obj_of(const void *addr, mh_obj_find_t *f)
{
    memset(f, 0, sizeof(*f));
    f->addr = (uintptr_t)addr;
    dl_iterate_phdr(mh_obj_visit, f);
    return f->found;
}

/* See mh_int.h.  Returns 1 when malloc is not glibc's or our malloc is not
 * the one the program calls; *reason_p names the provider.  Init only. */
int mh_alloc_detect_foreign(const char **reason_p)
{
    static char why[160];
    mh_obj_find_t mi, li;
    void *def = dlsym(RTLD_DEFAULT, "malloc");
    const char *name = NULL;

    if (def && def != (void *)mh_alloc_self_malloc) {
        name = mh_obj_of(def, &mi) ? mi.name : "?";
    } else if (mh_obj_of((void *)zc_real.malloc, &mi) && mh_obj_of((void *)zc_real.mmap, &li) &&
               mi.base != li.base) {
        name = mi.name;
    }
    if (!name)
        return 0;
    memcpy(why, "malloc comes from ", 18);
    strncpy(why + 18, name, sizeof(why) - 19);
    why[sizeof(why) - 1] = 0;
    *reason_p = why;
    return 1;
}
