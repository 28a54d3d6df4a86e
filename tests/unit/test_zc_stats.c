/* Unit tests for common/zc_stats.c: counters, sources, lookup, report. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <cmocka.h>

#include "zc_stats.h"

static const char *const t_src_names[] = { "t.alpha", "t.beta" };
static uint64_t t_src_values[2] = { 11, 0 };

static void t_src_visit(void *arg, zc_stats_emit_func_t emit, void *ctx)
{
    uint64_t *v = arg;
    unsigned i;

    for (i = 0; i < 2; i++)
        emit(ctx, t_src_names[i], v[i]);
}

static const zc_stats_source_t t_src = { t_src_visit, t_src_values };

static void t_add_and_get(void **state)
{
    uint64_t v = 99;

    (void)state;
    zc_stats_reset();
    zc_stat_add(ZC_STAT_COPY_SEND_BYTES, 100);
    zc_stat_add(ZC_STAT_COPY_SEND_BYTES, 23);
    assert_int_equal(zc_stats_get("path.copy.send_bytes", &v), 0);
    assert_int_equal(v, 123);
    assert_int_equal(zc_stats_get("calls.recvmmsg", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(zc_stats_get("no.such.key", &v), -ENOENT);
}

static void t_sources(void **state)
{
    uint64_t v = 0;

    (void)state;
    assert_int_equal(zc_stats_source_add(&t_src), 0);
    assert_int_equal(zc_stats_get("t.alpha", &v), 0);
    assert_int_equal(v, 11);
    t_src_values[1] = 7;
    assert_int_equal(zc_stats_get("t.beta", &v), 0);
    assert_int_equal(v, 7);
}

static void t_report_format(void **state)
{
    char buf[8192];
    size_t n;

    (void)state;
    zc_stats_reset();
    zc_stat_add(ZC_STAT_CALLS_send, 3);
    zc_stat_add(ZC_STAT_SOCKETS_CREATED, 1);
    n = zc_stats_format(buf, sizeof(buf), "exit", 0);
    assert_int_equal(n, strlen(buf));
    assert_true(strncmp(buf, "# zcsock ", 9) == 0);
    assert_non_null(strstr(buf, " at=exit\n"));
    assert_non_null(strstr(buf, "\n# sockets\nsockets.created: 1\n"));   /* grouped */
    assert_non_null(strstr(buf, "\n# calls\n"));
    assert_true(strstr(buf, "\ncalls.send: 3\n") > strstr(buf, "\n# calls\n"));
    assert_null(strstr(buf, "path.copy.recv_bytes"));              /* zeros hidden */
    assert_null(strstr(buf, "# path\n"));                          /* and empty groups */
    assert_null(strstr(buf, "calls.recv:"));
    n = zc_stats_format(buf, sizeof(buf), "exit", 1);
    assert_non_null(strstr(buf, "\npath.copy.recv_bytes: 0\n"));   /* zeros when asked */
    assert_non_null(strstr(buf, "\ncalls.recv: 0\n"));
    assert_non_null(strstr(buf, "\nt.alpha: 11\n"));
    t_src_values[1] = 0;
    n = zc_stats_format(buf, sizeof(buf), "exit", 0);
    assert_null(strstr(buf, "t.beta"));                           /* zero module counter hidden */
    assert_int_equal(zc_stats_any_socket_activity(), 1);
    zc_stats_reset();
    assert_int_equal(zc_stats_any_socket_activity(), 0);
}

static void t_report_truncates_safely(void **state)
{
    char buf[40];
    size_t n;

    (void)state;
    n = zc_stats_format(buf, sizeof(buf), "exit", 0);
    assert_true(n < sizeof(buf));
    assert_int_equal(strlen(buf), n);
}

#define T_THREADS 4
#define T_ADDS 100000

static void *t_adder(void *arg)
{
    int i;

    (void)arg;
    for (i = 0; i < T_ADDS; i++)
        zc_stat_add(ZC_STAT_COPY_RECV_CALLS, 1);
    return NULL;
}

static void t_threads_lose_nothing(void **state)
{
    pthread_t th[T_THREADS];
    uint64_t v;
    int i;

    (void)state;
    zc_stats_reset();
    for (i = 0; i < T_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, t_adder, NULL), 0);
    for (i = 0; i < T_THREADS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(zc_stats_get("path.copy.recv_calls", &v), 0);
    assert_int_equal(v, (uint64_t)T_THREADS * T_ADDS);
}

/* More threads than per-thread blocks: the rest share atomic counters, and
 * nothing is lost either way. */
#define T_MANY 300

static void *t_one_add(void *arg)
{
    (void)arg;
    zc_stat_add(ZC_STAT_PROC_FORKS, 1);
    zc_stat_add(ZC_STAT_PROC_FORKS, 2);
    return NULL;
}

static void t_more_threads_than_blocks(void **state)
{
    pthread_t th;
    uint64_t v;
    int i;

    (void)state;
    zc_stats_reset();
    for (i = 0; i < T_MANY; i++) {
        assert_int_equal(pthread_create(&th, NULL, t_one_add, NULL), 0);
        pthread_join(th, NULL);
    }
    assert_int_equal(zc_stats_get("proc.forks", &v), 0);
    assert_int_equal(v, 3 * T_MANY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_add_and_get),
        cmocka_unit_test(t_sources),
        cmocka_unit_test(t_report_format),
        cmocka_unit_test(t_report_truncates_safely),
        cmocka_unit_test(t_threads_lose_nothing),
        cmocka_unit_test(t_more_threads_than_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
