/* The io_uring backend, for real (exit 77 when io_uring is unavailable).
 *
 * t_stale_after_free is the correctness test of the cache: register a heap
 * buffer through io_uring, invalidate it as the free hook would, free it,
 * let malloc reuse the address, fill it with new bytes, and prove that the
 * cache hands out a NEW registration whose fixed-buffer write carries the
 * new bytes.  t_stale_control shows what the invalidation prevents: without
 * it the cache hits the old registration, whose pinned pages still hold the
 * old bytes.  Then: slots (eviction when the sparse table is full), reads
 * into a registered receive buffer, SEND_ZC from a fixed buffer over a
 * loopback TCP, a fork child that registers on a ring of its own, and
 * RLIMIT_MEMLOCK in a child without CAP_IPC_LOCK. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pdc_fake.h"
#include "pdc_int.h"

#define T_BUF ((size_t)2 << 20)
#define T_IO ((size_t)64 << 10)

typedef struct t_env {
    pdc_uring_t *uring;
    pdc_ops_t ops;
    pdc_t *cache;
    struct io_uring *ring;
    int pipefd[2];
} t_env_t;

static void *t_alloc(void *arg, size_t size)
{
    (void)arg;
    return malloc(size);
}

static void t_free(void *arg, void *ptr, size_t size)
{
    (void)arg;
    (void)size;
    free(ptr);
}

static int t_setup_slots(void **state, unsigned slots)
{
    t_env_t *e = calloc(1, sizeof(*e));
    pdc_params_t p;
    int err;

    assert_int_equal(pdc_uring_create(slots, 8, t_alloc, t_free, NULL, &e->uring), 0);
    e->ring = pdc_uring_ring(e->uring, &err);
    assert_non_null(e->ring);
    pdc_uring_ops_init(e->uring, &e->ops);
    pdc_params_default(&p);
    p.alloc = t_alloc;
    p.free = t_free;
    assert_int_equal(pdc_create(&p, &e->ops, e->uring, &e->cache), 0);
    assert_int_equal(pipe(e->pipefd), 0);
    fcntl(e->pipefd[1], F_SETPIPE_SZ, (int)T_IO);
    *state = e;
    return 0;
}

static int t_setup(void **state)
{
    return t_setup_slots(state, 64);
}

static int t_setup_small(void **state)
{
    return t_setup_slots(state, 4);
}

static int t_teardown(void **state)
{
    t_env_t *e = *state;

    pdc_destroy(e->cache);
    pdc_uring_destroy(e->uring);
    close(e->pipefd[0]);
    close(e->pipefd[1]);
    free(e);
    return 0;
}

/* Run one prepared SQE and return its result. */
static int t_submit_wait(struct io_uring *ring)
{
    struct io_uring_cqe *cqe;
    int res;

    assert_int_equal(io_uring_submit(ring), 1);
    assert_int_equal(io_uring_wait_cqe(ring, &cqe), 0);
    res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return res;
}

/* write_fixed T_IO bytes at addr (inside region r) into the pipe and return
 * the first byte read back; all T_IO bytes must be equal. */
static int t_write_fixed(t_env_t *e, pdc_region_t *r, const char *addr)
{
    static char back[T_IO];
    struct io_uring_sqe *sqe = io_uring_get_sqe(e->ring);
    size_t i;

    io_uring_prep_write_fixed(sqe, e->pipefd[1], addr, T_IO, 0, (int)r->handle.id);
    assert_int_equal(t_submit_wait(e->ring), (int)T_IO);
    assert_int_equal(read(e->pipefd[0], back, T_IO), (ssize_t)T_IO);
    for (i = 1; i < T_IO; i++)
        assert_int_equal(back[i], back[0]);
    return back[0];
}

static void t_stale_after_free(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r1, *r2;
    uint64_t gen1, aux1;
    char *buf, *buf2;
    uintptr_t old;

    buf = malloc(T_BUF);
    assert_non_null(buf);
    old = (uintptr_t)buf;
    memset(buf, 'A', T_BUF);
    assert_int_equal(pdc_region_get(e->cache, buf, T_BUF, PDC_SEND, 0, &r1), 0);
    assert_int_equal(t_write_fixed(e, r1, buf + 4096), 'A');
    gen1 = r1->gen;
    aux1 = r1->handle.aux;
    pdc_region_put(e->cache, r1, PDC_SEND);

    pdc_range_invalidate(e->cache, buf, T_BUF);   /* what the free hook does */
    free(buf);
    buf2 = malloc(T_BUF);
    assert_non_null(buf2);
    print_message("address %s reused (%#lx, %p)\n",
                  (uintptr_t)buf2 == old ? "was" : "was not", (unsigned long)old,
                  (void *)buf2);
    memset(buf2, 'B', T_BUF);
    assert_int_equal(pdc_region_get(e->cache, buf2, T_BUF, PDC_SEND, 0, &r2), 0);
    assert_true(r2->gen > gen1);
    assert_int_not_equal(r2->handle.aux, aux1);
    assert_int_equal(t_write_fixed(e, r2, buf2 + 4096), 'B');
    assert_int_equal(t_write_fixed(e, r2, buf2 + T_BUF - T_IO), 'B');
    assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_INVALIDATIONS), 1);
    assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_DEREGS), 1);
    pdc_region_put(e->cache, r2, PDC_SEND);
    free(buf2);
}

static void t_stale_control(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r1, *r2;
    char *buf, *buf2;
    uintptr_t old;

    buf = malloc(T_BUF);
    old = (uintptr_t)buf;
    memset(buf, 'C', T_BUF);
    assert_int_equal(pdc_region_get(e->cache, buf, T_BUF, PDC_SEND, 0, &r1), 0);
    pdc_region_put(e->cache, r1, PDC_SEND);
    free(buf);                                   /* no invalidation */
    buf2 = malloc(T_BUF);
    memset(buf2, 'D', T_BUF);
    if ((uintptr_t)buf2 != old) {
        free(buf2);
        print_message("skip: the allocator did not hand the same block back\n");
        skip();
    }
    assert_int_equal(pdc_region_get(e->cache, buf2, T_BUF, PDC_SEND, 0, &r2), 0);
    assert_ptr_equal(r2, r1);                    /* the stale hit */
    assert_int_equal(t_write_fixed(e, r2, buf2 + 4096), 'C');   /* old bytes */
    pdc_region_put(e->cache, r2, PDC_SEND);
    pdc_range_invalidate(e->cache, buf2, T_BUF);
    free(buf2);
}

/* The same with mmap/munmap at a fixed address, so that the address is
 * reused whatever the allocator (ASan's never reuses at once): with the
 * invalidation a new registration and new bytes, without it the old ones. */
static char *t_map_at(void *want)
{
    char *p = mmap(want, T_BUF, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (want ? MAP_FIXED_NOREPLACE : 0), -1, 0);

    assert_true(p != MAP_FAILED);
    assert_true(!want || p == want);
    return p;
}

static void t_stale_after_munmap(void **state)
{
    t_env_t *e = *state;
    pdc_region_t *r1, *r2;
    uint64_t gen1;
    char *buf = t_map_at(NULL);
    int round;

    for (round = 0; round < 2; round++) {
        int invalidate = round == 0;

        memset(buf, 'E', T_BUF);
        assert_int_equal(pdc_region_get(e->cache, buf, T_BUF, PDC_SEND, 0, &r1), 0);
        gen1 = r1->gen;
        pdc_region_put(e->cache, r1, PDC_SEND);
        if (invalidate)
            pdc_range_invalidate(e->cache, buf, T_BUF);   /* the munmap hook */
        assert_int_equal(munmap(buf, T_BUF), 0);
        assert_ptr_equal(t_map_at(buf), buf);
        memset(buf, 'F', T_BUF);
        assert_int_equal(pdc_region_get(e->cache, buf, T_BUF, PDC_SEND, 0, &r2), 0);
        if (invalidate) {
            assert_true(r2->gen > gen1);
            assert_int_equal(t_write_fixed(e, r2, buf + 8192), 'F');
        } else {
            assert_int_equal(r2->gen, gen1);                        /* stale hit */
            assert_int_equal(t_write_fixed(e, r2, buf + 8192), 'E');   /* old pages */
        }
        pdc_region_put(e->cache, r2, PDC_SEND);
        pdc_range_invalidate(e->cache, buf, T_BUF);
    }
    munmap(buf, T_BUF);
}

/* A shared file mapping on a disk filesystem cannot be pinned long-term:
 * the get fails and the failure is remembered (no second syscall). */
static void t_file_mapping(void **state)
{
    t_env_t *e = *state;
    char path[] = "/var/tmp/pdc_uring_XXXXXX";
    pdc_region_t *r = NULL;
    int fd = mkstemp(path), rc;
    char *map;

    assert_true(fd >= 0);
    unlink(path);
    assert_int_equal(ftruncate(fd, T_IO), 0);
    map = mmap(NULL, T_IO, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(map != MAP_FAILED);
    memset(map, 'M', T_IO);
    rc = pdc_region_get(e->cache, map, T_IO, PDC_SEND, 0, &r);
    if (rc == 0) {   /* a filesystem that allows it (tmpfs, shmem) */
        pdc_region_put(e->cache, r, PDC_SEND);
        print_message("file mapping registered: %s is pinnable here\n", path);
    } else {
        print_message("file mapping: %d (%s)\n", rc, strerror(-rc));
        assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_NEG_ENTRIES), 1);
        assert_int_equal(pdc_region_get(e->cache, map, 100, PDC_SEND, 0, &r), rc);
        assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_NEG_HITS), 1);
        assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_REG_FAILS), 1);
    }
    pdc_range_invalidate(e->cache, map, T_IO);
    munmap(map, T_IO);
    close(fd);
}

static void t_slots_evict(void **state)
{
    t_env_t *e = *state;
    char *bufs[6];
    pdc_region_t *r;
    unsigned i;

    assert_int_equal(e->cache->max_entries, 4);
    for (i = 0; i < 6; i++) {
        bufs[i] = aligned_alloc(4096, 8 * 4096);
        memset(bufs[i], 'a' + i, 8 * 4096);
        assert_int_equal(pdc_region_get(e->cache, bufs[i], 8 * 4096, PDC_SEND, 0, &r), 0);
        assert_true(r->handle.id < 4);
        pdc_region_put(e->cache, r, PDC_SEND);
    }
    assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_EVICTIONS), 2);
    assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_REGIONS), 4);
    for (i = 0; i < 6; i++) {
        pdc_range_invalidate(e->cache, bufs[i], 8 * 4096);
        free(bufs[i]);
    }
    pdc_cache_reap(e->cache);
    assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_REGIONS), 0);
}

static void t_recv_fixed(void **state)
{
    t_env_t *e = *state;
    char *buf = aligned_alloc(4096, T_IO * 2), *src = malloc(T_IO);
    struct io_uring_sqe *sqe;
    pdc_region_t *r;
    size_t i;

    memset(src, 'R', T_IO);
    memset(buf, 0, T_IO * 2);
    assert_int_equal(pdc_region_get(e->cache, buf, T_IO * 2, PDC_RECV, 0, &r), 0);
    assert_int_equal(write(e->pipefd[1], src, T_IO), (ssize_t)T_IO);
    sqe = io_uring_get_sqe(e->ring);
    io_uring_prep_read_fixed(sqe, e->pipefd[0], buf + T_IO, T_IO, 0, (int)r->handle.id);
    assert_int_equal(t_submit_wait(e->ring), (int)T_IO);
    for (i = 0; i < T_IO; i++)
        assert_int_equal(buf[T_IO + i], 'R');
    pdc_region_put(e->cache, r, PDC_RECV);
    pdc_range_invalidate(e->cache, buf, T_IO * 2);
    free(buf);
    free(src);
}

/* A connected TCP pair on 127.0.0.1. */
static void t_tcp_pair(int sv[2])
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t sl = sizeof(sa);
    int l = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
    sv[0] = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(sv[0], (struct sockaddr *)&sa, sizeof(sa)), 0);
    sv[1] = accept(l, NULL, NULL);
    assert_true(sv[1] >= 0);
    close(l);
}

static void t_send_zc_fixed(void **state)
{
    t_env_t *e = *state;
    char *buf = aligned_alloc(4096, T_IO), *back = malloc(T_IO);
    struct io_uring_cqe *cqe;
    struct io_uring_sqe *sqe;
    pdc_region_t *r;
    int sv[2], res = 0, more = 1, seen = 0;

    t_tcp_pair(sv);
    memset(buf, 'Z', T_IO);
    assert_int_equal(pdc_region_get(e->cache, buf, T_IO, PDC_SEND, 0, &r), 0);
    sqe = io_uring_get_sqe(e->ring);
    io_uring_prep_send_zc_fixed(sqe, sv[0], buf, 4096, 0, 0, (unsigned)r->handle.id);
    assert_int_equal(io_uring_submit(e->ring), 1);
    while (more && seen < 2) {
        assert_int_equal(io_uring_wait_cqe(e->ring, &cqe), 0);
        if (!(cqe->flags & IORING_CQE_F_NOTIF))
            res = cqe->res;
        more = (cqe->flags & IORING_CQE_F_MORE) != 0;
        seen++;
        io_uring_cqe_seen(e->ring, cqe);
    }
    if (res == -EINVAL || res == -EOPNOTSUPP) {   /* kernel without SEND_ZC */
        print_message("send_zc unsupported here: %d\n", res);
    } else {
        assert_int_equal(res, 4096);
        assert_int_equal(recv(sv[1], back, 4096, 0), 4096);
        assert_int_equal(back[0], 'Z');
        assert_int_equal(back[4095], 'Z');
    }
    pdc_region_put(e->cache, r, PDC_SEND);
    pdc_range_invalidate(e->cache, buf, T_IO);
    close(sv[0]);
    close(sv[1]);
    free(buf);
    free(back);
}

static void t_fork_child_ring(void **state)
{
    t_env_t *e = *state;
    char *buf = aligned_alloc(4096, T_IO);
    pdc_region_t *r;
    int status;
    pid_t pid;

    memset(buf, 'P', T_IO);
    assert_int_equal(pdc_region_get(e->cache, buf, T_IO, PDC_SEND, 0, &r), 0);
    pdc_region_put(e->cache, r, PDC_SEND);
    pdc_fork_prepare(e->cache);
    pid = fork();
    if (pid == 0) {
        struct io_uring_sqe *sqe;
        struct io_uring_cqe *cqe;
        struct io_uring *ring;
        char back[64];
        int err, bad = 0;

        pdc_fork_child(e->cache);
        memset(buf, 'Q', T_IO);
        if (pdc_region_get(e->cache, buf, T_IO, PDC_SEND, 0, &r) != 0)
            _exit(2);
        ring = pdc_uring_ring(e->uring, &err);
        if (!ring || ring == NULL)
            _exit(3);
        sqe = io_uring_get_sqe(ring);
        io_uring_prep_write_fixed(sqe, e->pipefd[1], buf, 64, 0, (int)r->handle.id);
        io_uring_submit(ring);
        if (io_uring_wait_cqe(ring, &cqe) != 0 || cqe->res != 64)
            _exit(4);
        io_uring_cqe_seen(ring, cqe);
        bad |= read(e->pipefd[0], back, 64) != 64 || back[0] != 'Q';
        pdc_region_put(e->cache, r, PDC_SEND);
        _exit(bad ? 5 : 0);
    }
    pdc_fork_parent(e->cache);
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* The parent's registration survived the child. */
    assert_int_equal(pdc_region_get(e->cache, buf, T_IO, PDC_SEND, 0, &r), 0);
    assert_int_equal(pdc_stats_get(e->cache, PDC_STAT_HITS), 1);
    assert_int_equal(t_write_fixed(e, r, buf), 'P');   /* parent's copy */
    pdc_region_put(e->cache, r, PDC_SEND);
    pdc_range_invalidate(e->cache, buf, T_IO);
    free(buf);
}

/* RLIMIT_MEMLOCK for real, in a child without CAP_IPC_LOCK: the cache caps
 * itself at the limit (AUTO), and when told to ignore it the kernel refuses
 * the slot update and the get fails cleanly (the caller copies). */
static int t_memlock_child(void)
{
    struct rlimit rl = { 256 << 10, 256 << 10 };
    pdc_region_t *r;
    pdc_uring_t *u;
    pdc_params_t p;
    pdc_ops_t ops;
    pdc_t *c;
    char *buf = aligned_alloc(4096, 1 << 20);
    int err;

    memset(buf, 1, 1 << 20);
    if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        return 10;
    if (geteuid() == 0 && setuid(65534) != 0)
        return 11;
    if (pdc_uring_create(8, 4, t_alloc, t_free, NULL, &u) != 0 || !pdc_uring_ring(u, &err))
        return 12;
    pdc_uring_ops_init(u, &ops);
    pdc_params_default(&p);
    p.alloc = t_alloc;
    p.free = t_free;
    if (pdc_create(&p, &ops, u, &c) != 0)
        return 13;
    if (c->max_bytes != (256 << 10))
        return 14;
    if (pdc_region_get(c, buf, 128 << 10, PDC_SEND, 0, &r) != 0)
        return 15;
    pdc_region_put(c, r, PDC_SEND);
    if (pdc_region_get(c, buf, 512 << 10, PDC_SEND, 0, &r) != -ENOSPC)
        return 16;
    pdc_destroy(c);
    p.memlock_bytes = PDC_MEMLOCK_NONE;            /* the kernel decides */
    if (pdc_create(&p, &ops, u, &c) != 0)
        return 17;
    err = pdc_region_get(c, buf, 512 << 10, PDC_SEND, 0, &r);
    if (err != -ENOMEM)
        return 18;
    if (pdc_stats_get(c, PDC_STAT_REG_FAILS) != 1)
        return 19;
    pdc_destroy(c);
    pdc_uring_destroy(u);
    free(buf);
    return 0;
}

static void t_memlock_kernel(void **state)
{
    int status;
    pid_t pid;

    (void)state;
    pid = fork();
    if (pid == 0)
        _exit(t_memlock_child());
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_stale_after_free, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(t_stale_control, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(t_stale_after_munmap, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(t_file_mapping, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(t_slots_evict, t_setup_small, t_teardown),
        cmocka_unit_test_setup_teardown(t_recv_fixed, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(t_send_zc_fixed, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(t_fork_child_ring, t_setup, t_teardown),
        cmocka_unit_test(t_memlock_kernel),
    };
    pdc_uring_t *u;
    int err = 0;

    /* A fixed threshold: freed 2 MiB blocks are unmapped and the next
     * malloc maps again (glibc would otherwise raise the threshold). */
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    if (pdc_uring_create(4, 4, t_alloc, t_free, NULL, &u) != 0)
        return 1;
    if (!pdc_uring_ring(u, &err)) {
        printf("io_uring unavailable: %s\n", strerror(-err));
        pdc_uring_destroy(u);
        return 77;
    }
    pdc_uring_destroy(u);
    return cmocka_run_group_tests_name("pdc_uring", tests, NULL, NULL);
}
