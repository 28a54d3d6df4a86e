/* The local path: sending, sendfile and splice (send.c). What the rest of
 * the path may call of it; the connection object and its locks are
 * lp_int.h's. */
#ifndef LP_SEND_H
#define LP_SEND_H

#include "lp_int.h"

void lp_pickup(lp_conn_t *c, int fd);
ssize_t lp_epipe(int flags);
ssize_t lp_send_kernel(shim_fd_t *f, int fd, const struct msghdr *msg, int flags,
                              lp_conn_t *c);
ssize_t lp_sendmsg(shim_fd_t *f, int fd, const struct msghdr *msg, int flags);
size_t lp_send_room(lp_conn_t *c, int fd, int flags, size_t want);
ssize_t path_local_sendfile(shim_fd_t *f, int out_fd, int in_fd, off_t *offset, size_t count);
ssize_t path_local_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
                          unsigned flags);

#endif
