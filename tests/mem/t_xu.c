/* Page exchange, the lending side (shim/shim_xu.c), in one process that
 * links the library's objects, so its malloc/free/madvise/fork run through
 * malloc-hooks and the exchange-unit cache hears their events:
 *
 *   - lending a unit of a placed block gives a sealed 2 MiB unit file with
 *     its bytes that nobody can write (mmap, pwrite, mprotect);
 *   - the application overwrites the buffer right after the lend: the unit
 *     file keeps what was lent, the application reads its new bytes, and the
 *     rewritten unit is refused from then on (-EFAULT, counted: the ring
 *     carries it) until freed; it was never frozen, so the rewrite paid no
 *     copy-on-write (no page of it became private);
 *   - an unchanged unit lent again is a cache hit (same file), and is frozen
 *     then; written after that, it is refused too;
 *   - free + malloc of the same memory with new bytes: the lend carries the
 *     NEW bytes (invalidation on real traffic); madvise(DONTNEED) likewise;
 *   - a thread storing into the unit while it is frozen loses no store;
 *   - fork: the child's writes do not reach the parent or the unit file;
 *   - the unit file's descriptor is the library's: close() refuses it,
 *     dup2() onto it moves it.
 *
 * With ZCSOCK_ALLOC_PLACEMENT=0 nothing is placed: every lend is refused
 * (-EINVAL); so is every lend without 2 MiB shared pages (shmem THP off:
 * then the test says so and skips).  Exit 0 pass, 1 fail, 77 skip. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shim_mem.h"
#include "zc_stats.h"

#define U (2u << 20)

#define T_CHECK(c)                                                               \
    do {                                                                         \
        if (!(c)) {                                                              \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static uint64_t t_stat(const char *name)
{
    uint64_t v = 0;

    T_CHECK(zc_stats_get(name, &v) == 0);
    return v;
}

/* Every byte of the unit file equals c. */
static void t_file_is(int fd, char c)
{
    char *m = mmap(NULL, U, PROT_READ, MAP_SHARED, fd, 0);

    T_CHECK(m != MAP_FAILED);
    for (size_t i = 0; i < U; i += 511)
        if (m[i] != c) {
            fprintf(stderr, "unit file byte %zu is %d, want %d\n", i, m[i], c);
            exit(1);
        }
    munmap(m, U);
}

static void t_lend(char *unit, shim_xu_t *x, char want)
{
    T_CHECK(shim_xu_lend(unit, x) == 0);
    T_CHECK(x->fd >= 0);
    t_file_is(x->fd, want);
}

static volatile int t_stop;
static char *t_target;

static void *t_writer(void *arg)
{
    unsigned n = 0;

    (void)arg;
    while (!__atomic_load_n(&t_stop, __ATOMIC_ACQUIRE) && n < 50000000u) {
        __atomic_store_n(&t_target[(n % 512) * 4096], (char)(n & 0x7f), __ATOMIC_RELEASE);
        n++;
    }
    /* leave a known last value in every page */
    for (unsigned i = 0; i < 512; i++)
        __atomic_store_n(&t_target[i * 4096], 'L', __ATOMIC_RELEASE);
    return NULL;
}

int main(void)
{
    char *b = malloc(4 * U), *b2, *c;
    shim_xu_t x, y;
    struct stat st;
    pthread_t th;
    int status, fd;
    pid_t pid;

    T_CHECK(b);
    {
        char thp[128] = "";
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");

        if (f) {
            if (!fgets(thp, sizeof(thp), f))
                thp[0] = 0;
            fclose(f);
        }
        if (!strstr(thp, "[advise]") && !strstr(thp, "[always]") &&
            !strstr(thp, "[within_size]") && !strstr(thp, "[force]")) {
            T_CHECK(shim_xu_lend((char *)(((uintptr_t)b + U - 1) & ~(uintptr_t)(U - 1)), &x) ==
                    -EINVAL);
            printf("no 2 MiB shared pages (shmem THP off): lends refused, nothing more to test\n");
            return 77;
        }
    }
    if (((uintptr_t)b & (U - 1)) || getenv("ZCSOCK_ALLOC_PLACEMENT")[0] == '0') {
        /* not placed: never lent */
        T_CHECK(shim_xu_lend((char *)(((uintptr_t)b + U - 1) & ~(uintptr_t)(U - 1)), &x) ==
                -EINVAL);
        printf("not placed: lend refused\n");
        return 0;
    }
    memset(b, 'A', 4 * U);

    /* a sealed file with the unit's bytes */
    t_lend(b + U, &x, 'A');
    T_CHECK(fstat(x.fd, &st) == 0 && st.st_size == U && st.st_ino == x.ino);
    T_CHECK((fcntl(x.fd, F_GET_SEALS) & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW |
                                         F_SEAL_SEAL)) ==
            (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
    T_CHECK(mmap(NULL, U, PROT_READ | PROT_WRITE, MAP_SHARED, x.fd, 0) == MAP_FAILED);
    T_CHECK(pwrite(x.fd, "x", 1, 0) < 0 && errno == EPERM);
    T_CHECK(ftruncate(x.fd, U / 2) < 0);
    T_CHECK(close(x.fd) < 0 && errno == EBADF);     /* the library's descriptor */
    T_CHECK(fcntl(x.fd, F_GETFD) >= 0);
    fd = x.fd;
    shim_xu_release(&x);

    /* overwrite right after the lend */
    memset(b + U, 'B', U);
    t_file_is(fd, 'A');                             /* what was lent stays */
    T_CHECK(b[U] == 'B' && b[2 * U - 1] == 'B');
    {
        uint64_t rw = t_stat("xu.rewritten"), fz = t_stat("xu.frozen");

        T_CHECK(shim_xu_lend(b + U, &y) == -EFAULT);    /* rewritten: refused */
        memset(b + U, 'C', U);
        T_CHECK(shim_xu_lend(b + U, &y) == -EFAULT);    /* until freed */
        T_CHECK(t_stat("xu.rewritten") == rw + 1);
        T_CHECK(t_stat("xu.frozen") == fz);
        T_CHECK(shim_xu_clean(b + U));      /* no page went private: no copy-on-write */
    }

    /* an unchanged unit: a hit, the same file; frozen at the second lend */
    t_lend(b, &x, 'A');
    shim_xu_release(&x);
    {
        uint64_t hits = t_stat("pdc.xu.hits"), regs = t_stat("pdc.xu.regs");
        uint64_t fz = t_stat("xu.frozen"), rw = t_stat("xu.rewritten");

        for (int i = 0; i < 3; i++) {
            t_lend(b, &y, 'A');
            T_CHECK(y.ino == x.ino);
            shim_xu_release(&y);
        }
        T_CHECK(t_stat("pdc.xu.hits") == hits + 3 && t_stat("pdc.xu.regs") == regs);
        T_CHECK(t_stat("xu.frozen") == fz + 1 && t_stat("xu.rewritten") == rw);
        /* frozen, then written: refused */
        b[100] = 'Z';
        T_CHECK(!shim_xu_clean(b));         /* the write copied on write */
        T_CHECK(shim_xu_lend(b, &y) == -EFAULT);
        T_CHECK(t_stat("xu.rewritten") == rw + 1);
        b[100] = 'A';
    }

    /* madvise(DONTNEED) then new bytes: lent anew with them */
    T_CHECK(madvise(b, U, MADV_DONTNEED) == 0);
    T_CHECK(b[0] == 0 && b[U - 1] == 0);
    t_lend(b, &y, 0);
    T_CHECK(y.ino != x.ino);
    shim_xu_release(&y);

    /* free + malloc of the same memory with new bytes */
    free(b);
    b2 = malloc(4 * U);
    T_CHECK(b2 == b);                               /* the pool hands it back */
    memset(b2, 'C', 4 * U);
    t_lend(b2 + U, &x, 'C');                        /* no longer refused, new bytes */
    shim_xu_release(&x);

    /* a thread storing while the unit is frozen loses nothing */
    t_target = b2 + 2 * U;
    T_CHECK(pthread_create(&th, NULL, t_writer, NULL) == 0);
    for (int i = 0; i < 200; i++)
        if (shim_xu_lend(t_target, &x) == 0)
            shim_xu_release(&x);
    __atomic_store_n(&t_stop, 1, __ATOMIC_RELEASE);
    T_CHECK(pthread_join(th, NULL) == 0);
    for (unsigned i = 0; i < 512; i++)
        T_CHECK(t_target[i * 4096] == 'L' && t_target[i * 4096 + 1] == 'C');

    /* dup2 onto the unit file's number moves it */
    t_lend(b2 + 3 * U, &x, 'C');
    fd = x.fd;
    shim_xu_release(&x);
    T_CHECK(dup2(0, fd) == fd);
    T_CHECK(shim_xu_lend(b2 + 3 * U, &y) == 0 && y.fd != fd);
    t_file_is(y.fd, 'C');
    shim_xu_release(&y);
    close(fd);

    /* fork: private on both sides; the unit file unchanged */
    c = b2 + 3 * U;
    t_lend(c, &x, 'C');
    fd = x.fd;
    pid = fork();
    T_CHECK(pid >= 0);
    if (pid == 0) {
        memset(c, 'D', U);
        _exit(c[5] == 'D' ? 0 : 1);
    }
    T_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    T_CHECK(c[5] == 'C');
    t_file_is(fd, 'C');
    shim_xu_release(&x);
    /* the forked generation is not lent from any more */
    T_CHECK(shim_xu_lend(c, &x) == -EINVAL);
    free(b2);
    printf("lends %llu rewritten %llu hits %llu regs %llu\n",
           (unsigned long long)t_stat("xu.lends"), (unsigned long long)t_stat("xu.rewritten"),
           (unsigned long long)t_stat("pdc.xu.hits"), (unsigned long long)t_stat("pdc.xu.regs"));
    return 0;
}
