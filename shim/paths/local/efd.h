/* The local path: wake-up descriptors for poll/epoll waiters (efd.c). What
 * the rest of the path may call of it; the connection object and its locks
 * are lp_int.h's. */
#ifndef LP_EFD_H
#define LP_EFD_H

#include "lp_int.h"

int lp_rx_arm(lp_conn_t *c, int listening);
/* next: announced even with bytes in the ring (SHIM_READY_ARM_NEXT). */
int lp_rx_arm_ex(lp_conn_t *c, int listening, int next);
int lp_wake_fd(shim_fd_t *f, int fd, int unusable);
void lp_efd_offered(lp_conn_t *c);
int lp_efd_reset(lp_conn_t *c);
void lp_efd_ring(lp_conn_t *c, int fd);
void lp_efd_retire(lp_conn_t *c);
void lp_efd_close(lp_conn_t *c);
int lp_efd_moved(lp_conn_t *c, int from, int to);

#endif
