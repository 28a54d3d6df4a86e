/* FORK PAGES (zc_real.h): the start of the library's fork data, on a page
 * boundary.  This object is linked first (common/module.mk), so every
 * ZC_FORK_DATA word of the other objects follows it on the same page (less
 * than a kilobyte in all: one page for a fork to copy, not eight). */
#include "zc_real.h"

ZC_FORK_DATA __attribute__((aligned(4096), used)) static char zc_fork_page[0];
