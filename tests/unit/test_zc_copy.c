/* Unit tests for common/zc_copy.h: every size and relative alignment around
 * the thresholds copies exactly what memcpy would, touches nothing outside
 * the destination, and the 4 KiB-aliasing test picks exactly dst 1..63
 * bytes past src (mod 4096). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "zc_copy.h"

#define T_AREA (3u << 20)

static void t_fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 9));
}

static void t_copies_exactly(void **state)
{
    static const size_t sizes[] = { 0, 1, 31, 32, 127, 128, 129, 2047, 2048, 2049, 4088,
                                    4096, 65536 + 13, (1u << 20) - 1, 1u << 20 };
    static const size_t offs[] = { 0, 1, 8, 16, 24, 31, 32, 63, 64, 4095, 4096 + 8 };
    uint8_t *src = aligned_alloc(4096, T_AREA), *dst = aligned_alloc(4096, T_AREA);

    (void)state;
    assert_non_null(src);
    assert_non_null(dst);
    t_fill(src, T_AREA, 1);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
        for (size_t a = 0; a < sizeof(offs) / sizeof(offs[0]); a++)
            for (size_t b = 0; b < 3; b++) {
                size_t n = sizes[k], so = offs[b * 4 % 11], doff = offs[a] + 64;

                memset(dst, 0xa5, n + doff + 64);
                zc_copy(dst + doff, src + so, n);
                assert_memory_equal(dst + doff, src + so, n);
                for (size_t i = 0; i < doff; i++)
                    assert_int_equal(dst[i], 0xa5);
                for (size_t i = 0; i < 64; i++)
                    assert_int_equal(dst[doff + n + i], 0xa5);
            }
    free(src);
    free(dst);
}

static void t_aliasing_window(void **state)
{
    static uint8_t buf[3 * 4096] __attribute__((aligned(4096)));

    (void)state;
    assert_false(zc_copy_aliases(buf, buf));
    assert_true(zc_copy_aliases(buf + 1, buf));
    assert_true(zc_copy_aliases(buf + 8, buf));
    assert_true(zc_copy_aliases(buf + 63, buf));
    assert_false(zc_copy_aliases(buf + 64, buf));
    assert_true(zc_copy_aliases(buf + 4096 + 8, buf));      /* modulo 4 KiB */
    assert_false(zc_copy_aliases(buf, buf + 8));            /* dst before src */
    assert_true(zc_copy_aliases(buf + 16, buf + 8));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_copies_exactly),
        cmocka_unit_test(t_aliasing_window),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
