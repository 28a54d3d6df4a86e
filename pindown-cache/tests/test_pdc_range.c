/* Unit tests of pdc_range.c: the sorted overlap index, the exact-start
 * hash, killing, the published bounds, against a brute-force model. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pdc_fake.h"
#include "pdc_int.h"

#define T_PG 4096u

typedef struct t_env {
    pdc_t *cache;
    t_fake_t *fake;
} t_env_t;

static int t_setup(void **state)
{
    t_env_t *e = calloc(1, sizeof(*e));
    pdc_params_t p;

    e->fake = t_fake_new(8);
    t_fake_params(&p, 1 << 30, 64);
    assert_int_equal(pdc_create(&p, &t_fake_ops, e->fake, &e->cache), 0);
    *state = e;
    return 0;
}

static void t_drop_dead(pdc_t *cache)
{
    pdc_list_t *l;

    while (!pdc_list_empty(&cache->dead)) {
        l = cache->dead.next;
        pdc_list_del(l);
        pdc_range_unhash(cache, pdc_rgn_of_link(l));
        free(pdc_rgn_of_link(l));
    }
}

static void t_drop_all(pdc_t *cache)
{
    while (cache->index.n > 0)
        pdc_range_kill(cache, cache->index.v[cache->index.n - 1]);
    t_drop_dead(cache);
}

static int t_teardown(void **state)
{
    t_env_t *e = *state;

    t_drop_all(e->cache);
    pdc_destroy(e->cache);
    t_fake_free(e->fake);
    free(e);
    return 0;
}

static pdc_rgn_t *t_rgn(uintptr_t start_pg, uintptr_t end_pg)
{
    pdc_rgn_t *r = calloc(1, sizeof(*r));

    r->start = start_pg * T_PG;
    r->end = end_pg * T_PG;
    r->state = PDC_RS_READY;
    return r;
}

static void t_sorted(const pdc_range_index_t *ix)
{
    unsigned i;

    for (i = 1; i < ix->n; i++)
        assert_true(ix->v[i - 1]->end <= ix->v[i]->start);
}

static void t_insert_lookup(void **state)
{
    t_env_t *e = *state;
    pdc_t *c = e->cache;
    pdc_rgn_t *a = t_rgn(10, 20), *b = t_rgn(30, 31), *d = t_rgn(0, 5);

    assert_int_equal(pdc_range_insert(c, a), 0);
    assert_int_equal(pdc_range_insert(c, b), 0);
    assert_int_equal(pdc_range_insert(c, d), 0);
    t_sorted(&c->index);
    assert_ptr_equal(c->index.v[0], d);
    assert_ptr_equal(pdc_range_lookup(c, 10 * T_PG, 20 * T_PG), a);   /* hash */
    assert_ptr_equal(pdc_range_lookup(c, 12 * T_PG, 13 * T_PG), a);   /* index */
    assert_null(pdc_range_lookup(c, 12 * T_PG, 21 * T_PG));
    assert_null(pdc_range_lookup(c, 5 * T_PG, 6 * T_PG));
    assert_ptr_equal(pdc_range_lookup(c, 30 * T_PG, 31 * T_PG), b);
    assert_int_equal(pdc_range_lower(&c->index, 0), 0);
    assert_int_equal(pdc_range_lower(&c->index, 5 * T_PG), 1);
    assert_int_equal(pdc_range_lower(&c->index, 19 * T_PG), 1);
    assert_int_equal(pdc_range_lower(&c->index, 20 * T_PG), 2);
    assert_int_equal(pdc_range_lower(&c->index, 31 * T_PG), 3);
    assert_int_equal(c->span_lo, 0);
    assert_int_equal(c->span_hi, 31 * T_PG);
}

static void t_kill_dead_invisible(void **state)
{
    t_env_t *e = *state;
    pdc_t *c = e->cache;
    pdc_rgn_t *a = t_rgn(10, 20), *b = t_rgn(30, 40);

    assert_int_equal(pdc_range_insert(c, a), 0);
    assert_int_equal(pdc_range_insert(c, b), 0);
    pdc_range_kill(c, a);
    assert_true(a->flags & PDC_RF_DEAD);
    assert_true(a->flags & PDC_RF_HASH);   /* unhashed by the reap only */
    assert_null(pdc_range_lookup(c, 10 * T_PG, 20 * T_PG));
    assert_int_equal(c->index.n, 1);
    assert_int_equal(c->span_lo, 30 * T_PG);
    pdc_range_kill(c, a);                  /* idempotent */
    assert_int_equal(c->index.n, 1);
    assert_int_equal(pdc_range_invalidate_locked(c, 40 * T_PG, 50 * T_PG), 0);
    assert_int_equal(pdc_range_invalidate_locked(c, 39 * T_PG, 50 * T_PG), 1);
    assert_int_equal(c->index.n, 0);
    assert_int_equal(c->span_lo, UINTPTR_MAX);
    assert_int_equal(c->span_hi, 0);
}

static void t_capacity(void **state)
{
    t_env_t *e = *state;
    pdc_t *c = e->cache;
    pdc_rgn_t *extra = t_rgn(1000, 1001);
    unsigned i;

    for (i = 0; i < c->index.cap; i++)
        assert_int_equal(pdc_range_insert(c, t_rgn(2 * i, 2 * i + 1)), 0);
    assert_int_equal(pdc_range_insert(c, extra), -ENOSPC);
    free(extra);
    assert_int_equal(pdc_range_invalidate_all(c), c->index.cap);
}

/* Random inserts of non-overlapping regions and random invalidations,
 * checked against a page bitmap model. */
static void t_model(void **state)
{
    t_env_t *e = *state;
    pdc_t *c = e->cache;
    enum { PAGES = 512 };
    pdc_rgn_t *owner[PAGES];
    unsigned seed = 1, step, i;

    memset(owner, 0, sizeof(owner));
    for (step = 0; step < 4000; step++) {
        unsigned s = (seed = seed * 1103515245u + 12345u) >> 8 & (PAGES - 1);
        unsigned len = 1 + ((seed = seed * 1103515245u + 12345u) >> 8) % 8;
        unsigned op = ((seed = seed * 1103515245u + 12345u) >> 8) % 3;
        int free_span = s + len <= PAGES;

        for (i = s; free_span && i < s + len; i++)
            free_span = owner[i] == NULL;
        if (op < 2 && free_span && c->index.n < c->index.cap) {
            pdc_rgn_t *r = t_rgn(s, s + len);

            assert_int_equal(pdc_range_insert(c, r), 0);
            for (i = s; i < s + len; i++)
                owner[i] = r;
        } else if (op == 2) {
            unsigned expect = 0, e2 = s + len > PAGES ? PAGES : s + len;
            pdc_rgn_t *last = NULL;

            for (i = s; i < e2; i++)
                if (owner[i] && owner[i] != last)
                    expect++, last = owner[i];
            /* Regions straddling s from the left count too. */
            assert_int_equal(pdc_range_invalidate_locked(c, s * T_PG, e2 * T_PG), expect);
            for (i = 0; i < PAGES; i++)
                if (owner[i] && (owner[i]->flags & PDC_RF_DEAD))
                    owner[i] = NULL;
            t_drop_dead(c);
        }
        t_sorted(&c->index);
        for (i = 0; i < PAGES; i += 7) {
            pdc_rgn_t *r = pdc_range_lookup(c, i * T_PG, (i + 1) * T_PG);

            assert_ptr_equal(r, owner[i]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_insert_lookup, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(t_kill_dead_invisible, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(t_capacity, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(t_model, t_setup, t_teardown),
    };

    return cmocka_run_group_tests_name("pdc_range", tests, NULL, NULL);
}
