/* The local path: page exchange on the local path (xchg.c). What the rest of
 * the path may call of it; the connection object and its locks are
 * lp_int.h's. */
#ifndef LP_XCHG_H
#define LP_XCHG_H

#include "lp_int.h"

void lp_xchg_init(lp_conn_t *c);
void lp_xchg_attach(lp_conn_t *c);
void lp_xchg_offered(lp_conn_t *c);
/* A ring receive into win[0..n) is about to copy: units received earlier
 * and mapped in place there that the ring's bytes will overwrite whole get
 * their own memory back first (shim_xu_reclaim).  RX lock held. */
void lp_xchg_rx_reclaim(lp_conn_t *c, const struct iovec *win, int n);
/* Lend the whole 2 MiB units at stream byte `sent` of msg (TX lock held):
 * the bytes lent (one PAGES record, *flags_p its ring flags), 0 when none
 * (the ring window is then cut to *lim_p: up to the next unit, or the one
 * refused; *over_p: refused because the send budget is spent, which a
 * blocking send waits out rather than copying), or -errno (the channel
 * broke). */
/* A send of LP_XCHG_SMALL bytes or more but under a unit, where exchange
 * could lend: counted and charged to its call site as too_small. */
void lp_xchg_small(lp_conn_t *c);
ssize_t lp_xchg_send(lp_conn_t *c, const struct msghdr *msg, size_t sent, size_t *lim_p,
                     int *flags_p, int *over_p);
void lp_xchg_close(lp_conn_t *c);
void lp_xchg_exec(lp_conn_t *c, int keep, int xfds[2]);
void lp_xchg_inherit(lp_conn_t *c, const int xfds[2]);
int lp_xchg_moved(lp_conn_t *c, int from, int to);

#endif
