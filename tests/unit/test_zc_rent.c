/* Unit tests for common/zc_rent.c: when a unit's first lend pays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "zc_config.h"
#include "zc_rent.h"

#define UNIT ((size_t)2 << 20)
#define A ((uintptr_t)64 << 21)     /* a unit's address */

static zc_rent_t r;

static int reset(void **state)
{
    (void)state;
    zc_config_reset();
    memset(&r, 0, sizeof(r));
    return 0;
}

/* Sends of one unit until it is bought: how many were rented first. */
static int rents_before_buy(uintptr_t unit, uint64_t fp, int most)
{
    for (int i = 0; i < most; i++)
        if (zc_rent_decide(&r, unit, fp))
            return i;
    return -1;
}

static void t_unknown_buys(void **state)
{
    (void)state;
    /* nothing measured: buy (and so find out what it costs) */
    assert_int_equal(zc_rent_cheap(&r), 1);
    assert_int_equal(zc_rent_decide(&r, A, 1), 1);
    zc_rent_bought(&r, 5000000, 0);
    /* the cost of buying, but not yet of a ring pass: still buy */
    assert_int_equal(zc_rent_decide(&r, A, 1), 1);
}

static void t_cheap_buys_at_once(void **state)
{
    (void)state;
    zc_rent_bought(&r, 300000, 0);              /* 0.3 ms: hugetlb, say */
    zc_rent_ring(&r, 64 * UNIT, 64 * 400000ull, UNIT);   /* 0.4 ms a unit */
    assert_int_equal(zc_rent_cheap(&r), 1);
    assert_int_equal(rents_before_buy(A, 1, 10), 0);
}

static void t_ski_rental(void **state)
{
    (void)state;
    zc_rent_bought(&r, 5000000, 0);             /* 5 ms a new unit */
    zc_rent_ring(&r, UNIT, 500000, UNIT);       /* 0.5 ms a ring pass */
    assert_int_equal(zc_rent_cheap(&r), 0);
    /* the same bytes: bought on the pass that makes the rent add up */
    assert_int_equal(rents_before_buy(A, 42, 100), 9);
    /* bought: the next sight of it starts again */
    assert_int_equal(zc_rent_decide(&r, A, 42), 0);
}

static void t_refilled_never_buys(void **state)
{
    (void)state;
    zc_rent_bought(&r, 5000000, 150000);
    zc_rent_ring(&r, UNIT, 500000, UNIT);
    for (uint64_t fp = 1; fp < 1000; fp++)
        assert_int_equal(zc_rent_decide(&r, A, fp), 0);    /* other bytes each time */
}

static void t_units_apart(void **state)
{
    (void)state;
    zc_rent_bought(&r, 2000000, 0);
    zc_rent_ring(&r, UNIT, 1000000, UNIT);      /* 1 ms: bought at the 2nd pass */
    assert_int_equal(zc_rent_decide(&r, A, 5), 0);
    assert_int_equal(zc_rent_decide(&r, A + UNIT, 5), 0);   /* a neighbour: its own */
    assert_int_equal(zc_rent_decide(&r, A, 5), 1);
    assert_int_equal(zc_rent_decide(&r, A + UNIT, 5), 1);
}

static void t_copy_stands_in_for_ring(void **state)
{
    (void)state;
    /* ring not timed yet: a pass costs the copy into the unit file */
    zc_rent_bought(&r, 1000000, 250000);
    assert_int_equal(rents_before_buy(A, 3, 10), 3);
}

static void t_averages(void **state)
{
    (void)state;
    zc_rent_bought(&r, 4000000, 0);
    assert_int_equal(r.buy_ns, 4000000);
    zc_rent_bought(&r, 0, 0);                   /* a quarter per sample */
    assert_int_equal(r.buy_ns, 3000000);
    zc_rent_ring(&r, UNIT / 2, 1000, UNIT);     /* less than a unit: no sample */
    assert_int_equal(r.rent_ns, 0);
    zc_rent_ring(&r, 4 * UNIT, 800000, UNIT);   /* per unit */
    assert_int_equal(r.rent_ns, 200000);
}

static void t_ring_starts_from_copy(void **state)
{
    (void)state;
    /* the copy into the unit file stands for a ring pass (0.15 ms); the
     * first ring sample, 20 ms (a preempted send), moves the average a
     * quarter of the way instead of replacing it: buying (10 ms) stays
     * dearer than renting */
    zc_rent_bought(&r, 10000000, 150000);
    zc_rent_ring(&r, UNIT, 20000000, UNIT);
    assert_int_equal(r.rent_ns, 150000 - 150000 / 4 + 20000000 / 4);
    assert_int_equal(zc_rent_cheap(&r), 0);
    assert_int_equal(zc_rent_decide(&r, A, 9), 0);
    /* ring passes as slow again and again: buying is cheap after all */
    for (int i = 0; i < 8; i++)
        zc_rent_ring(&r, UNIT, 20000000, UNIT);
    assert_int_equal(zc_rent_cheap(&r), 1);
}

static void t_knob(void **state)
{
    (void)state;
    zc_rent_bought(&r, 5000000, 0);
    zc_rent_ring(&r, UNIT, 500000, UNIT);
    assert_int_equal(zc_config_set("ZCSOCK_EXCHANGE_UNIT_US", "1"), 0);
    assert_int_equal(rents_before_buy(A, 1, 10), 0);      /* every unit at once */
    assert_int_equal(zc_config_set("ZCSOCK_EXCHANGE_UNIT_US", "2000"), 0);
    assert_int_equal(rents_before_buy(A, 2, 10), 3);      /* 4 passes of 0.5 ms */
    assert_int_not_equal(zc_config_set("ZCSOCK_EXCHANGE_UNIT_US", "ten"), 0);
}

static void t_fingerprint(void **state)
{
    char *p = aligned_alloc(4096, UNIT);
    uint64_t f0, f1;

    (void)state;
    assert_non_null(p);
    memset(p, 0, UNIT);
    f0 = zc_rent_fp(p, UNIT);
    assert_int_equal(zc_rent_fp(p, UNIT), f0);           /* the same bytes */
    memset(p, 1, UNIT);                                   /* a refill */
    f1 = zc_rent_fp(p, UNIT);
    assert_int_not_equal(f1, f0);
    p[UNIT - 4096 + ((511 * 67) & 511) * 8] ^= 1;         /* the last page's word */
    assert_int_not_equal(zc_rent_fp(p, UNIT), f1);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(t_unknown_buys, reset),
        cmocka_unit_test_setup(t_cheap_buys_at_once, reset),
        cmocka_unit_test_setup(t_ski_rental, reset),
        cmocka_unit_test_setup(t_refilled_never_buys, reset),
        cmocka_unit_test_setup(t_units_apart, reset),
        cmocka_unit_test_setup(t_copy_stands_in_for_ring, reset),
        cmocka_unit_test_setup(t_averages, reset),
        cmocka_unit_test_setup(t_ring_starts_from_copy, reset),
        cmocka_unit_test_setup(t_knob, reset),
        cmocka_unit_test_setup(t_fingerprint, reset),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
