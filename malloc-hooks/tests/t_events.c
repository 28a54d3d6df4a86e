/* Memory events arrive for munmap, mremap, MAP_FIXED, madvise, shmdt, brk
 * shrink, free of a glibc-mmapped chunk and free of a placed block. */
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include "t_mh.h"

#define T_EXPECT(kind, stmt)                                                   \
    do {                                                                       \
        long long before = t_ev(kind);                                         \
        stmt;                                                                  \
        if (t_ev(kind) <= before) {                                            \
            fprintf(stderr, "no %s event for: %s\n", kind, #stmt);             \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static void *t_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    T_CHECK(p != MAP_FAILED);
    memset(p, 1, n);
    return p;
}

int main(void)
{
    char *p, *q;
    int id;

    if (t_ev("unmap") < 0) {
        return t_missing("the library publishes no mh.events counters");
    }
    p = t_map(4 * 4096);
    T_EXPECT("unmap", T_CHECK(munmap(p, 4096) == 0));
    T_EXPECT("remap", q = mremap(p + 4096, 3 * 4096, 8 * 4096, MREMAP_MAYMOVE));
    T_CHECK(q != MAP_FAILED);
    T_EXPECT("remap", T_CHECK(mremap(q, 8 * 4096, 2 * 4096, 0) == q));
    T_EXPECT("madvise", T_CHECK(madvise(q, 4096, MADV_DONTNEED) == 0));
    T_CHECK(q[0] == 0 && q[4096] == 1);
    T_EXPECT("map_fixed", T_CHECK(mmap(q, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                                       -1, 0) == q));
    T_CHECK(munmap(q, 2 * 4096) == 0);

    id = shmget(IPC_PRIVATE, 65536, IPC_CREAT | 0600);
    if (id >= 0) {
        p = shmat(id, NULL, 0);
        T_CHECK(p != (void *)-1);
        shmctl(id, IPC_RMID, NULL);
        p[0] = 1;
        T_EXPECT("shmdt", T_CHECK(shmdt(p) == 0));
    }

    p = sbrk(0);
    if (p != (void *)-1 && sbrk(65536) == p) {
        T_EXPECT("brk", T_CHECK(sbrk(-65536) != (void *)-1));
        T_CHECK(sbrk(0) == p);
    }

    /* glibc serves 300 MiB with mmap (past the placement ceiling) and unmaps
     * it internally on free. */
    p = malloc(300u << 20);
    T_CHECK(p);
    p[0] = 1;
    T_EXPECT("free", free(p));
    if (t_placement()) {
        p = malloc(1u << 20);
        T_CHECK(p && t_in_memfd(p));
        T_EXPECT("block", free(p));
        char *spacer;

        p = malloc(1u << 20);
        spacer = malloc(1u << 20);       /* p is no longer its arena's last block */
        T_EXPECT("block", q = realloc(p, 8u << 20));
        T_CHECK(q && q != p);
        T_EXPECT("block", p = realloc(q, 1u << 20));   /* shrink releases the tail */
        T_CHECK(p == q);
        free(p);
        free(spacer);
    }
    printf("ok\n");
    return 0;
}
