/* Run with a munmap interposed in front of the library (mh_nomunmap.so):
 * the self-test must report SELFTEST_FAILED, placement must stay off, and
 * allocation must keep working. */
#include <malloc.h>

#include "t_mh.h"

int main(void)
{
    unsigned st = t_status();
    unsigned char *p;

    if (!st) {
        return t_missing("the library publishes no mh.status");
    }
    T_CHECK(st & MH_ST_SELFTEST_FAILED);
    T_CHECK(!(st & MH_ST_EVENTS_OK));
    T_CHECK(!(st & MH_ST_PLACEMENT_ACTIVE));
    p = malloc(4u << 20);
    T_CHECK(p && !t_in_memfd(p) && malloc_usable_size(p) >= (4u << 20));
    memset(p, 1, 4u << 20);
    p = realloc(p, 8u << 20);
    T_CHECK(p && p[(4u << 20) - 1] == 1);
    free(p);
    printf("ok: status 0x%x\n", st);
    return 0;
}
