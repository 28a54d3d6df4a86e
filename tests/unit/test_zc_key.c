/* Unit tests for common/zc_key.c: SipHash-2-4 against the reference
 * vectors, and the key file (made once, read back, refused when it is not
 * a private 16-byte file of this user). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zc_key.h"

/* The paper's vectors: key 00 01 .. 0f, message 00 01 .. (len-1). */
static void t_siphash_vectors(void **state)
{
    static const struct {
        size_t len;
        uint64_t out;
    } v[] = {
        { 0, 0x726fdb47dd0e0e31ull },
        { 1, 0x74f839c593dc67fdull },
        { 7, 0xab0200f58b01d137ull },
        { 8, 0x93f5f5799a932462ull },
        { 15, 0xa129ca6149be45e5ull },
        { 63, 0x958a324ceb064572ull },
    };
    uint8_t k[ZC_KEY_LEN], m[64];

    (void)state;
    for (int i = 0; i < ZC_KEY_LEN; i++)
        k[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        m[i] = (uint8_t)i;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        assert_true(zc_siphash(k, m, v[i].len) == v[i].out);
}

/* The pid permutation: its inverse undoes it, it moves pids, and another
 * key gives other names. */
static void t_pid_names(void **state)
{
    uint8_t k[ZC_KEY_LEN], k2[ZC_KEY_LEN];
    int moved = 0, differ = 0;

    (void)state;
    for (int i = 0; i < ZC_KEY_LEN; i++)
        k[i] = (uint8_t)(i * 7 + 1), k2[i] = (uint8_t)(i * 7 + 2);
    for (uint32_t pid = 1; pid < 4194304; pid += 997) {
        uint32_t h = zc_key_hide(k, pid);

        assert_true(zc_key_show(k, h) == pid);
        moved += h != pid;
        differ += zc_key_hide(k2, pid) != h;
    }
    assert_true(moved > 4000 && differ > 4000);
    assert_true(zc_key_show(k, zc_key_hide(k, 0xffffffffu)) == 0xffffffffu);
}

static char dir[64];

static int mkdir_tmp(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/zc_key.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int rm_tmp(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *p, size_t n, const char *name)
{
    snprintf(p, n, "%s/%s", dir, name);
}

static void t_made_once(void **state)
{
    uint8_t a[ZC_KEY_LEN], b[ZC_KEY_LEN], zero[ZC_KEY_LEN] = { 0 };
    char p[128];
    struct stat st;

    (void)state;
    assert_int_equal(zc_key_load(dir, a), 0);
    path_of(p, sizeof(p), ZC_KEY_FILE);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, ZC_KEY_LEN);
    assert_memory_not_equal(a, zero, ZC_KEY_LEN);
    assert_int_equal(zc_key_load(dir, b), 0);   /* read back, not made again */
    assert_memory_equal(a, b, ZC_KEY_LEN);
}

/* Eight processes racing to make it agree on one key. */
static void t_race(void **state)
{
    uint8_t mine[ZC_KEY_LEN];
    int pipes[8][2];

    (void)state;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(pipe(pipes[i]), 0);
        if (fork() == 0) {
            uint8_t k[ZC_KEY_LEN];
            int rc = zc_key_load(dir, k);

            _exit(rc == 0 && write(pipes[i][1], k, sizeof(k)) == sizeof(k) ? 0 : 1);
        }
    }
    for (int i = 0; i < 8; i++) {
        int st;

        assert_true(wait(&st) > 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_int_equal(zc_key_load(dir, mine), 0);
    for (int i = 0; i < 8; i++) {
        uint8_t k[ZC_KEY_LEN];

        assert_int_equal(read(pipes[i][0], k, sizeof(k)), sizeof(k));
        assert_memory_equal(k, mine, ZC_KEY_LEN);
        close(pipes[i][0]);
        close(pipes[i][1]);
    }
}

/* What is there and is not a private 16-byte file of ours is refused, and
 * left as it is. */
static void t_refused(void **state)
{
    uint8_t k[ZC_KEY_LEN];
    char p[128], q[128];
    int fd;

    (void)state;
    path_of(p, sizeof(p), ZC_KEY_FILE);
    fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);    /* readable by others */
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789abcdef", 16), 16);
    close(fd);
    assert_int_equal(zc_key_load(dir, k), -EPERM);
    assert_int_equal(chmod(p, 0600), 0);
    assert_int_equal(zc_key_load(dir, k), 0);
    assert_memory_equal(k, "0123456789abcdef", 16);
    assert_int_equal(truncate(p, 8), 0);                /* short */
    assert_int_equal(zc_key_load(dir, k), -EPERM);
    assert_int_equal(unlink(p), 0);
    path_of(q, sizeof(q), "elsewhere");                 /* a link */
    fd = open(q, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789abcdef", 16), 16);
    close(fd);
    assert_int_equal(symlink(q, p), 0);
    assert_int_equal(zc_key_load(dir, k), -EPERM);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(mkdir(p, 0700), 0);                /* a directory */
    assert_int_equal(zc_key_load(dir, k), -EPERM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_siphash_vectors),
        cmocka_unit_test(t_pid_names),
        cmocka_unit_test_setup_teardown(t_made_once, mkdir_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(t_race, mkdir_tmp, rm_tmp),
        cmocka_unit_test_setup_teardown(t_refused, mkdir_tmp, rm_tmp),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
