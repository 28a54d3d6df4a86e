/* The constructor variant: this file is linked into libt_<name>.so together
 * with the test, and its constructor runs the test before the host program's
 * main (and, being initialised before the preloaded library, usually before
 * libzcsock's own constructor). */
#include "t_common.h"

__attribute__((visibility("default"))) int t_ctor_result = -1;

__attribute__((constructor)) static void t_ctor(void)
{
    t_ctor_result = t_main();
}
