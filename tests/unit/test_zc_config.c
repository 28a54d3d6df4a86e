/* Unit tests for common/zc_config.c: parsing, bounds, warnings, visiting. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "zc_config.h"

static int t_warnings;
static char t_last_warning[512];

static void t_report(const char *msg)
{
    t_warnings++;
    strncpy(t_last_warning, msg, sizeof(t_last_warning) - 1);
}

static int t_setup(void **state)
{
    (void)state;
    zc_config_reset();
    t_warnings = 0;
    t_last_warning[0] = '\0';
    return 0;
}

static void t_defaults(void **state)
{
    (void)state;
    assert_int_equal(zc_config.debug, 0);
    assert_int_equal(zc_config.stats, 0);
    assert_int_equal(zc_config.verbose, 0);
    assert_string_equal(zc_config.log_file, "");
}

static void t_load_valid(void **state)
{
    char *env[] = { "PATH=/bin", "ZCSOCK_STATS=2", "ZCSOCK_VERBOSE=yes",
                    "ZCSOCK_LOG_FILE=/tmp/x.%p", "ZCSOCK_DEBUG=1", NULL };

    (void)state;
    assert_int_equal(zc_config_load(env, t_report), 0);
    assert_int_equal(t_warnings, 0);
    assert_int_equal(zc_config.stats, 2);
    assert_int_equal(zc_config.verbose, 1);
    assert_int_equal(zc_config.debug, 1);
    assert_string_equal(zc_config.log_file, "/tmp/x.%p");
}

static void t_invalid_keeps_default(void **state)
{
    char *env[] = { "ZCSOCK_STATS=4", "ZCSOCK_DEBUG=abc", "ZCSOCK_VERBOSE=maybe",
                    "ZCSOCK_DEBUG=", "ZCSOCK_STATS=-1", NULL };

    (void)state;
    assert_int_equal(zc_config_load(env, t_report), 5);
    assert_int_equal(t_warnings, 5);
    assert_int_equal(zc_config.stats, 0);
    assert_int_equal(zc_config.debug, 0);
    assert_int_equal(zc_config.verbose, 0);
    assert_non_null(strstr(t_last_warning, "ZCSOCK_STATS=-1"));
    assert_non_null(strstr(t_last_warning, "0..3"));
}

static void t_unknown_variable_warns(void **state)
{
    char *env[] = { "ZCSOCK_STAT=1", "ZCSOCKX=1", "XZCSOCK_STATS=1", NULL };

    (void)state;
    assert_int_equal(zc_config_load(env, t_report), 1);
    assert_non_null(strstr(t_last_warning, "unknown variable ZCSOCK_STAT=1"));
    assert_int_equal(zc_config.stats, 0);
}

static void t_set_api(void **state)
{
    (void)state;
    assert_int_equal(zc_config_set("ZCSOCK_STATS", "1"), 0);
    assert_int_equal(zc_config.stats, 1);
    assert_int_equal(zc_config_set("ZCSOCK_STATS", "99999999999999999999999"), -EINVAL);
    assert_int_equal(zc_config.stats, 1);
    assert_int_equal(zc_config_set("ZCSOCK_NOPE", "1"), -ENOENT);
    assert_int_equal(zc_config_set("OTHER", "1"), -ENOENT);
    assert_int_equal(zc_config_set("zcsock_stats", "1"), -ENOENT);
}

static void t_long_path_rejected(void **state)
{
    static char env0[PATH_MAX + 64];
    char *env[] = { env0, NULL };

    (void)state;
    strcpy(env0, "ZCSOCK_LOG_FILE=");
    memset(env0 + strlen(env0), 'a', PATH_MAX + 10);
    assert_int_equal(zc_config_load(env, t_report), 1);
    assert_string_equal(zc_config.log_file, "");
}

typedef struct {
    int count, stats_seen, from_env;
} t_visit_t;

static void t_visit(void *arg, const char *name, const char *value, int from_env, const char *doc)
{
    t_visit_t *v = arg;

    v->count++;
    assert_non_null(doc);
    assert_true(strncmp(name, "ZCSOCK_", 7) == 0);
    if (!strcmp(name, "ZCSOCK_STATS")) {
        v->stats_seen = 1;
        v->from_env = from_env;
        assert_string_equal(value, "1");
    }
}

static void t_visit_all(void **state)
{
    char *env[] = { "ZCSOCK_STATS=1", NULL };
    t_visit_t v = { 0, 0, 0 };

    (void)state;
    zc_config_load(env, t_report);
    zc_config_visit(t_visit, &v);
    assert_true(v.count >= 5);
    assert_true(v.stats_seen);
    assert_true(v.from_env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(t_defaults, t_setup),
        cmocka_unit_test_setup(t_load_valid, t_setup),
        cmocka_unit_test_setup(t_invalid_keeps_default, t_setup),
        cmocka_unit_test_setup(t_unknown_variable_warns, t_setup),
        cmocka_unit_test_setup(t_set_api, t_setup),
        cmocka_unit_test_setup(t_long_path_rejected, t_setup),
        cmocka_unit_test_setup(t_visit_all, t_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
