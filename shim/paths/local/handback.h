/* The local path: hand-back to the kernel, lingering sockets and pumps
 * (handback.c). What the rest of the path may call of it; the connection
 * object and its locks are lp_int.h's. */
#ifndef LP_HANDBACK_H
#define LP_HANDBACK_H

#include "lp_int.h"

int64_t lp_rv_owed(lp_conn_t *c);
void lp_pumps_reap(void);
void lp_pumps_exit(void);
void lp_pumps_fork_child(void);
extern __thread int lp_execing;
size_t lp_rv_keep(lp_conn_t *c, const char *buf, size_t n);
size_t lp_pb_take(lp_conn_t *c, struct msghdr *msg, size_t skip, int peek);
int lp_bells_take(lp_conn_t *c, int fd, int64_t n);
void lp_rv_check_done(lp_conn_t *c);
int lp_rv_sibling(lp_conn_t *c, int role);
void lp_rv_rx_done(lp_conn_t *c, int fd);
int lp_rv_take_mark(lp_conn_t *c, int fd);
int lp_rv_tx(lp_conn_t *c, int fd, int wait_ms);
int lp_linger_offer(lp_conn_t *c, int fd);
void lp_linger_wake(lp_conn_t *c, int fd);
void lp_linger_drop(lp_conn_t *c);
int lp_peer_lingers(lp_conn_t *c);
int lp_rv_peer_pumping(lp_conn_t *c);
void lp_revert(lp_conn_t *c, int fd, const char *why);
void lp_handback_count(const char *why);
extern const char *const lp_handback_names[LP_HB_COUNT];
int lp_handback_reason(const char *why);

#endif
