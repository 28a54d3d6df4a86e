/* Unit tests: subscriber table and event dispatch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mh_int.h"

mh_state_t mh_g = { .alloc_min = SIZE_MAX, .huge_min = SIZE_MAX, .reason = "" };
__thread int mh_tls_guard;

typedef struct t_rec {
    int calls;
    unsigned kind;
    void *addr;
    size_t len;
    int guard_seen;
} t_rec_t;

static void t_cb(unsigned kind, void *addr, size_t len, void *arg)
{
    t_rec_t *r = arg;

    r->calls++;
    r->kind = kind;
    r->addr = addr;
    r->len = len;
    r->guard_seen = mh_tls_guard;
}

static int t_reset(void **state)
{
    (void)state;
    mh_event_reset_for_test();
    return 0;
}

static void t_subscribe_rejects_bad_args(void **state)
{
    t_rec_t r = { 0 };

    (void)state;
    assert_int_equal(mh_event_subscribe(MH_EV_UNMAP, NULL, &r), -EINVAL);
    assert_int_equal(mh_event_subscribe(0, t_cb, &r), -EINVAL);
    assert_int_equal(mh_event_subscribe(0x8000, t_cb, &r), -EINVAL);
    assert_int_equal(mh_event_unsubscribe(-1), -EINVAL);
    assert_int_equal(mh_event_unsubscribe(3), -ENOENT);
}

static void t_dispatch_matches_mask(void **state)
{
    t_rec_t a = { 0 }, b = { 0 };
    int ha = mh_event_subscribe(MH_EV_UNMAP | MH_EV_REMAP, t_cb, &a);
    int hb = mh_event_subscribe(MH_EV_FREE, t_cb, &b);

    (void)state;
    assert_true(ha >= 0 && hb >= 0 && ha != hb);
    assert_true(mh_event_wanted(MH_EV_UNMAP));
    assert_false(mh_event_wanted(MH_EV_SHMDT));
    mh_event_dispatch(MH_EV_REMAP, (void *)0x10000, 8192);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.kind, MH_EV_REMAP);
    assert_ptr_equal(a.addr, (void *)0x10000);
    assert_int_equal(a.len, 8192);
    assert_int_equal(a.guard_seen, 1);
    assert_int_equal(mh_tls_guard, 0);
    assert_int_equal(b.calls, 0);
    mh_event_dispatch(MH_EV_SHMDT, (void *)0x10000, 4096);
    assert_int_equal(a.calls + b.calls, 1);
    mh_event_dispatch(MH_EV_FREE, (void *)0x20000, 4096);
    assert_int_equal(b.calls, 1);
    mh_event_dispatch(MH_EV_FREE, (void *)0x20000, 0);       /* empty range */
    assert_int_equal(b.calls, 1);
    assert_int_equal(mh_event_unsubscribe(hb), 0);
    assert_false(mh_event_wanted(MH_EV_FREE));
    mh_event_dispatch(MH_EV_FREE, (void *)0x20000, 4096);
    assert_int_equal(b.calls, 1);
}

static void t_subscribers_bounded(void **state)
{
    t_rec_t r = { 0 };
    int h = 0;

    (void)state;
    for (int i = 0; i < MH_SUBSCRIBERS_MAX; i++)
        assert_true((h = mh_event_subscribe(MH_EV_BRK, t_cb, &r)) >= 0);
    assert_int_equal(mh_event_subscribe(MH_EV_BRK, t_cb, &r), -ENOSPC);
    mh_event_dispatch(MH_EV_BRK, (void *)0x1000, 4096);
    assert_int_equal(r.calls, MH_SUBSCRIBERS_MAX);
    assert_int_equal(mh_event_unsubscribe(h), 0);
    assert_true(mh_event_subscribe(MH_EV_BRK, t_cb, &r) >= 0);
}

static int t_nested_calls;

static void t_cb_nesting(unsigned kind, void *addr, size_t len, void *arg)
{
    (void)arg;
    t_nested_calls++;
    mh_event_dispatch(kind, addr, len);         /* dropped, not recursed */
}

static void t_nested_dispatch_dropped(void **state)
{
    (void)state;
    assert_true(mh_event_subscribe(MH_EV_UNMAP, t_cb_nesting, NULL) >= 0);
    mh_event_dispatch(MH_EV_UNMAP, (void *)0x1000, 4096);
    assert_int_equal(t_nested_calls, 1);
}

static void t_cb_allocating(unsigned kind, void *addr, size_t len, void *arg)
{
    char *p = malloc(len);

    (void)kind;
    (void)addr;
    (void)arg;
    if (p)
        p[0] = 1;
    free(p);
}

static void t_counts_every_event(void **state)
{
    mh_stats_t st;

    (void)state;
    assert_true(mh_event_subscribe(MH_EV_ALL, t_cb_allocating, NULL) >= 0);
    for (unsigned k = 0; k < MH_EV_KINDS; k++)
        for (unsigned i = 0; i <= k; i++)
            mh_event_dispatch(1u << k, (void *)0x1000, 4096);
    mh_stats_get(&st);
    for (unsigned k = 0; k < MH_EV_KINDS; k++)
        assert_int_equal(st.events[k], k + 1);
    assert_string_equal(mh_event_names[0], "unmap");
    {
        uint64_t v = 0;

        assert_int_equal(mh_stat_lookup("mh.events.brk", &v), 0);
        assert_int_equal(v, 6);
        assert_int_equal(mh_stat_lookup("mh.alloc.pool_hits", &v), 0);
        assert_int_equal(mh_stat_lookup("mh.events.nope", &v), -ENOENT);
        assert_int_equal(mh_stat_lookup("calls.send", &v), -ENOENT);
    }
    assert_string_equal(mh_event_names[MH_EV_KINDS - 1], "block");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(t_subscribe_rejects_bad_args, t_reset),
        cmocka_unit_test_setup(t_dispatch_matches_mask, t_reset),
        cmocka_unit_test_setup(t_subscribers_bounded, t_reset),
        cmocka_unit_test_setup(t_nested_dispatch_dropped, t_reset),
        cmocka_unit_test_setup(t_counts_every_event, t_reset),
    };

    return cmocka_run_group_tests_name("mh_event", tests, NULL, NULL);
}
