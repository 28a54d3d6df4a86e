/* Bootstrap arena: serves allocations made while zc_real is still empty
 * (dlsym's own calloc/malloc while the resolver runs, allocations that
 * re-enter a hook before resolution finished).
 *
 * A static bump allocator: every block has a 16-byte header holding its
 * size, blocks are never reused (free is a no-op), the arena is never
 * returned.  It serves a few hundred bytes in a normal run; when it runs out
 * it returns NULL (ENOMEM at the hook).  Lock-free (one atomic add).
 */
#include <stdint.h>
#include <string.h>

#include "mh_int.h"

#define MH_BOOT_HDR  16u

char mh_boot_mem[MH_BOOT_SIZE] __attribute__((aligned(4096)));
static size_t mh_boot_top;          /* bytes used (atomic) */
uint64_t mh_boot_used;              /* bytes handed out (stats) */

/* Allocate n bytes aligned to align (a power of two, at least 16).  Memory
 * is zero (never reused).  Hook-safe, signal-safe.  NULL when exhausted. */
void *mh_boot_alloc(size_t n, size_t align)
{
    size_t old, start, end;

    if (align < MH_BOOT_HDR)
        align = MH_BOOT_HDR;
    if (n > MH_BOOT_SIZE || align > MH_BOOT_SIZE / 4)
        return NULL;
    old = __atomic_load_n(&mh_boot_top, __ATOMIC_RELAXED);
    do {
        start = MH_ALIGN_UP(old + MH_BOOT_HDR, align);
        end = start + MH_ALIGN_UP(n ? n : 1, MH_BOOT_HDR);
        if (end > MH_BOOT_SIZE)
            return NULL;
    } while (!__atomic_compare_exchange_n(&mh_boot_top, &old, end, 1,
                                          __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
    *(size_t *)(mh_boot_mem + start - MH_BOOT_HDR) = n;
    __atomic_fetch_add(&mh_boot_used, n, __ATOMIC_RELAXED);
    return mh_boot_mem + start;
}

/* Requested size of the bootstrap block p. */
size_t mh_boot_size(const void *p)
{
    return *(const size_t *)((const char *)p - MH_BOOT_HDR);
}
