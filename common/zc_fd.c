/* Where the library's own descriptors go: see zc_fd.h. */
#include "zc_fd.h"

#include <sys/resource.h>

#define ZC_FD_TOP_MAX 65536
#define ZC_FD_BAND_MAX 1024

/* The floor read last, + 1 (0: not read yet); the soft limit then. */
static int zc_fd_floor1;
static long zc_fd_soft;

int zc_fd_floor_refresh(void)
{
    struct rlimit rl;
    rlim_t top, band;
    int floor = 0;

    if (getrlimit(RLIMIT_NOFILE, &rl))
        rl.rlim_cur = 0;
    __atomic_store_n(&zc_fd_soft, rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1UL << 30)
                                  ? 1L << 30 : (long)rl.rlim_cur, __ATOMIC_RELAXED);
    if (rl.rlim_cur >= 64) {
        top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > ZC_FD_TOP_MAX ? ZC_FD_TOP_MAX
                                                                           : rl.rlim_cur;
        band = top / 4 < ZC_FD_BAND_MAX ? top / 4 : ZC_FD_BAND_MAX;
        floor = (int)(top - band);
    }
    __atomic_store_n(&zc_fd_floor1, floor + 1, __ATOMIC_RELAXED);
    return floor;
}

int zc_fd_floor(void)
{
    static unsigned uses;
    int f1 = __atomic_load_n(&zc_fd_floor1, __ATOMIC_RELAXED);

    /* read again now and then: a limit the application raised moves the
     * band up soon (one that went down is met at once, see zc_fd.h) */
    if (!f1 || (__atomic_add_fetch(&uses, 1, __ATOMIC_RELAXED) & 255) == 0)
        return zc_fd_floor_refresh();
    return f1 - 1;
}

long zc_fd_limit(void)
{
    zc_fd_floor();
    return __atomic_load_n(&zc_fd_soft, __ATOMIC_RELAXED);
}
