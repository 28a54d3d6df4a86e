/* Storm: 4 threads x bounded iterations of malloc/free/realloc/calloc/mmap/
 * munmap/mremap of random sizes (small and placed), every block checked
 * before it is released; one thread forks in the middle, the child
 * allocates, checks what it inherited, and exits 0.
 * argv[1]: iterations per thread (default 20000). */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t_mh.h"

#define SLOTS 16

typedef struct t_slot {
    unsigned char *p;
    size_t n;
    unsigned seed;
    int mapped;
} t_slot_t;

static long t_iters = 20000;
static int t_fork_status = -1;

static size_t t_size(unsigned *r)
{
    unsigned k = rand_r(r) % 10;

    if (k < 6)
        return 1 + rand_r(r) % 4096;
    if (k < 9)
        return 64 * 1024 + rand_r(r) % (1024 * 1024);
    return 2 * 1024 * 1024 + rand_r(r) % (3 * 1024 * 1024);
}

static void t_release(t_slot_t *s)
{
    T_CHECK(t_same(s->p, s->n, s->seed));
    if (s->mapped)
        T_CHECK(munmap(s->p, s->n) == 0);
    else
        free(s->p);
    s->p = NULL;
}

static void t_child_after_fork(t_slot_t *slots)
{
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p && !t_same(slots[i].p, slots[i].n, slots[i].seed))
            _exit(3);
    for (int i = 0; i < 200; i++) {
        unsigned char *p = malloc(1 + (size_t)i * 7919);

        if (!p)
            _exit(4);
        t_fill(p, 1 + (size_t)i * 7919, (unsigned)i);
        if (!t_same(p, 1 + (size_t)i * 7919, (unsigned)i))
            _exit(5);
        free(p);
    }
    _exit(0);
}

static void t_step(t_slot_t *s, unsigned *r)
{
    unsigned op = rand_r(r) % 8;

    if (!s->p) {
        s->n = t_size(r);
        s->seed = rand_r(r);
        s->mapped = op == 0;
        if (s->mapped) {
            s->p = mmap(NULL, s->n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            T_CHECK(s->p != MAP_FAILED);
        } else {
            s->p = op == 1 ? calloc(1, s->n) : malloc(s->n);
            T_CHECK(s->p);
            if (op == 1)
                T_CHECK(s->p[0] == 0 && s->p[s->n - 1] == 0);
        }
        t_fill(s->p, s->n, s->seed);
    } else if (op < 3) {
        size_t n = t_size(r), keep = n < s->n ? n : s->n;
        unsigned char *q;

        T_CHECK(t_same(s->p, s->n, s->seed));
        if (s->mapped) {
            size_t old = (s->n + 4095) & ~4095ul, nn = (n + 4095) & ~4095ul;

            q = mremap(s->p, old, nn, MREMAP_MAYMOVE);
            T_CHECK(q != MAP_FAILED);
            keep = keep < nn ? keep : nn;
            n = nn;
        } else {
            q = realloc(s->p, n);
            T_CHECK(q);
        }
        T_CHECK(t_same(q, keep, s->seed));
        s->p = q;
        s->n = n;
        t_fill(s->p, s->n, s->seed);
    } else {
        t_release(s);
    }
}

static void *t_worker(void *arg)
{
    unsigned r = (unsigned)(uintptr_t)arg;
    t_slot_t slots[SLOTS] = { 0 };

    for (long i = 0; i < t_iters; i++) {
        t_step(&slots[rand_r(&r) % SLOTS], &r);
        if ((uintptr_t)arg == 1 && i == t_iters / 2) {
            pid_t pid = fork();
            int st;

            T_CHECK(pid >= 0);
            if (pid == 0)
                t_child_after_fork(slots);
            T_CHECK(waitpid(pid, &st, 0) == pid);
            t_fork_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].p)
            t_release(&slots[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[4];

    if (argc > 1)
        t_iters = atol(argv[1]);
    for (uintptr_t i = 0; i < 4; i++)
        T_CHECK(pthread_create(&th[i], NULL, t_worker, (void *)(i + 1)) == 0);
    for (int i = 0; i < 4; i++)
        T_CHECK(pthread_join(th[i], NULL) == 0);
    T_CHECK(t_fork_status == 0);
    printf("ok: 4 threads x %ld iterations, fork child exit %d\n", t_iters, t_fork_status);
    return 0;
}
