/* Bulk copies independent of relative alignment (zc_copy.h). */
#include "zc_copy.h"

typedef uint8_t zc_v32_t __attribute__((vector_size(32), aligned(1), may_alias));

/* 128 bytes per turn in 32-byte unaligned moves, then 32, then the tail. */
#define ZC_COPY_BODY                                                                     \
    do {                                                                                 \
        uint8_t *d = dst;                                                                \
        const uint8_t *s = src;                                                          \
        size_t i = 0;                                                                    \
                                                                                         \
        for (; i + 128 <= n; i += 128) {                                                 \
            zc_v32_t a = *(const zc_v32_t *)(s + i), b = *(const zc_v32_t *)(s + i + 32); \
            zc_v32_t c = *(const zc_v32_t *)(s + i + 64);                                \
            zc_v32_t e = *(const zc_v32_t *)(s + i + 96);                                \
                                                                                         \
            *(zc_v32_t *)(d + i) = a;                                                    \
            *(zc_v32_t *)(d + i + 32) = b;                                               \
            *(zc_v32_t *)(d + i + 64) = c;                                               \
            *(zc_v32_t *)(d + i + 96) = e;                                               \
        }                                                                                \
        for (; i + 32 <= n; i += 32)                                                     \
            *(zc_v32_t *)(d + i) = *(const zc_v32_t *)(s + i);                           \
        if (i < n)                                                                       \
            memcpy(d + i, s + i, n - i);                                                 \
    } while (0)

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) static void zc_copy_avx2(void *dst, const void *src, size_t n)
{
    ZC_COPY_BODY;
}
#endif

static void zc_copy_plain(void *dst, const void *src, size_t n)
{
    ZC_COPY_BODY;
}

typedef void (*zc_copy_fn_t)(void *, const void *, size_t);

void zc_copy_loop(void *dst, const void *src, size_t n)
{
    static zc_copy_fn_t fn;
    zc_copy_fn_t f = __atomic_load_n(&fn, __ATOMIC_RELAXED);

    if (__builtin_expect(!f, 0)) {
        f = zc_copy_plain;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2"))
            f = zc_copy_avx2;
#endif
        __atomic_store_n(&fn, f, __ATOMIC_RELAXED);
    }
    f(dst, src, n);
}
