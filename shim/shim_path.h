/* The interface every data path implements.
 *
 * A descriptor whose shim_fd_t.path is NULL takes the copy path: the hook
 * forwards the very call the application made to the kernel, so nothing about
 * it can differ from running without the library.  A path (the local
 * shared-memory path, the wire zero-copy path) claims a descriptor by setting
 * .path and .path_ctx when it has made sure it can keep every contract of
 * DESIGN.md §3 for it (at connect/accept time), and from then on the data hooks
 * hand it their call in the general msghdr form.  Adding a path is adding a
 * file that fills one of these tables; the hooks do not change.
 *
 * Every function returns what the call returns (>= 0) or -errno; the hook sets
 * errno.  Called from hooks: no process allocator, no stdio. */
#ifndef SHIM_PATH_H
#define SHIM_PATH_H

#include <sys/socket.h>
#include <sys/types.h>

#include "shim_fd.h"

typedef struct shim_path_ops {
    const char *name;
    /* send/sendto/sendmsg/write/writev (flags 0 for write). */
    ssize_t (*sendmsg)(shim_fd_t *f, int fd, const struct msghdr *msg, int flags);
    /* recv/recvfrom/recvmsg/read/readv (flags 0 for read). */
    ssize_t (*recvmsg)(shim_fd_t *f, int fd, struct msghdr *msg, int flags);
    /* fd is about to be closed (or replaced by dup2/dup3); the entry is
     * cleared afterwards. */
    void (*forget)(shim_fd_t *f, int fd);
    /* newfd now refers to the same socket as f (dup, dup2, dup3, F_DUPFD). */
    void (*dup)(shim_fd_t *f, int newfd);
} shim_path_ops_t;

#endif
