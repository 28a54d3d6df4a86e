/* Stress through the real wiring: threads storm malloc/free/realloc/mmap/
 * munmap/mremap (checking their own bytes) while other threads register
 * buffers through the pin-down cache and verify, after each free/malloc or
 * munmap/mmap cycle of their own buffer, that the cache never hands back a
 * stale registration (a fixed write must carry the bytes written since);
 * a fork happens in the middle (the child allocates, uses the cache and
 * exits), and a dlopen'ed library allocates and its blocks are freed here.
 * Bounded: T_SECONDS of storm.  Exit 0 pass, 1 fail, 77 skip. */
#include <dlfcn.h>
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pdc.h"
#include "shim_mem.h"

#define T_SECONDS 3.0
#define T_STORMERS 2
#define T_REGISTRARS 2
#define T_BUF (1u << 20)

#define T_FAIL(...)                                          \
    do {                                                     \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);      \
        fprintf(stderr, __VA_ARGS__);                        \
        fputc('\n', stderr);                                 \
        __atomic_store_n(&t_failed, 1, __ATOMIC_RELAXED);    \
        return NULL;                                         \
    } while (0)

static int t_failed, t_stop;
static pdc_t *t_cache;
static pthread_mutex_t t_ring_lock = PTHREAD_MUTEX_INITIALIZER;
static struct io_uring *t_ring;

static double t_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Fixed write of 4 KiB at addr into a pipe of the caller; first byte out. */
static int t_write_fixed(pdc_region_t *r, const char *addr, int pfd[2])
{
    struct io_uring_sqe *sqe;
    struct io_uring_cqe *cqe;
    char out[4096];
    int res;

    pthread_mutex_lock(&t_ring_lock);
    sqe = io_uring_get_sqe(t_ring);
    io_uring_prep_write_fixed(sqe, pfd[1], addr, sizeof(out), 0, (int)r->handle.id);
    io_uring_submit(t_ring);
    io_uring_wait_cqe(t_ring, &cqe);
    res = cqe->res;
    io_uring_cqe_seen(t_ring, cqe);
    pthread_mutex_unlock(&t_ring_lock);
    if (res != (int)sizeof(out) || read(pfd[0], out, sizeof(out)) != (ssize_t)sizeof(out))
        return -1;
    return (unsigned char)out[0];
}

static void *t_registrar(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    int pfd[2];

    if (pipe(pfd))
        T_FAIL("pipe: %s", strerror(errno));
    while (!__atomic_load_n(&t_stop, __ATOMIC_RELAXED)) {
        int use_mmap = (seed = seed * 1103515245u + 12345u) >> 16 & 1;
        unsigned char fill = (unsigned char)(seed >> 8) | 1;
        char *buf = use_mmap ? mmap(NULL, T_BUF, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                             : malloc(T_BUF);
        pdc_region_t *r;
        int got, rc;

        if (!buf || buf == MAP_FAILED)
            T_FAIL("allocation failed");
        memset(buf, fill, T_BUF);
        rc = pdc_region_get(t_cache, buf, T_BUF, PDC_SEND, PDC_F_NOWAIT, &r);
        if (rc == 0) {
            got = t_write_fixed(r, buf + 4096, pfd);
            pdc_region_put(t_cache, r, PDC_SEND);
            if (got != fill)
                T_FAIL("stale registration: wrote %#x, io_uring sent %#x", fill, got);
        } else if (rc != -EAGAIN && rc != -ENOSPC && rc != -ESTALE) {
            T_FAIL("pdc_region_get: %s", strerror(-rc));
        }
        if (use_mmap)
            munmap(buf, T_BUF);
        else
            free(buf);
    }
    close(pfd[0]);
    close(pfd[1]);
    return NULL;
}

static void *t_stormer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    char *held[8] = { 0 };
    size_t len[8] = { 0 };

    while (!__atomic_load_n(&t_stop, __ATOMIC_RELAXED)) {
        unsigned k = (seed = seed * 1103515245u + 12345u) % 8, op = (seed >> 8) % 4;

        if (held[k]) {
            size_t i;

            for (i = 0; i < len[k]; i += 4093)
                if (held[k][i] != (char)k)
                    T_FAIL("storm block %u corrupted at %zu", k, i);
            if (op == 0) {
                size_t n = 4096 + (seed >> 4) % (3u << 20);
                char *p = realloc(held[k], n);

                if (!p)
                    T_FAIL("realloc");
                memset(p, (int)k, n);
                held[k] = p;
                len[k] = n;
                continue;
            }
            if (op == 1 && len[k] >= 8192) {
                /* an mremap of a private mapping, then back to the heap */
                char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                char *m2 = m == MAP_FAILED ? MAP_FAILED
                                           : mremap(m, 8192, 1u << 20, MREMAP_MAYMOVE);

                if (m2 == MAP_FAILED)
                    T_FAIL("mremap");
                munmap(m2, 1u << 20);
            }
            free(held[k]);
            held[k] = NULL;
        } else {
            len[k] = 16 + (seed >> 4) % (op ? 300000 : 4u << 20);
            held[k] = malloc(len[k]);
            if (!held[k])
                T_FAIL("malloc");
            memset(held[k], (int)k, len[k]);
        }
    }
    for (int k = 0; k < 8; k++)
        free(held[k]);
    return NULL;
}

static int t_fork_child(void)
{
    pid_t pid = fork();
    int status;

    if (pid < 0)
        return -1;
    if (pid == 0) {
        char *p = malloc(T_BUF);
        pdc_region_t *r;
        int ok = p != NULL;

        if (ok) {
            memset(p, 1, T_BUF);
            ok = pdc_region_get(t_cache, p, T_BUF, PDC_SEND, PDC_F_NOWAIT, &r) == 0;
            if (ok)
                pdc_region_put(t_cache, r, PDC_SEND);
            free(p);
        }
        _exit(ok ? 0 : 1);
    }
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return -1;
    return 0;
}

static int t_dlopen_library(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *(*block)(int, size_t *);
    size_t n;

    if (!h)
        return -1;
    block = (void *(*)(int, size_t *))dlsym(h, "t_dllib_block");
    for (int i = 0; block && i < 3; i++) {
        char *p = block(i, &n);

        if (!p || p[n - 1] != 'a' + i)
            return -1;
        free(p);    /* freed here, allocated in the library's constructor */
    }
    return block ? 0 : -1;
}

int main(int argc, char **argv)
{
    pthread_t th[T_STORMERS + T_REGISTRARS];
    int err = 0, i, n = 0, forked = 0;
    double end;

    t_cache = shim_mem_cache();
    if (!t_cache) {
        printf("skip: no pin-down cache\n");
        return 77;
    }
    t_ring = pdc_uring_ring(shim_mem_uring(), &err);
    if (!t_ring) {
        printf("skip: io_uring unavailable\n");
        return 77;
    }
    for (i = 0; i < T_STORMERS; i++)
        pthread_create(&th[n++], NULL, t_stormer, (void *)(uintptr_t)(i + 11));
    for (i = 0; i < T_REGISTRARS; i++)
        pthread_create(&th[n++], NULL, t_registrar, (void *)(uintptr_t)(i + 101));
    end = t_now() + T_SECONDS;
    while (t_now() < end && !__atomic_load_n(&t_failed, __ATOMIC_RELAXED)) {
        usleep(200000);
        if (!forked && t_now() > end - T_SECONDS / 2) {
            forked = 1;
            if (t_fork_child()) {
                fprintf(stderr, "fork child failed\n");
                t_failed = 1;
            }
            if (argc > 1 && t_dlopen_library(argv[1])) {
                fprintf(stderr, "dlopen'ed library's blocks wrong\n");
                t_failed = 1;
            }
        }
    }
    __atomic_store_n(&t_stop, 1, __ATOMIC_RELAXED);
    for (i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    printf("%s: gets %llu, misses %llu, invalidations %llu, deferred %llu\n",
           t_failed ? "fail" : "pass",
           (unsigned long long)pdc_stats_get(t_cache, PDC_STAT_GETS),
           (unsigned long long)pdc_stats_get(t_cache, PDC_STAT_MISSES),
           (unsigned long long)pdc_stats_get(t_cache, PDC_STAT_INVALIDATIONS),
           (unsigned long long)pdc_stats_get(t_cache, PDC_STAT_DEFERRED_INVALIDATIONS));
    return t_failed;
}
