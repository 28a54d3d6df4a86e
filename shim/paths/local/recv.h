/* The local path: receiving (recv.c). What the rest of the path may call of
 * it; the connection object and its locks are lp_int.h's. */
#ifndef LP_RECV_H
#define LP_RECV_H

#include "lp_int.h"

int lp_interrupted(const lp_wait_t *w);
int lp_sig_interrupts(const lp_wait_t *w);
/* The slice a wait of role may sleep (ms, the socket's timeout left), or
 * -EAGAIN when that timeout passed. */
long lp_slice_ms(lp_conn_t *c, int fd, int role, lp_wait_t *w);
void lp_kernel_look(lp_conn_t *c, int fd, int role);
int lp_sleep(lp_conn_t *c, int fd, int role, lp_wait_t *w);
ssize_t lp_recv_kernel(lp_conn_t *c, shim_fd_t *f, int fd, struct msghdr *msg, int flags,
                              int *again);
ssize_t lp_recv_ring(lp_conn_t *c, int fd, struct msghdr *msg, int flags, size_t skip,
                            int *eof);
int lp_rv_return(lp_conn_t *c, int fd, int flags, lp_wait_t *w);
ssize_t lp_recvmsg(shim_fd_t *f, int fd, struct msghdr *msg, int flags);

#endif
