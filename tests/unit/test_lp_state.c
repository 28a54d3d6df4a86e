/* Unit tests for shim/paths/local/state.c: the table of a connection's
 * state changes.  Every allowed change is made and counted; every other
 * one is refused (the state stays, local.state.refused counts it), and in
 * a checked build (ZC_CHECKS: the sanitizer builds) aborts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lp_int.h"

static lp_conn_t conn;

static lp_conn_t *fresh(void)
{
    memset(&conn, 0, sizeof(conn));
    return &conn;
}

static void t_allowed(void **state)
{
    static const int paths[][5] = {
        { LP_OFFER, LP_PAIRED, LP_PLAIN, 0 },
        { LP_OFFER, LP_PLAIN, LP_PLAIN, 0 },
        { LP_PENDING, LP_PAIRED, LP_PLAIN, 0 },
        { LP_PENDING, LP_PLAIN, 0, 0 },
        { LP_PAIRED, LP_PLAIN, 0, 0 },
        { LP_DEFER, LP_PENDING, LP_PAIRED, LP_PLAIN, 0 },
        { LP_DEFER, LP_PLAIN, 0, 0 },
    };
    uint64_t before[8], after[8];
    static const unsigned ids[8] = {
        ZC_STAT_LOCAL_STATE_OFFER_PAIRED, ZC_STAT_LOCAL_STATE_OFFER_PLAIN,
        ZC_STAT_LOCAL_STATE_PENDING_PAIRED, ZC_STAT_LOCAL_STATE_PENDING_PLAIN,
        ZC_STAT_LOCAL_STATE_PAIRED_PLAIN, ZC_STAT_LOCAL_STATE_REFUSED,
        ZC_STAT_LOCAL_STATE_DEFER_PENDING, ZC_STAT_LOCAL_STATE_DEFER_PLAIN,
    };

    (void)state;
    for (int i = 0; i < 8; i++)
        before[i] = zc_stat_read(ids[i]);
    for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
        lp_conn_t *c = fresh();

        for (int k = 0; k < 5 && paths[p][k]; k++) {
            assert_int_equal(lp_state_set(c, paths[p][k]), 0);
            assert_int_equal(c->state, paths[p][k]);
        }
    }
    for (int i = 0; i < 8; i++)
        after[i] = zc_stat_read(ids[i]);
    assert_true(after[0] - before[0] == 1);    /* offer -> paired */
    assert_true(after[1] - before[1] == 1);    /* offer -> plain (plain -> plain: no count) */
    assert_true(after[2] - before[2] == 2);    /* pending -> paired */
    assert_true(after[3] - before[3] == 1);    /* pending -> plain */
    assert_true(after[4] - before[4] == 4);    /* paired -> plain */
    assert_true(after[5] == before[5]);        /* nothing refused */
    assert_true(after[6] - before[6] == 1);    /* defer -> pending */
    assert_true(after[7] - before[7] == 1);    /* defer -> plain */
}

/* c in state from, by allowed changes */
static void reach(lp_conn_t *c, int from)
{
    if (from == LP_PLAIN)
        assert_int_equal(lp_state_set(c, LP_OFFER), 0);
    if (from)
        assert_int_equal(lp_state_set(c, from), 0);
}

/* from -> to must be refused: the state stays from.  (A checked build
 * aborts: then the change is made in a child, which must die of SIGABRT.) */
static void refused(int from, int to)
{
#ifdef ZC_CHECKS
    pid_t pid = fork();
    int st;

    assert_true(pid >= 0);
    if (pid == 0) {
        lp_conn_t *c = fresh();

        reach(c, from);
        lp_state_set(c, to);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
#else
    lp_conn_t *c = fresh();
    uint64_t n = zc_stat_read(ZC_STAT_LOCAL_STATE_REFUSED);

    reach(c, from);
    assert_int_equal(lp_state_set(c, to), -1);
    assert_int_equal(c->state, from);
    assert_true(zc_stat_read(ZC_STAT_LOCAL_STATE_REFUSED) == n + 1);
#endif
}

static void t_refused(void **state)
{
    (void)state;
    refused(0, LP_PLAIN);               /* made plain: there is no object for that */
    refused(LP_PLAIN, LP_PAIRED);       /* plain is final: never the ring again */
    refused(LP_PLAIN, LP_PENDING);
    refused(LP_PLAIN, LP_OFFER);
    refused(LP_PAIRED, LP_PENDING);
    refused(LP_PAIRED, LP_OFFER);
    refused(LP_PAIRED, LP_PAIRED);
    refused(LP_PENDING, LP_OFFER);
    refused(LP_OFFER, LP_PENDING);
    refused(LP_DEFER, LP_PAIRED);       /* an offer only to an announced client */
    refused(LP_DEFER, LP_OFFER);
    refused(LP_PENDING, LP_DEFER);
    refused(LP_PLAIN, LP_DEFER);
    refused(LP_OFFER, 0);
    refused(LP_OFFER, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_allowed),
        cmocka_unit_test(t_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
