/* Unit tests for common/zc_spin.c: the knobs, learning, and the CPU gate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "zc_config.h"
#include "zc_spin.h"

static int reset(void **state)
{
    (void)state;
    zc_config_reset();
    return 0;
}

static void t_learns_and_decays(void **state)
{
    zc_spin_t s = { 0 };

    (void)state;
    zc_spin_learn(&s, zc_now_us());                 /* a quick wait: spin next time */
    assert_int_equal(s.budget_us, ZC_SPIN_MAX_US);
    zc_spin_learn(&s, zc_now_us() - 10 * ZC_SPIN_LEARN_US);    /* a long one halves it */
    assert_int_equal(s.budget_us, ZC_SPIN_MAX_US / 2);
    for (int i = 0; i < 16; i++)
        zc_spin_learn(&s, zc_now_us() - 10 * ZC_SPIN_LEARN_US);
    assert_int_equal(s.budget_us, 0);               /* idle: no spin at all */
    assert_int_equal(zc_spin_for(&s), 0);
    zc_spin_learn(&s, zc_now_us());                 /* and back after a quick one */
    assert_int_equal(s.budget_us, ZC_SPIN_MAX_US);
}

static void t_knobs(void **state)
{
    zc_spin_t s = { ZC_SPIN_MAX_US };
    unsigned us;

    (void)state;
    /* adaptive: the budget, or nothing while the CPUs are busy / only one */
    us = zc_spin_for(&s);
    assert_true(us == 0 || us == ZC_SPIN_MAX_US);
    assert_int_equal(zc_config_set("ZCSOCK_SPIN", "0"), 0);
    assert_int_equal(zc_spin_for(&s), 0);           /* never */
    assert_int_equal(zc_config_set("ZCSOCK_SPIN_US", "20"), 0);
    s.budget_us = 0;
    assert_int_equal(zc_spin_for(&s), 20);          /* fixed: whatever the load */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(t_learns_and_decays, reset),
        cmocka_unit_test_setup(t_knobs, reset),
    };
    zc_spin_init();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
