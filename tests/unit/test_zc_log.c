/* Unit tests for common/zc_log.c: the formatter and the output target. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "zc_log.h"

static void t_fmt_conversions(void **state)
{
    char buf[256];
    size_t n;

    (void)state;
    n = zc_fmt(buf, sizeof(buf), "%s|%d|%i|%u|%x|%c|%%|%ld|%lu|%lld|%llu|%zu|%zd",
               "str", -42, 7, 4000000000u, 0xbeefu, 'z', -1L, 123456789012UL,
               (long long)INT64_MIN, (unsigned long long)UINT64_MAX, (size_t)99, (ssize_t)-5);
    assert_string_equal(buf, "str|-42|7|4000000000|beef|z|%|-1|123456789012|"
                             "-9223372036854775808|18446744073709551615|99|-5");
    assert_int_equal(n, strlen(buf));
}

static void t_fmt_pointer_null_and_unknown(void **state)
{
    char buf[64];

    (void)state;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat"
#pragma GCC diagnostic ignored "-Wformat-extra-args"
    zc_fmt(buf, sizeof(buf), "%p %s %q", (void *)0x1234, (char *)NULL);
#pragma GCC diagnostic pop
    assert_string_equal(buf, "0x1234 (null) %q");
}

static void t_fmt_errno(void **state)
{
    char buf[128];

    (void)state;
    errno = ENOENT;
    zc_fmt(buf, sizeof(buf), "open: %m");
    assert_string_equal(buf, "open: No such file or directory");
    assert_int_equal(errno, ENOENT);
}

static void t_fmt_truncates(void **state)
{
    char buf[8];
    size_t n;

    (void)state;
    n = zc_fmt(buf, sizeof(buf), "%s", "0123456789");
    assert_int_equal(n, 7);
    assert_string_equal(buf, "0123456");
    n = zc_fmt(buf, 1, "abc");
    assert_int_equal(n, 0);
    assert_string_equal(buf, "");
}

static void t_log_to_file_with_pid(void **state)
{
    char tmpl[] = "/tmp/zc_log_test_XXXXXX", path[128], expect[64], got[256];
    int fd;
    ssize_t n;

    (void)state;
    assert_non_null(mkdtemp(tmpl));
    snprintf(path, sizeof(path), "%s/log.%%p", tmpl);
    zc_log_target_set(path);
    zc_log_level_set(ZC_LOG_NOTICE);
    zc_log(ZC_LOG_NOTICE, "hello %d", 5);
    zc_log(ZC_LOG_TRACE, "dropped");
    zc_log_target_set(NULL);
    snprintf(path, sizeof(path), "%s/log.%d", tmpl, (int)getpid());
    fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    n = read(fd, got, sizeof(got) - 1);
    close(fd);
    assert_true(n > 0);
    got[n] = '\0';
    snprintf(expect, sizeof(expect), "zcsock[%d]: hello 5\n", (int)getpid());
    assert_string_equal(got, expect);
    unlink(path);
    rmdir(tmpl);
}

static int t_fd2_is_socket(int fd)
{
    return fd == 2;
}

static void t_stderr_guard_drops(void **state)
{
    int pipefd[2], saved;
    char c;

    (void)state;
    assert_int_equal(pipe2(pipefd, O_NONBLOCK), 0);
    saved = dup(2);
    dup2(pipefd[1], 2);
    zc_log_stderr_guard_set(t_fd2_is_socket);
    zc_log(ZC_LOG_WARN, "must not appear");
    zc_log_stderr_guard_set(NULL);
    dup2(saved, 2);
    close(saved);
    assert_int_equal(read(pipefd[0], &c, 1), -1);
    assert_int_equal(errno, EAGAIN);
    close(pipefd[0]);
    close(pipefd[1]);
}

static void t_log_once(void **state)
{
    int pipefd[2], saved, i;
    char buf[512];
    ssize_t n;

    (void)state;
    assert_int_equal(pipe(pipefd), 0);
    saved = dup(2);
    dup2(pipefd[1], 2);
    zc_log_level_set(ZC_LOG_WARN);
    for (i = 0; i < 3; i++)
        ZC_LOG_ONCE(ZC_LOG_WARN, "once %d", i);
    dup2(saved, 2);
    close(saved);
    close(pipefd[1]);
    n = read(pipefd[0], buf, sizeof(buf) - 1);
    close(pipefd[0]);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "once 0\n"));
    assert_null(strstr(buf, "once 1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_fmt_conversions),
        cmocka_unit_test(t_fmt_pointer_null_and_unknown),
        cmocka_unit_test(t_fmt_errno),
        cmocka_unit_test(t_fmt_truncates),
        cmocka_unit_test(t_log_to_file_with_pid),
        cmocka_unit_test(t_stderr_guard_drops),
        cmocka_unit_test(t_log_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
