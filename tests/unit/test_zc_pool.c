/* Unit tests for common/zc_pool.c: classes, zeroing, reuse, large blocks,
 * threads, fork. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "zc_pool.h"

static void t_alloc_zeroed_aligned_reused(void **state)
{
    unsigned char *a, *b;
    size_t i;

    (void)state;
    a = zc_pool_alloc(100);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 16, 0);
    for (i = 0; i < 128; i++)
        assert_int_equal(a[i], 0);
    memset(a, 0xff, 128);            /* the whole 128-byte class is usable */
    zc_pool_free(a, 100);
    b = zc_pool_alloc(120);
    assert_ptr_equal(a, b);          /* same class: recycled */
    for (i = 0; i < 120; i++)
        assert_int_equal(b[i], 0);   /* and zeroed again, as far as asked */
    zc_pool_free(b, 120);
    assert_non_null(zc_pool_alloc(0));
}

static void t_large_blocks(void **state)
{
    size_t n = (1u << 16) + 1;
    unsigned char *p = zc_pool_alloc(n);

    (void)state;
    assert_non_null(p);
    assert_int_equal(p[n - 1], 0);
    memset(p, 1, n);
    zc_pool_free(p, n);
    zc_pool_free(NULL, 10);
}

#define T_THREADS 4
#define T_ITERS 20000

static void *t_worker(void *arg)
{
    void *held[16] = { 0 };
    size_t sizes[16] = { 0 };
    unsigned seed = (unsigned)(uintptr_t)arg, i;

    for (i = 0; i < T_ITERS; i++) {
        unsigned k = (seed = seed * 1103515245u + 12345u) % 16;

        if (held[k]) {
            unsigned char *p = held[k];
            if (p[0] != (unsigned char)k || p[sizes[k] - 1] != (unsigned char)k)
                return (void *)1;   /* someone else scribbled on our block */
            zc_pool_free(held[k], sizes[k]);
            held[k] = NULL;
        } else {
            sizes[k] = 16 + (seed >> 8) % 5000;
            held[k] = zc_pool_alloc(sizes[k]);
            if (!held[k])
                return (void *)1;
            memset(held[k], (int)k, sizes[k]);
        }
    }
    for (i = 0; i < 16; i++)
        zc_pool_free(held[i], sizes[i]);
    return NULL;
}

static void t_threads(void **state)
{
    pthread_t th[T_THREADS];
    void *ret;
    int i;

    (void)state;
    for (i = 0; i < T_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, t_worker, (void *)(uintptr_t)(i + 1)), 0);
    for (i = 0; i < T_THREADS; i++) {
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
}

static void t_fork(void **state)
{
    pid_t pid;
    int status;

    (void)state;
    zc_pool_fork_prepare();
    pid = fork();
    if (pid == 0) {
        zc_pool_fork_child();
        _exit(zc_pool_alloc(64) ? 0 : 1);
    }
    zc_pool_fork_parent();
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_non_null(zc_pool_alloc(64));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_alloc_zeroed_aligned_reused),
        cmocka_unit_test(t_large_blocks),
        cmocka_unit_test(t_threads),
        cmocka_unit_test(t_fork),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
