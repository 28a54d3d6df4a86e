/* With another allocator (jemalloc) providing malloc, the library detects
 * it, places nothing, and still delivers mapping events. */
#include <sys/mman.h>

#include "t_mh.h"

int main(void)
{
    unsigned st = t_status();
    long long before;
    void *p, *m;

    if (!st) {
        return t_missing("the library publishes no mh.status");
    }
    T_CHECK(st & MH_ST_FOREIGN_ALLOCATOR);
    T_CHECK(!(st & MH_ST_PLACEMENT_ACTIVE));
    p = malloc(4u << 20);
    T_CHECK(p && !t_in_memfd(p));
    free(p);
    before = t_ev("unmap");
    m = mmap(NULL, 8192, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    T_CHECK(m != MAP_FAILED && munmap(m, 8192) == 0);
    T_CHECK(t_ev("unmap") > before);
    printf("ok\n");
    return 0;
}
