/* The local path: shutdown, close, fork, initialisation (life.c). What the
 * rest of the path may call of it; the connection object and its locks are
 * lp_int.h's. */
#ifndef LP_LIFE_H
#define LP_LIFE_H

#include "lp_int.h"

int path_local_shutdown(shim_fd_t *f, int fd, int how);
void lp_bells_settle(lp_conn_t *c, int fd);
void lp_conn_release(lp_conn_t *c, int fd);
void lp_forget(shim_fd_t *f, int fd);
void lp_dup(shim_fd_t *f, int fd);
void lp_fork_hold(int delta);
void lp_fork_prepare(void);
void lp_fork_parent(void);
void lp_fork_child(void);
void lp_init(void);
/* Whatever the state (offer due, pending, paired): plain from now on. */
void lp_release_to_kernel(lp_conn_t *c, int fd, const char *why);

#endif
