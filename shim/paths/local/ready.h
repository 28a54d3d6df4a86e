/* The local path: readiness, FIONREAD, socket options (ready.c). What the
 * rest of the path may call of it; the connection object and its locks are
 * lp_int.h's. */
#ifndef LP_READY_H
#define LP_READY_H

#include "lp_int.h"

/* The bytes the application can read next (FIONREAD's answer): the kernel's
 * data before the switch point, the ring's from it; *kernel the kernel's
 * queue length when known (a TCP_CM_INQ count), else NULL (asked); *ring
 * (when not NULL) set to 1 when the ring's bytes were counted.  -1 when the
 * kernel cannot say.  Takes the RX lock. */
int lp_rx_avail(lp_conn_t *c, int fd, const int *kernel, int *ring);
short lp_kernel_events(shim_fd_t *f, short ev);
int lp_kernel_quiet(shim_fd_t *f);
uint64_t lp_change(shim_fd_t *f, int fd);
void lp_armed_recheck(lp_conn_t *c, shim_ready_ask_t *ask);
int lp_rv_progress(lp_conn_t *c, int fd, short ev, int kev, shim_ready_ask_t *ask);
short lp_revents(shim_fd_t *f, int fd, short ev, int kev, int arm, shim_ready_ask_t *ask);
int path_local_ioctl(shim_fd_t *f, int fd, unsigned long req, void *arg, int *rc);
void path_local_settings_changed(shim_fd_t *f);
void path_local_setsockopt(shim_fd_t *f, int fd, int level, int name, const void *val,
                           socklen_t len);
int path_local_getsockopt(shim_fd_t *f, int fd, int level, int name, void *val, socklen_t *len);

#endif
