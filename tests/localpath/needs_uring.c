/* A shared library that links liburing (DT_NEEDED), for case uring_dlopen:
 * a process that dlopens it after a connection paired hands that
 * connection back (liburing's inline system calls pass no hook). */
#include <liburing.h>

int needs_uring_probe(void)
{
    struct io_uring_probe *p = io_uring_get_probe();

    if (!p)
        return -1;
    io_uring_free_probe(p);
    return 0;
}
