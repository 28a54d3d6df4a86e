/* The local path: doorbells, draining owed doorbells, rule R2 (bell.c). What
 * the rest of the path may call of it; the connection object and its locks
 * are lp_int.h's. */
#ifndef LP_BELL_H
#define LP_BELL_H

#include "lp_int.h"

int lp_tx_switch(lp_conn_t *c);
void lp_bell(lp_conn_t *c, int fd);
void lp_wake(lp_conn_t *c, int fd, int flags, uint32_t *word);
void lp_wake_ex(lp_conn_t *c, int fd, int flags, uint32_t *word, int tx_held);
size_t lp_drain_ex(lp_conn_t *c, int fd, int full);
size_t lp_drain(lp_conn_t *c, int fd);
int lp_rx_catch_up(lp_conn_t *c);
void lp_wait_fd(int fd, short ev, int ms);
/* Send the doorbells the kernel refused earlier, waiting (bounded) for
 * room: before anything of ours that is not a doorbell enters the kernel
 * stream.  0, or -1 (the connection is then broken). */
int lp_bells_flush(lp_conn_t *c, int fd);
uint32_t lp_bells_send(lp_conn_t *c, int fd);

#endif
