/* Metadata allocator: see zc_pool.h. */
#include "zc_pool.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "zc_real.h"

#define ZC_POOL_MIN_SHIFT 5                      /* 32 bytes */
#define ZC_POOL_MAX_SHIFT 16                     /* 64 KiB */
#define ZC_POOL_CLASSES (ZC_POOL_MAX_SHIFT - ZC_POOL_MIN_SHIFT + 1)
#define ZC_POOL_SLAB ((size_t)1 << 20)

typedef struct zc_pool_free_node {
    struct zc_pool_free_node *next;
} zc_pool_free_node_t;

static struct {
    int lock;                                        /* protects everything below */
    zc_pool_free_node_t *free[ZC_POOL_CLASSES];
    char *slab_cur, *slab_end;
} zc_pool ZC_FORK_DATA;

static void zc_pool_lock(void)
{
    while (__atomic_exchange_n(&zc_pool.lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&zc_pool.lock, __ATOMIC_RELAXED))
            __builtin_ia32_pause();
}

static void zc_pool_unlock(void)
{
    __atomic_store_n(&zc_pool.lock, 0, __ATOMIC_RELEASE);
}

static void *zc_pool_map(size_t len)
{
    void *p = zc_real.mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

static unsigned zc_pool_class(size_t size)
{
    unsigned shift = size <= 1 ? 0 : (unsigned)(64 - __builtin_clzll((unsigned long long)size - 1));

    return shift <= ZC_POOL_MIN_SHIFT ? 0 : shift - ZC_POOL_MIN_SHIFT;
}

/* Carve one block of class c from the current slab; lock held. */
static void *zc_pool_carve(unsigned c)
{
    size_t bs = (size_t)1 << (c + ZC_POOL_MIN_SHIFT);
    void *p;

    if (!zc_pool.slab_cur || (size_t)(zc_pool.slab_end - zc_pool.slab_cur) < bs) {
        char *slab = zc_pool_map(ZC_POOL_SLAB);

        if (!slab)
            return NULL;
        zc_pool.slab_cur = slab;
        zc_pool.slab_end = slab + ZC_POOL_SLAB;
    }
    p = zc_pool.slab_cur;
    zc_pool.slab_cur += bs;
    return p;
}

void *zc_pool_alloc(size_t size)
{
    zc_pool_free_node_t *n;
    unsigned c;
    void *p;

    if (size == 0)
        size = 1;
    if (size > ((size_t)1 << ZC_POOL_MAX_SHIFT))
        return zc_pool_map(size);       /* fresh anonymous pages are zero */
    c = zc_pool_class(size);
    zc_pool_lock();
    n = zc_pool.free[c];
    if (n) {
        zc_pool.free[c] = n->next;
        p = n;
    } else {
        p = zc_pool_carve(c);
    }
    zc_pool_unlock();
    if (p)
        memset(p, 0, size);     /* what the caller asked for: the class's tail is never read */
    return p;
}

void zc_pool_free(void *ptr, size_t size)
{
    zc_pool_free_node_t *n = ptr;
    unsigned c;

    if (!ptr)
        return;
    if (size == 0)
        size = 1;
    if (size > ((size_t)1 << ZC_POOL_MAX_SHIFT)) {
        zc_real.munmap(ptr, size);
        return;
    }
    c = zc_pool_class(size);
    zc_pool_lock();
    n->next = zc_pool.free[c];
    zc_pool.free[c] = n;
    zc_pool_unlock();
}

void *zc_pool_alloc_cb(void *arg, size_t size)
{
    (void)arg;
    return zc_pool_alloc(size);
}

void zc_pool_free_cb(void *arg, void *ptr, size_t size)
{
    (void)arg;
    zc_pool_free(ptr, size);
}

void zc_pool_fork_prepare(void)
{
    zc_pool_lock();
}

void zc_pool_fork_parent(void)
{
    zc_pool_unlock();
}

ZC_FORK_CODE void zc_pool_fork_child(void)
{
    zc_pool_unlock();
}
