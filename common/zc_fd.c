/* Where the library's own descriptors go: see zc_fd.h. */
#include "zc_fd.h"

#include <sys/resource.h>

#define ZC_FD_TOP_MAX 65536
#define ZC_FD_BAND_MAX 1024

int zc_fd_floor(void)
{
    struct rlimit rl;
    rlim_t top, band;

    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur < 64)
        return 0;
    top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > ZC_FD_TOP_MAX ? ZC_FD_TOP_MAX
                                                                       : rl.rlim_cur;
    band = top / 4 < ZC_FD_BAND_MAX ? top / 4 : ZC_FD_BAND_MAX;
    return (int)(top - band);
}
