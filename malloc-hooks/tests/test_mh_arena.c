/* Unit tests: size classes, memfd arenas, block pool, region lookup, fork
 * copies.  Linked directly with mh_arena.o (no exported hooks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mh_int.h"
#include "zc_real.h"

mh_state_t mh_g = { .alloc_min = SIZE_MAX, .huge_min = SIZE_MAX, .reason = "" };
__thread int mh_tls_guard;

static int t_setup(void **state)
{
    mh_arena_cfg_t cfg = { 0 };

    (void)state;
    assert_int_equal(zc_real_resolve(NULL), 0);
    mh_arena_reset_for_test();
    assert_int_equal(mh_arena_setup(&cfg), 0);
    return 0;
}

/* Exchange units exist only in arenas of 2 MiB pages: arenas configured
 * for shmem THP (on 4 KiB pages, as here when THP is off, their states and
 * mappings behave the same). */
static int t_setup_thp(void **state)
{
    mh_arena_cfg_t cfg = { .thp = 1 };

    (void)state;
    assert_int_equal(zc_real_resolve(NULL), 0);
    mh_arena_reset_for_test();
    assert_int_equal(mh_arena_setup(&cfg), 0);
    return 0;
}

static void t_class_roundtrip(void **state)
{
    (void)state;
    for (size_t u = 1; u <= 70000; u++) {
        unsigned c = mh_class_of(u);
        size_t cu = mh_class_units(c);

        assert_true(c < MH_CLASS_MAX);
        assert_true(cu >= u);
        assert_true(c == 0 || mh_class_units(c - 1) < u);
        assert_true(cu - u <= u / 8 + 1);       /* waste at most 12.5 % */
        assert_int_equal(mh_class_of(cu), c);
    }
}

static void t_alloc_aligned_and_sized(void **state)
{
    int dirty = -1, n0 = mh_arena_count();
    char *p = mh_arena_alloc(200000, 0, &dirty);
    mh_arena_t *a;

    (void)state;
    assert_int_equal(n0, 0);        /* set-up makes no arena (no memfd) */
    assert_int_equal(mh_arena_count(), 1);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % MH_PAGE, 0);
    assert_int_equal(dirty, 0);
    a = mh_arena_find(p);
    assert_non_null(a);
    assert_true(mh_arena_block_size(a, p) >= 200000);
    assert_int_equal(mh_arena_block_size(a, p + MH_PAGE), 0);   /* interior */
    memset(p, 0x5a, 200000);
    assert_true(mh_arena_free(a, p) >= 200000);
    assert_int_equal(mh_arena_free(a, p), 0);                   /* double free */
    assert_null(mh_arena_find((char *)&dirty));
}

static void t_pool_recycles_dirty(void **state)
{
    int dirty;
    char *p = mh_arena_alloc(300000, 0, &dirty), *q;
    char *spacer = mh_arena_alloc(4096, 0, &dirty);
    mh_stats_t st = { 0 };

    (void)state;
    p[0] = 1;
    mh_arena_free(mh_arena_find(p), p);
    q = mh_arena_alloc(295000, 0, &dirty);      /* same class (80 pages) */
    assert_ptr_equal(p, q);
    assert_int_equal(dirty, 1);
    assert_int_equal(q[0], 1);
    mh_arena_stats(&st);
    assert_int_equal(st.pool_hits, 1);
    assert_int_equal(st.placed_allocs, 3);
    mh_arena_free(mh_arena_find(q), q);
    mh_arena_free(mh_arena_find(spacer), spacer);
}

static void t_last_block_returns_to_bump(void **state)
{
    int dirty;
    char *p = mh_arena_alloc(64 * 1024, 0, &dirty), *q;

    (void)state;
    assert_int_equal(dirty, 0);
    p[5] = 9;
    mh_arena_free(mh_arena_find(p), p);
    q = mh_arena_alloc(1u << 20, 0, &dirty);    /* carved over p's pages */
    assert_ptr_equal(p, q);
    assert_int_equal(dirty, 1);                 /* calloc must zero it */
    mh_arena_free(mh_arena_find(q), q);
}

static void t_fit_reuses_larger_block(void **state)
{
    int dirty;
    char *big = mh_arena_alloc(300 * 1024, 0, &dirty);
    char *spacer = mh_arena_alloc(4096, 0, &dirty), *q;

    (void)state;
    mh_arena_free(mh_arena_find(big), big);
    q = mh_arena_alloc(200 * 1024, 0, &dirty);  /* within 2x: reused */
    assert_ptr_equal(q, big);
    assert_true(mh_arena_block_size(mh_arena_find(q), q) >= 300 * 1024);
    mh_arena_free(mh_arena_find(q), q);
    q = mh_arena_alloc(100 * 1024, 0, &dirty);  /* less than half: not */
    assert_ptr_not_equal(q, big);
    mh_arena_free(mh_arena_find(q), q);
    mh_arena_free(mh_arena_find(spacer), spacer);
}

static void t_huge_blocks(void **state)
{
    int dirty;
    char *p = mh_arena_alloc(3u << 20, 1, &dirty), *q;
    mh_arena_t *a;

    (void)state;
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % MH_HUGE, 0);
    a = mh_arena_find(p);
    assert_true(a->huge);
    assert_int_equal(mh_arena_block_size(a, p), 4u << 20);
    q = mh_arena_alloc(1, 1, &dirty);
    assert_int_equal((uintptr_t)q % MH_HUGE, 0);
    assert_int_equal(mh_arena_count(), 1);      /* the huge arena only */
    mh_arena_free(a, p);
    mh_arena_free(mh_arena_find(q), q);
}

static long t_free_hugepages(void)
{
    char buf[32] = "";
    FILE *f = fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "r");

    if (!f)
        return 0;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = 0;
    fclose(f);
    return atol(buf);
}

/* Runs only when the hugetlb pool has free pages (skipped otherwise). */
static void t_hugetlb_block(void **state)
{
    mh_arena_cfg_t cfg = { 0 };
    int dirty, fd, huge = 0;
    uint64_t off;
    char *p;
    mh_arena_t *a;

    (void)state;
    cfg.hugetlb_free = t_free_hugepages();
    if (cfg.hugetlb_free < 4) {
        print_message("skip: fewer than 4 free hugetlb pages (vm.nr_hugepages)\n");
        skip();
    }
    mh_arena_reset_for_test();
    assert_int_equal(mh_arena_setup(&cfg), 0);
    p = mh_arena_alloc(3u << 20, 1, &dirty);
    assert_non_null(p);
    a = mh_arena_find(p);
    assert_true(a->hugetlb);
    assert_true(a->size <= (size_t)cfg.hugetlb_free / 2 * MH_HUGE);
    memset(p, 3, 3u << 20);
    assert_int_equal(mh_region_lookup(p, 3u << 20, &fd, &off, &huge), 1);
    assert_int_equal(huge, 1);
    assert_int_equal(off % MH_HUGE, 0);
    mh_arena_free(a, p);
    mh_arena_reset_for_test();
}

static void t_region_lookup_memfd(void **state)
{
    int dirty, fd = -1, huge = -1;
    uint64_t off = 0;
    char *p = mh_arena_alloc(64 * 1024, 0, &dirty), buf[16];

    (void)state;
    memcpy(p + 100, "exchangeable", 12);
    assert_int_equal(mh_region_lookup(p, 64 * 1024, &fd, &off, &huge), 1);
    assert_int_equal(huge, 0);
    assert_true(mh_fd_is_internal(fd));
    assert_false(mh_fd_is_internal(0));
    assert_int_equal(pread(fd, buf, 12, (off_t)off + 100), 12);
    assert_memory_equal(buf, "exchangeable", 12);
    assert_int_equal(mh_region_lookup(buf, 1, &fd, &off, NULL), 0);
    mh_arena_free(mh_arena_find(p), p);
}

static void t_pool_cap_releases(void **state)
{
    int dirty;
    size_t n = 100u << 20;
    char *b[3], *spacer;
    mh_stats_t st;

    (void)state;
    for (int i = 0; i < 3; i++) {
        b[i] = mh_arena_alloc(n, 0, &dirty);
        assert_non_null(b[i]);
        b[i][0] = 7;
    }
    spacer = mh_arena_alloc(4096, 0, &dirty);
    for (int i = 0; i < 3; i++)
        mh_arena_free(mh_arena_find(b[i]), b[i]);
    mh_arena_stats(&st);
    assert_true(st.pool_bytes <= MH_POOL_CAP);
    /* the third went over the cap: released, so it comes back clean */
    b[2] = mh_arena_alloc(n, 0, &dirty);
    assert_int_equal(dirty, 0);
    assert_int_equal(b[2][0], 0);
    b[1] = mh_arena_alloc(n, 0, &dirty);
    assert_int_equal(dirty, 1);
    b[0] = mh_arena_alloc(n, 0, &dirty);
    mh_arena_stats(&st);
    assert_int_equal(st.pool_bytes, 0);
    for (int i = 0; i < 3; i++)
        mh_arena_free(mh_arena_find(b[i]), b[i]);
    mh_arena_free(mh_arena_find(spacer), spacer);
}

static void t_grow_last_block_in_place(void **state)
{
    int dirty;
    char *p = mh_arena_alloc(128 * 1024, 0, &dirty), *q;
    mh_arena_t *a = mh_arena_find(p);

    (void)state;
    p[0] = 42;
    assert_true(mh_arena_grow(a, p, 1u << 20) >= 1u << 20);
    assert_int_equal(mh_arena_block_size(a, p), 1u << 20);
    assert_int_equal(p[0], 42);
    p[(1u << 20) - 1] = 1;
    q = mh_arena_alloc(128 * 1024, 0, &dirty);         /* now p is not last */
    assert_int_equal(mh_arena_grow(a, p, 2u << 20), 0);
    assert_int_equal(mh_arena_grow(a, q + MH_PAGE, 2u << 20), 0);   /* interior */
    assert_true(mh_arena_free(a, p) >= 1u << 20);
    assert_int_equal(mh_arena_grow(a, p, 2u << 20), 0);            /* freed */
    mh_arena_free(a, q);
}

static void t_threads_alloc_free(void **state);

static void *t_worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    char *held[8] = { 0 };

    for (int i = 0; i < 2000; i++) {
        int k = (int)(rand_r(&seed) % 8), dirty;

        if (held[k]) {
            assert_int_equal(held[k][0], (char)k);
            mh_arena_free(mh_arena_find(held[k]), held[k]);
            held[k] = NULL;
        } else {
            held[k] = mh_arena_alloc(MH_PAGE * (1 + rand_r(&seed) % 64), 0, &dirty);
            held[k][0] = (char)k;
        }
    }
    for (int k = 0; k < 8; k++)
        if (held[k])
            mh_arena_free(mh_arena_find(held[k]), held[k]);
    return NULL;
}

static void t_threads_alloc_free(void **state)
{
    pthread_t th[4];

    (void)state;
    for (uintptr_t i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, t_worker, (void *)(i + 1));
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
}

static void t_fork_child_gets_private_copy(void **state)
{
    int dirty, st, fd_parent, fd_child;
    uint64_t off;
    char *p = mh_arena_alloc(1u << 20, 0, &dirty);
    pid_t pid;

    (void)state;
    memset(p, 'P', 1u << 20);
    mh_region_lookup(p, 1, &fd_parent, &off, NULL);
    mh_arena_fork_prepare();
    pid = fork();
    if (pid == 0) {
        mh_arena_fork_child();
        mh_region_lookup(p, 1, &fd_child, &off, NULL);
        if (p[0] != 'P' || p[(1u << 20) - 1] != 'P' || fd_child == fd_parent + 1000)
            _exit(1);
        memset(p, 'C', 1u << 20);     /* must not reach the parent */
        _exit(0);
    }
    mh_arena_fork_parent();
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(p[0], 'P');
    assert_int_equal(p[12345], 'P');
    mh_arena_free(mh_arena_find(p), p);
}

/* After a fork the parent's arena with live blocks is a private
 * generation: not exchangeable, no new blocks; its last free reclaims it. */
static void t_fork_private_generation(void **state)
{
    int dirty, fd, st;
    uint64_t off;
    char *p = mh_arena_alloc(256 * 1024, 0, &dirty), *q;
    mh_arena_t *a = mh_arena_find(p);
    pid_t pid;

    (void)state;
    memset(p, 'x', 256 * 1024);
    assert_int_equal(mh_region_lookup(p, 1, &fd, &off, NULL), 1);
    mh_arena_fork_prepare();
    pid = fork();
    if (pid == 0) {
        mh_arena_fork_child();
        q = mh_arena_alloc(256 * 1024, 0, &dirty);
        _exit(p[100] == 'x' && q && mh_arena_find(q) != a ? 0 : 1);
    }
    mh_arena_fork_parent();
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(a->priv);
    assert_int_equal(mh_region_lookup(p, 1, &fd, &off, NULL), 0);
    assert_int_equal(p[1000], 'x');
    p[1000] = 'y';                                  /* private copy now */
    q = mh_arena_alloc(256 * 1024, 0, &dirty);
    assert_ptr_not_equal(mh_arena_find(q), a);      /* new blocks: new arena */
    assert_int_equal(mh_region_lookup(q, 1, &fd, &off, NULL), 1);
    assert_true(mh_arena_free(a, p) > 0);           /* last block: reclaimed */
    assert_false(a->priv);
    assert_int_equal(a->used, 0);
    mh_arena_free(mh_arena_find(q), q);
}

/* The file bytes behind arena address q (what a peer would map). */
static char t_file_byte(mh_arena_t *a, const char *q)
{
    char c = 0;

    assert_int_equal(pread(a->fd, &c, 1, q - a->base), 1);
    return c;
}

/* Exchange units: freeze (copy-on-write over the memfd), a foreign mapping,
 * zeroing by madvise, fork, and the memfd coming back at free. */
static void t_units(void **state)
{
    int dirty, st, xfd = memfd_create("t-xu", 0);
    size_t U = MH_UNIT_SIZE;
    char *p = mh_arena_alloc(3 * U, 1, &dirty), *q;
    mh_arena_t *a = mh_arena_find(p);
    mh_stats_t s0, s1;
    pid_t pid;

    (void)state;
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % U, 0);
    memset(p, 'a', 3 * U);
    assert_int_equal(mh_unit_state(p), MH_UNIT_SHARED);
    assert_int_equal(mh_unit_state(p + 3 * U), -1);            /* past the block */
    assert_int_equal(mh_unit_freeze(p + 4096), -EINVAL);        /* not a unit start */
    assert_int_equal(mh_unit_freeze(p + U), 0);
    assert_int_equal(mh_unit_freeze(p + U), 0);                 /* idempotent */
    assert_int_equal(mh_unit_state(p + U), MH_UNIT_PRIV);
    assert_int_equal(a->ustates, 1);
    p[U + 10] = 'b';                                            /* copies on write */
    assert_int_equal(p[U + 10], 'b');
    assert_int_equal(t_file_byte(a, p + U + 10), 'a');          /* frozen bytes kept */
    p[10] = 'c';                                                /* shared unit: the file */
    assert_int_equal(t_file_byte(a, p + 10), 'c');

    /* a foreign unit: another file's bytes, private */
    assert_true(xfd >= 0);
    assert_int_equal(ftruncate(xfd, (off_t)U), 0);
    assert_int_equal(pwrite(xfd, "zz", 2, 0), 2);
    assert_int_equal(mh_unit_map(p + 2 * U, xfd), 0);
    assert_int_equal(mh_unit_state(p + 2 * U), MH_UNIT_FOREIGN);
    assert_int_equal(p[2 * U], 'z');
    assert_int_equal(p[2 * U + 5], 0);
    assert_int_equal(mh_unit_freeze(p + 2 * U), -EPERM);
    p[2 * U + 1] = 'w';
    assert_int_equal(pread(xfd, &st, 1, 1), 1);
    assert_int_equal((char)st, 'z');                            /* not written through */

    /* madvise(DONTNEED) zeroes the range whatever the unit's state */
    assert_int_equal(mh_arena_units_zero(a, p + U + 4096, 8192), 1);
    assert_int_equal(p[U + 4096], 0);
    assert_int_equal(p[U + 4096 + 8191], 0);
    assert_int_equal(p[U + 10], 'b');
    assert_int_equal(p[U + 4096 + 8192], 'a');
    assert_int_equal(mh_arena_units_zero(a, p + 2 * U, 4096), 1);
    assert_int_equal(p[2 * U], 0);
    assert_int_equal(p[2 * U + 4096], 0);                       /* the foreign file's zeros */
    p[2 * U + 1] = 'w';

    /* fork: frozen and foreign units keep their bytes on both sides */
    mh_arena_fork_prepare();
    pid = fork();
    if (pid == 0) {
        mh_arena_fork_child();
        _exit(p[U + 10] == 'b' && p[10] == 'c' && p[2 * U + 1] == 'w' ? 0 : 1);
    }
    mh_arena_fork_parent();
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(p[U + 10], 'b');
    assert_int_equal(p[2 * U + 1], 'w');
    assert_true(a->priv);
    assert_int_equal(mh_unit_freeze(p), -EINVAL);               /* private generation */
    assert_true(mh_arena_free(a, p) > 0);                       /* last block: reclaimed */
    assert_int_equal(a->ustates, 0);
    assert_false(a->priv);

    /* free in a shared arena maps the memfd back; counted */
    p = mh_arena_alloc(2 * U, 1, &dirty);
    a = mh_arena_find(p);
    mh_arena_stats(&s0);
    assert_int_equal(mh_unit_freeze(p), 0);
    assert_int_equal(mh_unit_map(p + U, xfd), 0);
    assert_int_equal(mh_unit_map(p + U, xfd), 0);               /* mapped over: one released */
    assert_int_equal(a->ustates, 2);
    q = mh_arena_alloc(U, 1, &dirty);                           /* keeps p off the bump end */
    assert_true(mh_arena_free(a, p) > 0);
    assert_int_equal(a->ustates, 0);
    mh_arena_stats(&s1);
    assert_int_equal(mh_unit_reclaim(p), -EINVAL);              /* freed: not a unit */
    assert_int_equal(s1.units[0] - s0.units[0], 1);             /* frozen */
    assert_int_equal(s1.units[1] - s0.units[1], 2);             /* mapped in */
    assert_int_equal(s1.units[2] - s0.units[2], 2);             /* released: over, free */
    assert_int_equal(s1.units[3] - s0.units[3], 1);             /* thawed */
    p = mh_arena_alloc(2 * U, 1, &dirty);                       /* the same block again */
    p[U + 7] = 'q';
    assert_int_equal(t_file_byte(a, p + U + 7), 'q');            /* shared again */

    /* reclaim: a foreign unit gets the memfd back; others are left alone */
    assert_int_equal(mh_unit_reclaim(p), 0);                    /* shared: nothing to do */
    assert_int_equal(mh_unit_freeze(p), 0);
    assert_int_equal(mh_unit_reclaim(p), 0);                    /* frozen: left alone */
    assert_int_equal(mh_unit_state(p), MH_UNIT_PRIV);
    assert_int_equal(mh_unit_map(p + U, xfd), 0);
    assert_int_equal(p[U], 'z');
    assert_int_equal(mh_unit_reclaim(p + U), 1);
    assert_int_equal(mh_unit_state(p + U), MH_UNIT_SHARED);
    assert_int_equal(p[U + 7], 'q');                            /* the memfd's bytes again */
    p[U + 8] = 'r';
    assert_int_equal(t_file_byte(a, p + U + 8), 'r');            /* written through */
    mh_arena_free(a, p);
    mh_arena_free(a, q);
    close(xfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_class_roundtrip),
        cmocka_unit_test_setup(t_alloc_aligned_and_sized, t_setup),
        cmocka_unit_test_setup(t_pool_recycles_dirty, t_setup),
        cmocka_unit_test_setup(t_last_block_returns_to_bump, t_setup),
        cmocka_unit_test_setup(t_fit_reuses_larger_block, t_setup),
        cmocka_unit_test_setup(t_huge_blocks, t_setup),
        cmocka_unit_test_setup(t_region_lookup_memfd, t_setup),
        cmocka_unit_test_setup(t_hugetlb_block, t_setup),
        cmocka_unit_test_setup(t_pool_cap_releases, t_setup),
        cmocka_unit_test_setup(t_grow_last_block_in_place, t_setup),
        cmocka_unit_test_setup(t_threads_alloc_free, t_setup),
        cmocka_unit_test_setup(t_fork_child_gets_private_copy, t_setup),
        cmocka_unit_test_setup(t_fork_private_generation, t_setup),
        cmocka_unit_test_setup(t_units, t_setup_thp),
    };

    return cmocka_run_group_tests_name("mh_arena", tests, NULL, NULL);
}
